package launcher

import "syscall"

// Exec replaces ncclrun with the command (--no-watch): the user, the
// ambient CAP_IPC_LOCK, the capability drops and the memlock limit of cfg
// are applied to this process (on one locked OS thread, see MaybeTrampoline)
// and the command is exec'd with cfg.Env (nil: ncclrun's environment). The
// command inherits ncclrun's own stdin, stdout and stderr; cfg.Stdin,
// cfg.Stdout, cfg.Stderr, cfg.Tap, cfg.NoPTY and cfg.KillAfter do not
// apply. Exit status and signals are then the command's own. Exec returns
// only on failure: a *StartError (127/126) when the command cannot be
// found or executed, another error when a credential could not be applied;
// the process may then be partly changed and should exit. The command
// gets the huge-page setting ncclrun started with (SmallPages).
func Exec(cfg Config) error {
	l, err := plan(cfg)
	if err != nil {
		return err
	}
	withInheritedPages(func() {
		if l.spec == nil && l.user == nil && l.sys.AmbientCaps == nil {
			err = execError(cfg.Path, l.path, syscall.Exec(l.path, l.argv, l.env))
			return
		}
		spec := l.spec
		if spec == nil {
			spec = &trampolineSpec{Path: l.path, Argv: l.argv, User: l.user, Ambient: l.sys.AmbientCaps != nil}
		}
		err = applyAndExec(*spec, l.env)
	})
	return err
}
