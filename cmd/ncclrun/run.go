package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/cmdkind"
	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/internal/safefile"
	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/nccllog"
	"github.com/ncclrun/ncclrun/preflight"
)

// runReport is the JSON of --report FILE (docs/contract.md).
type runReport struct {
	Preflight     preflight.Report       `json:"preflight"`
	EnvAdded      map[string]envEntry    `json:"env_added"`
	Diagnoses     []diagnosis.Diagnosis  `json:"diagnoses"`
	FirstFailure  *diagnosis.Failure     `json:"first_failure,omitempty"`
	ExitCode      int                    `json:"exit_code"`
	Signal        *string                `json:"signal"`
	TorchrunError *nccllog.TorchrunError `json:"torchrun_error,omitempty"`
	// HangView is this node's counters of the process groups' collectives,
	// which explain merges with the other nodes' reports (docs/hangs.md).
	HangView *diagnosis.HangView `json:"hang_view,omitempty"`
	// TapShed: NCCL INFO noise lines diagnosis did not see, shed while it
	// was behind the output; TapLost: the other lines it did not see (0 as
	// long as the matcher keeps up with the lines that are not noise).
	TapShed int64    `json:"tap_shed_lines,omitempty"`
	TapLost int64    `json:"tap_lost_lines,omitempty"`
	Command []string `json:"command"`
	Version string   `json:"ncclrun_version"`
	// Hang is a collective that timed out and who never joined it
	// (docs/hangs.md), with the evidence captured live (hang.go); absent
	// without a hang.
	Hang *hangReport `json:"hang,omitempty"`
}

// raiseLimits is the limits stage of run, doctor and env: it raises
// ncclrun's own RLIMIT_MEMLOCK (soft to hard, and the hard limit where
// permitted) so that CMD and the probe inherit it, and returns the limit as
// found for preflight's report. Call it once per process: a second raise
// would find the raised limit. The raise is of the live process whatever
// --root says (run's CMD is live); the limit as found describes only the
// live system, so it is nil under --root, and nil when nothing was read.
func raiseLimits(s settings) *preflight.Rlimit {
	mc, err := launcher.RaiseMemlock()
	if err != nil || !liveRoot(s.root) {
		return nil
	}
	return &mc.Before
}

// preflightOptions are the options run, doctor and env share; before is
// raiseLimits' result.
func preflightOptions(s settings, environ []string, before *preflight.Rlimit) preflight.Options {
	// Under --root preflight reads the environment the tree recorded
	// (preflight.EnvFile, else proc/self/environ) instead of this one.
	return preflight.Options{
		Root:          s.root,
		Env:           environ,
		MinMemlock:    s.minMemlock,
		Plan:          s.plan(),
		MemlockBefore: before,
	}
}

// cmdRun is `ncclrun run`, one named stage after the other:
//
//	settings  -> runSettings: flags, CMD, --user resolved once
//	limits    -> raiseLimits: ncclrun's own memlock raised for CMD to inherit
//	preflight -> runPreflight: the checks, --strict, the failures printed
//	plan      -> planChild: CMD's environment, argv and launcher.Config
//	supervise -> supervise: start CMD, relay its output, diagnose the tap
//	collect   -> collect: NCCL_DEBUG_FILE files, torchrun's error file
//	report    -> reportOutcome: diagnoses, summary, --report, termination log
//	exit      -> CMD's exit status
func cmdRun(c *cli.Context, e *env) (err error) {
	// Every non-zero exit leaves a termination message: CMD's outcome is
	// reportOutcome's, the others (--strict, a start failure, ...) end's.
	e.ranRun = true
	end := &runEnd{c: c}
	defer func() { end.finish(e, err) }()
	// A terminating signal outside launcher.Run (during preflight, or while
	// the summary and report are written after CMD exited) must not kill
	// ncclrun: before the start it means "do not start", after the exit the
	// status stays CMD's. During Run the launcher forwards it to CMD. The
	// signals are caught once, in one step, on a goroutine that run
	// (app.go) starts before the flags are parsed and that overlaps the
	// preflight, and never released; this call is for a cmdRun that run
	// did not start.
	launcher.CatchSignals()

	j, err := runSettings(c)
	if err != nil {
		return err
	}
	end.s = &j.s
	// The evidence directory and RAS port are made beside the preflight.
	var hp *pendingHangPlan
	if !j.s.noWatch && j.command(e.environ).Remote() == "" {
		hp = startHangPlan(j.user, j.s.hang.after > 0)
		defer hp.end()
	}
	before := raiseLimits(j.s)
	rep, err := runPreflight(c.Context, e, j, before)
	end.rep = &rep
	if err != nil {
		return err
	}
	p := planChild(e, j, rep, hp)
	defer p.cleanup()
	term := launcher.Terminating()
	if j.s.noWatch {
		if err := notSignalled(e, j, term); err != nil {
			return err
		}
		err := launcher.Exec(p.cfg) // returns only on failure
		return &startError{cmd: j.path, err: err}
	}
	w := newWatch(e, rep, j.s, p)
	scanHangs(w, j)
	res, err := supervise(e, j, p, w, term)
	if err != nil {
		return err
	}
	out := collect(e, j, p, w, res, term)
	reportOutcome(e, j, rep, p, out)
	end.reported = true
	return exitWith(out.code)
}

