package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/hang"
	"github.com/ncclrun/ncclrun/internal/environ"
	"github.com/ncclrun/ncclrun/launcher"
)

// Live hang evidence (docs/hangs.md, "Live capture"): run sets what makes a hang
// leave evidence (a per-job NCCL_RAS_ADDR, the flight recorder's
// variables, PYTHONFAULTHANDLER), and on the first watchdog timeout line,
// or after --hang-after of silence, captures RAS's status and py-spy's
// stacks into the evidence directory (package hang) while CMD still
// runs; --on-hang stop then stops CMD. The flight-recorder dumps are read
// once CMD exited, into the report's hang object.

// frPrefixName is the file name stem of the flight-recorder dumps in the
// evidence directory; torch appends the global rank. frPipeName is that of
// the ranks' dump pipes; torch appends the rank and ".pipe".
const (
	frPrefixName = "flight_recorder_rank_"
	frPipeName   = "flight_recorder_pipe_"
)

// hangSettings are the flags as parsed.
type hangSettings struct {
	after time.Duration // 0: off
	stop  bool
}

func parseHang(c *cli.Context) (hangSettings, error) {
	h := hangSettings{after: c.Duration(flagHangAfter)}
	if h.after < 0 {
		return h, usagef("--%s: %v is negative", flagHangAfter, h.after)
	}
	w, err := ownWord(c, flagOnHang)
	h.stop = w == "stop"
	return h, err
}

// hangPlan is where a job's hang evidence goes: the evidence directory
// ("" when it could not be made), the flight recorder's dump prefix and
// pipe stem in it (the stem "" where no pipes are made), and the RAS
// address ncclrun would give the job.
type hangPlan struct {
	dir, frPrefix, frPipe, rasAddr string
}

// newHangPlan makes the job's evidence directory under TMPDIR (owned by
// CMD's uid when run drops to another user, so that its ranks can write
// their dumps) and picks a free loopback port for RAS. pipes asks for the
// ranks' dump pipes too (--hang-after: the capture of a silent job is
// the one that needs them). torch aborts a rank that cannot make its
// pipe, where a dump it cannot write only costs the dump, so the pipes
// stay off by default: a CMD that switches users itself (gosu, su-exec)
// would not be able to make them in a directory of ncclrun's user.
func newHangPlan(u *launcher.User, pipes bool) hangPlan {
	var p hangPlan
	if dir, err := os.MkdirTemp("", "ncclrun-hang-"); err == nil {
		if u == nil || os.Chown(dir, int(u.UID), int(u.GID)) == nil {
			p.dir, p.frPrefix = dir, filepath.Join(dir, frPrefixName)
			if pipes {
				p.frPipe = filepath.Join(dir, frPipeName)
			}
		} else {
			_ = os.Remove(dir)
		}
	}
	p.rasAddr = freeLoopback()
	return p
}

// removeDir removes the evidence directory if it is empty (and is still
// a directory), and reports whether it did. rmdir(2) itself: os.Remove
// would first try to unlink it, a system call more at every exit.
func (p hangPlan) removeDir() bool {
	return p.dir != "" && syscall.Rmdir(p.dir) == nil
}

// pendingHangPlan is a newHangPlan under way: run makes the directory and
// picks the port beside its preflight (a directory on a journalling file
// system costs a few hundred microseconds), and removes the directory
// when it ends, if it is empty.
type pendingHangPlan struct {
	ch   chan hangPlan
	plan *hangPlan // nil until get
}

func startHangPlan(u *launcher.User, pipes bool) *pendingHangPlan {
	p := &pendingHangPlan{ch: make(chan hangPlan, 1)}
	go func() { p.ch <- newHangPlan(u, pipes) }()
	return p
}

// get returns the plan, once it is made.
func (p *pendingHangPlan) get() hangPlan {
	if p.plan == nil {
		plan := <-p.ch
		p.plan = &plan
	}
	return *p.plan
}

// end removes the evidence directory if it is empty, whether or not run
// got as far as its plan stage (--strict, a signal before the start, a
// CMD that could not start, or one that left no dump).
func (p *pendingHangPlan) end() { p.get().removeDir() }

// envHangPlan is the plan `ncclrun env` shows. run picks both per job,
// so env shows their patterns: the directory as mktemp writes one
// (ncclrun-hang-XXXXXXXXX under TMPDIR), the port as PORT.
func envHangPlan() hangPlan {
	dir := filepath.Join(os.TempDir(), "ncclrun-hang-XXXXXXXXX")
	return hangPlan{dir: dir, frPrefix: filepath.Join(dir, frPrefixName), rasAddr: "127.0.0.1:PORT"}
}

