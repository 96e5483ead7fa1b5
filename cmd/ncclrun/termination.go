package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/cmdline"
	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/internal/printable"
	"github.com/ncclrun/ncclrun/internal/safefile"
	"github.com/ncclrun/ncclrun/nccllog"
	"github.com/ncclrun/ncclrun/preflight"
)

// The termination message (docs/contract.md "Termination message"): what
// Kubernetes shows of a container that exited non-zero, at most
// terminationLimit bytes. reportOutcome writes it once CMD ran
// (terminationText), runEnd for every other non-zero exit (earlyExitText).

// defaultTerminationLog is where Kubernetes reads a container's termination
// message from.
const defaultTerminationLog = "/dev/termination-log"

// terminationLimit is the size Kubernetes keeps of a termination message.
const terminationLimit = 4096

// terminationLogPath is --termination-log, or /dev/termination-log when
// running live in Kubernetes and it exists; "" for none.
func terminationLogPath(s settings, r preflight.Report) string {
	if s.termLog != "" {
		return s.termLog
	}
	if liveRoot(s.root) && r.Environment.Kind == preflight.Kubernetes && fileExists(defaultTerminationLog) {
		return defaultTerminationLog
	}
	return ""
}

// terminationText is the termination message: the diagnoses, led by the
// program's exception when that was the first failure and they are its
// knock-on (whatever torchrun's error file picked: torch orders ranks by
// whole-second timestamps), or when none was found, how CMD ended (and
// torchrun's first failure).
func terminationText(ds []diagnosis.Diagnosis, first *diagnosis.Failure, code int, sig string, te *nccllog.TorchrunError, limit int) string {
	if len(ds) > 0 {
		if first != nil && first.ID == "" {
			head := "ncclrun: first failure: " + diagnosis.FailureText(first) + "\n"
			return truncate(head+diagnosis.TerminationMessage(ds, limit-len(head)), limit)
		}
		return diagnosis.TerminationMessage(ds, limit)
	}
	var b bytes.Buffer
	if sig != "" {
		fmt.Fprintf(&b, "ncclrun: CMD was killed by %s (exit status %d); no NCCL failure found in its output\n", sig, code)
	} else {
		fmt.Fprintf(&b, "ncclrun: CMD exited with status %d; no NCCL failure found in its output\n", code)
	}
	if te != nil && te.Message != "" {
		fmt.Fprintf(&b, "torchrun: first failure: %s\n", printable.String(te.Message))
	}
	return truncate(b.String(), limit)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// runEnd is what run knows when it returns an error instead of CMD's own
// exit: it writes the termination message for every such non-zero exit
// (docs/contract.md "Termination message"): --strict's refusal (78), a
// command that could not be started (125, 126, 127, --user that cannot
// switch users among them), a signal before the start (128+n), a mistake
// in the command line (2). The exit after CMD ran is reportOutcome's, which
// writes its own message and sets reported.
type runEnd struct {
	c        *cli.Context
	s        *settings         // nil until the settings stage passed
	rep      *preflight.Report // nil until preflight ran
	reported bool              // reportOutcome wrote CMD's outcome
}

// finish writes the termination message for err, if there is a
// termination log and err is a non-zero exit that nothing else described.
func (r *runEnd) finish(e *env, err error) {
	if err == nil || r.reported {
		return
	}
	path := r.path()
	if path == "" {
		return
	}
	msg := earlyExitText(err, r.rep, r.command())
	if msg == "" {
		return
	}
	if werr := safefile.WriteFile(path, []byte(msg), 0o644); werr != nil {
		fprintf(e.stderr, "ncclrun: warning: termination log: %v\n", werr)
	}
}

// path is the termination log: as reportOutcome finds it once preflight
// ran; before that --termination-log, or /dev/termination-log where it
// exists on the live system (the kubelet mounts it into every container).
func (r *runEnd) path() string {
	if r.s != nil && r.rep != nil {
		return terminationLogPath(*r.s, *r.rep)
	}
	if p := r.c.String(flagTerminationLog); p != "" {
		return p
	}
	if liveRoot(r.c.String(flagRoot)) && fileExists(defaultTerminationLog) {
		return defaultTerminationLog
	}
	return ""
}

// flagMistakeEnd writes the termination message of a run whose flags the
// parser refused (a flag run does not own, a value missing, an NCCLRUN_*
// variable that does not parse): cmdRun never ran, so its runEnd did not.
// The log is --termination-log as given before the mistake, else
// NCCLRUN_TERMINATION_LOG, else /dev/termination-log where it exists on
// the live system, as runEnd.path finds it before preflight.
func flagMistakeEnd(e *env, args []string, err error) {
	var ue *usageError
	if !errors.As(err, &ue) {
		return
	}
	path, root := "", ""
	flags, _, _ := cmdline.Parse("run", args)
	for _, a := range flags {
		switch a.Flag.Name {
		case flagTerminationLog:
			path = a.Value
		case flagRoot:
			root = a.Value
		}
	}
	if f, ok := cmdline.Lookup("run", flagTerminationLog); ok && path == "" {
		path, _ = environ.Lookup(e.environ, f.Env)
	}
	if f, ok := cmdline.Lookup("run", flagRoot); ok && root == "" {
		root, _ = environ.Lookup(e.environ, f.Env)
	}
	if path == "" && liveRoot(root) && fileExists(defaultTerminationLog) {
		path = defaultTerminationLog
	}
	if path == "" {
		return
	}
	if werr := safefile.WriteFile(path, []byte(earlyExitText(err, nil, "CMD")), 0o644); werr != nil {
		fprintf(e.stderr, "ncclrun: warning: termination log: %v\n", werr)
	}
}

// command is CMD's name for the messages ("CMD" when none was given).
func (r *runEnd) command() string {
	if r.c.NArg() > 0 && r.c.Args().First() != "" {
		return r.c.Args().First()
	}
	return "CMD"
}

// earlyExitText is the termination message of a run that ended with err
// before CMD ran or instead of it: one short paragraph, at most
// terminationLimit bytes; "" for no message (a nil or zero-status err).
func earlyExitText(err error, rep *preflight.Report, cmd string) string {
	var se *statusError
	if errors.As(err, &se) {
		switch {
		case se.code == 0:
			return ""
		case se.code == ExitStrict && rep != nil && rep.Failed():
			return truncate(strictText(*rep, cmd), terminationLimit)
		case se.code > exitSignalBase && se.code <= exitSignalBase+64:
			name := unix.SignalName(syscall.Signal(se.code - exitSignalBase))
			if name == "" {
				name = fmt.Sprintf("signal %d", se.code-exitSignalBase)
			}
			return fmt.Sprintf("ncclrun: %s received before %s started; not started (exit status %d)\n", name, cmd, se.code)
		}
		return fmt.Sprintf("ncclrun: exit status %d before %s ran\n", se.code, cmd)
	}
	// The one line exitStatus prints for err is the message.
	var line bytes.Buffer
	code := exitStatus(err, &line)
	if code == ExitOK {
		return ""
	}
	msg := strings.TrimRight(line.String(), "\n")
	if msg == "" {
		msg = "ncclrun: " + err.Error()
	}
	return truncate(fmt.Sprintf("%s (exit status %d)\n", msg, code), terminationLimit)
}

// strictText says which checks made --strict refuse to start CMD, and the
// first failed check's fix.
func strictText(rep preflight.Report, cmd string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ncclrun: --strict: preflight failed, %s not started (exit status %d)\n", cmd, ExitStrict)
	fix := ""
	for _, c := range rep.Checks {
		if c.Status != preflight.Fail {
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n", c.ID, printable.String(c.Summary))
		if fix == "" {
			fix = c.Fix
		}
	}
	if fix != "" {
		b.WriteString("fix: " + fix + "\n")
	}
	return b.String()
}