// runJob is what run's settings stage hands the others: the parsed flags,
// the command and its arguments as given, and --user resolved on the live
// system (where CMD runs whatever --root says); user is nil without --user.
type runJob struct {
	s    settings
	path string
	args []string
	user *launcher.User
}

// command is CMD as cmdkind.Command, which knows what kind of command it
// is, with env the environment CMD gets.
func (j runJob) command(env []string) cmdkind.Command {
	return cmdkind.Command{Path: j.path, Args: j.args, Env: env}
}

// runSettings is run's settings stage: flags checked, a command given, and
// --user resolved once, so that a user that does not exist is a mistake in
// the command line, said in one line before any preflight output.
func runSettings(c *cli.Context) (runJob, error) {
	s, err := parseSettings(c)
	if err != nil {
		return runJob{}, err
	}
	if c.NArg() == 0 {
		return runJob{}, &usageError{errNoCommand}
	}
	j := runJob{s: s, path: c.Args().First(), args: c.Args().Tail()}
	if j.path == "" {
		return runJob{}, usagef("empty command name")
	}
	if s.user != "" {
		u, err := launcher.ResolveUser(s.user)
		if err != nil {
			return runJob{}, usagef("--user: %v", err)
		}
		j.user = &u
	}
	return j, nil
}

// runPreflight is run's preflight stage: the checks, --strict's refusal
// (ExitStrict), and the failed checks printed before the start. A run whose
// preflight only warned is healthy until a diagnosis says otherwise, and a
// healthy run prints nothing of ncclrun's own: the warnings are held back
// and printed with the exit summary if the output shows a failure (a 64 MiB
// /dev/shm matters once NCCL fails on it).
func runPreflight(ctx context.Context, e *env, j runJob, before *preflight.Rlimit) (preflight.Report, error) {
	opts := preflightOptions(j.s, e.environ, before)
	if liveRoot(j.s.root) {
		resolvedPlan(&opts, j.user)
		// The file CMD's exec runs: its file capability decides whether
		// CMD keeps the CAP_IPC_LOCK handed to it. Not found: the start
		// says so (127/126), and preflight has nothing to read.
		opts.Plan.Exec, _ = launcher.LookPath(j.path, e.environ)
	}
	// run shows a check's details only when it warned, and then the rules
	// that need NCCL's version have read it; --report shows them all.
	opts.VersionOnDemand = j.s.report == ""
	opts.Ranks, opts.RanksFrom = j.command(e.environ).Ranks()
	rep := preflight.Run(ctx, opts)
	if !j.s.quiet {
		printTreeWarnings(e.stderr, rep)
	}
	if j.s.strict && rep.Failed() {
		_ = rep.WriteChecks(e.stderr, preflight.Fail)
		say(e.stderr, "--strict: a preflight check failed; %s not started", j.path)
		return rep, exitWith(ExitStrict)
	}
	if !j.s.quiet && rep.Failed() {
		_ = rep.WriteChecks(e.stderr, preflight.Warn, preflight.Fail)
	}
	return rep, nil
}

// resolvedPlan gives preflight the ids the launcher will use for --user
// (nil: no --user). Only on the live system: under --root the tree's own
// passwd and group files describe that system instead.
func resolvedPlan(opts *preflight.Options, u *launcher.User) {
	if u != nil {
		opts.Plan.Resolved, opts.Plan.UID, opts.Plan.GID = true, int(u.UID), int(u.GID)
	}
}

