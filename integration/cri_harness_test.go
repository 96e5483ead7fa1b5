//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The CRI suite drives containerd's CRI plugin the way a kubelet does, over
// the CRI API with crictl, against a PRIVATE containerd: its own config,
// root, state and socket under a temporary directory, never the containerd
// that dockerd uses. Each private containerd is stopped by its pid when its
// test ends (t.Cleanup, so also on failure), after its pods are removed;
// TestMain stops any that a panic left behind.

// criErr is why the CRI suite cannot run here (not root, a tool missing);
// nil when it can. Set in TestMain.
var criErr error

// criTools are the programs the CRI suite needs, found in TestMain.
var criTools struct{ containerd, ctr, runc, crictl, prlimit string }

// criPodNamespace is the Kubernetes namespace of every pod the suite makes.
const criPodNamespace = "ncclrun-it"

// findCRITools looks for containerd, ctr, runc, crictl (on PATH or in
// $HOME/go/bin, where .ci/run installs it) and prlimit.
func findCRITools() error {
	if os.Geteuid() != 0 {
		return errors.New("the CRI suite starts its own containerd: needs root")
	}
	look := func(name string) (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		if home, err := os.UserHomeDir(); err == nil {
			p := filepath.Join(home, "go", "bin", name)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s not found (.ci/run installs it)", name)
	}
	var err error
	for _, x := range []struct {
		dst  *string
		name string
	}{
		{&criTools.containerd, "containerd"}, {&criTools.ctr, "ctr"}, {&criTools.runc, "runc"},
		{&criTools.crictl, "crictl"}, {&criTools.prlimit, "prlimit"},
	} {
		if *x.dst, err = look(x.name); err != nil {
			return err
		}
	}
	if _, err := exec.LookPath("containerd-shim-runc-v2"); err != nil {
		return fmt.Errorf("containerd-shim-runc-v2 not found: %w", err)
	}
	return nil
}

// requireCRI skips the test where the CRI suite cannot run (fails under
// CI=true) and fails it when ncclrun, capprobe or pause could not be built.
func requireCRI(t *testing.T) {
	t.Helper()
	if criErr != nil {
		testutil.SkipOrFail(t, "no CRI suite here: %v", criErr)
	}
	require.NoError(t, probeErr, "building capprobe")
	require.NoError(t, ncclErr, "building ncclrun")
	require.NoError(t, pauseErr, "building pause")
}

var pauseErr error

// live private containerds, for TestMain's last-resort stop.
var (
	liveMu  sync.Mutex
	liveCRI = map[*criEnv]bool{}
)

// stopLeftoverCRI stops every private containerd a test did not stop.
func stopLeftoverCRI() {
	liveMu.Lock()
	envs := make([]*criEnv, 0, len(liveCRI))
	for e := range liveCRI {
		envs = append(envs, e)
	}
	liveMu.Unlock()
	for _, e := range envs {
		e.stop()
	}
}

// criEnv is one private containerd with the CRI plugin.
type criEnv struct {
	Dir     string // everything of this containerd lives under it
	Sock    string
	Memlock string // what it was started under: "64 KiB" or "inherited 8 MiB"
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	stopped sync.Once
}

// containerdConfig is the private containerd's config.toml. restrict_oom_score_adj:
// runc cannot set oom_score_adj below the caller's without CAP_SYS_RESOURCE,
// which this kind of VM lacks (a kubelet node has it). No CNI: every pod
// uses the host network.
func containerdConfig(dir, pauseImage string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "containerd.sock"),
		filepath.Join(dir, "containerd.sock.ttrpc"), filepath.Join(dir, "opt"), pauseImage,
		filepath.Join(dir, "cni", "bin"), filepath.Join(dir, "cni", "conf"))
}

// criImageRef names an image of this run in the private containerd.
func criImageRef(name string) string { return "localhost/ncclrun-it/" + name + ":" + runID }

