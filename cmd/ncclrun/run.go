package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/preflight"
)

// defaultTerminationLog is where Kubernetes reads a container's termination
// message from.
const defaultTerminationLog = "/dev/termination-log"

// terminationLimit is the size Kubernetes keeps of a termination message.
const terminationLimit = 4096

// runReport is the JSON of --report FILE (docs/contract.md).
type runReport struct {
	Preflight     preflight.Report      `json:"preflight"`
	EnvAdded      map[string]envEntry   `json:"env_added"`
	Diagnoses     []diagnosis.Diagnosis `json:"diagnoses"`
	ExitCode      int                   `json:"exit_code"`
	Signal        *string               `json:"signal"`
	TorchrunError *torchrunError        `json:"torchrun_error,omitempty"`
	// TapDropped: output bytes diagnosis did not see (launcher.Result.TapDropped).
	TapDropped int64    `json:"tap_dropped_bytes,omitempty"`
	Command    []string `json:"command"`
	Version    string   `json:"ncclrun_version"`
}

// preflightOptions are the options run, doctor and env share. It first
// raises ncclrun's own memlock as run does (call it once per process: a
// second raise would find the raised limit) and, on the live system,
// records the limit as found.
func preflightOptions(s settings, environ []string) preflight.Options {
	// A snapshot carries the environment it was taken in (ncclrun-env, one
	// KEY=VALUE a line, written by `ncclrun snapshot`): the analyst's own
	// environment says nothing about that node.
	if !liveRoot(s.root) {
		if data, err := os.ReadFile(filepath.Join(s.root, snapEnvFile)); err == nil {
			environ = nil
			for _, l := range strings.Split(string(data), "\n") {
				if k, _, ok := strings.Cut(l, "="); ok && k != "" {
					environ = append(environ, l)
				}
			}
		}
	}
	opts := preflight.Options{
		Root:       s.root,
		Env:        environ,
		MinMemlock: s.minMemlock,
		Plan:       s.plan(),
	}
	// The raise is of the live process whatever --root says (run's CMD is
	// live); the limit as found only describes the live system.
	if mc, err := launcher.RaiseMemlock(); err == nil && liveRoot(s.root) {
		opts.MemlockBefore = &preflight.Rlimit{Soft: mc.Before[0], Hard: mc.Before[1]}
	}
	return opts
}

// preflightFor raises memlock and runs preflight without a probe.
func preflightFor(ctx context.Context, s settings, environ []string) preflight.Report {
	return preflight.Run(ctx, preflightOptions(s, environ))
}

