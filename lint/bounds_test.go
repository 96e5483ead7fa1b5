package lint

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// bomb is a List of k aliases to a Pod of k aliases to a container whose
// command is k aliases: a few KB that expand to k³ nodes.
func bomb(k int) string {
	list := func(alias string) string { return "[" + strings.Repeat(alias+",", k-1) + alias + "]" }
	return "kind: List\nx-s: &s torchrun\nx-c: &c {name: c, command: " + list("*s") + "}\n" +
		"x-p: &p {kind: Pod, metadata: {name: p}, spec: {containers: " + list("*c") + "}}\nitems: " + list("*p") + "\n"
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
}

// TestAliasBomb: a document that expands past its bound through aliases
// is one input error, found without expanding it, and the other inputs
// are still checked; anchors as manifests and Compose files use them
// (`<<: *defaults`, a shared env list) are read as before.
func TestAliasBomb(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a-bomb.yaml"), bomb(100))
	writeFile(t, filepath.Join(dir, "b-cycle.yaml"), "kind: List\nitems: &l [*l]\n")
	writeFile(t, filepath.Join(dir, "c-trap.yaml"), trapYAML(t))
	rep := Paths([]string{dir}, nil)
	require.Len(t, rep.Errors, 2)
	for _, e := range rep.Errors {
		assert.ErrorIs(t, e, ErrInput)
		assert.Contains(t, e.Error(), "expands through its aliases to more than")
	}
	assert.Len(t, rep.Containers, 1, "the good input is still checked")

	compose := `x-defaults: &defaults
  image: trainer:1
  user: "1000:1000"
  cap_drop: [ALL]
x-env: &env
  - NCCL_DEBUG=INFO
services:
`
	for _, s := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		compose += "  " + s + ":\n    <<: *defaults\n    environment: *env\n    cap_add: [IPC_LOCK]\n    gpus: all\n"
	}
	rep, err := CheckBytes("compose.yaml", []byte(compose))
	require.NoError(t, err)
	assert.Len(t, rep.Containers, 8)

	// Within the bound: a pod of 1000 containers that share one anchored
	// securityContext.
	pod := "kind: Pod\nmetadata: {name: p}\nx: &sc {runAsUser: 1000, capabilities: {add: [IPC_LOCK]}}\nspec:\n  containers:\n"
	for i := 0; i < 1000; i++ {
		pod += "  - {name: c" + itoa(i) + ", securityContext: *sc}\n"
	}
	rep, err = CheckBytes("pod.yaml", []byte(pod))
	require.NoError(t, err)
	assert.Len(t, rep.Containers, 1000)
}

// TestSymlinkedManifests: in a directory, a symlink to a regular manifest
// is read (once, however many names reach the file); one to a directory
// is not followed, nor a FIFO; a manifest's link that does not resolve is
// an error.
func TestSymlinkedManifests(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "data", "pod.yaml"), trapYAML(t))
	dir := filepath.Join(root, "mount")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.Symlink("../data/pod.yaml", filepath.Join(dir, "pod.yaml")))
	require.NoError(t, os.Symlink("../data/pod.yaml", filepath.Join(dir, "same.yaml")))
	require.NoError(t, os.Symlink("..", filepath.Join(dir, "loop.yaml")))
	require.NoError(t, os.Symlink("missing.yaml", filepath.Join(dir, "gone.yaml")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644))
	require.NoError(t, os.Symlink("fifo.yaml", filepath.Join(dir, "to-fifo.yaml")))
	rep := Paths([]string{dir}, nil)
	require.Len(t, rep.Errors, 1)
	assert.Equal(t, filepath.Join(dir, "gone.yaml")+": no such file or directory", rep.Errors[0].Error())
	require.Len(t, rep.Containers, 1)
	assert.Equal(t, filepath.Join(dir, "pod.yaml"), rep.Findings[0].File)
}

