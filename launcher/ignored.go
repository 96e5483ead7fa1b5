package launcher

import (
	"os"
	"os/signal"
)

// notifiable returns the signals of sigs that are not ignored now. A
// signal ignored when ncclrun started (nohup ignores SIGHUP, a shell's
// background job SIGINT and SIGQUIT) must stay ignored: catching it would
// both make ncclrun forward it and, because exec resets a caught signal to
// its default action but keeps an ignored one ignored, give CMD the
// default action where it would have inherited SIG_IGN (the shell and
// tini behave so). The Go runtime keeps an inherited SIG_IGN for SIGHUP
// and SIGINT, which signal.Ignored reports until someone calls
// signal.Notify for them, and leaves alone the signals it does not handle
// unless asked (SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU), which signal.Ignored
// does not report: inheritedIgnore asks the kernel (a review found an
// ignored SIGTSTP caught and CMD given the default). It installs its own
// handler for the others before main runs. Every Notify of ncclrun's goes
// through this filter.
func notifiable(sigs []os.Signal) []os.Signal {
	out := make([]os.Signal, 0, len(sigs))
	for _, s := range sigs {
		if !signal.Ignored(s) && !inheritedIgnore(s) {
			out = append(out, s)
		}
	}
	return out
}
