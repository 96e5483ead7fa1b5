package demo

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/testutil"
	"github.com/ncclrun/ncclrun/internal/units"
)

// fakeEnv makes the test binary play ncclrun in one of the scenarios of
// fakeNcclrun; fakeLog names a file where each call appends its arguments
// as one JSON line.
const (
	fakeEnv = "DEMO_TEST_FAKE_NCCLRUN"
	fakeLog = "DEMO_TEST_FAKE_LOG"
)

func TestMain(m *testing.M) {
	if sc, ok := os.LookupEnv(fakeEnv); ok {
		os.Exit(fakeNcclrun(sc, os.Args[1:]))
	}
	testutil.UnignoreSignals()
	os.Exit(m.Run())
}

// fakeNcclrun answers `run ... --report FILE -- ...` as ncclrun would in
// scenario sc: "good" fails with the memlock diagnosis when IPC_LOCK is
// dropped and passes otherwise; "nodiag" fails without a diagnosis;
// "alwaysfail" fails both runs; "alwayspass" passes both.
func fakeNcclrun(sc string, args []string) int {
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
		{"root with CAP_IPC_LOCK", State{IPCLockPermitted: true, MemlockSoft: 8 << 20, MemlockHard: 8 << 20}, FixCapability, FakePin},
		{"cap in a user namespace is useless", State{IPCLockPermitted: true, UserNamespace: true, MemlockSoft: 8 << 20, MemlockHard: 8 << 20}, FixLimit, 8 << 20},
		{"non-root, 8 MiB", State{MemlockSoft: 8 << 20, MemlockHard: 8 << 20}, FixLimit, 8 << 20},
		{"non-root, soft 64 KiB hard unlimited", State{MemlockSoft: 64 << 10, MemlockHard: units.Unlimited}, FixLimit, FakePin},
		{"non-root, 64 GiB", State{MemlockSoft: 64 << 30, MemlockHard: 64 << 30}, FixLimit, FakePin},
		{"non-root, odd hard limit rounds down to a page", State{MemlockSoft: 10000, MemlockHard: 10000}, FixLimit, 8192},
		{"non-root, hard 0", State{}, FixNone, 0},
		{"non-root, hard under a page", State{MemlockSoft: 100, MemlockHard: 100}, FixNone, 0},
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

func TestIsIdentityMap(t *testing.T) {
	assert.True(t, isIdentityMap("         0          0 4294967295\n"))
	assert.False(t, isIdentityMap("         0       1000          1\n"))
	assert.False(t, isIdentityMap(""))
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

func after(args []string) []string {
	i := slices.Index(args, "--")
	return args[i+2:] // skip "--" and the binary
}

func TestRunScenarios(t *testing.T) {
	capState := State{IPCLockPermitted: true, MemlockSoft: 8 << 20, MemlockHard: 8 << 20}
	limState := State{MemlockSoft: 8 << 20, MemlockHard: 8 << 20}
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
			if tc.want == 0 {
				assert.Contains(t, out, "Demo OK")
			} else {
				assert.Contains(t, out, "Demo FAILED")
			}
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