// startContainerd starts a private containerd; memlock > 0 starts it under
// `prlimit --memlock=N:N`, 0 lets it inherit the test's own limit. It
// returns once containerd has logged that it booted, with the suite's
// images imported.
func startContainerd(t *testing.T, memlock int64) *criEnv {
	t.Helper()
	requireCRI(t)
	dir, err := os.MkdirTemp("", "ncclrun-cri-")
	require.NoError(t, err)
	e := &criEnv{Dir: dir, Sock: filepath.Join(dir, "containerd.sock"), exited: make(chan struct{}), logPath: filepath.Join(dir, "containerd.log")}
	for _, d := range []string{"root", "state", "opt", "cni/bin", "cni/conf", "pods"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	// uid 1000 must reach the host files mounted into its containers.
	require.NoError(t, os.Chmod(dir, 0o755))
	ep := "unix://" + e.Sock
	require.NoError(t, os.WriteFile(filepath.Join(dir, "crictl.yaml"), []byte("runtime-endpoint: "+ep+"\nimage-endpoint: "+ep+"\ntimeout: 120\n"), 0o644))
	cfg := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(containerdConfig(dir, criImageRef("pause"))), 0o644))
	args := []string{criTools.containerd, "--config", cfg}
	e.Memlock = "inherited " + fmtLimit(selfMemlock())
	if memlock > 0 {
		m := strconv.FormatInt(memlock, 10)
		args = append([]string{criTools.prlimit, "--memlock=" + m + ":" + m}, args...)
		e.Memlock = fmtLimit(memlock)
	}
	logf, err := os.Create(e.logPath)
	require.NoError(t, err)
	e.cmd = exec.Command(args[0], args[1:]...)
	pr, pw := io.Pipe()
	e.cmd.Stdout, e.cmd.Stderr = logf, pw
	// Its own process group: a ^C of the test must not reach it first, and
	// stop() signals exactly this pid.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, e.cmd.Start(), "starting containerd")
	liveMu.Lock()
	liveCRI[e] = true
	liveMu.Unlock()
	t.Cleanup(e.stop)
	go func() {
		_ = e.cmd.Wait()
		pw.Close()
		logf.Close()
		close(e.exited)
	}()
	booted := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		said := false
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if !said && strings.Contains(sc.Text(), "containerd successfully booted") {
				said = true
				booted <- true
			}
		}
		if !said {
			booted <- false
		}
	}()
	select {
	case ok := <-booted:
		require.True(t, ok, "containerd exited before booting:\n%s", e.log())
	case <-time.After(2 * time.Minute): // a bound on a wedged start, not a synchronisation
		t.Fatalf("containerd did not boot within 2 minutes:\n%s", e.log())
	}
	e.importImages(t)
	return e
}

func (e *criEnv) log() string {
	b, _ := os.ReadFile(e.logPath)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// stop removes every pod, stops containerd by its pid, kills any shim of
// this containerd left behind, unmounts what is left under Dir and removes it.
func (e *criEnv) stop() {
	e.stopped.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = exec.CommandContext(ctx, criTools.crictl, e.crictlFlags("rmp", "-fa")...).Run()
		if e.cmd.Process != nil {
			_ = e.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-e.exited:
			case <-time.After(30 * time.Second): // bound, then the hard way
				_ = e.cmd.Process.Kill()
				<-e.exited
			}
		}
		for _, pid := range shimsOf(e.Sock) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		unmountUnder(e.Dir)
		removeCgroups()
		_ = os.RemoveAll(e.Dir)
		liveMu.Lock()
		delete(liveCRI, e)
		liveMu.Unlock()
	})
}

// shimsOf finds containerd-shim-runc-v2 processes started for the
// containerd listening on sock (their command line names its address).
func shimsOf(sock string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		for _, a := range args {
			if a == sock {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mps []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mps = append(mps, f[4])
		}
	}
	sort.Slice(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	for _, m := range mps {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
}

// Pod cgroups are made under /kubepods/besteffort/pod<uid>, as a kubelet
// with the cgroupfs driver does; the ones this run made are removed.
var (
	cgroupMu   sync.Mutex
	cgroupPods = map[string]bool{}
	// kubepodsExisted: /kubepods was there before the suite (a real node?);
	// then only the pod directories are removed.
	kubepodsExisted = func() map[string]bool {
		m := map[string]bool{}
		ents, _ := os.ReadDir("/sys/fs/cgroup")
		for _, c := range ents {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c.Name(), "kubepods")); err == nil {
				m[c.Name()] = true
			}
		}
		return m
	}()
)

