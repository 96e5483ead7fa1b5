package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var exportLine = regexp.MustCompile(`^export [A-Z_][A-Z0-9_]*='([^']|'\\'')*'(  # .+)?$`)

func TestEnvShellFormat(t *testing.T) {
	root := fakeTree(t, 0, "unlimited", "unlimited", "00000000a80425fb")
	for _, tc := range []struct {
		name    string
		args    []string
		env     []string
		want    map[string]string // name -> value that must be printed
		wantNot []string
	}{
		{"defaults", nil, nil, map[string]string{"NCCL_DEBUG": "WARN"}, []string{"NCCL_IB_DISABLE"}},
		{"--nccl-debug", []string{"--nccl-debug", "INFO"}, nil, map[string]string{"NCCL_DEBUG": "INFO"}, nil},
		{"--no-ib", []string{"--no-ib"}, nil, map[string]string{"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "1"}, nil},
		{"--nccl-ib=off", []string{"--no-ib", "--nccl-ib=off"}, nil, map[string]string{"NCCL_DEBUG": "WARN"}, []string{"NCCL_IB_DISABLE"}},
		{"already set", []string{"--no-ib"}, []string{"NCCL_DEBUG=INFO", "NCCL_IB_DISABLE=0"}, map[string]string{}, []string{"NCCL_DEBUG", "NCCL_IB_DISABLE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv := invocation{args: append([]string{"env", "--root", root}, tc.args...), env: tc.env}
			r := iv.run(t)
			require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
			require.Empty(t, r.stderr)
			again := iv.run(t)
			require.Equal(t, r.stdout, again.stdout, "stable output")
			got := map[string]string{}
			var names []string
			for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
				if l == "" {
					continue
				}
				require.Regexp(t, exportLine, l)
				name, rest, _ := strings.Cut(strings.TrimPrefix(l, "export "), "=")
				val, _, _ := strings.Cut(rest[1:], "'")
				got[name] = val
				names = append(names, name)
			}
			require.IsNonDecreasing(t, names, "sorted by name")
			for k, v := range tc.want {
				require.Equal(t, v, got[k], "%s in %q", k, r.stdout)
			}
			for _, k := range tc.wantNot {
				require.NotContains(t, got, k)
			}
			// JSON carries the same variables with reasons.
			j := invocation{args: append([]string{"env", "--root", root, "--format", "json"}, tc.args...), env: tc.env}.run(t)
			require.Equal(t, 0, j.code)
			var m map[string]struct {
				Value  string `json:"value"`
				Reason string `json:"reason"`
			}
			require.NoError(t, json.Unmarshal([]byte(j.stdout), &m), j.stdout)
			require.Len(t, m, len(got))
			for k, v := range got {
				require.Equal(t, v, m[k].Value)
				require.NotEmpty(t, m[k].Reason)
			}
		})
	}
}

func TestEnvRespectsNCCLConfFile(t *testing.T) {
	root := fakeTree(t, 0, "unlimited", "unlimited", "00000000a80425fb")
	// Under --root, NCCL's config files are read from the snapshot too.
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc", "nccl.conf"), []byte("NCCL_DEBUG=INFO\n"), 0o644))
	r := invocation{args: []string{"env", "--format", "json", "--root", root}}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	require.NotContains(t, decodeJSON(t, r.stdout), "NCCL_DEBUG")
	// NCCL_CONF_FILE names a file in the snapshot.
	conf := filepath.Join(root, "opt", "nccl.conf")
	require.NoError(t, os.MkdirAll(filepath.Dir(conf), 0o755))
	require.NoError(t, os.WriteFile(conf, []byte("NCCL_IB_DISABLE=0\n"), 0o644))
	r = invocation{args: []string{"env", "--format", "json", "--root", root, "--no-ib"}, env: []string{"NCCL_CONF_FILE=/opt/nccl.conf"}}.run(t)
	require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
	doc := decodeJSON(t, r.stdout)
	require.NotContains(t, doc, "NCCL_IB_DISABLE")
	require.NotContains(t, doc, "NCCL_DEBUG", "/etc/nccl.conf is read as well")
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := ncclrun(t, args...)
		require.Equal(t, 0, r.code, "%v", args)
		require.Regexp(t, `^ncclrun `+regexp.QuoteMeta(testVersion)+` \(commit `+testCommit+`, go\S+ \S+/\S+\)\n$`, r.stdout, "%v", args)
	}
}

// TestEnvShowsProbe: on a node where run would have the transport probe
// (GPUs and usable RDMA ports: the ib-node tree), env prints the probe's
// variables, the debug file's directory as the pattern each run's takes;
// --no-transport-probe or the user's NCCL_DEBUG leaves NCCL_DEBUG alone.
func TestEnvShowsProbe(t *testing.T) {
	root, err := filepath.Abs("../../preflight/testdata/ib-node")
	require.NoError(t, err)
	read := func(args []string, env ...string) map[string]string {
		r := invocation{args: append([]string{"--root", root, "env", "--format", "json"}, args...), env: env}.run(t)
		require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
		var m map[string]struct{ Value string }
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
		vals := map[string]string{}
		for k, v := range m {
			vals[k] = v.Value
		}
		return vals
	}
	got := read(nil)
	require.Equal(t, "INFO", got["NCCL_DEBUG"])
	require.Equal(t, "INIT,NET", got["NCCL_DEBUG_SUBSYS"])
	require.Equal(t, filepath.Join(os.TempDir(), "ncclrun-nccl-*", "nccl.%h.%p"), got["NCCL_DEBUG_FILE"])

	got = read([]string{"--no-transport-probe"})
	require.Equal(t, "WARN", got["NCCL_DEBUG"])
	require.NotContains(t, got, "NCCL_DEBUG_FILE")
	got = read(nil, "NCCL_DEBUG=WARN")
	require.NotContains(t, got, "NCCL_DEBUG_FILE")
	require.NotContains(t, got, "NCCL_DEBUG")
}

// docs/cli.md names the env command whose output is to be eval'd outside
// run: on a node where run would have the transport probe and hang
// capture, it must print no per-run pattern (the probe's private
// directory, hang capture's evidence directory and RAS port), which would
// point NCCL and torch at a directory that does not exist and at port
// "PORT".
func TestEnvEvalLineOfDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	m := regexp.MustCompile("`eval \"\\$\\(ncclrun (env[^)]*)\\)\"`").FindAllStringSubmatch(string(b), -1)
	require.NotEmpty(t, m, "docs/cli.md names the eval line")
	root := "../../preflight/testdata/k8s-trap" // GPUs and usable RDMA ports: run has the probe
	for _, sub := range m {
		t.Run(sub[1], func(t *testing.T) {
			args := append(strings.Fields(sub[1]), "--root", root)
			r := invocation{args: args}.run(t)
			require.Equal(t, 0, r.code, "stderr: %q", r.stderr)
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				value, _, _ := strings.Cut(l, "  # ")
				for _, pattern := range []string{"ncclrun-nccl-*", "ncclrun-hang-XXXXXXXXX", ":PORT"} {
					require.NotContains(t, value, pattern, "a per-run pattern in what docs/cli.md says to eval")
				}
			}
		})
	}
}