func cmdRun(c *cli.Context, e *env) error {
	// A terminating signal outside launcher.Run (during preflight, or while
	// the summary and report are written after CMD exited) must not kill
	// ncclrun: before the start it means "do not start", after the exit the
	// status stays CMD's. During Run the launcher forwards it to CMD.
	term := make(chan os.Signal, 8)
	signal.Notify(term, terminatingSignals...)
	defer signal.Stop(term)

	s, err := parseSettings(c)
	if err != nil {
		return err
	}
	if c.NArg() == 0 {
		return &usageError{errNoCommand}
	}
	path, args := c.Args().First(), c.Args().Tail()
	if path == "" {
		return usagef("empty command name")
	}
	if s.user != "" {
		// CMD runs on the live system whatever --root says: a user that
		// does not exist is a mistake in the command line, said in one
		// line before any preflight output.
		if _, err := launcher.ResolveUser(s.user); err != nil {
			return usagef("--user: %v", err)
		}
	}

	report := preflightFor(c.Context, s, e.environ)
	if s.strict && report.Failed() {
		printChecks(e.stderr, report, preflight.Fail)
		fprintf(e.stderr, "ncclrun: --strict: a preflight check failed; %s not started\n", path)
		return exitWith(ExitStrict)
	}
	// A run whose preflight only warned is healthy until a diagnosis says
	// otherwise, and a healthy run prints nothing of ncclrun's own: the
	// warnings are held back and printed with the exit summary if the output
	// shows a failure (a 64 MiB /dev/shm matters once NCCL fails on it).
	if !s.quiet && report.Failed() {
		printChecks(e.stderr, report, preflight.Warn, preflight.Fail)
	}

	// torchrun writes the first failing rank's exception to
	// TORCHELASTIC_ERROR_FILE; ask for it unless the user already did.
	var extra []launcher.EnvVar
	var torchFile string
	if _, set := lookupEnv(e.environ, "TORCHELASTIC_ERROR_FILE"); !set && !s.noWatch && isTorchrun(path, args) {
		if dir, err := os.MkdirTemp("", "ncclrun-torchelastic-"); err == nil {
			defer os.RemoveAll(dir)
			if s.user != "" {
				_ = os.Chmod(dir, 0o1777) // CMD runs as another user and must create the file
			}
			torchFile = filepath.Join(dir, "error.json")
			extra = append(extra, launcher.EnvVar{Name: "TORCHELASTIC_ERROR_FILE", Value: torchFile,
				Reason: "torchrun writes the first failing rank's exception there for ncclrun's report"})
		}
	}
	childEnv, added := s.composeEnv(e.environ, report, extra...)
	args = launcher.MPIRunArgs(path, args, added)

	cfg := launcher.Config{
		Path: path, Args: args, Env: childEnv,
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr,
		User:           s.user,
		AmbientIPCLock: report.Command.Ambient,
		DropCaps:       s.dropCaps,
		Memlock:        s.launcherMemlock(),
		KillAfter:      time.Duration(s.killAfter),
		NoPTY:          s.noPTY,
	}
	if s.noWatch {
		err := launcher.Exec(cfg) // returns only on failure
		return &startError{cmd: path, err: err}
	}

	// The matcher is built on CMD's first line, not before the start:
	// compiling the shipped catalog takes ~5 ms, which a CMD that prints
	// nothing never pays and which otherwise overlaps CMD's own start-up
	// instead of delaying it. A matcher that saw no line has no diagnosis.
	mf := facts(report, s.minMemlockOrDefault())
	var m *diagnosis.Matcher
	printed := map[string]bool{}
	var mu sync.Mutex // OnLine is called from one goroutine at a time; the lock also orders Diagnoses after it
	cfg.OnLine = func(_ launcher.Stream, line []byte) {
		mu.Lock()
		defer mu.Unlock()
		if m == nil {
			m = diagnosis.NewMatcher(mf)
		}
		for _, d := range m.FeedAll(line) {
			if d.ID == genericDiagnosis {
				continue // printed at exit, and only if nothing specific follows
			}
			printed[d.ID] = true
			_, _ = e.stderr.Write(diagnosisMessage(d))
		}
	}
	cfg.OnOutputError = func(st launcher.Stream, err error) {
		name := "stdout"
		if st == launcher.Stderr {
			name = "stderr"
		}
		fprintf(e.stderr, "ncclrun: warning: cannot write CMD's %s (%v); CMD keeps running and its %s is discarded\n", name, err, name)
	}
	select {
	case sig := <-term:
		fprintf(e.stderr, "ncclrun: %s received before %s started; not starting it\n", unix.SignalName(sig.(syscall.Signal)), path)
		return exitWith(128 + int(sig.(syscall.Signal)))
	default:
	}
	started := time.Now().Add(-time.Second) // file times have coarse granularity
	res, err := launcher.Run(cfg)
	if err != nil {
		return &startError{cmd: path, err: err}
	}
	mu.Lock()
	// With NCCL_DEBUG_FILE, NCCL's lines went to files, not to the output.
	if pattern, _ := lookupEnv(childEnv, "NCCL_DEBUG_FILE"); pattern != "" {
		for _, f := range ncclDebugFiles(pattern, started) {
			if m == nil {
				m = diagnosis.NewMatcher(mf)
			}
			if fh, err := os.Open(f); err == nil {
				_ = diagnosis.FeedReader(m, fh)
				fh.Close()
			}
		}
	}
	var ds []diagnosis.Diagnosis
	if m != nil {
		ds = m.Diagnoses()
	}
	mu.Unlock()

	sigName := ""
	if res.Signal != 0 {
		sigName = unix.SignalName(res.Signal)
		if sigName == "" {
			sigName = fmt.Sprintf("signal %d", int(res.Signal))
		}
	}
	// The generic nccl-error is held back while CMD runs: PyTorch's
	// DistBackendError on stderr often arrives before the WARN that names
	// the cause on stdout. It is left in ds only when nothing specific was
	// found, and then it is printed now (never silenced, like any diagnosis).
	for _, d := range ds {
		if !printed[d.ID] {
			_, _ = e.stderr.Write(diagnosisMessage(d))
		}
	}
	if !s.quiet && len(ds) > 0 {
		_, _ = e.stderr.Write(summaryMessage(ds, res.ExitCode, sigName))
		if !report.Failed() && report.Any(preflight.Warn) {
			fprintf(e.stderr, "ncclrun: preflight warned before the start:\n")
			printChecks(e.stderr, report, preflight.Warn)
		}
	}
	// Skipped tap data matters only when something went wrong: a healthy
	// run that printed faster than the matcher reads stays silent.
	if !s.quiet && res.TapDropped > 0 && (len(ds) > 0 || res.ExitCode != 0) {
		fprintf(e.stderr, "ncclrun: warning: diagnosis fell behind the output and skipped %d bytes (all of it was relayed)\n", res.TapDropped)
	}
	var te *torchrunError
	if torchFile != "" {
		te = readTorchrunError(torchFile)
	}

	if s.report != "" {
		rr := runReport{
			Preflight: report, EnvAdded: envMap(added), Diagnoses: nonNil(ds),
			ExitCode: res.ExitCode, TorchrunError: te, TapDropped: res.TapDropped,
			Command: append([]string{path}, args...), Version: version,
		}
		if sigName != "" {
			rr.Signal = &sigName
		}
		if err := writeFileJSON(s.report, rr); err != nil {
			fprintf(e.stderr, "ncclrun: warning: --report: %v\n", err)
		}
	}
	if tl := terminationLogPath(s, report); tl != "" && (len(ds) > 0 || res.ExitCode != 0) {
		msg := terminationText(ds, res.ExitCode, sigName, te)
		if err := os.WriteFile(tl, []byte(msg), 0o644); err != nil {
			fprintf(e.stderr, "ncclrun: warning: termination log: %v\n", err)
		}
	}
	return exitWith(res.ExitCode)
}

