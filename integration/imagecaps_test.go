//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// defaultBaseTar is where scripts/integration-base.sh caches a debootstrapped
// Debian root file system; NCCLRUN_BASE_TAR overrides it.
const defaultBaseTar = "/var/cache/ncclrun-integration/bookworm.tar"

var (
	baseOnce sync.Once
	baseImg  string
	baseKind string
	baseErr  error
)

// baseImage returns (once) a local base image with a shell and setcap: the
// cached Debian minbase tarball if there is one, else a root file system
// assembled from the host's /bin/sh, setcap, getcap and their libraries.
// Both are `docker import`ed: there is no registry.
func baseImage(t *testing.T) (tag, kind string) {
	t.Helper()
	requireDocker(t)
	baseOnce.Do(func() {
		tag := imageTag("base")
		src := os.Getenv("NCCLRUN_BASE_TAR")
		if src == "" {
			src = defaultBaseTar
		}
		if st, err := os.Stat(src); err == nil && st.Size() > 0 {
			r := docker(t, "import", "--change", "LABEL "+labelKey+"="+runID, src, tag)
			if r.Code != 0 {
				baseErr = fmt.Errorf("docker import %s: %s", src, r.Stderr)
				return
			}
			baseImg, baseKind = tag, "debian bookworm minbase (debootstrap, "+src+")"
			return
		}
		var files []tarFile
		files = append(files, withLibs(t, "/bin/sh", "bin/sh")...)
		for _, tool := range []string{"setcap", "getcap", "cat", "chmod", "chown"} {
			p, err := exec.LookPath(tool)
			if err != nil {
				baseErr = fmt.Errorf("assembling a base image needs %s on the host: %w", tool, err)
				return
			}
			files = append(files, withLibs(t, p, "usr/bin/"+tool)...)
		}
		files = append(files,
			tarFile{Name: "etc/passwd", Mode: 0o644, Body: []byte(etcPasswd)},
			tarFile{Name: "etc/group", Mode: 0o644, Body: []byte(etcGroup)},
			tarFile{Name: "tmp", Mode: 0o1777, Dir: true},
			tarFile{Name: "usr/local/bin", Mode: 0o755, Dir: true},
		)
		var buf bytes.Buffer
		if err := writeTar(&buf, parentDirs(files)); err != nil {
			baseErr = err
			return
		}
		cmd := exec.Command("docker", "import", "--change", "LABEL "+labelKey+"="+runID, "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", "-", tag)
		cmd.Stdin = &buf
		if out, err := cmd.CombinedOutput(); err != nil {
			baseErr = fmt.Errorf("docker import: %w: %s", err, out)
			return
		}
		baseImg, baseKind = tag, "assembled from host binaries (sh, setcap, getcap + libs)"
	})
	require.NoError(t, baseErr, "making the base image")
	t.Logf("base image: %s", baseKind)
	return baseImg, baseKind
}

// builderKind says which image builder `docker build` uses here.
func builderKind() string {
	if os.Getenv("DOCKER_BUILDKIT") == "0" {
		return "legacy"
	}
	if exec.Command("docker", "buildx", "version").Run() == nil {
		return "buildkit"
	}
	return "legacy"
}

// fileCapWay is one way of putting a file capability into an image.
type fileCapWay struct {
	Name string
	// Dockerfile for the context; {{BASE}} is replaced by the base image.
	// The context has "probe" (capprobe, with cap_ipc_lock+p set on it on
	// the host) and "probe.tar" (capprobe at usr/local/bin/probe with the
	// xattr in the archive). Empty: the image is `docker import probe.tar`.
	Dockerfile string
	// Legacy is what happens with the legacy builder (Docker 20.10 without
	// buildx): "kept", "lost" or "build fails".
	Legacy string
}

var fileCapWays = []fileCapWay{
	{Name: "COPY of a setcap'd file from the build context", Legacy: "lost",
		Dockerfile: "FROM {{BASE}}\nCOPY probe /usr/local/bin/probe\n"},
	{Name: "COPY --chmod=0755 of a setcap'd file", Legacy: "build fails",
		Dockerfile: "FROM {{BASE}}\nCOPY --chmod=0755 probe /usr/local/bin/probe\n"},
	{Name: "RUN setcap in a build stage, then COPY --from", Legacy: "lost",
		Dockerfile: "FROM {{BASE}} AS caps\nCOPY probe /usr/local/bin/probe\nRUN [\"setcap\", \"cap_ipc_lock+p\", \"/usr/local/bin/probe\"]\n" +
			"FROM {{BASE}}\nCOPY --from=caps /usr/local/bin/probe /usr/local/bin/probe\n"},
	{Name: "RUN setcap in the final stage", Legacy: "kept",
		Dockerfile: "FROM {{BASE}}\nCOPY probe /usr/local/bin/probe\nRUN [\"setcap\", \"cap_ipc_lock+p\", \"/usr/local/bin/probe\"]\n"},
	{Name: "RUN setcap, then RUN chmod in a later layer", Legacy: "kept",
		Dockerfile: "FROM {{BASE}}\nCOPY probe /usr/local/bin/probe\nRUN [\"setcap\", \"cap_ipc_lock+p\", \"/usr/local/bin/probe\"]\nRUN [\"chmod\", \"0755\", \"/usr/local/bin/probe\"]\n"},
	{Name: "RUN setcap, then RUN chown in a later layer", Legacy: "lost",
		Dockerfile: "FROM {{BASE}}\nCOPY probe /usr/local/bin/probe\nRUN [\"setcap\", \"cap_ipc_lock+p\", \"/usr/local/bin/probe\"]\nRUN [\"chown\", \"0:0\", \"/usr/local/bin/probe\"]\n"},
	{Name: "ADD of a tar carrying the security.capability xattr", Legacy: "kept",
		Dockerfile: "FROM {{BASE}}\nADD probe.tar /\n"},
	{Name: "docker import of a tar carrying the xattr", Legacy: "kept"},
}

