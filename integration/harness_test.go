//go:build integration

package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/stretchr/testify/require"
)

// labelKey marks every container and image the suite makes; the value is the
// run id, so parallel or crashed runs never remove each other's objects.
const labelKey = "ncclrun.integration"

var (
	runID     string
	binDir    string // ncclrun and capprobe, static
	probeErr  error  // building capprobe failed: every test fails with it
	ncclErr   error  // building ncclrun failed: the ncclrun tests fail with it
	dockerErr error  // docker info failed: every test skips (fails under CI)
	repoRoot  string
)

func TestMain(m *testing.M) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	runID = hex.EncodeToString(b)
	wd, _ := os.Getwd()
	repoRoot = filepath.Dir(wd)

	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		dockerErr = fmt.Errorf("docker info: %v: %s", err, bytes.TrimSpace(out))
	}
	dir, err := os.MkdirTemp("", "ncclrun-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	criErr = findCRITools()
	if dockerErr == nil || criErr == nil {
		probeErr = buildStatic(dir, "capprobe", "./integration/testdata/capprobe")
		ncclErr = buildStatic(dir, "ncclrun", "./cmd/ncclrun")
	}
	if criErr == nil {
		pauseErr = buildStatic(dir, "pause", "./integration/testdata/pause")
	}
	testutil.UnignoreSignals()
	code := m.Run()
	stopLeftoverCRI()
	if err := writeTable(); err != nil {
		fmt.Fprintln(os.Stderr, "writing the scenario table:", err)
	}
	if dockerErr == nil {
		cleanup()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildStatic builds the package pkg with CGO_ENABLED=0 as dir/name.
func buildStatic(dir, name, pkg string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, name), pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w: %s", pkg, err, out)
	}
	return nil
}

// cleanup removes this run's containers, then its images.
func cleanup() {
	filter := "label=" + labelKey + "=" + runID
	if out, err := exec.Command("docker", "ps", "-aq", "--filter", filter).Output(); err == nil {
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
	}
	if out, err := exec.Command("docker", "images", "-q", "--filter", filter).Output(); err == nil {
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rmi", "-f"}, ids...)...).Run()
		}
	}
}

// requireDocker skips the test without a Docker engine (fails under CI=true)
// and fails it when capprobe could not be built.
func requireDocker(t *testing.T) {
	t.Helper()
	if dockerErr != nil {
		testutil.SkipOrFail(t, "no Docker engine: %v", dockerErr)
	}
	require.NoError(t, probeErr, "building capprobe")
}

// requireNcclrun is requireDocker that also fails the test when ncclrun
// could not be built.
func requireNcclrun(t *testing.T) {
	t.Helper()
	requireDocker(t)
	require.NoError(t, ncclErr, "building ncclrun")
}

// result is one finished docker command.
type result struct {
	Stdout, Stderr string
	Code           int // exit status of the docker CLI (the container's for docker run)
}

// docker runs the docker CLI with args and returns its output; it fails the
// test only when docker could not be started at all. A bound of 5 minutes
// keeps a wedged engine from hanging the suite (not a synchronisation).
func docker(t *testing.T, args ...string) result {
	t.Helper()
	return runTool(t, "docker", "docker", args, args)
}

// runTool runs path with argv under the suite's 5-minute bound and returns
// its output and exit status; it fails the test (naming the tool and shown
// args) only when the tool could not be started at all.
func runTool(t *testing.T, name, path string, argv, shown []string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, argv...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := result{Stdout: so.String(), Stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("%s %s: %v", name, strings.Join(shown, " "), err)
	}
	return r
}

