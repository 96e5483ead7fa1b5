package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/units"
	"github.com/ncclrun/ncclrun/launcher"
)

// Set by the Makefile: -ldflags '-X main.version=... -X main.commit=...'.
var (
	version = "dev"
	commit  = "unknown"
)

// Flag names shared by every command (accepted before the command and after it).
const (
	flagRoot             = "root"
	flagStrict           = "strict"
	flagNoWatch          = "no-watch"
	flagReport           = "report"
	flagTerminationLog   = "termination-log"
	flagNCCLDebug        = "nccl-debug"
	flagMemlock          = "memlock"
	flagDropCap          = "drop-cap"
	flagQuiet            = "quiet"
	flagUser             = "user"
	flagKillAfter        = "kill-after"
	flagMinMemlock       = "min-memlock"
	flagProbe            = "probe"
	flagNoIB             = "no-ib"
	flagNCCLIB           = "nccl-ib"
	flagNoPTY            = "no-pty"
	flagNoTransportProbe = "no-transport-probe"
	flagJSON             = "json"
	flagFormat           = "format"
)

// envName is the NCCLRUN_* variable of a flag: --kill-after -> NCCLRUN_KILL_AFTER.
func envName(flag string) string {
	return "NCCLRUN_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// globalFlags are new instances of the flags every command accepts; urfave
// flags hold parse state, so each command gets its own.
func globalFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: flagRoot, Usage: "read the system from files under `DIR` instead of the live system (tests, snapshots)", EnvVars: []string{envName(flagRoot)}},
		&cli.BoolFlag{Name: flagStrict, Usage: "do not start CMD when a preflight check failed (exit 78)", EnvVars: []string{envName(flagStrict)}},
		&cli.BoolFlag{Name: flagNoWatch, Usage: "exec CMD in place after preflight and env: no relay, no diagnosis", EnvVars: []string{envName(flagNoWatch)}},
		&cli.StringFlag{Name: flagReport, Usage: "write a JSON report to `FILE` when CMD exits", EnvVars: []string{envName(flagReport)}},
		&cli.StringFlag{Name: flagTerminationLog, Usage: "write the termination message to `PATH` (default /dev/termination-log in Kubernetes)", EnvVars: []string{envName(flagTerminationLog)}},
		&cli.StringFlag{Name: flagNCCLDebug, Usage: "NCCL_DEBUG `LEVEL` to set when unset", Value: "WARN", EnvVars: []string{envName(flagNCCLDebug)}},
		&cli.StringFlag{Name: flagMemlock, Usage: "start CMD with RLIMIT_MEMLOCK `SIZE` (or SOFT:HARD)", EnvVars: []string{envName(flagMemlock)}},
		&cli.StringSliceFlag{Name: flagDropCap, Usage: "drop capability `CAP` from CMD (repeatable, comma list)", EnvVars: []string{envName(flagDropCap)}},
		&cli.BoolFlag{Name: flagQuiet, Usage: "silence preflight warnings and the exit summary (never a diagnosis)", EnvVars: []string{envName(flagQuiet)}},
		&cli.StringFlag{Name: flagUser, Usage: "run CMD as `USER[:GROUP]` with the user's own groups", EnvVars: []string{envName(flagUser)}},
		&cli.DurationFlag{Name: flagKillAfter, Usage: "after forwarding a terminating signal, kill the process tree after `DURATION`", DefaultText: "none while CMD runs, 30s for what it leaves behind", EnvVars: []string{envName(flagKillAfter)}},
		&cli.StringFlag{Name: flagMinMemlock, Usage: "locked memory `SIZE` CMD must be able to pin (default 1GiB)", EnvVars: []string{envName(flagMinMemlock)}},
		&cli.StringFlag{Name: flagProbe, Usage: "pin `SIZE` bytes with mlock in a child with CMD's credentials", EnvVars: []string{envName(flagProbe)}},
		&cli.BoolFlag{Name: flagNoIB, Usage: "set NCCL_IB_DISABLE=1 (when unset)", EnvVars: []string{envName(flagNoIB)}},
		&cli.BoolFlag{Name: flagNoPTY, Usage: "give CMD plain pipes even when ncclrun's output is a terminal", EnvVars: []string{envName(flagNoPTY)}},
		&cli.BoolFlag{Name: flagNoTransportProbe, Usage: "keep NCCL at WARN on stdout: do not read its INIT/NET INFO lines from a private NCCL_DEBUG_FILE to learn the transport it chose", EnvVars: []string{envName(flagNoTransportProbe)}},
		&cli.StringFlag{Name: flagNCCLIB, Usage: "`on|off`: off adds no NCCL_IB_* variable at all", Value: "on", EnvVars: []string{envName(flagNCCLIB)}},
	}, append(failFastFlags(), hangFlags()...)...)
}

