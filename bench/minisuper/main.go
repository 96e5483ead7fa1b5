//go:build linux

// Command minisuper is the start-up reference of scripts/bench.sh: the
// least a Go supervisor in front of a command does. It catches the
// signals ncclrun forwards, and SIGCHLD, in one signal.Notify before the
// fork (so that a signal sent the instant the command starts is not
// lost), forks and execs its arguments, forwards what it catches, waits
// and exits with the command's status (128+N when signal N killed it).
package main

import (
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// forwarded are the signals ncclrun forwards (launcher/signals_linux.go).
var forwarded = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
	syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTERM, syscall.Signal(0x10), syscall.SIGCONT,
	syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGXCPU, syscall.SIGXFSZ,
	syscall.SIGVTALRM, syscall.SIGWINCH, syscall.SIGIO, syscall.SIGPWR,
}

func main() {
	if len(os.Args) < 2 {
		_, _ = os.Stderr.WriteString("usage: minisuper CMD [ARGS...]\n")
		os.Exit(2)
	}
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs, append(forwarded, syscall.SIGCHLD)...)
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		_, _ = os.Stderr.WriteString("minisuper: " + err.Error() + "\n")
		os.Exit(127)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if s != syscall.SIGCHLD {
					_ = cmd.Process.Signal(s)
				}
			case <-done:
				return
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(ws.ExitStatus())
}
