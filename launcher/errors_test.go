package launcher

import (
	"errors"
	"fmt"
	"io/fs"
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
	} {
		assert.Equal(t, tc.want, StartStatus(tc.err), tc.name)
	}
}

type codeErr int

func (c codeErr) Error() string { return fmt.Sprintf("code %d", int(c)) }
func (c codeErr) ExitCode() int { return int(c) }