// flagWords are what normalize needs to know of the global flags: which
// names take a value and which do not (help included); commandWords are
// the words that select a subcommand. They are derived from globalFlags
// and buildApp's commands, each once and only when asked, so a new flag or
// command cannot be forgotten, and `ncclrun run -- CMD` or `ncclrun --
// CMD`, which name no global flag, do not build the flags to learn it.
type flagKinds struct {
	value, boolean map[string]bool
}

var flagWords = sync.OnceValue(func() flagKinds {
	w := flagKinds{value: map[string]bool{}, boolean: map[string]bool{}}
	for _, f := range append(globalFlags(), cli.HelpFlag) {
		kind := w.value
		if d, ok := f.(cli.DocGenerationFlag); ok && !d.TakesValue() {
			kind = w.boolean
		}
		for _, n := range f.Names() {
			kind[n] = true
		}
	}
	return w
})

var commandWords = sync.OnceValue(func() map[string]bool {
	w := map[string]bool{}
	for _, c := range buildApp(&env{}, noCommand).Commands {
		for _, n := range c.Names() {
			w[n] = true
		}
	}
	w["help"] = true // urfave adds its help command when the app runs
	return w
})

// normalize rewrites argv so that urfave sees `ncclrun COMMAND FLAGS... ARGS...`:
// global flags before the command move after it, and a first non-flag word
// that is not a command (or anything after `--`) makes the command `run`.
// Flags stop at the first non-flag word: `ncclrun torchrun --nproc-per-node 8`
// leaves --nproc-per-node to torchrun, and `ncclrun -- doctor` runs a program
// named doctor.
func normalize(args []string) []string {
	if len(args) == 0 {
		args = []string{"ncclrun"}
	}
	prog, rest := args[0], args[1:]
	if len(rest) == 1 && rest[0] == "--version" {
		// tini --version, dumb-init --version: the same as `version`.
		return []string{prog, "version"}
	}
	out := func(cmd string, globals, tail []string) []string {
		r := make([]string, 0, len(args)+1)
		r = append(r, prog, cmd)
		r = append(r, globals...)
		return append(r, tail...)
	}
	help := false
	i := 0
	for i < len(rest) {
		a := rest[i]
		if a == "--" {
			return out("run", rest[:i], rest[i:])
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case flagWords().value[name]:
			if hasValue {
				i++
			} else {
				i += 2
			}
		case flagWords().boolean[name]:
			help = help || name == "help" || name == "h"
			i++
		default:
			// Unknown flag: run's parser reports it as a usage error.
			return out("run", nil, rest)
		}
	}
	if i >= len(rest) {
		if help {
			return []string{prog, "--help"}
		}
		return out("run", nil, rest)
	}
	word := rest[i]
	if !commandWords()[word] {
		return out("run", rest[:i], rest[i:])
	}
	if word == "fake-nccl" {
		// Its arguments belong to the workload, unparsed.
		return out(word, nil, rest[i+1:])
	}
	return out(word, rest[:i], rest[i+1:])
}

