package fakenccl_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/fakenccl"
	"github.com/ncclrun/ncclrun/internal/testutil"
)

// argsEnv makes the test binary run fakenccl.Main with the JSON array of
// arguments it holds. Ranks started by Main re-execute the binary with the
// same arguments and environment, so they arrive here as well.
const argsEnv = "FAKENCCL_TEST_ARGS"

func TestMain(m *testing.M) {
	if s, ok := os.LookupEnv(argsEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(s), &args); err != nil {
			panic(err)
		}
		os.Exit(fakenccl.Main(args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

// run starts the test binary as fake-nccl with args, behind wrapper (e.g.
// prlimit ... setpriv ...), with the environment env added to a clean one.
func run(t *testing.T, wrapper []string, env []string, args ...string) result {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	argv := append(append([]string(nil), wrapper...), self, "-test.run=^$")
	js, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), argsEnv + "=" + string(js)}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "stderr: %s", errb.String())
		code = ee.ExitCode()
	}
	return result{code, out.String(), errb.String()}
}

func hostForLog(t *testing.T) string {
	h, err := os.Hostname()
	require.NoError(t, err)
	h, _, _ = strings.Cut(h, ".")
	return regexp.QuoteMeta(strings.NewReplacer("%", "-", "/", "-").Replace(h))
}

// limited is prlimit --memlock=L:L setpriv without CAP_IPC_LOCK: a default
// Docker container's limit and capabilities.
func limited(t *testing.T, limit string) []string {
	t.Helper()
	testutil.RequireRoot(t)
	return []string{testutil.RequireTool(t, "prlimit"), "--memlock=" + limit,
		testutil.RequireTool(t, "setpriv"), "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock", "--"}
}