// childPlan is run's plan for CMD: the launcher's Config, the variables
// ncclrun added, the torchrun error file it asked for ("" for none) and
// what to remove when run ends.
type childPlan struct {
	cfg       launcher.Config
	added     []launcher.EnvVar
	torchFile string // torchrun's error file: the user's TORCHELASTIC_ERROR_FILE or ncclrun's
	// debugFile is NCCL_DEBUG_FILE, and report and termLog are --report
	// and the termination log ("" for none), their directories' links
	// resolved before CMD runs (nccllog.PinDir).
	debugFile, report, termLog string
	cleanup                    func()
	probe                      *nccllog.Probe // nil: off (probe.go)
	hang                       *hangRun       // nil: off (--no-watch)
}

// planChild is run's plan stage: CMD's environment (NCCL variables,
// torchrun's error file), its arguments (mpirun's -x for what was added)
// and the launcher.Config.
func planChild(e *env, j runJob, rep preflight.Report, pending *pendingHangPlan) childPlan {
	p := childPlan{cleanup: func() {}}
	// torchrun writes the first failing rank's exception to
	// TORCHELASTIC_ERROR_FILE; ask for it unless the user already did.
	var extra []launcher.EnvVar
	if !j.s.noWatch {
		var ask *launcher.EnvVar
		p.torchFile, ask, p.cleanup = nccllog.TorchFile(e.environ, j.command(e.environ), j.s.user != "")
		if ask != nil {
			extra = append(extra, *ask)
		}
	}
	probe := planProbe(e, &j, rep) // transport probe (probe.go)
	var transport []launcher.EnvVar
	if probe != nil {
		transport = probe.Env()
	}
	// Hang capture's variables name this node's evidence directory and
	// RAS port: a CMD that starts ranks on other hosts gets none of them
	// (ncclrun in front of each rank there captures its own).
	var hp hangPlan
	if pending != nil {
		hp = pending.get() // cmdRun removes its directory at the end
		extra = append(extra, hangEnv(e.environ, hp)...)
	}
	childEnv, added := j.s.composeEnv(e.environ, rep, transport, extra...)
	args, childEnv, added := j.command(childEnv).ForwardEnv(added) // -x or Open MPI's env list
	p.added = added
	if !j.s.noWatch {
		p.hang = newHangRun(e, j.s.hang, hp, childEnv, rep.NCCLConf)
	}
	if v, _ := environ.Lookup(childEnv, "NCCL_DEBUG_FILE"); v != "" {
		p.debugFile = nccllog.PinDir(v)
	}
	p.report, p.termLog = nccllog.PinDir(j.s.report), nccllog.PinDir(terminationLogPath(j.s, rep))
	p.cfg = launcher.Config{
		Path: j.path, Args: args, Env: childEnv,
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr,
		User:           j.user,
		AmbientIPCLock: rep.Command.Ambient,
		DropCaps:       j.s.dropCaps,
		Memlock:        j.s.memlock,
		KillAfter:      j.s.killAfter,
		NoPTY:          j.s.noPTY,
	}
	j.s.ff.configure(&p.cfg, j.command(childEnv), e.stderr)
	if probe != nil {
		attachProbe(&p, probe, added)
	}
	return p
}

// watch is the diagnosis of CMD's output while it runs (diagnosis.Watch)
// as the launcher's Tap of that output; run's other sources feed it too
// (sources.go), and the policy (failfast.go) is told what it finds.
type watch struct {
	*diagnosis.Watch
	started time.Time // just before CMD started, less the file times' granularity
	ff      *failRun  // --on-degraded (failfast.go); nil: the default policy
	hang    *hangRun  // hang capture (hang.go); nil: off
	cmd     string    // CMD as given, for the line that says it is stopped
}

func newWatch(e *env, rep preflight.Report, s settings, p childPlan) *watch {
	w := &watch{ff: newFailRun(s.ff), hang: p.hang}
	f := facts(rep, s.minMemlockOrDefault())
	f.IBDisabled = ibDisabled(p.cfg.Env, rep.NCCLConf)
	w.Watch = diagnosis.NewWatch(f, e.stderr, func(d diagnosis.Diagnosis) string {
		if w.hang != nil {
			w.hang.found(d)
		}
		return w.ff.found(d, w.cmd)
	})
	return w
}

// Lines is launcher.Tap.Lines: the chunk goes to the Watch whole; when the
// tap is behind, the noise among its lines is shed.
func (w *watch) Lines(_ launcher.Stream, p []byte, behind bool) int { return w.Feed(p, behind) }

