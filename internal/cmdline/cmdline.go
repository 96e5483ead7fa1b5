// Package cmdline is the one table of ncclrun's own flags: each flag's
// name, whether it takes a value, its NCCLRUN_* variable and the commands
// that own it. cmd/ncclrun builds each command's flags from it and reads
// the words before a command with it; lint reads the ncclrun command line
// of a manifest with it. Of a flag's value it knows the kind's syntax
// (true or false, a duration) and, for a flag that takes one of a few
// words, those words (Check); what a size, a signal or a path means is
// the command's.
//
// A command owns exactly the rows that name it. A flag it does not own is
// a usage error there, and that flag's variable is not read.
package cmdline

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is what a flag's value is.
type Kind int

// The kinds of value.
const (
	Bool     Kind = iota // no value: --flag, --flag=false
	String               // one word
	Strings              // repeatable, each a comma list
	Duration             // a Go duration: 30s, 2m
)

// Commands are ncclrun's commands, hidden ones included, in the order its
// help lists them. A word of this list after ncclrun's own flags selects
// the command; any other word is CMD of `run`.
var Commands = []string{"run", "doctor", "explain", "env", "lint", "version", "demo", "snapshot", "fake-nccl", "probe-mlock"}

// Command reports whether word selects one of Commands (or urfave's help).
func Command(word string) bool {
	if word == "help" {
		return true
	}
	for _, c := range Commands {
		if c == word {
			return true
		}
	}
	return false
}

// Flag is one row of the table. Two rows may share a name only where no
// command owns both (--format of env and of lint); they then agree on
// whether the name takes a value.
type Flag struct {
	Name    string
	Aliases []string
	Kind    Kind
	// Env is the variable read when the flag is not given ("": none),
	// written out so that the table is data, with no code run at start.
	Env string
	// Commands own the flag.
	Commands []string
	// Usage is the help text; a `WORD` in backquotes names the value.
	Usage string
	// Default is the value when neither the flag nor Env is set ("" for
	// none); DefaultText, when set, is what help shows instead.
	Default, DefaultText string
	// Words, for a String flag that takes one of a few words, are those
	// words, a group for each meaning: its first word names it, the others
	// are synonyms. They match in any case (strings.ToLower, not Unicode
	// folding), with blanks around them. nil: any word.
	Words [][]string
}

// Check reports whether the flag accepts value, as ncclrun checks it: a
// Bool's true or false (strconv.ParseBool), a Duration's Go duration, not
// negative, one of a String's Words. What another String means (a size, a
// signal) is checked by the command that reads it.
func (f Flag) Check(value string) error {
	if f.Words != nil {
		_, err := f.Word(value)
		return err
	}
	switch f.Kind {
	case Bool:
		_, err := strconv.ParseBool(value)
		return err
	case Duration:
		d, err := time.ParseDuration(value)
		if err == nil && d < 0 {
			err = fmt.Errorf("%v is negative", d)
		}
		return err
	}
	return nil
}

// Word returns what value means among f.Words: the first word of the
// group that holds it. The error says which words the flag takes.
func (f Flag) Word(value string) (string, error) {
	v := strings.ToLower(strings.TrimSpace(value))
	for _, group := range f.Words {
		for _, w := range group {
			if v == strings.ToLower(w) {
				return group[0], nil
			}
		}
	}
	return "", fmt.Errorf("%q is not %s", value, f.Meanings())
}

// Meanings lists the first word of each of f.Words' groups, as help and
// errors say them: "warn or stop", "VERSION, WARN, ... or TRACE".
func (f Flag) Meanings() string {
	var names []string
	for _, group := range f.Words {
		names = append(names, group[0])
	}
	list := strings.Join(names, ", ")
	if i := strings.LastIndex(list, ", "); i >= 0 {
		list = list[:i] + " or " + list[i+2:]
	}
	return list
}

// TakesValue reports whether the flag needs a value (--flag V or --flag=V).
func (f Flag) TakesValue() bool { return f.Kind != Bool }

// Names are the flag's name and aliases.
func (f Flag) Names() []string { return append([]string{f.Name}, f.Aliases...) }

// Owned reports whether command owns f.
func (f Flag) Owned(command string) bool {
	for _, c := range f.Commands {
		if c == command {
			return true
		}
	}
	return false
}

// The groups of commands that share flags.
var (
	run = []string{"run"}
	// credentials are what CMD runs as: run starts it so, doctor and env
	// judge it so.
	credentials = []string{"run", "doctor", "env"}
	// ncclEnv are the flags that decide the NCCL variables run adds, which
	// env prints.
	ncclEnv = []string{"run", "env"}
)