// mustDocker is docker that fails the test on a non-zero status.
func mustDocker(t *testing.T, args ...string) result {
	t.Helper()
	r := docker(t, args...)
	require.Zerof(t, r.Code, "docker %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Stdout, r.Stderr)
	return r
}

// runArgs starts `docker run --rm` with the suite's label, the given docker
// options, image and command.
func runContainer(t *testing.T, opts []string, image string, cmd ...string) result {
	t.Helper()
	args := append([]string{"run", "--rm", "--label", labelKey + "=" + runID}, opts...)
	args = append(args, image)
	args = append(args, cmd...)
	return docker(t, args...)
}

// vfsCapIPCLockP is the security.capability xattr value of
// `setcap cap_ipc_lock+p`: struct vfs_cap_data revision 2 (linux/capability.h),
// magic_etc = VFS_CAP_REVISION_2 without VFS_CAP_FLAGS_EFFECTIVE,
// permitted[0] = 1<<CAP_IPC_LOCK, everything else 0.
func vfsCapIPCLockP() string { return vfsCapIPCLock(false) }

// vfsCapIPCLock is the xattr value of cap_ipc_lock+p, or with effective set
// (VFS_CAP_FLAGS_EFFECTIVE) of cap_ipc_lock+ep.
func vfsCapIPCLock(effective bool) string {
	b := make([]byte, 20)
	magic := uint32(0x02000000)
	if effective {
		magic |= 1
	}
	binary.LittleEndian.PutUint32(b[0:], magic)
	binary.LittleEndian.PutUint32(b[4:], 1<<14)
	return string(b)
}

// tarFile is one entry of a root file system tarball.
type tarFile struct {
	Name    string // path inside the image, without leading /
	Mode    int64
	Body    []byte
	Dir     bool
	FileCap bool // carry cap_ipc_lock+p as a security.capability xattr
	// FileCapEff: carry cap_ipc_lock+ep instead.
	FileCapEff bool
	Link       string
}

// writeTar writes files (sorted by name) as a tar archive to w. A name
// given twice (a shared library that two host binaries need) is written
// once, the first time: docker import refuses duplicate paths.
func writeTar(w io.Writer, files []tarFile) error {
	sort.SliceStable(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	tw := tar.NewWriter(w)
	for i, f := range files {
		if i > 0 && files[i-1].Name == f.Name {
			continue
		}
		h := &tar.Header{Name: f.Name, Mode: f.Mode, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case f.Dir:
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		case f.Link != "":
			h.Typeflag = tar.TypeSymlink
			h.Linkname = f.Link
		default:
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Body))
		}
		if f.FileCap || f.FileCapEff {
			h.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": vfsCapIPCLock(f.FileCapEff)}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar header %q: %w", f.Name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Body); err != nil {
				return fmt.Errorf("tar body %q: %w", f.Name, err)
			}
		}
	}
	return tw.Close()
}

// hostFile reads a host file into a tarFile at name.
func hostFile(t *testing.T, src, name string, mode int64) tarFile {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	return tarFile{Name: strings.TrimPrefix(name, "/"), Mode: mode, Body: b}
}

var lddPath = regexp.MustCompile(`(/[^ ]+) \(0x`)

// withLibs returns the host binary bin and the shared libraries ldd lists for
// it, at their host paths (symlinks resolved to their contents).
func withLibs(t *testing.T, bin, name string) []tarFile {
	t.Helper()
	files := []tarFile{hostFile(t, bin, name, 0o755)}
	out, err := exec.Command("ldd", bin).CombinedOutput()
	if err != nil { // "not a dynamic executable"
		return files
	}
	for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
		files = append(files, hostFile(t, m[1], m[1], 0o755))
	}
	return files
}

// parentDirs adds the directories every entry needs.
func parentDirs(files []tarFile) []tarFile {
	seen := map[string]bool{}
	for _, f := range files {
		if f.Dir {
			seen[f.Name] = true
		}
	}
	var dirs []tarFile
	for _, f := range files {
		for d := filepath.Dir(f.Name); d != "." && d != "/" && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			dirs = append(dirs, tarFile{Name: d, Mode: 0o755, Dir: true})
		}
	}
	return append(files, dirs...)
}

// buildImage builds an image tagged tag from a context holding the given
// Dockerfile and files (name -> content), labelled for cleanup.
func buildImage(t *testing.T, tag, dockerfile string, files map[string][]byte) result {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644))
	for n, b := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o755))
	}
	return docker(t, "build", "-q", "--label", labelKey+"="+runID, "-t", tag, dir)
}