// hangEnv are the variables hang capture adds to CMD's environment. A
// variable torch reads under two names is added under both only when
// neither is set, so that ncclrun's value never outranks the user's.
func hangEnv(base []string, p hangPlan) []launcher.EnvVar {
	set := func(names ...string) bool {
		for _, n := range names {
			if _, ok := environ.Lookup(base, n); ok {
				return true
			}
		}
		return false
	}
	var adds []launcher.EnvVar
	// pair adds every name of names unless one of them or of also is set.
	pair := func(names []string, value, reason string, also ...string) {
		if set(names...) || set(also...) {
			return
		}
		for _, n := range names {
			adds = append(adds, launcher.EnvVar{Name: n, Value: value, Reason: reason})
		}
	}
	if p.rasAddr != "" {
		pair([]string{"NCCL_RAS_ADDR"}, p.rasAddr, "a RAS client socket of this job's own (jobs on a node share port 28028), for the status ncclrun reads when the job hangs")
	}
	pair([]string{"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, "2000", "the flight recorder keeps the last 2000 collectives of each rank (a few MB of host memory a rank) for its dump when a collective times out")
	pair([]string{"TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_DUMP_ON_TIMEOUT"}, "1", "each rank dumps its flight recorder when a collective times out")
	if p.frPrefix != "" {
		pair([]string{"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}, p.frPrefix, "the flight-recorder dumps go to ncclrun's evidence directory, where the report reads them (not under HOME)")
	}
	if p.frPipe != "" {
		pair([]string{"TORCH_NCCL_DEBUG_INFO_PIPE_FILE"}, p.frPipe, "each rank (torch 2.2+) makes a pipe in ncclrun's evidence directory, through which --hang-after's capture asks it for its flight-recorder dump while the job still runs")
	}
	pair([]string{"TORCH_NCCL_ASYNC_ERROR_HANDLING"}, "3", "a timed-out rank is torn down without aborting NCCL first, so its flight-recorder dump is written (torchrun would set 1)",
		"NCCL_ASYNC_ERROR_HANDLING") // its name before torch 2.2
	pair([]string{"PYTHONFAULTHANDLER"}, "1", "a Python process that dies of SIGABRT (the watchdog's teardown) prints every thread's stack to its stderr")
	return adds
}

// hangRun is hang capture during one run: what triggers it (the first
// watchdog timeout the Watch finds, --hang-after's silence), the one
// capture, and --on-hang stop. A nil *hangRun captures nothing.
type hangRun struct {
	s       hangSettings
	plan    hangPlan
	rasAddr string // the address CMD's NCCL uses; "" when RAS is off
	frPref  string // the dump prefix CMD's torch uses
	frPipe  string // the pipe stem CMD's torch uses ("": none)
	stderr  io.Writer
	cmd     string

	once sync.Once
	done chan struct{} // closed when the capture ended
	stop chan struct{} // launcher.Config.Stop's share; nil without --on-hang stop
	mu   sync.Mutex
	over bool // CMD has exited: nothing more is captured
	// quiet: the main child has exited (launcher's OnExit); what still
	// holds its output is no training job, so its silence is no hang.
	quiet   bool
	trigger string
	ev      *hang.Evidence
	stopped bool
	timer   *time.Timer
}

// newHangRun plans capture for a child whose environment is childEnv
// (NCCL's configuration files in conf).
func newHangRun(e *env, s hangSettings, p hangPlan, childEnv []string, conf map[string]string) *hangRun {
	h := &hangRun{s: s, plan: p, stderr: e.stderr, done: make(chan struct{})}
	lookup := func(name string) string { return ncclSetting(childEnv, conf, name) }
	if lookup("NCCL_RAS_ENABLE") != "0" {
		h.rasAddr = lookup("NCCL_RAS_ADDR")
		if h.rasAddr == "" {
			h.rasAddr = "localhost:28028" // NCCL's default
		}
	}
	for _, n := range []string{"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"} {
		if v := lookup(n); v != "" && h.frPref == "" {
			h.frPref = v
		}
	}
	h.frPipe = lookup("TORCH_NCCL_DEBUG_INFO_PIPE_FILE")
	if s.stop {
		h.stop = make(chan struct{})
	}
	return h
}

// start arms --hang-after's timer as CMD starts.
func (h *hangRun) start(cmd string) {
	h.cmd = cmd
	if h.s.after > 0 {
		h.timer = time.AfterFunc(h.s.after, func() {
			h.fire(fmt.Sprintf("no output from CMD for %v (--%s)", h.s.after, flagHangAfter), true)
		})
	}
}

// output is told of each chunk of CMD's output: the silence starts over,
// until the main child has exited.
func (h *hangRun) output() {
	if h.timer == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.quiet {
		h.timer.Reset(h.s.after)
	}
}

// exited is told that the main child has exited (launcher.Config.OnExit):
// --hang-after's clock stops for good, since descendants that still hold
// the output while they are torn down are no hung job.
func (h *hangRun) exited() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.quiet = true
	if h.timer != nil {
		h.timer.Stop()
	}
}

// found is told each diagnosis the Watch finds: the first watchdog timeout
// starts the capture.
func (h *hangRun) found(d diagnosis.Diagnosis) {
	if d.ID == "collective-timeout" {
		h.fire(d.ID, false)
	}
}

// fire starts the one capture of this run, unless CMD has exited; idle
// says --hang-after's silence is the trigger, which no longer counts once
// the main child has exited.
func (h *hangRun) fire(trigger string, idle bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.over || (idle && h.quiet) {
		return
	}
	h.once.Do(func() {
		h.trigger = trigger
		go h.capture()
	})
}

func (h *hangRun) capture() {
	defer close(h.done)
	o := hang.Options{Dir: h.plan.dir, RASAddr: h.rasAddr, FRPipes: h.frPipe}
	if py, err := exec.LookPath("py-spy"); err == nil {
		o.PySpy, o.PIDs = py, hang.Descendants("/proc", os.Getpid())
	} else {
		o.StacksOff = "py-spy is not installed; PYTHONFAULTHANDLER prints a Python process's stacks to its stderr when it dies of SIGABRT"
	}
	if o.Dir == "" {
		o.PySpy, o.StacksOff = "", "no evidence directory (TMPDIR not writable)"
		if dir, err := os.MkdirTemp("", "ncclrun-hang-"); err == nil {
			o.Dir = dir
		}
	}
	ev := hang.Capture(context.Background(), o)
	h.mu.Lock()
	h.ev = &ev
	stop := h.stop != nil && !h.over
	h.stopped = stop
	h.mu.Unlock()
	where := "evidence in " + ev.Dir
	if ev.Dir == "" {
		where = "no evidence directory (TMPDIR cannot be written)"
	}
	fprintf(h.stderr, "ncclrun: suspected hang (%s): %s; %s\n", h.trigger, evidenceLine(ev), where)
	if stop {
		h.awaitAskedDumps(ev)
		fprintf(h.stderr, "ncclrun: --%s stop: stopping %s as SIGTERM would; ncclrun will exit %d\n", flagOnHang, h.cmd, ExitHang)
		close(h.stop)
	}
}

// dumpWait bounds how long --on-hang stop waits for the dumps the
// capture asked the ranks for: torch looks at its pipe about once a
// second, then writes its dump.
const dumpWait = 5 * time.Second

// awaitAskedDumps waits, at most dumpWait, for the flight-recorder dump
// of each rank the capture asked for one, before --on-hang stop stops
// them: a rank stopped while it writes its dump leaves none.
func (h *hangRun) awaitAskedDumps(ev hang.Evidence) {
	ranks := ev.Asked()
	if len(ranks) == 0 || h.frPref == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), dumpWait)
	defer cancel()
	hang.AwaitDumps(ctx, h.frPref, ranks)
}

// evidenceLine says in a few words what the capture found.
func evidenceLine(ev hang.Evidence) string {
	var parts []string
	switch r := ev.RAS; {
	case r == nil:
		parts = append(parts, "RAS off")
	case r.Error != "" && len(r.Raw) == 0:
		parts = append(parts, "RAS did not answer ("+r.Error+")")
	default:
		s := "RAS status read"
		if n := len(r.Missing); n > 0 {
			s += fmt.Sprintf(", %d rank(s) missing", n)
		}
		for _, b := range r.Behind {
			for _, rk := range b.Ranks {
				s += fmt.Sprintf(", rank %d of %s behind in %s (%d < %d)", rk.Rank, b.Comm, b.Op, rk.Count, b.Max)
			}
		}
		if r.Confirmed {
			s += fmt.Sprintf(", unchanged %v later", hang.RASRecheck)
		}
		parts = append(parts, s)
	}
	n := 0
	for _, s := range ev.Stacks {
		if s.File != "" {
			n++
		}
	}
	if ev.StacksOff == "" {
		parts = append(parts, strconv.Itoa(n)+" process stack(s) from py-spy")
	}
	if asked := len(ev.Asked()); asked > 0 {
		parts = append(parts, strconv.Itoa(asked)+" rank(s) asked for a flight-recorder dump")
	}
	return strings.Join(parts, "; ")
}

// end says CMD has exited: a capture under way is waited for, none starts.
func (h *hangRun) end() {
	h.mu.Lock()
	h.over = true
	fired := h.trigger != ""
	h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
	}
	if fired {
		<-h.done
	}
}