// Flags is the table, in the order help lists a command's flags.
var Flags = []Flag{
	{Name: "root", Kind: String, Env: "NCCLRUN_ROOT", Commands: credentials, Usage: "read the system from files under `DIR` instead of the live system (tests, snapshots)"},
	{Name: "root", Kind: String, Env: "NCCLRUN_ROOT", Commands: []string{"snapshot"}, Usage: "copy the tree under `DIR` instead of the live system"},
	{Name: "user", Kind: String, Env: "NCCLRUN_USER", Commands: credentials, Usage: "run CMD as `USER[:GROUP]` with the user's own groups"},
	{Name: "drop-cap", Kind: Strings, Env: "NCCLRUN_DROP_CAP", Commands: credentials, Usage: "drop capability `CAP` from CMD (repeatable, comma list)"},
	{Name: "memlock", Kind: String, Env: "NCCLRUN_MEMLOCK", Commands: credentials, Usage: "start CMD with RLIMIT_MEMLOCK `SIZE` (or SOFT:HARD)"},
	{Name: "min-memlock", Kind: String, Env: "NCCLRUN_MIN_MEMLOCK", Commands: credentials, Usage: "locked memory `SIZE` CMD must be able to pin", DefaultText: "1GiB"},
	{Name: "nccl-debug", Kind: String, Env: "NCCLRUN_NCCL_DEBUG", Commands: ncclEnv, Usage: "NCCL_DEBUG `LEVEL` to set when unset", Default: "WARN",
		Words: [][]string{{"VERSION"}, {"WARN"}, {"INFO"}, {"ABORT"}, {"TRACE"}}},
	{Name: "no-ib", Kind: Bool, Env: "NCCLRUN_NO_IB", Commands: ncclEnv, Usage: "set NCCL_IB_DISABLE=1 (when unset)"},
	{Name: "nccl-ib", Kind: String, Env: "NCCLRUN_NCCL_IB", Commands: ncclEnv, Usage: "`on|off`: off adds no NCCL_IB_* variable at all", Default: "on",
		Words: [][]string{{"on", "true", "1", "yes"}, {"off", "false", "0", "no"}}},
	{Name: "no-transport-probe", Kind: Bool, Env: "NCCLRUN_NO_TRANSPORT_PROBE", Commands: ncclEnv, Usage: "keep NCCL at WARN on stdout: do not read its INIT/NET INFO lines from a private NCCL_DEBUG_FILE to learn the transport it chose"},
	{Name: "strict", Kind: Bool, Env: "NCCLRUN_STRICT", Commands: run, Usage: "do not start CMD when a preflight check failed (exit 78)"},
	{Name: "no-watch", Kind: Bool, Env: "NCCLRUN_NO_WATCH", Commands: ncclEnv, Usage: "exec CMD in place after preflight and env: no relay, no diagnosis"},
	{Name: "report", Kind: String, Env: "NCCLRUN_REPORT", Commands: run, Usage: "write a JSON report to `FILE` when CMD exits"},
	{Name: "termination-log", Kind: String, Env: "NCCLRUN_TERMINATION_LOG", Commands: run, Usage: "write the termination message to `PATH` (default /dev/termination-log in Kubernetes)"},
	{Name: "quiet", Kind: Bool, Env: "NCCLRUN_QUIET", Commands: run, Usage: "silence preflight warnings and the exit summary (never a diagnosis)"},
	{Name: "kill-after", Kind: Duration, Env: "NCCLRUN_KILL_AFTER", Commands: run, Usage: "after forwarding a terminating signal, kill the process tree after `DURATION`", DefaultText: "none while CMD runs, 30s for what it leaves behind"},
	{Name: "no-pty", Kind: Bool, Env: "NCCLRUN_NO_PTY", Commands: run, Usage: "give CMD plain pipes even when ncclrun's output is a terminal"},
	{Name: "on-degraded", Kind: String, Env: "NCCLRUN_ON_DEGRADED", Commands: run, Usage: "`warn|fail`: fail stops CMD (as SIGTERM would) once degraded-transport is certain, and exits 79", Default: "warn",
		Words: [][]string{{"warn", ""}, {"fail"}}},
	{Name: "stop-grace", Kind: Duration, Env: "NCCLRUN_STOP_GRACE", Commands: run, Usage: "on the first terminating signal, send --checkpoint-signal to the training processes and forward the terminating signal `DURATION` later (or once they exited)"},
	{Name: "checkpoint-signal", Kind: String, Env: "NCCLRUN_CHECKPOINT_SIGNAL", Commands: run, Usage: "the `SIG` --stop-grace sends to the training processes", DefaultText: "SIGUSR1"},
	{Name: "misconfig-exit", Kind: String, Env: "NCCLRUN_MISCONFIG_EXIT", Commands: run, Usage: "exit `N` instead of CMD's status when CMD failed of a certain deployment misconfiguration (memlock, shm, ...)"},
	{Name: "hang-after", Kind: Duration, Env: "NCCLRUN_HANG_AFTER", Commands: run, Usage: "no line from CMD for `DURATION` while its processes live is a suspected hang", DefaultText: "0: off"},
	{Name: "on-hang", Kind: String, Env: "NCCLRUN_ON_HANG", Commands: run, Usage: "`warn|stop`: stop stops CMD (as SIGTERM would) once a hang's evidence is captured", Default: "warn",
		Words: [][]string{{"warn", ""}, {"stop"}}},
	{Name: "probe", Kind: String, Env: "NCCLRUN_PROBE", Commands: []string{"doctor"}, Usage: "pin `SIZE` bytes with mlock in a child with CMD's credentials"},
	{Name: "json", Kind: Bool, Env: "NCCLRUN_JSON", Commands: []string{"doctor"}, Usage: "print docs/contract.md's doctor JSON"},
	{Name: "json", Kind: Bool, Env: "NCCLRUN_JSON", Commands: []string{"explain"}, Usage: "print {\"diagnoses\": [...], \"first_failure\": ...} (docs/contract.md)"},
	{Name: "format", Kind: String, Env: "NCCLRUN_FORMAT", Commands: []string{"env"}, Usage: "`shell|json`", Default: "shell"},
	{Name: "format", Kind: String, Env: "NCCLRUN_LINT_FORMAT", Commands: []string{"lint"}, Usage: "`text|json|sarif`", Default: "text"},
	{Name: "fail-on", Kind: String, Env: "NCCLRUN_LINT_FAIL_ON", Commands: []string{"lint"}, Usage: "exit 1 when a finding is at least `error|warning|info`", Default: "error"},
	{Name: "output", Aliases: []string{"o"}, Kind: String, Env: "NCCLRUN_SNAPSHOT_OUTPUT", Commands: []string{"snapshot"}, Usage: "`FILE.tar.gz`, FILE.tgz, - (stdout) or a new or empty DIR (default ncclrun-snapshot-HOST-DATE.tar.gz here)"},
	{Name: "ambient", Kind: Bool, Commands: []string{"probe-mlock"}, Usage: "raise CAP_IPC_LOCK from permitted to effective first, as CMD's ambient set would"},
}