// Shed is launcher.Tap.Shed: NCCL's per-channel INFO lines and the like
// go when the matcher falls behind a burst; every other line (WARN lines,
// errors) is kept (diagnosis.Shed).
func (w *watch) Shed(p []byte) ([]byte, int) { return diagnosis.Shed(p) }

// supervise is run's supervise stage: unless a terminating signal came
// before the start, start CMD with its output relayed and tapped into w,
// and wait for it.
func supervise(e *env, j runJob, p childPlan, w *watch, term <-chan os.Signal) (launcher.Result, error) {
	cfg := p.cfg
	cfg.Tap = w
	cfg.Stop = w.ff.stopChan()
	if p.hang != nil {
		if p.hang.s.after > 0 {
			cfg.Tap = hangTap{Tap: w, h: p.hang}
		}
		cfg.Stop = anyStop(cfg.Stop, p.hang.stopChan())
	}
	w.cmd = j.path
	cfg.OnOutputError = func(st launcher.Stream, err error) {
		name := "stdout"
		if st == launcher.Stderr {
			name = "stderr"
		}
		fprintf(e.stderr, "ncclrun: warning: cannot write CMD's %s (%v); CMD keeps running and its %s is discarded\n", name, err, name)
	}
	if err := notSignalled(e, j, term); err != nil {
		return launcher.Result{}, err
	}
	w.started = time.Now().Add(-time.Second) // file times have coarse granularity
	if p.probe != nil {
		p.probe.Start(w.sourceLines)
	}
	if p.hang != nil {
		p.hang.start(j.path)
		cfg.OnExit = p.hang.exited
	}
	res, err := launcher.Run(cfg)
	if err != nil {
		return res, &startError{cmd: j.path, err: err}
	}
	return res, nil
}

// notSignalled is nil unless a terminating signal came before CMD was
// started (during preflight): then CMD is not started, with or without
// --no-watch, and ncclrun exits 128+N.
func notSignalled(e *env, j runJob, term <-chan os.Signal) error {
	select {
	case sig := <-term:
		say(e.stderr, "%s received before %s started; not starting it", unix.SignalName(sig.(syscall.Signal)), j.path)
		return exitWith(128 + int(sig.(syscall.Signal)))
	default:
		return nil
	}
}

// outcome is what run collected once CMD exited.
type outcome struct {
	res     launcher.Result
	sigName string // the signal that killed CMD, "" when it exited
	ds      []diagnosis.Diagnosis
	first   *diagnosis.Failure // the first failure (Matcher.FirstFailure)
	printed map[string]bool    // the ids of ds printed while CMD ran
	te      *nccllog.TorchrunError
	hang    *diagnosis.Hang // a collective timed out (docs/hangs.md)
	view    *diagnosis.HangView
	// code is ncclrun's exit status: CMD's, unless the policy
	// (failfast.go) changed it and note says why.
	code int
	note string
	live *hangReport // the evidence captured live (hang.go)
}

// collect is run's collect stage: with NCCL_DEBUG_FILE, NCCL's lines went
// to files, not to the output, so those files are diagnosed now; then the
// diagnoses, the signal's name and torchrun's error file.
//
// Those files are read as CMD's user, without following links, within the
// bounds of nccllog.ExitFiles; a terminating signal meanwhile stops the reading.
func collect(e *env, j runJob, p childPlan, w *watch, res launcher.Result, term <-chan os.Signal) outcome {
	out := outcome{res: res}
	if p.probe != nil {
		p.probe.Finish() // the rest of NCCL's private debug files, then WARN lines still waiting
	}
	for len(term) > 0 {
		<-term // signals during the run were the launcher's to forward
	}
	w.ff.end() // CMD has exited: nothing more to stop
	if p.hang != nil {
		p.hang.end() // a capture under way ends first
	}
	var reads nccllog.ExitReads
	if p.debugFile != "" || p.torchFile != "" {
		reads = exitFiles(p, j, w.started).Read(func(r io.Reader) { _ = nccllog.Split(r, w.sourceLines) }, term)
	}
	out.ds, out.first, out.printed = w.Result()
	out.code, out.note = w.ff.verdict(res, out.ds)
	if p.hang != nil {
		if code, note, ok := p.hang.verdict(res); ok && out.note == "" {
			out.code, out.note = code, note
		}
		out.live = p.hang.report()
	}
	// After the verdict: the hang is a failure CMD's status already tells.
	out.hang, out.view = w.Hang()
	out.ds, out.first = diagnosis.ApplyHang(out.ds, out.first, out.hang)
	if res.Signal != 0 {
		out.sigName = unix.SignalName(res.Signal)
		if out.sigName == "" {
			out.sigName = fmt.Sprintf("signal %d", int(res.Signal))
		}
	}
	if len(reads.Torch) > 0 {
		out.te = nccllog.ParseTorchrunError(reads.Torch).FirstFailing(out.first.Exception())
	}
	if !j.s.quiet {
		printExitWarnings(e, reads.Warns)
	}
	return out
}

