package testutil

import (
	"os"
	"os/signal"
	"syscall"
)

// UnignoreSignals makes the terminating signals that this test process was
// started with ignored (under nohup, or a CI runner that ignores SIGHUP)
// default again for the processes the tests start. ncclrun keeps a signal
// that was ignored at its start ignored for CMD, as a shell and tini do, so
// a test of "CMD killed by SIGHUP exits 129" would otherwise depend on how
// the test binary itself was started. Call it from TestMain, before m.Run.
// A signal handled by Go is reset to its default disposition across exec,
// so the children get SIG_DFL; the test process itself swallows them.
func UnignoreSignals() {
	sink := make(chan os.Signal, 1)
	for _, s := range []os.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2} {
		if signal.Ignored(s) {
			signal.Notify(sink, s)
		}
	}
}
