package examples_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const dockerfile = "../Dockerfile.base"

type instruction struct {
	cmd, args string
}

// parseDockerfile returns the instructions of a Dockerfile with line
// continuations joined and comments dropped.
func parseDockerfile(t *testing.T, file string) []instruction {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []instruction
	var cur strings.Builder
	for _, l := range strings.Split(string(data), "\n") {
		tl := strings.TrimSpace(l)
		if tl == "" || strings.HasPrefix(tl, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(tl, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(tl)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	require.Empty(t, cur.String(), "dangling continuation")
	return out
}

func TestDockerfileInstructions(t *testing.T) {
	ins := parseDockerfile(t, dockerfile)
	index := func(cmd, contains string) int {
		for i, in := range ins {
			if in.cmd == cmd && strings.Contains(in.args, contains) {
				return i
			}
		}
		return -1
	}
	arg, from := index("ARG", "BASE_IMAGE"), index("FROM", "")
	require.GreaterOrEqual(t, arg, 0, "ARG BASE_IMAGE")
	require.GreaterOrEqual(t, from, 0)
	assert.Less(t, arg, from, "ARG BASE_IMAGE before FROM, so --build-arg reaches FROM")
	assert.Equal(t, 1, strings.Count(fmt.Sprint(ins), "{FROM "), "one stage: the file capability is set where it ships")
	assert.Equal(t, "${BASE_IMAGE}", ins[from].args)

	def := regexp.MustCompile(`^BASE_IMAGE=(\S+)$`).FindStringSubmatch(ins[arg].args)
	require.Len(t, def, 2, "BASE_IMAGE has a default")
	assert.Regexp(t, `:[\w][\w.-]*$`, def[1], "the default base image is pinned to a tag")
	assert.NotRegexp(t, `:latest$`, def[1])

	cp := index("COPY", "/usr/local/bin/ncclrun")
	require.GreaterOrEqual(t, cp, 0)
	assert.Equal(t, "bin/ncclrun /usr/local/bin/ncclrun", ins[cp].args, "the prebuilt static binary from the build context")
	assert.NotContains(t, ins[cp].args, "--from", "xattrs do not travel through COPY --from")

	run := index("RUN", "setcap")
	require.Greater(t, run, cp, "setcap in a RUN after the COPY, in the final stage")
	assert.Contains(t, ins[run].args, "setcap cap_ipc_lock+p /usr/local/bin/ncclrun")
	for _, in := range ins {
		assert.NotRegexp(t, `cap_ipc_lock[=+][a-z]*e`, in.args, "never an effective bit: %s %s", in.cmd, in.args)
	}

	ep := index("ENTRYPOINT", "")
	require.GreaterOrEqual(t, ep, 0)
	var argv []string
	require.NoError(t, json.Unmarshal([]byte(ins[ep].args), &argv), "exec-form ENTRYPOINT")
	assert.Equal(t, []string{"/usr/local/bin/ncclrun", "--"}, argv)
	assert.Equal(t, len(ins)-1, ep, "ENTRYPOINT is last")
	assert.Equal(t, -1, index("USER", ""), "the image keeps the base's user; the pod or docker run chooses")
}

// dockerOrSkip returns the docker CLI when an engine answers. The image
// build is an integration check: it skips without an engine, and fails
// for want of one under CI=true.
func dockerOrSkip(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("docker build: not in -short")
	}
	d := testutil.RequireTool(t, "docker")
	if err := exec.Command(d, "info").Run(); err != nil {
		testutil.SkipOrFail(t, "docker info does not answer: %v", err)
	}
	return d
}

// rootfsTar returns a tar of the host's files and their shared libraries,
// enough for a base image with a shell (and setcap/getcap if asked).
func rootfsTar(t *testing.T, bins ...string) []byte {
	t.Helper()
	files := map[string]bool{}
	for _, b := range bins {
		p, err := exec.LookPath(b)
		require.NoError(t, err, "host tool %s", b)
		files[p] = true
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			continue // static
		}
		for _, f := range regexp.MustCompile(`(/\S+)`).FindAllString(string(out), -1) {
			files[f] = true
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for f := range files {
		real, err := filepath.EvalSymlinks(f)
		require.NoError(t, err)
		data, err := os.ReadFile(real)
		require.NoError(t, err)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(f, "/"), Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}))
		_, err = tw.Write(data)
		require.NoError(t, err)
	}
	// The shell as /bin/sh, which RUN uses.
	sh, err := exec.LookPath("dash")
	require.NoError(t, err)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "bin/sh", Linkname: sh, Typeflag: tar.TypeSymlink}))
	require.NoError(t, tw.Close())
	return buf.Bytes()
}