// imageTag names an image of this run.
func imageTag(name string) string { return "ncclrun-it-" + name + ":" + runID }

var (
	scenarioOnce sync.Once
	scenarioImg  string
	scenarioErr  error
)

// passwd and group of the scenario image: root and the training user 1000.
const (
	etcPasswd = "root:x:0:0:root:/root:/bin/sh\ntrainer:x:1000:1000:trainer:/home/trainer:/bin/sh\n"
	etcGroup  = "root:x:0:\ntrainer:x:1000:\nvideo:x:44:trainer\n"
)

// scenarioImage builds (once) the image every scenario runs in, FROM scratch:
//
//	/ncclrun            static, no file capability
//	/ncclrun-cap        the same binary with cap_ipc_lock+p (xattr in an ADDed tar)
//	/capprobe           the raw probe
//	/capprobe-cap       the raw probe with cap_ipc_lock+p
//	/bin/sh + its libs  the host's shell, for "behind a shell" entrypoints
//	/etc/passwd, /etc/group, /tmp (1777), /out (1777, a volume for reports)
func scenarioImage(t *testing.T) string {
	t.Helper()
	requireDocker(t)
	scenarioOnce.Do(func() {
		var files []tarFile
		// Without ncclrun (its build failed) the image still serves the raw
		// runtime tests; the ncclrun tests fail in requireNcclrun.
		nccl, _ := os.ReadFile(filepath.Join(binDir, "ncclrun"))
		probe, err := os.ReadFile(filepath.Join(binDir, "capprobe"))
		if err != nil {
			scenarioErr = err
			return
		}
		files = append(files,
			tarFile{Name: "ncclrun", Mode: 0o755, Body: nccl},
			tarFile{Name: "ncclrun-cap", Mode: 0o755, Body: nccl, FileCap: true},
			tarFile{Name: "capprobe", Mode: 0o755, Body: probe},
			tarFile{Name: "capprobe-cap", Mode: 0o755, Body: probe, FileCap: true},
			tarFile{Name: "etc/passwd", Mode: 0o644, Body: []byte(etcPasswd)},
			tarFile{Name: "etc/group", Mode: 0o644, Body: []byte(etcGroup)},
			tarFile{Name: "tmp", Mode: 0o1777, Dir: true},
			tarFile{Name: "out", Mode: 0o1777, Dir: true},
			tarFile{Name: "home/trainer", Mode: 0o755, Dir: true},
			tarFile{Name: "dev/shm", Mode: 0o1777, Dir: true},
		)
		files = append(files, withLibs(t, "/bin/sh", "bin/sh")...)
		var buf bytes.Buffer
		if err := writeTar(&buf, parentDirs(files)); err != nil {
			scenarioErr = err
			return
		}
		tag := imageTag("scenario")
		r := buildImage(t, tag, "FROM scratch\nADD rootfs.tar /\n", map[string][]byte{"rootfs.tar": buf.Bytes()})
		if r.Code != 0 {
			scenarioErr = fmt.Errorf("docker build: %s %s", r.Stdout, r.Stderr)
			return
		}
		scenarioImg = tag
	})
	require.NoError(t, scenarioErr, "building the scenario image")
	return scenarioImg
}

// probe is capprobe's report (testdata/capprobe).
type probe struct {
	UID         int               `json:"uid"`
	GID         int               `json:"gid"`
	Caps        map[string]string `json:"caps"`
	IPCLock     map[string]bool   `json:"ipc_lock"`
	NoNewPrivs  int               `json:"no_new_privs"`
	MemlockSoft int64             `json:"memlock_soft"`
	MemlockHard int64             `json:"memlock_hard"`
	MlockBytes  int64             `json:"mlock_bytes"`
	MlockOK     bool              `json:"mlock_ok"`
	MlockErr    string            `json:"mlock_err"`
}

// parseProbe finds capprobe's JSON line in out.
func parseProbe(t *testing.T, out string) probe {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, `{"uid"`) {
			var p probe
			require.NoError(t, json.Unmarshal([]byte(l), &p), l)
			return p
		}
	}
	t.Fatalf("no capprobe report in output:\n%s", out)
	return probe{}
}
