package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// LookPath finds the command as Run and Exec will: path as given when it
// holds a slash, else in the PATH of env (the environment the command
// gets; the process's own PATH when env has none). Errors are Run's.
func LookPath(path string, env []string) (string, error) {
	pathEnv, ok := environ.Lookup(env, "PATH")
	if !ok {
		pathEnv = os.Getenv("PATH")
	}
	return lookCommand(path, pathEnv)
}

// lookCommand resolves path like a shell: with a slash it is used as is,
// otherwise each PATH directory is tried (an empty entry is "."). It
// returns a *StartError wrapping ErrNotFound when nothing is there and
// ErrNotExecutable when only files without execute permission, or a
// directory, were found (bash reports 126 for those).
func lookCommand(path, pathEnv string) (string, error) {
	if path == "" {
		return "", &StartError{Path: path, Err: fmt.Errorf("%w: empty command name", ErrNotFound)}
	}
	if strings.Contains(path, "/") {
		if err := checkExecutable(path); err != nil {
			return "", &StartError{Path: path, Err: err}
		}
		return path, nil
	}
	var firstErr error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, path)
		if absentEntry(p) {
			continue // checkExecutable would say ErrNotFound, which the loop skips
		}
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && errors.Is(err, ErrNotExecutable) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", &StartError{Path: path, Err: firstErr}
	}
	return "", &StartError{Path: path, Err: fmt.Errorf("%w in PATH", ErrNotFound)}
}

// checkExecutable says whether p exists and has an execute bit (the exec
// itself still decides: a noexec mount or a bad format fail there).
func checkExecutable(p string) error {
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %w", ErrNotFound, syscall.ENOENT)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %w", ErrNotExecutable, syscall.EACCES)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case st.IsDir():
		return fmt.Errorf("%w: %w", ErrNotExecutable, syscall.EISDIR)
	case st.Mode()&0o111 == 0:
		return fmt.Errorf("%w: %w", ErrNotExecutable, syscall.EACCES)
	}
	return nil
}

// absentEntry reports whether stat(2) of p fails with an error that
// checkExecutable reports as ErrNotFound (anything but a permission
// error), without the error values and the message it would make: a
// start stats every PATH directory before the command's.
func absentEntry(p string) bool {
	var st syscall.Stat_t
	for {
		err := syscall.Stat(p, &st)
		switch err {
		case nil, syscall.EACCES, syscall.EPERM:
			return false
		case syscall.EINTR:
			continue
		}
		return true
	}
}

// execError maps the errno of a failed execve of resolved (path as
// looked up) to a *StartError: ENOENT is "not found", everything else
// (EACCES, ENOEXEC, EISDIR, ETXTBSY, EPERM, ...) "not executable". execve
// also says ENOENT when the file is there but its #! interpreter is not
// (or the line ends in CR); then resolved exists and the error says so
// (ErrNoInterpreter), still 127 as in bash.
func execError(path, resolved string, err error) error {
	if errors.Is(err, syscall.ENOENT) && resolved != "" && !absentEntry(resolved) {
		return &StartError{Path: path, Err: noInterpreterError{err}}
	}
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return &StartError{Path: path, Err: fmt.Errorf("%w: %w", ErrNotFound, err)}
	}
	return &StartError{Path: path, Err: fmt.Errorf("%w: %w", ErrNotExecutable, err)}
}
