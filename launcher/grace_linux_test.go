//go:build linux

package launcher

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func init() {
	// ckpt-trainer: a CMD that trains itself: on SIGUSR1 it says
	// "checkpoint"; then it waits for SIGTERM ("got TERM") unless its
	// argument is "exit", when it exits after the checkpoint.
	helpers["ckpt-trainer"] = func(a []string) {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, syscall.SIGUSR1, syscall.SIGTERM)
		os.Stdout.WriteString("ready\n")
		for sig := range ch {
			if sig == syscall.SIGTERM {
				os.Stdout.WriteString("got TERM\n")
				return
			}
			os.Stdout.WriteString("checkpoint\n")
			if len(a) > 0 && a[0] == "exit" {
				return
			}
		}
	}
	// ckpt-agent: torchrun's shape: an agent that dies of SIGUSR1 (its
	// default action) and two workers, its children, that save on SIGUSR1
	// and exit. The agent, on SIGTERM, says how many workers had exited.
	helpers["ckpt-agent"] = func([]string) {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		r, w, err := os.Pipe()
		must(err)
		var kids []int
		for range 2 {
			c := helperCmd("ckpt-worker")
			c.ExtraFiles = []*os.File{w}
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			must(c.Start())
			kids = append(kids, c.Process.Pid)
		}
		w.Close()
		b := make([]byte, 2)
		_, err = r.Read(b[:1])
		must(err)
		_, err = r.Read(b[1:])
		must(err)
		os.Stdout.WriteString("ready\n")
		<-term
		exited := 0 // exited workers are zombies until reaped here
		for _, pid := range kids {
			var ws syscall.WaitStatus
			if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
				exited++
			}
		}
		fmt.Fprintf(os.Stdout, "agent TERM, %d workers exited\n", exited)
	}
	helpers["ckpt-worker"] = func([]string) {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		f := os.NewFile(3, "ready")
		f.Write([]byte{1})
		f.Close()
		<-usr1
		fmt.Fprintf(os.Stdout, "saved %d\n", os.Getpid())
	}
}

// TestStopGrace: the first SIGTERM sends CheckpointSignal to the training
// processes, and SIGTERM follows once they exited (trainer "exit", the
// agent's workers) or StopGrace passed (trainer that keeps running).
func TestStopGrace(t *testing.T) {
	tests := []struct {
		name   string
		helper string
		args   []string
		to     Checkpoint
		grace  time.Duration
		want   string
	}{
		{"child saves and keeps running: TERM after the grace", "ckpt-trainer", nil, CheckpointChild, 200 * time.Millisecond,
			"ready\ncheckpoint\ngot TERM\n"},
		{"child saves and exits: no TERM", "ckpt-trainer", []string{"exit"}, CheckpointChild, time.Hour,
			"ready\ncheckpoint\n"},
		{"the children save, the main child gets TERM once they exited", "ckpt-agent", nil, CheckpointChildren, time.Hour,
			"ready\nsaved\nsaved\nagent TERM, 2 workers exited\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := newWatchBuf()
			cfg := helperConfig(t, tc.helper, tc.args...)
			cfg.Stdout = out
			cfg.CheckpointSignal, cfg.StopGrace, cfg.CheckpointTo = unix.SIGUSR1, tc.grace, tc.to
			var told []int
			cfg.OnCheckpoint = func(term syscall.Signal, reached int) { told = append(told, int(term), reached) }
			done := runAsync(cfg)
			out.waitFor("ready\n")
			require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM))
			r := <-done
			require.NoError(t, r.err)
			assert.Equal(t, Result{ExitCode: 0}, r.res, "no process died of the checkpoint signal; output %q", out.String())
			assert.Equal(t, []int{int(unix.SIGTERM), strings.Count(tc.want, "saved") + strings.Count(tc.want, "checkpoint")}, told)
			got := out.String()
			for _, pidLine := range strings.SplitAfter(got, "\n") {
				if strings.HasPrefix(pidLine, "saved ") {
					got = strings.Replace(got, pidLine, "saved\n", 1)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestStopGraceSecondSignal: a second SIGTERM during the grace forwards
// the held one at once (a user who insists).
func TestStopGraceSecondSignal(t *testing.T) {
	out := newWatchBuf()
	cfg := helperConfig(t, "ckpt-trainer")
	cfg.Stdout = out
	cfg.CheckpointSignal, cfg.StopGrace = unix.SIGUSR1, time.Hour
	done := runAsync(cfg)
	out.waitFor("ready\n")
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM))
	out.waitFor("checkpoint\n")
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGTERM))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, Result{ExitCode: 0}, r.res)
	assert.Equal(t, "ready\ncheckpoint\ngot TERM\n", out.String())
}

// TestStop: closing Config.Stop stops the child as SIGTERM would, the
// checkpoint step included.
func TestStop(t *testing.T) {
	for _, grace := range []time.Duration{0, 100 * time.Millisecond} {
		t.Run(grace.String(), func(t *testing.T) {
			out := newWatchBuf()
			stop := make(chan struct{})
			cfg := helperConfig(t, "ckpt-trainer")
			cfg.Stdout, cfg.Stop = out, stop
			cfg.CheckpointSignal, cfg.StopGrace = unix.SIGUSR1, grace
			done := runAsync(cfg)
			out.waitFor("ready\n")
			close(stop)
			r := <-done
			require.NoError(t, r.err)
			assert.Equal(t, Result{ExitCode: 0}, r.res)
			want := "ready\ngot TERM\n"
			if grace > 0 {
				want = "ready\ncheckpoint\ngot TERM\n"
			}
			assert.Equal(t, want, out.String())
		})
	}
}
