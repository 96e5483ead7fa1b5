package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestStartStatus: a failed start exits as bash and tini say: 127 not
// found, 126 not executable, 125 for anything else.
func TestStartStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"StartError not found", &StartError{Path: "x", Err: fmt.Errorf("%w: %w", ErrNotFound, syscall.ENOENT)}, 127},
		{"StartError not executable", &StartError{Path: "x", Err: fmt.Errorf("%w: %w", ErrNotExecutable, syscall.EACCES)}, 126},
		{"exec's not found", exec.ErrNotFound, 127},
		{"no such file", fmt.Errorf("start: %w", fs.ErrNotExist), 127},
		{"permission", fs.ErrPermission, 126},
		{"exec format", syscall.ENOEXEC, 126},
		{"a directory", syscall.EISDIR, 126},
		{"another typed 126", codeErr(126), 126},
		{"a typed status that is not a start's", codeErr(3), 125},
		{"anything else", errors.New("boom"), 125},
		// The trampoline's stages report their errno: a setrlimit, setgroups
		// or capset refused with EPERM is a privilege ncclrun lacks (125),
		// not a command that cannot be executed (126).
		{"trampoline memlock EPERM", failureError("x", "/bin/x", trampolineFailure{Stage: "memlock", Msg: "setrlimit: operation not permitted", Errno: int(syscall.EPERM)}), 125},
		{"trampoline user EPERM", failureError("x", "/bin/x", trampolineFailure{Stage: "user", Msg: "setgroups: operation not permitted", Errno: int(syscall.EPERM)}), 125},
		{"trampoline capset EPERM", failureError("x", "/bin/x", trampolineFailure{Stage: "capset", Msg: "capset: operation not permitted", Errno: int(syscall.EPERM)}), 125},
		{"trampoline ambient EPERM", failureError("x", "/bin/x", trampolineFailure{Stage: "ambient", Msg: "prctl: operation not permitted", Errno: int(syscall.EPERM)}), 125},
		{"trampoline exec EACCES", failureError("x", "/bin/x", trampolineFailure{Stage: "exec", Errno: int(syscall.EACCES)}), 126},
	} {
		assert.Equal(t, tc.want, StartStatus(tc.err), tc.name)
	}
}

type codeErr int

func (c codeErr) Error() string { return fmt.Sprintf("code %d", int(c)) }
func (c codeErr) ExitCode() int { return int(c) }

// execve's ENOENT for a file that exists means its #! interpreter is
// missing: still 127, but said as such, not "command not found".
func TestExecErrorMissingInterpreter(t *testing.T) {
	dir := t.TempDir()
	script := dir + "/script"
	assert.NoError(t, os.WriteFile(script, []byte("#!/nonexistent/sh\n"), 0o755))
	for _, tc := range []struct {
		name, resolved string
		interp         bool
	}{
		{"the file exists", script, true},
		{"the file is missing", dir + "/missing", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := execError("./x", tc.resolved, syscall.ENOENT)
			assert.Equal(t, 127, StartStatus(err))
			assert.ErrorIs(t, err, ErrNotFound)
			assert.ErrorIs(t, err, syscall.ENOENT)
			assert.Equal(t, tc.interp, errors.Is(err, ErrNoInterpreter))
			if tc.interp {
				assert.Equal(t, `"./x": cannot execute: the interpreter it needs was not found (its #! line's, or an ELF binary's loader)`, err.Error())
			} else {
				assert.Equal(t, `"./x": command not found: no such file or directory`, err.Error())
			}
		})
	}
}
