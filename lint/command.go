package lint

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/ncclrun/ncclrun/internal/cmdline"
	"github.com/ncclrun/ncclrun/internal/lazy"
)

// launch is how a container's first process relates to ncclrun.
type launch struct {
	// known: the manifest gives the whole argv (Kubernetes command,
	// Compose entrypoint); otherwise the image's ENTRYPOINT comes first.
	known bool
	argv  []string
	// ncclrun: ncclrun is started at all; direct: it is the process the
	// runtime execs (exec form); via names what starts it otherwise.
	ncclrun bool
	direct  bool
	via     string
	// flags given to ncclrun, and the command it starts (after its
	// flags and `--`).
	user, dropCaps, memlock string
	userSet                 bool
	cmd                     []string
	// bad is the first word of ncclrun's flags that run refuses (not its
	// flag, or a value flag without its value), or NAME=VALUE of an
	// NCCLRUN_* variable whose value run refuses; "" for none.
	bad string
	// other: ncclrun is started for another command than run (doctor,
	// env, ...), whose flags lint does not judge.
	other bool
}

var shells = []string{"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"}

func isNcclrun(word string) bool { return filepath.Base(word) == "ncclrun" }

// scriptWord splits a shell script into rough words (compiled on first use).
var scriptWord = &lazy.Regexp{Expr: `[^\s;&|()'"]+`}

// parseLaunch reads argv (command then args) as the runtime will start it.
func parseLaunch(argv []string, known bool) launch {
	l := launch{known: known, argv: argv}
	if len(argv) == 0 {
		return l
	}
	first := filepath.Base(argv[0])
	switch {
	case isNcclrun(argv[0]) && known:
		l.ncclrun, l.direct = true, true
		l.flags(argv[1:])
		return l
	case slices.Contains(shells, first) && len(argv) >= 3 && strings.HasPrefix(argv[1], "-") && strings.Contains(argv[1], "c"):
		words := scriptWord.Get().FindAllString(argv[2], -1)
		for i, w := range words {
			if isNcclrun(w) {
				l.ncclrun, l.via = true, "a shell ("+first+" -c)"
				l.flags(words[i+1:])
				return l
			}
		}
		return l
	}
	for i, a := range argv {
		if isNcclrun(a) {
			l.ncclrun, l.via = true, filepath.Base(argv[0])
			if i == 0 {
				l.via = "the image's ENTRYPOINT"
			}
			l.flags(argv[i+1:])
			return l
		}
	}
	return l
}

// flags reads ncclrun's own flags as ncclrun does (internal/cmdline):
// run's, before and after the word `run`, up to `--` or the command, which
// it keeps in l.cmd. A word that run refuses (not its flag, a flag
// without its value, a value the flag's kind refuses: ncclrun itself
// would exit 2) is skipped and, but for help, given to refused. Flags
// before another command's word are that command's (l.other).
func (l *launch) flags(args []string) {
	l.other = otherCommand(args)
	runWord := false
	for {
		got, rest, bad := cmdline.Parse("run", args)
		for _, a := range got {
			if a.Flag.Check(a.Value) != nil {
				l.refused("--" + a.Flag.Name + "=" + a.Value)
			}
			switch a.Flag.Name {
			case "user":
				l.user, l.userSet = a.Value, true
			case "drop-cap":
				if l.dropCaps != "" {
					l.dropCaps += ","
				}
				l.dropCaps += a.Value
			case "memlock":
				l.memlock = a.Value
			}
		}
		switch {
		case bad != "":
			if !slices.Contains(help, bad) {
				l.refused(bad)
			}
			args = rest
		case len(rest) > 0 && rest[0] == "--":
			l.cmd = rest[1:]
			return
		case len(rest) > 0 && rest[0] == "run" && !runWord:
			runWord, args = true, rest[1:]
		default:
			l.cmd = rest
			return
		}
	}
}

// help are the words that make ncclrun print help and exit 0.
var help = []string{"--help", "-help", "-h", "--h"}

// refused keeps word, which run refuses, as l.bad: the first one, and
// only for run (not l.other) and a word ncclrun will read as it stands,
// not one holding $(VAR) (Kubernetes expands it from the container's
// env), ${VAR} (Compose interpolates it) or $VAR (a shell -c script
// expands it).
func (l *launch) refused(word string) {
	if l.bad == "" && !l.other && !strings.Contains(word, "$") {
		l.bad = word
	}
}

// otherCommand reports whether ncclrun's flags in args are followed by
// the word of a command other than run (ncclrun doctor, --json doctor).
func otherCommand(args []string) bool {
	for {
		_, rest, bad := cmdline.Parse("", args)
		if bad != "" {
			args = rest
			continue
		}
		return len(rest) > 0 && rest[0] != "run" && rest[0] != "--" && cmdline.Command(rest[0])
	}
}

// applyEnv takes run's NCCLRUN_USER, NCCLRUN_DROP_CAP and NCCLRUN_MEMLOCK
// from the container's environment where no flag set them (flags win, as
// in ncclrun), and keeps in l.bad the first variable whose value the
// flag's kind refuses: ncclrun reads every one of run's variables, a flag
// given or not (an empty one is unset to it).
func (l *launch) applyEnv(env map[string]string) {
	if !l.ncclrun {
		return
	}
	for _, f := range cmdline.For("run") {
		if v := env[f.Env]; f.Env != "" && v != "" && f.Check(v) != nil {
			l.refused(f.Env + "=" + v)
		}
	}
	if v, ok := env[runEnv("user")]; ok && !l.userSet && v != "" {
		l.user, l.userSet = v, true
	}
	if v, ok := env[runEnv("drop-cap")]; ok && l.dropCaps == "" {
		l.dropCaps = v
	}
	if v, ok := env[runEnv("memlock")]; ok && l.memlock == "" {
		l.memlock = v
	}
}

// runEnv is the NCCLRUN_* variable of run's flag name.
func runEnv(name string) string {
	f, _ := cmdline.Lookup("run", name)
	return f.Env
}

// command is the command ncclrun starts, or the whole argv when ncclrun
// is not in it.
func (l launch) command() []string {
	if l.ncclrun {
		return l.cmd
	}
	return l.argv
}