// TestConfigMapVolume: a ConfigMap volume's files are links through
// ..data to a ..TIMESTAMP directory; findings name the links, and a
// dot-directory (.git) is not read.
func TestConfigMapVolume(t *testing.T) {
	vol := t.TempDir()
	writeFile(t, filepath.Join(vol, "..2026_12_02_15_00_00.1", "pod.yaml"), trapYAML(t))
	require.NoError(t, os.Symlink("..2026_12_02_15_00_00.1", filepath.Join(vol, "..data")))
	require.NoError(t, os.Symlink("..data/pod.yaml", filepath.Join(vol, "pod.yaml")))
	writeFile(t, filepath.Join(vol, ".git", "x.yaml"), "{")
	rep := Paths([]string{vol}, nil)
	require.Empty(t, rep.Errors)
	require.Len(t, rep.Containers, 1)
	assert.Equal(t, filepath.Join(vol, "pod.yaml"), rep.Findings[0].File)
}

// TestSizeCaps: an input over MaxFileSize, and the inputs past
// MaxTotalSize together, are refused, each one line; a regular file's
// size is looked at before anything is read.
func TestSizeCaps(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxFileSize+1)) // sparse: NULs, never read
	require.NoError(t, f.Close())
	rep := Paths([]string{big}, nil)
	require.Len(t, rep.Errors, 1)
	assert.Equal(t, big+": larger than 16 MiB", rep.Errors[0].Error())

	rep = Paths([]string{"-"}, bytes.NewReader(append([]byte("#"), bytes.Repeat([]byte("x"), MaxFileSize)...)))
	require.Len(t, rep.Errors, 1)
	assert.Equal(t, "<stdin>: larger than 16 MiB", rep.Errors[0].Error())

	// Five files of 15 MiB of comments after a pod: the fifth passes the
	// run's 64 MiB.
	trap := trapYAML(t)
	pad := trap + "#" + strings.Repeat("x", 15<<20-len(trap)) + "\n"
	var paths []string
	for _, n := range []string{"1", "2", "3", "4", "5"} {
		p := filepath.Join(dir, n+".yaml")
		writeFile(t, p, pad)
		paths = append(paths, p)
	}
	rep = Paths(paths, nil)
	require.Len(t, rep.Errors, 1)
	assert.Equal(t, paths[4]+": not read: the inputs of one run together are larger than 64 MiB", rep.Errors[0].Error())
	assert.Len(t, rep.Containers, 4)

	// A file too large by itself is said to be, whatever the run has left.
	rep = Paths(append(paths[:4:4], big), nil)
	require.Len(t, rep.Errors, 1)
	assert.Equal(t, big+": larger than 16 MiB", rep.Errors[0].Error())
}

// TestMergeBounded: merge keys are followed a bounded depth, and the
// ulimit-adjuster annotation's value, a YAML document of its own, gets the
// same alias bound as the manifest: a mapping that merges itself, or
// merges of merges ten deep, are a finding at once, not a stack overflow
// or an exponential walk.
func TestMergeBounded(t *testing.T) {
	var self yaml.Node
	require.NoError(t, yaml.Unmarshal([]byte("&a {type: memlock, <<: *a}"), &self))
	m := self.Content[0]
	assert.Nil(t, get(m, "soft"))
	assert.Equal(t, "memlock", str(get(m, "type")))
	assert.Len(t, pairs(m), 1)

	nested := "- &l0 {type: memlock}\n"
	for i := 1; i <= 10; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", ")
		nested += fmt.Sprintf("- &l%d {<<: [%s]}\n", i, refs)
	}
	for name, value := range map[string]string{"self": "- &a {type: memlock, <<: *a}\n", "nested": nested} {
		t.Run(name, func(t *testing.T) {
			doc := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n    ulimits.noderesource.dev/container.c: |\n" +
				indent(value, "      ") + "spec:\n  containers:\n    - name: c\n      image: i\n"
			rep, err := CheckBytes("p.yaml", []byte(doc))
			require.NoError(t, err)
			require.NotEmpty(t, rep.Findings)
			assert.Equal(t, "nri-annotation", rep.Findings[0].ID)
			assert.Contains(t, rep.Findings[0].Message, "expands through its aliases")
		})
	}
}