// warnRe matches one WARN line as NCCL 2.18-2.25 prints it, after the
// empty line every WARN starts with.
func warnRe(host, file, msg string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\n` + host + `:(\d+):(\d+) \[(\d+)\] ` + regexp.QuoteMeta(file) + ` NCCL WARN ` + regexp.QuoteMeta(msg) + `$`)
}

func pids(matches [][]string) map[string]bool {
	m := map[string]bool{}
	for _, mm := range matches {
		m[mm[1]] = true
	}
	return m
}

func TestMemlockFailureTwoRanks(t *testing.T) {
	w := limited(t, "65536:65536")
	host := hostForLog(t)
	r := run(t, w, []string{"NCCL_DEBUG=WARN"}, "--ranks", "2", "--pin", "16MiB")
	assert.Equal(t, 1, r.code, "stderr: %s", r.stderr)

	re := warnRe(host, "misc/ibvwrap.cc:169", "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory")
	m := re.FindAllStringSubmatch(r.stdout, -1)
	require.Len(t, m, 2, "stdout:\n%s", r.stdout)
	assert.Len(t, pids(m), 2, "two ranks are two processes")
	devs := []string{m[0][3], m[1][3]}
	assert.ElementsMatch(t, []string{"0", "1"}, devs)
	assert.NotContains(t, r.stdout, "NCCL INFO", "INFO lines need NCCL_DEBUG=INFO")
	assert.Regexp(t, `(?m)^NCCL version 2\.21\.5\+cuda\d+\.\d+$`, r.stdout, "rank 0 prints the version at WARN")

	for rank := range 2 {
		p := regexp.QuoteMeta("[rank" + string(rune('0'+rank)) + "]: ")
		assert.Regexp(t, `(?m)^`+p+regexp.QuoteMeta("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:")+`\d+, `+
			regexp.QuoteMeta("unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5")+`$`, r.stderr)
		assert.Regexp(t, `(?m)^`+p+regexp.QuoteMeta("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ")+`$`, r.stderr)
		assert.Regexp(t, `(?m)^`+p+`Last error:\n`+p+regexp.QuoteMeta("Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory")+`$`, r.stderr)
	}
}

func TestInfoChainAndNoPrefix(t *testing.T) {
	w := limited(t, "65536:65536")
	host := hostForLog(t)
	r := run(t, w, []string{"NCCL_DEBUG=info"}, "--pin", "128KiB", "--rank-prefix=false")
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `(?m)^`+host+`:\d+:\d+ \[0\] NCCL INFO transport/net_ib\.cc:\d+ -> 2$`, r.stdout)
	assert.Regexp(t, `(?m)^`+host+`:\d+:\d+ \[0\] NCCL INFO .*Init START$`, r.stdout)
	assert.NotContains(t, r.stdout, "Init COMPLETE")
	assert.Regexp(t, `(?m)^`+host+`:\d+:\d+ \[0\] NCCL INFO NCCL version 2\.21\.5`, r.stdout)
	assert.Regexp(t, `(?m)^Last error:\nCall to ibv_reg_mr_iova2 failed with error Cannot allocate memory$`, r.stderr)
	assert.NotContains(t, r.stderr, "[rank0]")
	// the WARN comes before its unwinding chain
	assert.Less(t, strings.Index(r.stdout, "NCCL WARN"), strings.Index(r.stdout, "-> 2"))
}

func TestNoOutputWithoutNCCLDebug(t *testing.T) {
	w := limited(t, "65536:65536")
	r := run(t, w, nil, "--ranks", "2")
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout, "NCCL prints nothing when NCCL_DEBUG is unset")
	assert.Equal(t, 2, strings.Count(r.stderr, "Last error:\n"), "PyTorch still prints the stored last error:\n%s", r.stderr)
	assert.Equal(t, 2, strings.Count(r.stderr, "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n"))
}

func TestLimitZeroIsEPERM(t *testing.T) {
	w := limited(t, "0:0")
	host := hostForLog(t)
	r := run(t, w, []string{"NCCL_DEBUG=WARN"}, "--pin", "4KiB")
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, warnRe(host, "misc/ibvwrap.cc:169", "Call to ibv_reg_mr_iova2 failed with error Operation not permitted"), r.stdout)
}

func TestVersionFormats(t *testing.T) {
	w := limited(t, "65536:65536")
	host := hostForLog(t)
	ts := `\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] `
	tests := []struct {
		version string
		warn    string // regexp of the WARN line after the empty line
		torch   string // the ncclGetErrorString part
		last    bool
	}{
		{"2.12.12", host + `:\d+:\d+ \[0\] misc/ibvwrap\.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed$`, "unhandled system error, NCCL version 2.12.12", false},
		{"2.18.3", host + `:\d+:\d+ \[0\] misc/ibvwrap\.cc:150 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory$`, "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3", true},
		{"2.26.2", ts + host + `:\d+:\d+ \[0\] misc/ibvwrap\.cc:178 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory$`, "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2", true},
		{"2.30.7", ts + host + `:\d+:\d+ \[0\] misc/ibvwrap\.cc:212 \(wrap_ibv_reg_mr_iova2\) NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory$`, "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.30.7", true},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			r := run(t, w, []string{"NCCL_DEBUG=WARN"}, "--nccl-version", tc.version)
			assert.Equal(t, 1, r.code)
			assert.Regexp(t, `(?m)^\n`+tc.warn, r.stdout)
			assert.Contains(t, r.stderr, tc.torch+"\n")
			if tc.last {
				assert.Contains(t, r.stderr, "[rank0]: Last error:\n")
			} else {
				assert.NotContains(t, r.stderr, "Last error:")
				assert.Contains(t, r.stderr, "It can be also caused by unexpected exit of a remote peer.")
			}
		})
	}
}

func TestSuccessWithCapIPCLock(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireCap(t, unix.CAP_IPC_LOCK)
	prlimit := testutil.RequireTool(t, "prlimit")
	host := hostForLog(t)
	r := run(t, []string{prlimit, "--memlock=65536:65536"}, []string{"NCCL_DEBUG=INFO"}, "--ranks", "2", "--pin", "16MiB")
	assert.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	m := regexp.MustCompile(`(?m)^`+host+`:(\d+):\d+ \[(\d)\] NCCL INFO ncclCommInitRankConfig comm 0x[0-9a-f]+ rank (\d) nranks 2 cudaDev (\d) nvmlDev \d busId [0-9a-f]+ commId 0x[0-9a-f]+ - Init COMPLETE$`).FindAllStringSubmatch(r.stdout, -1)
	require.Len(t, m, 2, r.stdout)
	assert.Len(t, pids(m), 2)
	assert.NotContains(t, r.stdout, "NCCL WARN")
	assert.Empty(t, r.stderr)
	assert.Contains(t, r.stdout, "fake-nccl: all-reduce OK on 2 ranks (16 MiB pinned per rank, NCCL 2.21.5)\n")
}

func TestSuccessWithinLimitAsUser(t *testing.T) {
	testutil.RequireRoot(t)
	prlimit := testutil.RequireTool(t, "prlimit")
	setpriv := testutil.RequireTool(t, "setpriv")
	bin := exposedBinary(t)
	// uid 1000, no capabilities, 64 KiB: 64 KiB fits exactly.
	argv := []string{prlimit, "--memlock=65536:65536", setpriv, "--reuid=1000", "--regid=1000", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", bin, "-test.run=^$"}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{argsEnv + `=["--ranks","2","--pin","64KiB","--stderr"]`, "NCCL_DEBUG=WARN"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "stderr: %s", errb.String())
	assert.Equal(t, "fake-nccl: all-reduce OK on 2 ranks (64 KiB pinned per rank, NCCL 2.21.5)\n", out.String())
	assert.Equal(t, "NCCL version 2.21.5+cuda12.4\n", errb.String(), "--stderr moves NCCL's lines")
}

func exposedBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "fakenccl-test-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	bin := filepath.Join(dir, "fakenccl.test")
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	return bin
}

func TestShmSegment(t *testing.T) {
	dir := t.TempDir()
	r := run(t, nil, []string{"NCCL_DEBUG=WARN"}, "--pin", "0", "--shm", "1MiB", "--shm-dir", dir)
	assert.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, left, "the segment is removed")
}

// TestShmNoSpace fills a real 1 MiB tmpfs, in a private mount namespace, so
// the kernel answers ENOSPC as a 64 MiB /dev/shm does to NCCL.
func TestShmNoSpace(t *testing.T) {
	testutil.RequireRoot(t)
	unshare := testutil.RequireTool(t, "unshare")
	host := hostForLog(t)
	dir := t.TempDir()
	self, err := os.Executable()
	require.NoError(t, err)
	tests := []struct {
		version, ext, seg, ts string
	}{
		{"2.21.5", "misc/shmutils.cc:88 ", "misc/shmutils.cc:132 ", ""},
		{"2.23.4", "misc/shmutils.cc:88 ", "misc/shmutils.cc:132 ", ""},
		{"2.30.7", `os/linux\.cc:795 \(ncclOsShmOpen\) `, `os/linux\.cc:842 \(ncclOsShmOpen\) `, `\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] `},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			args, _ := json.Marshal([]string{"--pin", "0", "--shm", "9637888", "--shm-dir", dir, "--nccl-version", tc.version})
			cmd := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c",
				`mount -t tmpfs -o size=1m tmpfs "$1" && exec "$2" -test.run='^$'`, "sh", dir, self)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), argsEnv + "=" + string(args), "NCCL_DEBUG=WARN"}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "stderr: %s", errb.String())
			assert.Equal(t, 1, ee.ExitCode())
			seg := regexp.QuoteMeta(dir) + `/nccl-[A-Za-z0-9]{6}`
			errTxt := ""
			if tc.version != "2.21.5" {
				errTxt = regexp.QuoteMeta(", error: No space left on device (28)")
			}
			pre := `(?m)^\n` + tc.ts + host + `:\d+:\d+ \[0\] `
			assert.Regexp(t, pre+tc.ext+`NCCL WARN Error: failed to extend `+seg+` to 9637892 bytes`+errTxt+`$`, out.String())
			assert.Regexp(t, pre+tc.seg+`NCCL WARN Error while creating shared memory segment `+seg+` \(size 9637888\)`+errTxt+`$`, out.String())
			assert.Regexp(t, `(?m)^\[rank0\]: Last error:\n\[rank0\]: Error while creating shared memory segment `+seg+` \(size 9637888\)`+errTxt+`$`, errb.String())
		})
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--ranks", "0"}, {"--pin", "lots"}, {"--pin", "unlimited"}, {"--shm", "-5"},
		{"--nccl-version", "2.21"}, {"--nccl-version", "3.0.0"}, {"--bogus"}, {"extra"}, {"--stdout", "--stderr"},
	} {
		var out, errb bytes.Buffer
		assert.Equal(t, fakenccl.ExitUsage, fakenccl.Main(args, &out, &errb), "%v", args)
		assert.NotEmpty(t, errb.String(), "%v explains itself", args)
	}
}

func TestThreeRanksLimitZero(t *testing.T) {
	w := limited(t, "0:0")
	r := run(t, w, nil, "--ranks", "3", "--pin", "8KiB")
	assert.Equal(t, 1, r.code)
	assert.Equal(t, 3, strings.Count(r.stderr, "Call to ibv_reg_mr_iova2 failed with error Operation not permitted\n"))
	for _, p := range []string{"[rank0]: ", "[rank1]: ", "[rank2]: "} {
		assert.Contains(t, r.stderr, p+"Last error:\n")
	}
}

// TestDebugFileAndSubsys: with NCCL_DEBUG_FILE each rank writes NCCL's
// lines to its own file (%h the host name, %p its pid) and stdout keeps
// only the program's own; NCCL_DEBUG_SUBSYS picks the INFO lines, never
// the WARN lines or the version banner.
func TestDebugFileAndSubsys(t *testing.T) {
	host := hostForLog(t)
	dir := t.TempDir()
	r := run(t, nil, []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=NET", "NCCL_DEBUG_FILE=" + dir + "/nccl.%h.%p"}, "--ranks", "2", "--pin", "0")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Equal(t, "fake-nccl: all-reduce OK on 2 ranks (0 B pinned per rank, NCCL 2.21.5)\n", r.stdout)
	files, err := filepath.Glob(filepath.Join(dir, "nccl.*"))
	require.NoError(t, err)
	require.Len(t, files, 2, "one file per rank")
	var all string
	for _, f := range files {
		assert.Regexp(t, `/nccl\.`+host+`\.[0-9]+$`, f)
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		all += string(b)
	}
	assert.Contains(t, all, " NCCL INFO NET/IB : Using [0]mlx5_0:1/IB")
	assert.Contains(t, all, " NCCL INFO NCCL version 2.21.5+cuda12.4", "the banner is every subsystem's")
	assert.NotContains(t, all, "Init START", "INIT is not in NCCL_DEBUG_SUBSYS")
	assert.NotContains(t, all, "Bootstrap")

	r = run(t, nil, []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=^NET,INIT"}, "--pin", "0")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Regexp(t, `^`+host+`:[0-9]+:[0-9]+ \[0\] NCCL INFO NCCL version 2.21.5\+cuda12.4\nfake-nccl: all-reduce OK`, r.stdout, "the banner alone: no INIT or NET line")

	r = run(t, nil, []string{"NCCL_DEBUG=INFO"}, "--pin", "0")
	assert.Contains(t, r.stdout, "Init START", "INIT is in the default subsystems")

	// NCCL opens the file above the VERSION level: at WARN the banner goes
	// there, at VERSION to stdout and no file is made.
	warnDir := t.TempDir()
	r = run(t, nil, []string{"NCCL_DEBUG=WARN", "NCCL_DEBUG_FILE=" + warnDir + "/nccl.%p"}, "--pin", "0")
	require.Equal(t, 0, r.code)
	assert.NotContains(t, r.stdout, "NCCL version")
	files, err = filepath.Glob(filepath.Join(warnDir, "nccl.*"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	b, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Equal(t, "NCCL version 2.21.5+cuda12.4\n", string(b))
	versionDir := t.TempDir()
	r = run(t, nil, []string{"NCCL_DEBUG=VERSION", "NCCL_DEBUG_FILE=" + versionDir + "/nccl.%p"}, "--pin", "0")
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "NCCL version 2.21.5+cuda12.4\n")
	entries, err := os.ReadDir(versionDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "at VERSION NCCL_DEBUG_FILE is not opened")
}
