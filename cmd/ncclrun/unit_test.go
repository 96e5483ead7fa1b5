package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/ncclrun/ncclrun/internal/cmdline"
	"github.com/ncclrun/ncclrun/preflight"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", "run"},
		{"torchrun --nproc-per-node 8 train.py", "run torchrun --nproc-per-node 8 train.py"},
		{"--strict torchrun -x", "run --strict torchrun -x"},
		{"--memlock 64KiB --user 1000 -- doctor", "run --memlock 64KiB --user 1000 -- doctor"},
		{"--memlock=64KiB doctor --json", "doctor --memlock=64KiB --json"},
		{"--root /snap doctor", "doctor --root /snap"},
		{"--root /snap run -- x", "run --root /snap -- x"},
		{"run --strict x", "run --strict x"},
		{"--bogus doctor", "run --bogus doctor"},
		{"--help", "--help"},
		{"-h", "--help"},
		{"--quiet", "run --quiet"},
		{"--no-pty --no-ib x", "run --no-pty --no-ib x"},
		{"--quiet fake-nccl --ranks 2", "fake-nccl --ranks 2"},
		{"explain a.log b.log", "explain a.log b.log"},
		{"- x", "run - x"},
		{"--version", "version"},
		{"--version x", "run --version x"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got := normalize(append([]string{"ncclrun"}, strings.Fields(tc.in)...))
			require.Equal(t, append([]string{"ncclrun"}, strings.Fields(tc.want)...), got)
		})
	}
}

// TestNormalizeEveryDefinition: normalize knows every flag of
// internal/cmdline and every command, so a flag before a command moves
// after it and a command word selects that command.
func TestNormalizeEveryDefinition(t *testing.T) {
	for _, f := range cmdline.Flags {
		for _, n := range f.Names() {
			in := []string{"ncclrun", "--" + n}
			if f.TakesValue() {
				in = append(in, "V")
			}
			got := normalize(append(in, "doctor", "--json"))
			want := append(append([]string{"ncclrun", "doctor"}, in[1:]...), "--json")
			assert.Equal(t, want, got, "--%s", n)
		}
	}
	for _, c := range cmdline.Commands {
		if c == "fake-nccl" {
			continue // its arguments are the workload's, tested above
		}
		assert.Equal(t, []string{"ncclrun", c, "x"}, normalize([]string{"ncclrun", c, "x"}), c)
	}
}

type codeErr int

func (c codeErr) Error() string { return fmt.Sprintf("code %d", int(c)) }
func (c codeErr) ExitCode() int { return int(c) }

func TestExitStatusMapping(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"child status", exitWith(42), 42},
		{"usage", usagef("bad"), ExitUsage},
		{"not found", &startError{"x", fmt.Errorf("start: %w", exec.ErrNotFound)}, ExitNotFound},
		{"no such file", &startError{"x", &fs.PathError{Op: "fork/exec", Path: "x", Err: syscall.ENOENT}}, ExitNotFound},
		{"permission", &startError{"x", &fs.PathError{Op: "fork/exec", Path: "x", Err: syscall.EACCES}}, ExitNotExecutable},
		{"typed 127", &startError{"x", codeErr(127)}, ExitNotFound},
		{"typed 126", &startError{"x", codeErr(126)}, ExitNotExecutable},
		{"other start failure", &startError{"x", errors.New("boom")}, ExitInternal},
		{"internal", errors.New("boom"), ExitInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, exitStatus(tc.err, io.Discard))
		})
	}
}

func TestShellQuoteAndTruncate(t *testing.T) {
	require.Equal(t, `'a b'`, shellQuote("a b"))
	require.Equal(t, `'it'\''s'`, shellQuote("it's"))
	require.Equal(t, "abc", truncate("abc", 5))
	require.Equal(t, "ab", truncate("abc", 2))
	require.Equal(t, "a", truncate("aé", 2), "never split a UTF-8 sequence")
}

// TestFactsNoRDMAOnlyWhenSysfsListsNone: only a tree whose sysfs lists no
// RDMA device gives NoRDMA; one with devices, or a preflight that never got
// to the rdma check, does not.
func TestFactsNoRDMAOnlyWhenSysfsListsNone(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		tree string
		want bool
	}{
		{"no devices in sysfs", context.Background(), "docker-root", true},
		{"devices in sysfs", context.Background(), "ib-node", false},
		{"unknown", cancelled, "docker-root", false},
	} {
		r := preflight.Run(tc.ctx, preflight.Options{Root: "../../preflight/testdata/" + tc.tree, Env: []string{}})
		assert.Equal(t, tc.want, facts(r, 0).NoRDMA, tc.name)
	}
}