func indent(s, pad string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(pad + l)
		}
	}
	return b.String()
}

// TestSymlinkedDirArgument: a directory given through a symlink is read.
func TestSymlinkedDirArgument(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "real", "pod.yaml"), trapYAML(t))
	link := filepath.Join(root, "link")
	require.NoError(t, os.Symlink("real", link))
	rep := Paths([]string{link}, nil)
	require.Empty(t, rep.Errors)
	require.Len(t, rep.Containers, 1)
	assert.Equal(t, filepath.Join(link, "pod.yaml"), rep.Findings[0].File)
}

// trapYAML is the trap pod (testdata/rules/trap.yaml): one error finding.
func trapYAML(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/rules/trap.yaml")
	require.NoError(t, err)
	return string(b)
}

// TestDocumentCap: an input of more than MaxDocuments documents (YAML
// documents, or the values of a JSON stream) is an input error after the
// first MaxDocuments are judged, so that 16 MiB of tiny documents costs
// a bounded time; MaxDocuments of them are read in full.
func TestDocumentCap(t *testing.T) {
	pod := "{\"kind\": \"Pod\", \"metadata\": {\"name\": \"p\"}, \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"i\"}]}}\n"
	for _, tc := range []struct {
		name, first, rest string
	}{
		{"yaml", pod, "---\n{}\n"},
		{"json stream", pod, "{}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := func(n int) []byte { return []byte(tc.first + strings.Repeat(tc.rest, n-1)) }
			rep, err := CheckBytes("in", at(MaxDocuments))
			require.NoError(t, err)
			assert.Len(t, rep.Containers, 1)

			rep, err = CheckBytes("in", at(MaxDocuments+1))
			require.ErrorIs(t, err, ErrInput)
			assert.Equal(t, fmt.Sprintf("in: more than %d documents in one input: the first %d are checked, the rest is not read", MaxDocuments, MaxDocuments), err.Error())
			assert.Len(t, rep.Containers, 1, "the documents before the bound are judged")
		})
	}
}

// allocated is the bytes fn allocates (runtime.MemStats.TotalAlloc).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestNodeBound: a document denser than MaxNodes is refused from its text,
// before the YAML parser builds its nodes (a 3 MB JSON array of {} was a
// million nodes and 250 MB), with one line and exit status 2 (ErrInput);
// the documents before it are checked. Text that only looks dense (a block
// scalar or a quoted string full of brackets) is one node.
func TestNodeBound(t *testing.T) {
	dense := "[" + strings.Repeat("{},", 1000000) + "{}]"
	var err error
	n := allocated(func() { _, err = CheckBytes("dense.json", []byte(dense)) })
	require.ErrorIs(t, err, ErrInput)
	assert.Equal(t, "dense.json: not read: the document at line 1 has more than 250000 nodes (a List: `jq -c '.items[]'` makes each object a document)", err.Error())
	assert.Less(t, n, uint64(8<<20), "allocated %d bytes for a %d-byte input", n, len(dense))

	trap := trapYAML(t)
	cases := []struct {
		name, data, err string
		containers      int
	}{
		{"scalars", "[" + strings.Repeat("1,", MaxNodes) + "1]", "the document at line 1 has more than", 0},
		{"block", "kind: List\nitems:\n" + strings.Repeat("- a: b\n", MaxNodes/2), "the document at line 1 has more than", 0},
		{"second document", trap + "---\n# dense\nkind: List\nitems: [" + strings.Repeat("{},", MaxNodes) + "{}]\n",
			"the document at line " + itoa(strings.Count(trap, "\n")+3) + " has more than 250000 nodes (a List: `jq -c '.items[]'` makes each object a document) (the document before it is checked, the rest of the input is not read)", 1},
		{"JSON stream", "{\"kind\": \"List\"}\n{\"kind\": \"List\",\n \"items\": [" + strings.Repeat("{},", MaxNodes) + "{}]}\n",
			"the document at line 2 has more than", 0},
		{"block scalar", trap + "---\nkind: ConfigMap\ndata:\n  x.json: |\n    [" + strings.Repeat("{},", MaxNodes) + "{}]\n  y: |-\n      - a: b\n      - a: b\n", "", 1},
		{"quoted", trap + "---\nkind: ConfigMap\ndata:\n  x: \"" + strings.Repeat("[{a: b}, ", MaxNodes/2) + "\"\n  y: '" + strings.Repeat("- a: ''b'', ", MaxNodes/2) + "'\n", "", 1},
		{"comment", trap + "\n# [" + strings.Repeat("{},", MaxNodes) + "\n", "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rep Report
			var err error
			n := allocated(func() { rep, err = CheckBytes("in.yaml", []byte(tc.data)) })
			assert.Len(t, rep.Containers, tc.containers)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInput)
			assert.Contains(t, err.Error(), "in.yaml: not read: "+tc.err)
			assert.Less(t, n, uint64(len(tc.data))*4+(1<<20), "allocated %d bytes", n)
		})
	}
}

