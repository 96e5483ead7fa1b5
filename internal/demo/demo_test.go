package demo

import (
	"bytes"
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/ncclrun/ncclrun/internal/units"
)

// fakeEnv makes the test binary play ncclrun in one of the scenarios of
// fakeNcclrun; fakeLog names a file where each call appends its arguments
// as one JSON line.
// fakeVersionFails makes `version` fail, as a copy that cannot run would.
// demoEnv makes the test binary run the demo.
const (
	demoEnv          = "DEMO_TEST_RUN_DEMO"
	fakeEnv          = "DEMO_TEST_FAKE_NCCLRUN"
	fakeLog          = "DEMO_TEST_FAKE_LOG"
	fakeVersionFails = "DEMO_TEST_FAKE_VERSION_FAILS"
)

func TestMain(m *testing.M) {
	if os.Getenv(demoEnv) != "" {
		// The demo itself, its runs answered by fakeNcclrun.
		os.Unsetenv(demoEnv)
		self, _ := os.Executable()
		os.Exit(run(self, State{IPCLockPermitted: true, Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}, os.Stdout, os.Stderr))
	}
	if sc, ok := os.LookupEnv(fakeEnv); ok {
		os.Exit(fakeNcclrun(sc, os.Args[1:]))
	}
	testutil.UnignoreSignals()
	os.Exit(m.Run())
}

// fakeNcclrun answers `run ... --report FILE -- ...` as ncclrun would in
// scenario sc: "good" fails with the memlock diagnosis when IPC_LOCK is
// dropped and passes otherwise; "nodiag" fails without a diagnosis;
// "alwaysfail" fails both runs; "alwayspass" passes both; "block" has the
// failing run say "fake started" and wait for SIGINT, as a run does until
// the terminal's Ctrl-C reaches it (the fixed run passes: a demo that saw
// the signal late still ends). `version`, the demo's check that its copy runs, is not
// logged.
func fakeNcclrun(sc string, args []string) int {
	if sc == "block" && slices.Contains(args, "--drop-cap") {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt)
		os.Stdout.WriteString("fake started\n")
		<-ch
		return 130
	}
	if len(args) == 1 && args[0] == "version" {
		if os.Getenv(fakeVersionFails) != "" {
			return 1
		}
		return 0
	}
	if p := os.Getenv(fakeLog); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			_ = json.NewEncoder(f).Encode(args)
			f.Close()
		}
	}
	rep := ""
	for i, a := range args {
		if a == "--" {
			break
		}
		if a == "--report" && i+1 < len(args) {
			rep = args[i+1]
		}
	}
	dropped := slices.Contains(args, "--drop-cap")
	type diag struct {
		ID    string `json:"id"`
		Count int    `json:"count"`
	}
	var diags []diag
	code := 0
	switch {
	case sc == "good" && dropped, sc == "alwaysfail":
		diags, code = []diag{{"memlock", 2}}, 1
	case sc == "nodiag" && dropped:
		code = 1
	}
	if rep != "" {
		data, _ := json.Marshal(map[string]any{"diagnoses": diags, "exit_code": code})
		_ = os.WriteFile(rep, data, 0o600)
	}
	os.Stdout.WriteString("fake relay\n")
	return code
}

func TestChooseFix(t *testing.T) {
	tests := []struct {
		name string
		st   State
		kind FixKind
		pin  int64
	}{
		{"root with CAP_IPC_LOCK", State{IPCLockPermitted: true, Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}, FixCapability, FakePin},
		{"cap in a user namespace is useless", State{IPCLockPermitted: true, UserNamespace: true, Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}, FixLimit, 8 << 20},
		{"non-root, 8 MiB", State{Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}, FixLimit, 8 << 20},
		{"non-root, soft 64 KiB hard unlimited", State{Memlock: rlimit.Limit{Soft: 64 << 10, Hard: units.Unlimited}}, FixLimit, FakePin},
		{"non-root, 64 GiB", State{Memlock: rlimit.Limit{Soft: 64 << 30, Hard: 64 << 30}}, FixLimit, FakePin},
		{"non-root, odd hard limit rounds down to a page", State{Memlock: rlimit.Limit{Soft: 100000, Hard: 100000}}, FixLimit, 98304},
		{"non-root, hard 64 KiB: no more than the failing run", State{Memlock: rlimit.Limit{Soft: 64 << 10, Hard: 64 << 10}}, FixNone, 0},
		{"non-root, hard 128 KiB", State{Memlock: rlimit.Limit{Soft: 64 << 10, Hard: 128 << 10}}, FixLimit, 128 << 10},
		{"non-root, hard 0", State{}, FixNone, 0},
		{"non-root, hard under a page", State{Memlock: rlimit.Limit{Soft: 100, Hard: 100}}, FixNone, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ChooseFix(tc.st)
			assert.Equal(t, tc.kind, f.Kind)
			assert.Equal(t, tc.pin, f.Pin)
			assert.NotEmpty(t, f.Why)
			if f.Kind != FixNone {
				assert.NotEmpty(t, f.Equivalent)
			}
		})
	}
}