// env is what the commands share: stdio and the process environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	environ        []string
}

// newApp builds the CLI with every command's flags. Errors come back from
// Run; nothing in here exits.
func newApp(e *env) *cli.App { return buildApp(e, "") }

// noCommand is buildApp's only for an app whose commands have no flags
// (words needs only their names).
const noCommand = "\x00"

// flagsFor is the command whose flags an app running the normalized args
// needs: the command they select, or "" (every command's, and the global
// ones for the app's own help) when they select none or `help`, which
// shows any command's.
func flagsFor(args []string) string {
	if len(args) < 2 || args[1] == "help" || !commandWords()[args[1]] {
		return ""
	}
	return args[1]
}

// buildApp builds the CLI. With only set, only that command gets its flags
// and the app none of its own: a start parses one command's flags, and
// building the ~17 of each of the other commands (each with its NCCLRUN_*
// name) and setting them up was ~0.2 ms of every start (docs/performance.md).
// Only the help of the command that runs is shown then, and it lists that
// command's flags, so nothing a user sees changes.
func buildApp(e *env, only string) *cli.App {
	onUsage := func(_ *cli.Context, err error, _ bool) error {
		return &usageError{err}
	}
	want := func(name string) bool { return only == "" || only == name }
	flags := func(name string, f func() []cli.Flag) []cli.Flag {
		if !want(name) {
			return nil
		}
		return f()
	}
	globalsParsed := false // by the command that runs
	withGlobals := func(name string, extra ...cli.Flag) []cli.Flag {
		if !want(name) {
			return nil
		}
		globalsParsed = globalsParsed || name == only
		return append(globalFlags(), extra...)
	}
	app := &cli.App{
		Name:  "ncclrun",
		Usage: "check, fix and supervise a distributed GPU training command; explain NCCL failures",
		UsageText: "ncclrun [flags] [--] CMD [ARGS...]     # same as: ncclrun run ...\n" +
			"ncclrun doctor [--json] [--probe SIZE] [--root DIR]\n" +
			"ncclrun explain [--json] [FILE|-]...\n" +
			"ncclrun lint [--format text|json|sarif] [--fail-on LEVEL] [FILE|DIR|-]...\n" +
			"ncclrun env [--format shell|json]\n" +
			"ncclrun snapshot [--output FILE.tar.gz|DIR|-]\n" +
			"ncclrun version | demo",
		HideVersion:    true,
		Reader:         e.stdin,
		Writer:         e.stdout,
		ErrWriter:      e.stderr,
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   onUsage,
		Commands: []*cli.Command{
			{
				Name:      "run",
				Usage:     "preflight, compose NCCL env, supervise CMD and diagnose its output",
				ArgsUsage: "[--] CMD [ARGS...]",
				Flags:     withGlobals("run"),
				Action:    func(c *cli.Context) error { return cmdRun(c, e) },
			},
			{
				Name:   "doctor",
				Usage:  "preflight only: a table (or JSON) of checks",
				Flags:  withGlobals("doctor", &cli.BoolFlag{Name: flagJSON, Usage: "print docs/contract.md's doctor JSON", EnvVars: []string{envName(flagJSON)}}),
				Action: func(c *cli.Context) error { return cmdDoctor(c, e) },
			},
			{
				Name:      "explain",
				Usage:     "diagnose saved logs (stdin when no file; gzip read transparently)",
				ArgsUsage: "[FILE|-]...",
				Flags:     withGlobals("explain", &cli.BoolFlag{Name: flagJSON, Usage: "print {\"diagnoses\": [...], \"first_failure\": ...} (docs/contract.md)", EnvVars: []string{envName(flagJSON)}}),
				Action:    func(c *cli.Context) error { return cmdExplain(c, e) },
			},
			{
				Name:   "env",
				Usage:  "the variables run would add to CMD's environment",
				Flags:  withGlobals("env", &cli.StringFlag{Name: flagFormat, Usage: "`shell|json`", Value: "shell", EnvVars: []string{envName(flagFormat)}}),
				Action: func(c *cli.Context) error { return cmdEnv(c, e) },
			},
			{
				Name:      "lint",
				Usage:     "judge Kubernetes manifests and Compose files: will each training container be able to pin memory?",
				ArgsUsage: "[FILE|DIR|-]...",
				Flags:     flags("lint", lintFlags),
				Action:    func(c *cli.Context) error { return cmdLint(c, e) },
			},
			{
				Name:   "version",
				Usage:  "print version, commit and Go version",
				Flags:  withGlobals("version"),
				Action: func(c *cli.Context) error { return cmdVersion(c, e) },
			},
			{
				Name:   "demo",
				Usage:  "show a failing run under a default container's limits, its diagnosis, then the fixed run",
				Flags:  withGlobals("demo"),
				Action: func(c *cli.Context) error { return cmdDemo(c, e) },
			},
			{
				Name:   "snapshot",
				Usage:  "copy what doctor reads (proc, sys, dev names, etc, NCCL variables) into a tarball or directory for `doctor --root`",
				Flags:  flags("snapshot", snapshotFlags),
				Action: func(c *cli.Context) error { return cmdSnapshot(c, e) },
			},
			{
				Name:            "fake-nccl",
				Hidden:          true,
				SkipFlagParsing: true,
				Action:          func(c *cli.Context) error { return cmdFakeNCCL(c, e) },
			},
			{
				Name:      "probe-mlock",
				Hidden:    true,
				ArgsUsage: "SIZE",
				Flags:     flags("probe-mlock", probeFlags),
				Action:    func(c *cli.Context) error { return cmdProbeMlock(c, e) },
			},
		},
	}
	for _, c := range app.Commands {
		if !c.SkipFlagParsing {
			c.OnUsageError = onUsage
		}
	}
	// The app's flags are shown by --help, and parsed before the command's:
	// a bad NCCLRUN_* value of a global flag is a usage error even for a
	// command without the global flags (lint, snapshot). A command with
	// them parses them anyway, with the same error first.
	if !globalsParsed {
		app.Flags = globalFlags()
	}
	return app
}