// TestFileCapabilityInImage finds out which ways of building an image keep
// a file capability on a binary: the result decides how Dockerfile.base must
// give ncclrun cap_ipc_lock+p. Each image is checked the way it is used: a
// uid 1000 container with --cap-add IPC_LOCK runs the probe, whose permitted
// set must then hold CAP_IPC_LOCK.
func TestFileCapabilityInImage(t *testing.T) {
	base, _ := baseImage(t)
	builder := builderKind()
	t.Logf("builder: %s", builder)

	probeBin, err := os.ReadFile(filepath.Join(binDir, "capprobe"))
	require.NoError(t, err)
	var probeTar bytes.Buffer
	require.NoError(t, writeTar(&probeTar, parentDirs([]tarFile{{Name: "usr/local/bin/probe", Mode: 0o755, Body: probeBin, FileCap: true}})))

	for i, w := range fileCapWays {
		t.Run(w.Name, func(t *testing.T) {
			tag := imageTag(fmt.Sprintf("filecap%d", i))
			if w.Dockerfile == "" {
				cmd := exec.Command("docker", "import", "--change", "LABEL "+labelKey+"="+runID, "-", tag)
				cmd.Stdin = bytes.NewReader(probeTar.Bytes())
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "docker import: %s", out)
			} else {
				dir := t.TempDir()
				p := filepath.Join(dir, "probe")
				require.NoError(t, os.WriteFile(p, probeBin, 0o755))
				if err := unix.Setxattr(p, "security.capability", []byte(vfsCapIPCLockP()), 0); err != nil {
					t.Fatalf("setting cap_ipc_lock+p on the context file (needs CAP_SETFCAP): %v", err)
				}
				require.NoError(t, os.WriteFile(filepath.Join(dir, "probe.tar"), probeTar.Bytes(), 0o644))
				df := strings.ReplaceAll(w.Dockerfile, "{{BASE}}", base)
				// Label every stage, so cleanup also finds the image of an
				// intermediate stage (--label marks only the final one).
				df = regexp.MustCompile(`(?m)^(FROM .*)$`).ReplaceAllString(df, "$1\nLABEL "+labelKey+"="+runID)
				require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644))
				r := docker(t, "build", "-q", "--label", labelKey+"="+runID, "-t", tag, dir)
				if r.Code != 0 {
					recordFileCap(w.Name, builder, "build fails: "+lastLine(r.Stderr))
					if builder == "legacy" {
						assert.Equal(t, w.Legacy, "build fails", "build failed: %s", r.Stderr)
					} else {
						t.Errorf("build failed with %s: %s", builder, r.Stderr)
					}
					return
				}
			}
			r := runContainer(t, []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK", "--entrypoint", "/usr/local/bin/probe"}, tag)
			require.Zerof(t, r.Code, "probe: %s %s", r.Stdout, r.Stderr)
			p := parseProbe(t, r.Stdout)
			got := "lost"
			if p.IPCLock["CapPrm"] {
				got = "kept"
			}
			recordFileCap(w.Name, builder, got)
			if builder == "legacy" {
				assert.Equal(t, w.Legacy, got, "file capability after the build")
			} else {
				t.Logf("%s with %s: %s (legacy builder: %s)", w.Name, builder, got, w.Legacy)
			}
		})
	}
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(ls[len(ls)-1])
}

var (
	fileCapMu   sync.Mutex
	fileCapRows = map[string]string{}
)

func recordFileCap(way, builder, got string) {
	fileCapMu.Lock()
	defer fileCapMu.Unlock()
	fileCapRows[way+" ("+builder+" builder)"] = got
}

// fileCapTable renders what TestFileCapabilityInImage saw.
func fileCapTable() string {
	fileCapMu.Lock()
	defer fileCapMu.Unlock()
	if len(fileCapRows) == 0 {
		return ""
	}
	keys := make([]string, 0, len(fileCapRows))
	for k := range fileCapRows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("| way | cap_ipc_lock+p in the image |\n|---|---|\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %s |\n", k, fileCapRows[k])
	}
	return b.String()
}