func removeCgroups() {
	cgroupMu.Lock()
	defer cgroupMu.Unlock()
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ents {
		base := filepath.Join("/sys/fs/cgroup", c.Name())
		for pod := range cgroupPods {
			_ = os.Remove(filepath.Join(base, "kubepods", "besteffort", "pod"+pod))
		}
		if !kubepodsExisted[c.Name()] {
			_ = os.Remove(filepath.Join(base, "kubepods", "besteffort"))
			_ = os.Remove(filepath.Join(base, "kubepods"))
		}
	}
}

func selfMemlock() int64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		return -2
	}
	if rl.Cur == unix.RLIM_INFINITY {
		return unlimited
	}
	return int64(rl.Cur)
}

func (e *criEnv) crictlFlags(args ...string) []string {
	ep := "unix://" + e.Sock
	return append([]string{"--config", filepath.Join(e.Dir, "crictl.yaml"), "--runtime-endpoint", ep, "--image-endpoint", ep, "--timeout", "2m"}, args...)
}

// crictl runs crictl against this containerd; it fails the test only when
// crictl could not be started at all.
func (e *criEnv) crictl(t *testing.T, args ...string) result {
	t.Helper()
	return runTool(t, "crictl", criTools.crictl, e.crictlFlags(args...), args)
}

func (e *criEnv) mustCrictl(t *testing.T, args ...string) string {
	t.Helper()
	r := e.crictl(t, args...)
	require.Zerof(t, r.Code, "crictl %s\nstdout: %s\nstderr: %s\ncontainerd log:\n%s", strings.Join(args, " "), r.Stdout, r.Stderr, e.log())
	return strings.TrimSpace(r.Stdout)
}

// criImage is one image of the suite: a name, its layer and its config.
type criImage struct {
	Name       string
	Entrypoint []string
	Cmd        []string
}

// criImages share one layer (criRootfs) and differ in their config.
var criImages = []criImage{
	{Name: "pause", Entrypoint: []string{"/pause"}},
	{Name: "scenario"},
	// way (b) as the image's ENTRYPOINT: the pod gives only args.
	{Name: "entrypoint-ncclrun-cap", Entrypoint: []string{"/ncclrun-cap"}, Cmd: []string{"doctor"}},
	{Name: "entrypoint-capprobe-cap", Entrypoint: []string{"/capprobe-cap"}},
}

var (
	criLayerOnce sync.Once
	criLayer     []byte
	criLayerErr  error
)