func TestChoosePlan(t *testing.T) {
	const self, copied = "/usr/local/bin/ncclrun", "TMPDIR/ncclrun-demo-1/ncclrun"
	capState := State{IPCLockPermitted: true, Memlock: rlimit.Limit{Soft: 64 << 10, Hard: 64 << 10}}
	noCap := State{Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}
	with := func(s State) State { s.FileCaps = true; return s }
	tests := []struct {
		name   string
		st     State
		copied string
		kind   FixKind
		pin    int64
		job    string
		why    string
	}{
		{"root, no file capabilities", capState, "", FixCapability, FakePin, self, "holds CAP_IPC_LOCK"},
		{"file capability, copy runs", with(capState), copied, FixCapability, FakePin, copied, "holds CAP_IPC_LOCK"},
		{"file capability, no copy, hard 64 KiB: no fix to show", with(capState), "", FixNone, 0, self, "the fake job is ncclrun itself"},
		{"file capability, no copy: the limit", with(State{IPCLockPermitted: true, Memlock: rlimit.Limit{Soft: 64 << 10, Hard: 8 << 20}}), "", FixLimit, 8 << 20, self, "the fake job is ncclrun itself"},
		{"file capability, no copy, hard 0", with(State{IPCLockPermitted: true}), "", FixNone, 0, self, "the fake job is ncclrun itself"},
		{"file capability not in the bounding set, copy runs", with(noCap), copied, FixLimit, 8 << 20, copied, "no usable CAP_IPC_LOCK"},
		{"file capability not in the bounding set, no copy", with(noCap), "", FixLimit, 8 << 20, self, "no usable CAP_IPC_LOCK"},
		{"file capability in a user namespace, copy runs", with(State{IPCLockPermitted: true, UserNamespace: true, Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}), copied, FixLimit, 8 << 20, copied, "user namespace"},
		{"no file capabilities, limit", noCap, "", FixLimit, 8 << 20, self, "no usable CAP_IPC_LOCK"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ChoosePlan(tc.st, self, tc.copied)
			assert.Equal(t, tc.kind, p.Fix.Kind)
			assert.Equal(t, tc.pin, p.Fix.Pin)
			assert.Equal(t, tc.job, p.Job)
			assert.Equal(t, tc.job == copied, p.Copied)
			assert.Contains(t, p.Fix.Why, tc.why)
		})
	}
}

func TestSizeArg(t *testing.T) {
	assert.Equal(t, "16MiB", sizeArg(16<<20))
	assert.Equal(t, "64KiB", sizeArg(64<<10))
	assert.Equal(t, "8MiB", sizeArg(8192<<10))
	assert.Equal(t, "12KiB", sizeArg(12<<10))
	assert.Equal(t, "12345", sizeArg(12345))
}

func runWithFake(t *testing.T, scenario string, st State) (int, string, [][]string) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	logPath := filepath.Join(t.TempDir(), "calls.jsonl")
	t.Setenv(fakeEnv, scenario)
	t.Setenv(fakeLog, logPath)
	var out, errb bytes.Buffer
	code := run(self, st, &out, &errb)
	var calls [][]string
	if data, err := os.ReadFile(logPath); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var a []string
			require.NoError(t, json.Unmarshal([]byte(line), &a))
			calls = append(calls, a)
		}
	}
	return code, out.String(), calls
}

// before returns the arguments before "--" with --report and its value removed.
func before(args []string) []string {
	var r []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			break
		}
		if args[i] == "--report" {
			i++
			continue
		}
		r = append(r, args[i])
	}
	return r
}

// job returns the executable after "--".
func job(args []string) string { return args[slices.Index(args, "--")+1] }

func after(args []string) []string {
	i := slices.Index(args, "--")
	return args[i+2:] // skip "--" and the binary
}