func docker(t *testing.T, d string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(d, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestImageBuild builds Dockerfile.base on a local base image (no
// registry) and checks that the binary keeps cap_ipc_lock=p and that the
// ENTRYPOINT hands the container's arguments to ncclrun after "--".
func TestImageBuild(t *testing.T) {
	d := dockerOrSkip(t)
	tag := fmt.Sprintf("ncclrun-examples-test-%08x", rand.Uint32())
	var images []string
	t.Cleanup(func() {
		for _, img := range images {
			_, _ = docker(t, d, nil, "rmi", "-f", img)
		}
	})

	// ncclrun stand-in: a static binary that prints its arguments.
	ctx := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(ctx, "bin"), 0o755))
	src := filepath.Join(t.TempDir(), "main.go")
	require.NoError(t, os.WriteFile(src, []byte("package main\n\nimport (\"fmt\"; \"os\")\n\nfunc main() { fmt.Printf(\"%q\\n\", os.Args[1:]) }\n"), 0o644))
	build := exec.Command("go", "build", "-o", filepath.Join(ctx, "bin", "ncclrun"), src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	df, err := os.ReadFile(dockerfile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ctx, "Dockerfile.base"), df, 0o644))

	withCap, noCap := tag+"-base:cap", tag+"-base:nocap"
	for img, bins := range map[string][]string{withCap: {"dash", "chmod", "setcap", "getcap"}, noCap: {"dash", "chmod"}} {
		out, err := docker(t, d, rootfsTar(t, bins...), "import", "-", img)
		require.NoError(t, err, "%s", out)
		images = append(images, img)
	}

	t.Run("with setcap", func(t *testing.T) {
		img := tag + ":cap"
		out, err := docker(t, d, nil, "build", "-f", filepath.Join(ctx, "Dockerfile.base"), "--build-arg", "BASE_IMAGE="+withCap, "-t", img, ctx)
		require.NoError(t, err, "%s", out)
		images = append(images, img)
		out, err = docker(t, d, nil, "run", "--rm", "--entrypoint", "/usr/sbin/getcap", img, "/usr/local/bin/ncclrun")
		require.NoError(t, err, "%s", out)
		assert.Regexp(t, `^/usr/local/bin/ncclrun cap_ipc_lock[=+]p\n$`, out, "the file capability survives in the image")
		out, err = docker(t, d, nil, "run", "--rm", img, "torchrun", "--nproc-per-node=2", "train.py")
		require.NoError(t, err, "%s", out)
		assert.Equal(t, `["--" "torchrun" "--nproc-per-node=2" "train.py"]`+"\n", out)
		out, err = docker(t, d, nil, "run", "--rm", "--user", "1000:1000", img, "id")
		require.NoError(t, err, "a non-root user can start the +p binary without IPC_LOCK in the bounding set: %s", out)
	})
	t.Run("without setcap", func(t *testing.T) {
		img := tag + ":nocap"
		out, err := docker(t, d, nil, "build", "-f", filepath.Join(ctx, "Dockerfile.base"), "--build-arg", "BASE_IMAGE="+noCap, "-t", img, ctx)
		require.NoError(t, err, "%s", out)
		images = append(images, img)
		assert.Contains(t, out, "setcap not found")
		out, err = docker(t, d, nil, "build", "--force-rm", "-f", filepath.Join(ctx, "Dockerfile.base"), "--build-arg", "BASE_IMAGE="+noCap, "--build-arg", "REQUIRE_FILECAP=1", "-t", img+"-req", ctx)
		assert.Error(t, err, "REQUIRE_FILECAP=1 fails without setcap: %s", out)
		assert.Contains(t, out, "setcap not found", "the build failed at the capability step")
		images = append(images, img+"-req")
	})
}