// criRootfs is the layer of every CRI image, FROM scratch:
//
//	/pause                  the sandbox program (testdata/pause)
//	/ncclrun, /capprobe     static, no file capability
//	/ncclrun-cap, /capprobe-cap   with cap_ipc_lock+p (PAX SCHILY.xattr.security.capability)
//	/ncclrun-ep, /capprobe-ep     with cap_ipc_lock+ep
//	/bin/busybox, /bin/sh   busybox-static, for commands behind a shell
//	/etc/passwd, /etc/group, /tmp, /dev/shm, /home/trainer
func criRootfs() ([]byte, error) {
	criLayerOnce.Do(func() {
		read := func(p string) []byte {
			b, err := os.ReadFile(p)
			if err != nil && criLayerErr == nil {
				criLayerErr = err
			}
			return b
		}
		nccl, probe, pause := read(filepath.Join(binDir, "ncclrun")), read(filepath.Join(binDir, "capprobe")), read(filepath.Join(binDir, "pause"))
		bb := read(busyboxPath())
		if criLayerErr != nil {
			return
		}
		if ef, err := elf.NewFile(bytes.NewReader(bb)); err != nil || hasInterp(ef) {
			criLayerErr = fmt.Errorf("%s is not a static executable (install busybox-static): %v", busyboxPath(), err)
			return
		}
		files := []tarFile{
			{Name: "pause", Mode: 0o755, Body: pause},
			{Name: "ncclrun", Mode: 0o755, Body: nccl},
			{Name: "ncclrun-cap", Mode: 0o755, Body: nccl, FileCap: true},
			{Name: "ncclrun-ep", Mode: 0o755, Body: nccl, FileCapEff: true},
			{Name: "capprobe", Mode: 0o755, Body: probe},
			{Name: "capprobe-cap", Mode: 0o755, Body: probe, FileCap: true},
			{Name: "capprobe-ep", Mode: 0o755, Body: probe, FileCapEff: true},
			{Name: "bin/busybox", Mode: 0o755, Body: bb},
			{Name: "bin/sh", Link: "busybox"},
			{Name: "etc/passwd", Mode: 0o644, Body: []byte(etcPasswd)},
			{Name: "etc/group", Mode: 0o644, Body: []byte(etcGroup)},
			{Name: "tmp", Mode: 0o1777, Dir: true},
			{Name: "out", Mode: 0o1777, Dir: true},
			{Name: "home/trainer", Mode: 0o755, Dir: true},
			{Name: "dev/shm", Mode: 0o1777, Dir: true},
		}
		var buf bytes.Buffer
		if err := writeTar(&buf, parentDirs(files)); err != nil {
			criLayerErr = err
			return
		}
		criLayer = buf.Bytes()
	})
	return criLayer, criLayerErr
}