func TestRunScenarios(t *testing.T) {
	capState := State{IPCLockPermitted: true, Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}
	limState := State{Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}
	tests := []struct {
		name      string
		scenario  string
		st        State
		want      int
		fixedArgs []string
		fixedPin  string
	}{
		{"capability fix", "good", capState, 0, []string{"run", "--memlock", "64KiB"}, "16MiB"},
		{"limit fix", "good", limState, 0, []string{"run"}, "8MiB"},
		{"first run not diagnosed", "nodiag", capState, 1, []string{"run", "--memlock", "64KiB"}, "16MiB"},
		{"fix does not work", "alwaysfail", capState, 1, []string{"run", "--memlock", "64KiB"}, "16MiB"},
		{"first run does not fail", "alwayspass", limState, 1, []string{"run"}, "8MiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, calls := runWithFake(t, tc.scenario, tc.st)
			assert.Equal(t, tc.want, code, out)
			require.Len(t, calls, 2, out)
			assert.Equal(t, []string{"run", "--memlock", "64KiB", "--drop-cap", "IPC_LOCK"}, before(calls[0]))
			assert.Equal(t, []string{"fake-nccl", "--ranks", "2", "--pin", "16MiB"}, after(calls[0]))
			assert.Equal(t, tc.fixedArgs, before(calls[1]))
			assert.Equal(t, []string{"fake-nccl", "--ranks", "2", "--pin", tc.fixedPin}, after(calls[1]))
			assert.Contains(t, out, "$ ncclrun run --memlock 64KiB --drop-cap IPC_LOCK -- ncclrun fake-nccl --ranks 2 --pin 16MiB\n")
			assert.Contains(t, out, "fake relay\n", "the runs' output is relayed")
			self, _ := os.Executable()
			assert.Equal(t, self, job(calls[0]), "no file capabilities: the fake job is ncclrun itself")
			assert.NotContains(t, out, "file capabilities")
			if tc.want == 0 {
				assert.Contains(t, out, "Demo OK")
			} else {
				assert.Contains(t, out, "Demo FAILED")
			}
		})
	}
}

// TestRunFileCaps: where ncclrun carries file capabilities, both runs' fake
// job is a copy of it in the demo's directory, or ncclrun itself with the
// limit fix when the copy cannot run.
func TestRunFileCaps(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	st := State{IPCLockPermitted: true, FileCaps: true, Memlock: rlimit.Limit{Soft: 8 << 20, Hard: 8 << 20}}
	tests := []struct {
		name        string
		copyFails   bool
		fixedArgs   []string
		fixedPin    string
		line        string
		fromTheCopy bool
	}{
		{"copy runs", false, []string{"run", "--memlock", "64KiB"}, "16MiB", "the fake job runs from a copy of ncclrun without them.\n", true},
		{"copy cannot run", true, []string{"run"}, "8MiB", "but no copy without them can run from ", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.copyFails {
				t.Setenv(fakeVersionFails, "1")
			}
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			code, out, calls := runWithFake(t, "good", st)
			assert.Equal(t, 0, code, out)
			assert.Contains(t, out, tc.line)
			require.Len(t, calls, 2, out)
			for _, c := range calls {
				if tc.fromTheCopy {
					assert.NotEqual(t, self, job(c))
					assert.Equal(t, "ncclrun", filepath.Base(job(c)))
					assert.Equal(t, tmp, filepath.Dir(filepath.Dir(job(c))), "in the demo's temporary directory")
				} else {
					assert.Equal(t, self, job(c))
				}
			}
			assert.Equal(t, tc.fixedArgs, before(calls[1]))
			assert.Equal(t, []string{"fake-nccl", "--ranks", "2", "--pin", tc.fixedPin}, after(calls[1]))
			assert.Contains(t, out, "$ ncclrun run --memlock 64KiB --drop-cap IPC_LOCK -- ncclrun fake-nccl --ranks 2 --pin 16MiB\n", "the copy is shown as ncclrun")
			assert.Contains(t, out, "Demo OK")
			ents, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, ents, "the copy goes with the demo's directory")
		})
	}
}

func TestRunNoFixPossible(t *testing.T) {
	code, out, calls := runWithFake(t, "good", State{})
	assert.Equal(t, 1, code)
	assert.Len(t, calls, 1, "no second run when no fix can be shown")
	assert.Contains(t, out, "No fix can be shown here")
}

func TestRunMissingBinary(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 1, run(filepath.Join(t.TempDir(), "nope"), State{IPCLockPermitted: true}, &out, &errb))
	assert.Contains(t, errb.String(), "ncclrun: demo: ")
}
