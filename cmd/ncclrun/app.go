package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/cmdline"
	"github.com/ncclrun/ncclrun/internal/units"
	"github.com/ncclrun/ncclrun/launcher"
)

// Set by the Makefile: -ldflags '-X main.version=... -X main.commit=...'.
var (
	version = "dev"
	commit  = "unknown"
)

// Flag names the commands read (internal/cmdline's table defines them:
// who owns each, its NCCLRUN_* variable, its help).
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
	flagHangAfter        = "hang-after"
	flagOnHang           = "on-hang"
	flagJSON             = "json"
	flagFormat           = "format"
)

// commandFlags are new instances of the flags command owns in
// internal/cmdline's table; urfave flags hold parse state, so each app
// gets its own. Only these flags' variables are read.
func commandFlags(command string) []cli.Flag {
	var out []cli.Flag
	for _, f := range cmdline.For(command) {
		var envs []string
		if v, set := os.LookupEnv(f.Env); f.Env != "" && (!set || v != "") {
			// An empty variable is unset, as the library already takes an
			// empty boolean, duration or list: a string flag would get ""
			// in place of its default (WARN, shell, on, text, error) and
			// refuse it (docs/cli.md).
			envs = []string{f.Env}
		}
		names := append([]string{f.Name}, f.Aliases...)
		switch f.Kind {
		case cmdline.Bool:
			out = append(out, &boolFlag{&cli.BoolFlag{Name: f.Name, Aliases: f.Aliases, Usage: f.Usage, EnvVars: envs}, names})
		case cmdline.Strings:
			out = append(out, &stringsFlag{&cli.StringSliceFlag{Name: f.Name, Aliases: f.Aliases, Usage: f.Usage, EnvVars: envs, DefaultText: f.DefaultText}, names})
		case cmdline.Duration:
			out = append(out, &durationFlag{&cli.DurationFlag{Name: f.Name, Aliases: f.Aliases, Usage: f.Usage, EnvVars: envs, DefaultText: f.DefaultText}, names})
		default:
			out = append(out, &stringFlag{&cli.StringFlag{Name: f.Name, Aliases: f.Aliases, Usage: f.Usage, EnvVars: envs, Value: f.Default, DefaultText: f.DefaultText}, names})
		}
	}
	return out
}

// The library's flags work out their names with a regular expression
// each time they are asked, and before a command runs it asks, for each
// flag that is not set, every flag's names (runFlagActions, IsSet): a
// fifth of a millisecond of every run's start with run's flags. These
// flags answer with the names internal/cmdline gave them.
type (
	boolFlag struct {
		*cli.BoolFlag
		names []string
	}
	stringsFlag struct {
		*cli.StringSliceFlag
		names []string
	}
	durationFlag struct {
		*cli.DurationFlag
		names []string
	}
	stringFlag struct {
		*cli.StringFlag
		names []string
	}
)

func (f *boolFlag) Names() []string     { return f.names }
func (f *stringsFlag) Names() []string  { return f.names }
func (f *durationFlag) Names() []string { return f.names }
func (f *stringFlag) Names() []string   { return f.names }

// normalize rewrites argv so that urfave sees `ncclrun COMMAND FLAGS... ARGS...`:
// flags before the command move after it (the command's parser refuses
// those it does not own), and a first non-flag word that is not a command
// (or anything after `--`) makes the command `run`. Flags stop at the
// first non-flag word: `ncclrun torchrun --nproc-per-node 8` leaves
// --nproc-per-node to torchrun, and `ncclrun -- doctor` runs a program
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
	out := func(cmd string, flags, tail []string) []string {
		r := make([]string, 0, len(args)+1)
		r = append(r, prog, cmd)
		r = append(r, flags...)
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
		if name == "help" || name == "h" {
			help = true
			i++
			continue
		}
		f, ok := cmdline.Lookup("", name)
		switch {
		case !ok:
			// Unknown flag: run's parser reports it as a usage error.
			return out("run", nil, rest)
		case f.TakesValue() && !hasValue:
			i += 2
		default:
			i++
		}
	}
	if i >= len(rest) {
		if help {
			return []string{prog, "--help"}
		}
		return out("run", nil, rest)
	}
	word := rest[i]
	if !cmdline.Command(word) {
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
	// ranRun: cmdRun was called (its runEnd writes the termination
	// message of every exit from there on).
	ranRun bool
}