func probeFlags() []cli.Flag {
	return []cli.Flag{&cli.BoolFlag{Name: "ambient", Usage: "raise CAP_IPC_LOCK from permitted to effective first, as CMD's ambient set would"}}
}

// run is ncclrun with its arguments and stdio; it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, environ: launcher.Environ()}
	args = normalize(args)
	only := flagsFor(args)
	if only == "run" {
		// Enabling the signals takes a few hundred microseconds of
		// round trips to the runtime's signal thread; started now, the
		// goroutine that makes them runs as soon as this one first
		// waits (in preflight) and overlaps the rest of the preflight.
		launcher.CatchSignals()
	}
	var out *checkedStdout
	if only != "run" {
		out = &checkedStdout{w: stdout}
		e.stdout = out
	}
	app := buildApp(e, only)
	err := app.RunContext(context.Background(), args)
	if out != nil {
		if code, failed := out.outputFailure(err, stderr); failed {
			return code
		}
	}
	return exitStatus(err, stderr)
}

// bytesFlag parses a flag that must be a number of bytes (not
// unlimited); "" gives 0.
func bytesFlag(c *cli.Context, name string) (int64, error) {
	s := c.String(name)
	if s == "" {
		return 0, nil
	}
	n, err := units.ParseFiniteSize(s)
	if err != nil {
		return 0, usagef("--%s: %v", name, err)
	}
	return n, nil
}

var errNoCommand = errors.New("no command given (usage: ncclrun [flags] [--] CMD [ARGS...]; see ncclrun --help)")

// liveRoot reports whether root names the live system.
func liveRoot(root string) bool { return root == "" || root == "/" }

func fprintf(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