// hasInterp reports whether an ELF file names a dynamic loader.
func hasInterp(f *elf.File) bool {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// busyboxPath is Debian's busybox-static (static, unlike Debian's busybox).
func busyboxPath() string {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "/bin/busybox"
}

// importImages writes criImages as one docker-archive (manifest.json, one
// config per image, the shared layer) and imports it with
// `ctr -n k8s.io images import`: no registry.
func (e *criEnv) importImages(t *testing.T) {
	t.Helper()
	layer, err := criRootfs()
	require.NoError(t, err, "assembling the CRI images' layer")
	sum := sha256.Sum256(layer)
	diffID := "sha256:" + hex.EncodeToString(sum[:])
	files := []tarFile{{Name: "layer.tar", Mode: 0o644, Body: layer}}
	type manifestEntry struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	var manifest []manifestEntry
	for _, img := range criImages {
		cfg := map[string]any{
			"architecture": runtime.GOARCH, "os": "linux",
			"config": map[string]any{
				"Entrypoint": img.Entrypoint, "Cmd": img.Cmd,
				"Env": []string{"PATH=/bin"}, "WorkingDir": "/",
			},
			"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		}
		b, err := json.Marshal(cfg)
		require.NoError(t, err)
		cs := sha256.Sum256(b)
		name := hex.EncodeToString(cs[:]) + ".json"
		files = append(files, tarFile{Name: name, Mode: 0o644, Body: b})
		manifest = append(manifest, manifestEntry{Config: name, RepoTags: []string{criImageRef(img.Name)}, Layers: []string{"layer.tar"}})
	}
	mb, err := json.Marshal(manifest)
	require.NoError(t, err)
	files = append(files, tarFile{Name: "manifest.json", Mode: 0o644, Body: mb})
	archive := filepath.Join(e.Dir, "images.tar")
	f, err := os.Create(archive)
	require.NoError(t, err)
	require.NoError(t, writeTar(f, files))
	require.NoError(t, f.Close())
	out, err := exec.Command(criTools.ctr, "--address", e.Sock, "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs", archive).CombinedOutput()
	require.NoError(t, err, "ctr images import: %s\ncontainerd log:\n%s", out, e.log())
	_ = os.Remove(archive)
}

// criSecurity is a container's securityContext as the kubelet hands it to
// the CRI (LinuxContainerSecurityContext).
type criSecurity struct {
	RunAsUser    *int64 // nil: the image's user (root here)
	RunAsNonRoot bool   // checked by the kubelet before create, as it does
	Add, Drop    []string
	NoNewPrivs   bool // allowPrivilegeEscalation: false
}

// criContainer is one container of a pod.
type criContainer struct {
	Name    string
	Image   string // criImages name
	Command []string
	Args    []string
	Env     map[string]string
	// Kube: the kubelet's additions: KUBERNETES_* variables and the
	// service-account token mount.
	Kube bool
}

// criRun is what became of one container: its exit status, output and the
// termination message the kubelet would read back from its file.
type criRun struct {
	Started     bool   // false: create or start failed
	StartErr    string // crictl's error then
	ExitCode    int
	Reason      string
	Stdout      string
	Stderr      string
	Termination string
}

func i64(n int64) *int64 { return &n }

// kubeletEnv is what a kubelet puts into every container of a pod in the
// default namespace of a cluster whose API service is 10.96.0.1:443.
var kubeletEnv = map[string]string{
	"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
	"KUBERNETES_PORT": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
	"KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
}

// criPod is one pod sandbox, created as a kubelet does for a host-network
// pod: no hostname, network namespace NODE, pod cgroup under kubepods.
type criPod struct {
	env  *criEnv
	ID   string
	UID  string
	Name string
	dir  string // like /var/lib/kubelet/pods/<uid>
	sec  criSecurity
	n    int
}

func (e *criEnv) runPod(t *testing.T, name string, sec criSecurity) *criPod {
	t.Helper()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	uid := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	p := &criPod{env: e, UID: uid, Name: name, sec: sec, dir: filepath.Join(e.Dir, "pods", uid)}
	require.NoError(t, os.MkdirAll(filepath.Join(p.dir, "logs"), 0o755))
	cgroupMu.Lock()
	cgroupPods[uid] = true
	cgroupMu.Unlock()
	podSec := map[string]any{"namespace_options": map[string]any{"network": 2, "pid": 1, "ipc": 0}}
	if sec.RunAsUser != nil {
		podSec["run_as_user"] = map[string]any{"value": *sec.RunAsUser}
		podSec["run_as_group"] = map[string]any{"value": *sec.RunAsUser}
	}
	cfg := map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": criPodNamespace, "uid": uid, "attempt": 0},
		"log_directory": filepath.Join(p.dir, "logs"),
		"labels":        map[string]string{labelKey: runID},
		"linux": map[string]any{
			"cgroup_parent":    "/kubepods/besteffort/pod" + uid,
			"security_context": podSec,
		},
	}
	p.writeJSON(t, "pod.json", cfg)
	p.ID = e.mustCrictl(t, "runp", filepath.Join(p.dir, "pod.json"))
	t.Cleanup(func() {
		_ = e.crictl(t, "stopp", p.ID)
		_ = e.crictl(t, "rmp", "-f", p.ID)
	})
	return p
}

func (p *criPod) writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(p.dir, name), b, 0o644))
}