// terminationLogPath is --termination-log, or /dev/termination-log when
// running live in Kubernetes and it exists; "" for none.
func terminationLogPath(s settings, r preflight.Report) string {
	if s.termLog != "" {
		return s.termLog
	}
	if liveRoot(s.root) && r.Environment.Kind == "kubernetes" && fileExists(defaultTerminationLog) {
		return defaultTerminationLog
	}
	return ""
}

// terminationText is the termination message: the diagnoses, or when none
// was found, how CMD ended (and torchrun's first failure).
func terminationText(ds []diagnosis.Diagnosis, code int, sig string, te *torchrunError) string {
	if len(ds) > 0 {
		return diagnosis.TerminationMessage(ds, terminationLimit)
	}
	var b bytes.Buffer
	if sig != "" {
		fmt.Fprintf(&b, "ncclrun: CMD was killed by %s (exit status %d); no NCCL failure found in its output\n", sig, code)
	} else {
		fmt.Fprintf(&b, "ncclrun: CMD exited with status %d; no NCCL failure found in its output\n", code)
	}
	if te != nil && te.Message != "" {
		fmt.Fprintf(&b, "torchrun: first failure: %s\n", te.Message)
	}
	return truncate(b.String(), terminationLimit)
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

// writeFileJSON writes v as JSON to path, atomically where the directory allows.
func writeFileJSON(path string, v any) error {
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		return fmt.Errorf("encode %q: %w", path, err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// torchrunError is the first failing rank's exception from torchrun's error
// file: {"message": {"message": "...", "extraInfo": {"py_callstack": ..., "timestamp": ...}}}.
type torchrunError struct {
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	ErrorCode *int   `json:"error_code,omitempty"`
}

// readTorchrunError reads torchrun's error file; nil when there is none or
// it cannot be understood.
func readTorchrunError(path string) *torchrunError {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return nil
	}
	return parseTorchrunError(data)
}

func parseTorchrunError(data []byte) *torchrunError {
	var raw struct {
		Message   json.RawMessage `json:"message"`
		ErrorCode *int            `json:"errorCode"`
	}
	if json.Unmarshal(data, &raw) != nil || len(raw.Message) == 0 {
		return nil
	}
	te := &torchrunError{ErrorCode: raw.ErrorCode}
	var str string
	if json.Unmarshal(raw.Message, &str) == nil {
		te.Message = str
		return te
	}
	var obj struct {
		Message   string `json:"message"`
		ExtraInfo struct {
			PyCallstack string          `json:"py_callstack"`
			Timestamp   json.RawMessage `json:"timestamp"`
		} `json:"extraInfo"`
	}
	if json.Unmarshal(raw.Message, &obj) != nil {
		return nil
	}
	te.Message, te.Traceback = obj.Message, obj.ExtraInfo.PyCallstack
	var ts string
	if json.Unmarshal(obj.ExtraInfo.Timestamp, &ts) == nil {
		te.Timestamp = ts
	} else if len(obj.ExtraInfo.Timestamp) > 0 {
		te.Timestamp = string(obj.ExtraInfo.Timestamp)
	}
	return te
}

// genericDiagnosis is the catalog's catch-all id (docs/contract.md: an NCCL
// failure with no more specific cause found).
const genericDiagnosis = "nccl-error"

// terminatingSignals are the signals whose default action would end ncclrun
// and that a container runtime or a shell sends to stop a job.
var terminatingSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}