// newApp builds the CLI: each command with the flags it owns
// (commandFlags), the app itself with none but --help. Errors come back
// from Run; nothing in here exits.
func newApp(e *env) *cli.App {
	onUsage := func(c *cli.Context, err error, _ bool) error {
		command := "ncclrun"
		if c != nil && c.Command != nil && c.Command.Name != "" {
			command = c.Command.Name
		}
		return &usageError{flagError(command, err)}
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
				Action:    func(c *cli.Context) error { return cmdRun(c, e) },
			},
			{
				Name:   "doctor",
				Usage:  "preflight only: a table (or JSON) of checks",
				Action: func(c *cli.Context) error { return cmdDoctor(c, e) },
			},
			{
				Name:      "explain",
				Usage:     "diagnose saved logs (stdin when no file; gzip read transparently)",
				ArgsUsage: "[FILE|-]...",
				Action:    func(c *cli.Context) error { return cmdExplain(c, e) },
			},
			{
				Name:   "env",
				Usage:  "the variables run would add to CMD's environment",
				Action: func(c *cli.Context) error { return cmdEnv(c, e) },
			},
			{
				Name:      "lint",
				Usage:     "judge Kubernetes manifests and Compose files: will each training container be able to pin memory?",
				ArgsUsage: "[FILE|DIR|-]...",
				Action:    func(c *cli.Context) error { return cmdLint(c, e) },
			},
			{
				Name:   "version",
				Usage:  "print the version: ncclrun VERSION (commit COMMIT, GOVERSION OS/ARCH)",
				Action: func(c *cli.Context) error { return cmdVersion(c, e) },
			},
			{
				Name:   "demo",
				Usage:  "show a failing run under a default container's limits, its diagnosis, then the fixed run",
				Action: func(c *cli.Context) error { return cmdDemo(c, e) },
			},
			{
				Name:   "snapshot",
				Usage:  "copy what doctor reads (proc, sys, dev names, etc, NCCL variables) into a tarball or directory for `doctor --root`",
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
				Action:    func(c *cli.Context) error { return cmdProbeMlock(c, e) },
			},
		},
	}
	for _, c := range app.Commands {
		// The words after a command are its own: a program or file named
		// help or h is CMD or an input, not the library's help command
		// (--help still is; `ncclrun help CMD` is the app's).
		c.HideHelpCommand = true
		if !c.SkipFlagParsing {
			c.Flags = commandFlags(c.Name)
			c.OnUsageError = onUsage
		}
	}
	return app
}

// flagError says an unknown flag in ncclrun's words: the flag library
// writes "flag provided but not defined: -format", where a user wants to
// hear which command does take it and where the command's flags are.
func flagError(command string, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	var owners []string
	for _, f := range cmdline.Flags {
		if slices.Contains(f.Names(), name) {
			for _, o := range f.Commands {
				if !slices.Contains(owners, o) {
					owners = append(owners, o)
				}
			}
		}
	}
	msg := fmt.Sprintf("--%s is not a flag of %s", name, command)
	if n := len(owners); n > 0 {
		list := owners[n-1]
		if n > 1 {
			list = strings.Join(owners[:n-1], ", ") + " and " + list
		}
		msg += " (it is a flag of " + list + ")"
	}
	return fmt.Errorf("%s; ncclrun %s --help lists its flags", msg, command)
}

// run is ncclrun with its arguments and stdio; it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, environ: launcher.Environ()}
	args = normalize(args)
	isRun := len(args) > 1 && args[1] == "run"
	if isRun {
		// Enabling the signals takes a few hundred microseconds of
		// round trips to the runtime's signal thread; started now, the
		// goroutine that makes them runs as soon as this one first
		// waits (in preflight) and overlaps the rest of the preflight.
		launcher.CatchSignals()
	}
	var out *checkedStdout
	if !isRun {
		out = &checkedStdout{w: stdout}
		e.stdout = out
	}
	err := newApp(e).RunContext(context.Background(), args)
	if err != nil && len(args) > 1 && args[1] == "help" {
		// `ncclrun help WORD` for no command: the library exits 3, a
		// status of no meaning here; it is a mistake in the command line.
		err = &usageError{err}
	}
	if isRun && !e.ranRun {
		// run's flags did not parse, so cmdRun, whose runEnd writes the
		// termination message, never ran (termination.go).
		flagMistakeEnd(e, args[2:], err)
	}
	if out != nil {
		if code, failed := out.outputFailure(err, stderr); failed {
			return code
		}
		if readerGone(out.err) {
			err = quietEPIPE(err)
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