// run creates, starts and waits for one container of the pod, as a kubelet
// would for it, and removes it.
func (p *criPod) run(t *testing.T, c criContainer) criRun {
	t.Helper()
	p.n++
	e := p.env
	sec := p.sec
	if sec.RunAsNonRoot {
		// The kubelet's verifyRunAsNonRoot: refuse uid 0 before creating.
		require.True(t, sec.RunAsUser != nil && *sec.RunAsUser != 0, "runAsNonRoot with uid 0: the kubelet would refuse to start this container")
	}
	cname := fmt.Sprintf("%s-%d", c.Name, p.n)
	// The termination message file, where the kubelet keeps it
	// (pods/<uid>/containers/<name>/<id>), world-writable as the kubelet
	// makes it, mounted at /dev/termination-log.
	cdir := filepath.Join(p.dir, "containers", cname)
	require.NoError(t, os.MkdirAll(cdir, 0o755))
	term := filepath.Join(cdir, "termination-log")
	require.NoError(t, os.WriteFile(term, nil, 0o666))
	require.NoError(t, os.Chmod(term, 0o666))
	mounts := []map[string]any{{"container_path": "/dev/termination-log", "host_path": term}}
	envs := []map[string]string{}
	keys := []string{}
	all := map[string]string{}
	if c.Kube {
		for k, v := range kubeletEnv {
			all[k] = v
		}
		sa := filepath.Join(p.dir, "volumes", "kube-api-access")
		require.NoError(t, os.MkdirAll(sa, 0o755))
		for n, v := range map[string]string{"token": "not-a-real-token\n", "namespace": criPodNamespace, "ca.crt": "not a real certificate\n"} {
			require.NoError(t, os.WriteFile(filepath.Join(sa, n), []byte(v), 0o644))
		}
		mounts = append(mounts, map[string]any{"container_path": "/var/run/secrets/kubernetes.io/serviceaccount", "host_path": sa, "readonly": true})
	}
	for k, v := range c.Env {
		all[k] = v
	}
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		envs = append(envs, map[string]string{"key": k, "value": all[k]})
	}
	csec := map[string]any{
		"capabilities":      map[string]any{"add_capabilities": sec.Add, "drop_capabilities": sec.Drop},
		"no_new_privs":      sec.NoNewPrivs,
		"namespace_options": map[string]any{"network": 2, "pid": 1, "ipc": 0},
	}
	if sec.RunAsUser != nil {
		csec["run_as_user"] = map[string]any{"value": *sec.RunAsUser}
		csec["run_as_group"] = map[string]any{"value": *sec.RunAsUser}
	}
	cfg := map[string]any{
		"metadata": map[string]any{"name": cname, "attempt": 0},
		"image":    map[string]any{"image": criImageRef(c.Image)},
		"command":  c.Command,
		"args":     c.Args,
		"envs":     envs,
		"mounts":   mounts,
		"log_path": cname + ".log",
		"labels":   map[string]string{labelKey: runID},
		"linux":    map[string]any{"security_context": csec},
	}
	p.writeJSON(t, cname+".json", cfg)
	r := criRun{}
	cr := e.crictl(t, "create", p.ID, filepath.Join(p.dir, cname+".json"), filepath.Join(p.dir, "pod.json"))
	if cr.Code != 0 {
		r.StartErr = strings.TrimSpace(cr.Stderr)
		return r
	}
	id := strings.TrimSpace(cr.Stdout)
	defer e.crictl(t, "rm", "-f", id)
	sr := e.crictl(t, "start", id)
	if sr.Code != 0 {
		r.StartErr = strings.TrimSpace(sr.Stderr)
		return r
	}
	r.Started = true
	// crictl logs -f follows the log until the container is no longer
	// running: the wait, without polling here.
	_ = e.crictl(t, "logs", "-f", id)
	st := e.inspect(t, id)
	require.Equal(t, "CONTAINER_EXITED", st.State, "container %s state after its log ended", cname)
	r.ExitCode, r.Reason = st.ExitCode, st.Reason
	r.Stdout, r.Stderr = readCRILog(t, filepath.Join(p.dir, "logs", cname+".log"))
	b, err := os.ReadFile(term)
	require.NoError(t, err)
	r.Termination = string(b)
	return r
}

type criStatus struct {
	State    string `json:"state"`
	ExitCode int    `json:"exitCode"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
}

func (e *criEnv) inspect(t *testing.T, id string) criStatus {
	t.Helper()
	out := e.mustCrictl(t, "inspect", "-o", "json", id)
	var v struct {
		Status criStatus `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v), "crictl inspect: %s", out)
	return v.Status
}

// readCRILog splits a CRI log file ("TIME STREAM P|F TEXT" lines) into the
// container's stdout and stderr.
func readCRILog(t *testing.T, path string) (stdout, stderr string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err, "container log")
	defer f.Close()
	var so, se strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) < 3 {
			continue
		}
		text := ""
		if len(parts) == 4 {
			text = parts[3]
		}
		if parts[2] == "F" {
			text += "\n"
		}
		if parts[1] == "stderr" {
			se.WriteString(text)
		} else {
			so.WriteString(text)
		}
	}
	require.NoError(t, sc.Err())
	return so.String(), se.String()
}