// TestNodeEstimate: the estimate is at least the parser's own nodes for
// dense inputs, and within twice it for manifests.
func TestNodeEstimate(t *testing.T) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	more, _ := filepath.Glob("../examples/*/*.yaml")
	files = append(files, more...)
	for _, dense := range []string{"[{},{},{}]", "[1,1,1]", "{a: 1, b: 2}", "{a, b, c}", "[a: 1, b: 2]", "- \n- \n- \n", "a:\nb:\nc:\n", "? a\n? b\n",
		"- - - a\n", "[[[[]]]]", "{\"a\":1,\"b\":{\"c\":[1,2]}}"} {
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(dense), &doc), dense)
		est := 0
		countNodes([]byte(dense), func(d docNodes) bool { est += d.nodes; return true })
		assert.GreaterOrEqual(t, est, ownNodes(doc.Content[0]), dense)
	}
	for _, f := range files {
		if strings.Contains(f, "/bad/") {
			continue
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var est []int
		countNodes(data, func(d docNodes) bool { est = append(est, d.nodes); return true })
		dec := yaml.NewDecoder(bytes.NewReader(data))
		var own []int
		for {
			var doc yaml.Node
			if dec.Decode(&doc) != nil {
				break
			}
			if len(doc.Content) > 0 && !(doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null") {
				own = append(own, ownNodes(doc.Content[0]))
			}
		}
		require.Len(t, est, len(own), f)
		for i := range own {
			assert.GreaterOrEqual(t, est[i], own[i], "%s document %d", f, i)
			assert.LessOrEqual(t, est[i], 2*own[i], "%s document %d", f, i)
		}
	}
}

// TestNodeCountBlockScalar: a block scalar ends where YAML's scanner ends
// it, at the first line indented less than its own first line, so the
// nodes after it are counted.
func TestNodeCountBlockScalar(t *testing.T) {
	for _, tc := range []struct {
		data string
		want int
	}{
		{"a: |\n      deep\n      deep: 1\n", 3},
		{"a: |\n      deep\n    b: 1\n", 5},
		{"- a: |\n    x\n  b: 1\n  c: 1\n", 8},
		{"- |\n x\n- y\n", 3},
		{"a: |+\n\n    x\n\n    - y\nb: 1\n", 5},
		// An indentation indicator sets the content's indentation (the
		// parent's plus the digit), whatever the first line's: a line
		// indented less than that first line but not less than the
		// indicator's is still content.
		{"a: |2\n    x\n  - y\n  - z\n", 3},
		{"b:\n  a: |1\n    x\n   - y\n", 5},
		{"- |2-\n    x\n   - y\n", 2},
		{"--- |1\n  x\n - y\n", 1},
		{"a: >-2\n    x\n  - y\nb: 1\n", 5},
	} {
		got := 0
		countNodes([]byte(tc.data), func(d docNodes) bool { got += d.nodes; return true })
		assert.Equal(t, tc.want, got, "%q", tc.data)
	}
}