// For is the flags command owns, in the table's order.
func For(command string) []Flag {
	var out []Flag
	for _, f := range Flags {
		if f.Owned(command) {
			out = append(out, f)
		}
	}
	return out
}

// Lookup finds the flag command owns under name or an alias ("" command:
// any command's).
func Lookup(command, name string) (Flag, bool) {
	for _, f := range Flags {
		if command != "" && !f.Owned(command) {
			continue
		}
		for _, n := range f.Names() {
			if n == name {
				return f, true
			}
		}
	}
	return Flag{}, false
}

// Arg is one flag read from a command line.
type Arg struct {
	Flag  Flag
	Value string // "true" for a Bool given as --flag
}

// Parse reads the flags of command at the start of args as ncclrun's
// parser does: `-name` or `--name`, a value as `--name=V` or the next
// word; flags stop at `--` or at the first word that is not a flag (`-`
// is a word), where rest starts. Command "" reads any command's flags.
// bad is the first word that is not a flag of command, or a value flag
// without its value ("" when there is none); flags holds those before it,
// and rest starts after it.
func Parse(command string, args []string) (flags []Arg, rest []string, bad string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			return flags, args[i:], ""
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		f, ok := Lookup(command, name)
		if !ok {
			return flags, args[i+1:], a
		}
		switch {
		case !f.TakesValue() && !hasVal:
			val = "true"
		case f.TakesValue() && !hasVal:
			if i+1 >= len(args) {
				return flags, nil, a
			}
			i++
			val = args[i]
		}
		flags = append(flags, Arg{Flag: f, Value: val})
	}
	return flags, nil, ""
}
