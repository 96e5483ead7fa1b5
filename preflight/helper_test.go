package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/environ"
)

// helperEnv chooses a helper behaviour when the test binary is re-executed.
const helperEnv = "PREFLIGHT_TEST_HELPER"

// TestMain runs a helper instead of the tests when helperEnv is set:
//
//	report: run preflight.Run on the live system, with a Prober that
//	        mlock(2)s PREFLIGHT_TEST_PROBE bytes in this very process (the
//	        helper already has the credentials under test), and print the
//	        report as JSON with the command state added.
//	securebits: set RLIMIT_MEMLOCK to 64 KiB and the securebits
//	        PREFLIGHT_TEST_SECUREBITS (a number) on this thread, then exec
//	        the report helper from it (securebits are per thread and kept
//	        across exec; setpriv cannot set every bit).
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "report":
		os.Exit(helperReport())
	case "securebits":
		os.Exit(helperSecurebits())
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// helperOutput is what the report helper prints.
type helperOutput struct {
	Report  Report       `json:"report"`
	Command CommandState `json:"command"`
	Ambient bool         `json:"ambient"`
}

func helperSecurebits() int {
	runtime.LockOSThread()
	bits, err := strconv.Atoi(os.Getenv("PREFLIGHT_TEST_SECUREBITS"))
	if err == nil {
		err = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 64 << 10, Max: 64 << 10})
	}
	if err == nil {
		err = unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0)
	}
	self, xerr := os.Executable()
	if err == nil {
		err = xerr
	}
	if err == nil {
		err = unix.Exec(self, []string{self, "-test.run=^$"}, append(environ.Without(os.Environ(), helperEnv), helperEnv+"=report"))
	}
	fmt.Fprintln(os.Stderr, "securebits helper:", err)
	return 2
}

func helperReport() int {
	probe, _ := strconv.ParseInt(os.Getenv("PREFLIGHT_TEST_PROBE"), 10, 64)
	opts := Options{Env: []string{}, Probe: probe, Prober: mlockProbe}
	if u := os.Getenv("PREFLIGHT_TEST_USER"); u != "" {
		opts.Plan.User = u
	}
	opts.Plan.Exec = os.Getenv("PREFLIGHT_TEST_EXEC")
	r := Run(context.Background(), opts)
	out := helperOutput{Report: r, Command: r.Command, Ambient: r.Command.Ambient}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// mlockProbe maps size bytes and mlock(2)s them (never mlockall: it
// counts the whole address space against the limit). Like the hand-off
// ncclrun's launcher does for CMD, a CAP_IPC_LOCK that is only permitted
// (a cap_ipc_lock+p binary) is first raised into the effective set of the
// locked thread that calls mlock.
func mlockProbe(size int64) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lower, err := caps.Raise(capIPCLock)
	if err != nil {
		return err
	}
	defer lower()
	b, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	defer unix.Munmap(b)
	if err := unix.Mlock(b); err != nil {
		return fmt.Errorf("mlock %d bytes: %w", size, err)
	}
	_ = unsafe.Pointer(&b[0])
	return unix.Munlock(b)
}

func TestLiveReportPrints(t *testing.T) {
	if os.Getenv("PREFLIGHT_DUMP") == "" {
		t.Skip("set PREFLIGHT_DUMP=1 to print the live report")
	}
	r := Run(context.Background(), Options{Probe: 1 << 20, Prober: mlockProbe})
	b, _ := json.MarshalIndent(r, "", "  ")
	t.Log(string(b))
}

func TestDumpTree(t *testing.T) {
	tree := os.Getenv("PREFLIGHT_DUMP_TREE")
	if tree == "" {
		t.Skip("set PREFLIGHT_DUMP_TREE=<testdata tree> to print its report")
	}
	r := Run(context.Background(), Options{Root: "testdata/" + tree, Env: []string{}})
	for _, c := range r.Checks {
		b, _ := json.Marshal(c.Details)
		t.Logf("%s %s: %s\n   fix: %s\n   %s", c.ID, c.Status, c.Summary, c.Fix, b)
	}
}