// reportOutcome is run's report stage: the diagnoses not printed yet, the exit
// summary with the held-back preflight warnings, the lines the tap lost,
// --report and the termination log.
func reportOutcome(e *env, j runJob, rep preflight.Report, p childPlan, out outcome) {
	s, ds, res := j.s, out.ds, out.res
	// A hang names the rank that stopped the job before anything else.
	if !s.quiet && out.hang != nil {
		writeHang(e.stderr, out.hang)
	}
	// The catalog's held-back ids (the generic nccl-error) wait while CMD runs: PyTorch's
	// DistBackendError on stderr often arrives before the WARN that names
	// the cause on stdout. It is left in ds only when nothing specific was
	// found, and then it is printed now (never silenced, like any diagnosis).
	for _, d := range ds {
		if !out.printed[d.ID] {
			_, _ = e.stderr.Write(diagnosis.Message(d))
		}
	}
	if !s.quiet && len(ds) > 0 {
		_, _ = e.stderr.Write(diagnosis.Summary(ds, out.first, res.ExitCode, out.sigName))
		if !rep.Failed() && rep.Any(preflight.Warn) {
			fprintf(e.stderr, "ncclrun: preflight warned before the start:\n")
			_ = rep.WriteChecks(e.stderr, preflight.Warn)
		}
	}
	_, _ = io.WriteString(e.stderr, out.note) // the policy changed the exit status (failfast.go)
	// Skipped tap data matters only when something went wrong: a healthy
	// run that printed faster than the matcher reads stays silent.
	if !s.quiet && res.TapLost > 0 && (len(ds) > 0 || res.ExitCode != 0) {
		fprintf(e.stderr, "ncclrun: warning: diagnosis fell behind the output and skipped %d lines that were not NCCL INFO noise (all of it was relayed)\n", res.TapLost)
	}
	if s.report != "" {
		rr := runReport{
			Preflight: rep, EnvAdded: envMap(p.added), Diagnoses: nonNil(ds), FirstFailure: out.first,
			ExitCode: res.ExitCode, TorchrunError: out.te,
			TapShed: res.TapShed, TapLost: res.TapLost,
			Command: append([]string{j.path}, p.cfg.Args...), Version: version,
			Hang: joinHang(out.hang, out.live), HangView: out.view,
		}
		if out.sigName != "" {
			rr.Signal = &out.sigName
		}
		if err := writeFileJSON(p.report, rr); err != nil {
			fprintf(e.stderr, "ncclrun: warning: --report: %v\n", err)
		}
	}
	if tl := p.termLog; tl != "" && (len(ds) > 0 || res.ExitCode != 0) {
		head := out.note + hangTermination(out.hang, out.view)
		msg := head + terminationText(ds, out.first, res.ExitCode, out.sigName, out.te, terminationLimit-len(head))
		if err := safefile.WriteFile(tl, []byte(msg), 0o644); err != nil {
			fprintf(e.stderr, "ncclrun: warning: termination log: %v\n", err)
		}
	}
}

// envEntry is one variable in env's JSON and the report's env_added.
type envEntry struct {
	Value  string `json:"value"`
	Reason string `json:"reason"`
}

func envMap(added []launcher.EnvVar) map[string]envEntry {
	m := make(map[string]envEntry, len(added))
	for _, a := range added {
		m[a.Name] = envEntry{Value: a.Value, Reason: a.Reason}
	}
	return m
}

// writeFileJSON writes v as JSON to path: a temporary file renamed over
// path, no link followed nor replaced (safefile.WriteFile).
func writeFileJSON(path string, v any) error {
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		return fmt.Errorf("encode %q: %w", path, err)
	}
	return safefile.WriteFile(path, b.Bytes(), 0o644) // its errors name the path
}