// stopChan is launcher.Config.Stop's share of hang capture.
func (h *hangRun) stopChan() <-chan struct{} {
	if h.stop == nil {
		return nil
	}
	return h.stop
}

// verdict changes the exit status when --on-hang stop stopped CMD (and
// CMD did not succeed before the stop reached it).
func (h *hangRun) verdict(res launcher.Result) (int, string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stopped || res.ExitCode == 0 {
		return 0, "", false
	}
	return ExitHang, fmt.Sprintf("ncclrun: --%s stop: CMD was stopped because it hung (%s); CMD's exit status %d, ncclrun's %d\n",
		flagOnHang, h.trigger, res.ExitCode, ExitHang), true
}

// hangReport is the report's hang object: what the lines tell of the
// collective that timed out (diagnosis.Hang, nil when they tell nothing),
// and the evidence captured live and the flight-recorder dumps read after
// CMD exited. Its Certainty and EvidenceDir are the object's (they hide
// the lines' own); Certainty is "unknown" when the lines name no rank.
type hangReport struct {
	*diagnosis.Hang
	Certainty      string          `json:"certainty"`
	Trigger        string          `json:"trigger,omitempty"`
	EvidenceDir    string          `json:"evidence_dir,omitempty"`
	RAS            *hang.RASStatus `json:"ras,omitempty"`
	FlightRecorder []hang.Dump     `json:"flight_recorder,omitempty"`
	FRPipes        []hang.Pipe     `json:"fr_pipes,omitempty"`
	Stacks         []hang.Stack    `json:"stacks,omitempty"`
	StacksOff      string          `json:"stacks_off,omitempty"`
}

