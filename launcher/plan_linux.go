package launcher

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"

	"github.com/ncclrun/ncclrun/internal/environ"
)

// launch is how a Config is started: either the command itself with Go's
// own credential and ambient handling, or ncclrun re-executed as the
// trampoline when something Go's fork path cannot do is asked for
// (dropping capabilities, the bounding set included, or a memlock limit
// for the child alone).
type launch struct {
	path string // what to execve
	argv []string
	env  []string
	user *User // nil: ncclrun's own
	sys  syscall.SysProcAttr
	// spec is set when path is the trampoline.
	spec *trampolineSpec
}

// target is the command's own path as looked up: path, or the
// trampoline's command when path is the trampoline.
func (l *launch) target() string {
	if l.spec != nil {
		return l.spec.Path
	}
	return l.path
}

// plan resolves cfg into a launch. The command is looked up, the user
// resolved and the capabilities checked here, in ncclrun, so that errors
// are clear and come before anything is forked.
func plan(cfg Config) (*launch, error) {
	env := cfg.Env
	if env == nil {
		env = Environ()
	}
	// One entry per name, the last (exec.Cmd.Env's rule): CMD reads the
	// value ncclrun read, whichever entry its libc would have picked.
	env = environ.Dedup(environ.Without(env, trampolineEnv))
	path, err := LookPath(cfg.Path, env)
	if err != nil {
		return nil, err
	}
	u := cfg.User
	if u != nil && u.self() {
		// Naming oneself (--user 1000 as uid 1000) changes nothing: no
		// setgroups, which an unprivileged ncclrun could not do.
		u = nil
	}
	if cfg.Memlock != nil {
		if err := checkMemlock(*cfg.Memlock); err != nil {
			return nil, err
		}
	}
	drop, err := parseCaps(cfg.DropCaps)
	if err != nil {
		return nil, err
	}
	ambient := cfg.AmbientIPCLock && drop&(1<<capIPCLock) == 0
	if err := checkLaunchCaps(u, ambient); err != nil {
		return nil, err
	}
	argv := append([]string{cfg.Path}, cfg.Args...)
	if drop == 0 && cfg.Memlock == nil {
		l := &launch{path: path, argv: argv, env: env, user: u}
		if u != nil {
			l.sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
		}
		if ambient {
			l.sys.AmbientCaps = []uintptr{capIPCLock}
		}
		return l, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find ncclrun's own binary for the trampoline: %w", err)
	}
	spec := &trampolineSpec{Path: path, Argv: argv, Drop: drop, Memlock: cfg.Memlock, User: u, Ambient: ambient}
	return &launch{path: self, argv: []string{self}, env: env, user: u, spec: spec}, nil
}

// withSpec returns l.env with the trampoline spec added.
func (l *launch) withSpec() ([]string, error) {
	b, err := json.Marshal(l.spec)
	if err != nil {
		return nil, fmt.Errorf("encode trampoline spec: %w", err)
	}
	return append(append([]string(nil), l.env...), trampolineEnv+"="+string(b)), nil
}