// joinHang is the report's hang object from the lines' hang and the live
// evidence; nil when there is neither.
func joinHang(lines *diagnosis.Hang, live *hangReport) *hangReport {
	if lines == nil && live == nil {
		return nil
	}
	r := &hangReport{Certainty: "unknown"}
	if live != nil {
		*r = *live
	}
	if lines != nil {
		r.Hang, r.Certainty = lines, lines.Certainty
	}
	return r
}

// report reads the flight-recorder dumps (bounded: hang.ReadDumps, two
// seconds) and returns the report's hang object; nil when there was no
// capture and no dump. The ranks' pipes in the evidence directory are
// removed, and the directory when it then holds nothing.
func (h *hangRun) report() *hangReport {
	if h.plan.frPipe != "" && h.frPipe == h.plan.frPipe {
		hang.RemovePipes(h.frPipe)
	}
	h.mu.Lock()
	ev := h.ev // end has run: no capture starts now
	h.mu.Unlock()
	// ours: the dumps go to the evidence directory ncclrun made.
	ours := h.plan.dir != "" && strings.HasPrefix(h.frPref, h.plan.dir+string(filepath.Separator))
	if ev == nil && ours && h.plan.removeDir() {
		return nil // the evidence directory was empty: no dump, no capture
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var dumps []hang.Dump
	if h.frPref != "" {
		dumps = hang.ReadDumps(ctx, h.frPref)
	}
	if ev == nil && len(dumps) == 0 {
		h.plan.removeDir()
		return nil
	}
	r := &hangReport{Certainty: "unknown", Trigger: h.trigger, FlightRecorder: dumps}
	if ev != nil {
		r.EvidenceDir, r.RAS, r.Stacks, r.StacksOff, r.FRPipes = ev.Dir, ev.RAS, ev.Stacks, ev.StacksOff, ev.FRPipes
	} else if ours {
		r.EvidenceDir = h.plan.dir
	}
	return r
}

// hangTap is the launcher's Tap with --hang-after's clock: every chunk of
// CMD's output starts the silence over.
type hangTap struct {
	launcher.Tap
	h *hangRun
}

func (t hangTap) Lines(s launcher.Stream, p []byte, behind bool) int {
	t.h.output()
	return t.Tap.Lines(s, p, behind)
}

// anyStop is closed when a or b is (nil: never).
func anyStop(a, b <-chan struct{}) <-chan struct{} {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	c := make(chan struct{})
	go func() {
		select {
		case <-a:
		case <-b:
		}
		close(c)
	}()
	return c
}
