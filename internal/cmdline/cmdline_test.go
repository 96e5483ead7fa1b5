package cmdline

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTable: every owner is a command; a name (or alias) and a variable
// are one command's flag at most once; rows that share a name agree on
// whether it takes a value (normalize reads words before the command
// with any command's rows); every variable is NCCLRUN_*.
func TestTable(t *testing.T) {
	kind := map[string]bool{}
	for _, c := range Commands {
		names, envs := map[string]bool{}, map[string]bool{}
		for _, f := range For(c) {
			for _, n := range f.Names() {
				assert.False(t, names[n], "%s: --%s twice", c, n)
				names[n] = true
				if v, ok := kind[n]; ok {
					assert.Equal(t, v, f.TakesValue(), "--%s", n)
				}
				kind[n] = f.TakesValue()
			}
			if f.Env != "" {
				assert.False(t, envs[f.Env], "%s: %s twice", c, f.Env)
				envs[f.Env] = true
				assert.True(t, strings.HasPrefix(f.Env, "NCCLRUN_"), f.Env)
			}
		}
	}
	for _, f := range Flags {
		require.NotEmpty(t, f.Commands, f.Name)
		for _, c := range f.Commands {
			assert.True(t, Command(c), "--%s: %s is no command", f.Name, c)
		}
		assert.NotEmpty(t, f.Usage, f.Name)
	}
	assert.True(t, Command("help"))
	assert.False(t, Command("torchrun"))
}

// TestOwners: the commands' flags as the docs list them.
func TestOwners(t *testing.T) {
	names := func(c string) []string {
		var out []string
		for _, f := range For(c) {
			out = append(out, f.Name)
		}
		return out
	}
	credentials := []string{"root", "user", "drop-cap", "memlock", "min-memlock"}
	for _, c := range []string{"run", "doctor", "env"} {
		assert.Subset(t, names(c), credentials, c)
	}
	assert.Equal(t, append(credentials, "probe", "json"), names("doctor"))
	assert.Equal(t, append(credentials, "nccl-debug", "no-ib", "nccl-ib", "no-transport-probe", "no-watch", "format"), names("env"))
	assert.Equal(t, []string{"json"}, names("explain"))
	assert.Equal(t, []string{"format", "fail-on"}, names("lint"))
	assert.Equal(t, []string{"root", "output"}, names("snapshot"))
	assert.Empty(t, names("version"))
	assert.Empty(t, names("demo"))
	assert.Subset(t, names("run"), []string{"on-degraded", "stop-grace", "checkpoint-signal", "misconfig-exit", "hang-after", "on-hang"})
	assert.NotContains(t, names("run"), "probe")
	assert.NotContains(t, names("run"), "json")
	for _, n := range []string{"hang-after", "on-hang"} {
		f, ok := Lookup("run", n)
		require.True(t, ok, n)
		assert.Equal(t, "NCCLRUN_"+strings.ToUpper(strings.ReplaceAll(n, "-", "_")), f.Env)
	}
	f, _ := Lookup("lint", "format")
	assert.Equal(t, "NCCLRUN_LINT_FORMAT", f.Env)
	f, _ = Lookup("env", "format")
	assert.Equal(t, "NCCLRUN_FORMAT", f.Env)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		command, args string
		flags         string // name=value ...
		rest, bad     string
	}{
		{"run", "--user 1000 --strict -- torchrun x", "user=1000 strict=true", "-- torchrun x", ""},
		{"run", "-user=1000 --strict=false torchrun x", "user=1000 strict=false", "torchrun x", ""},
		{"run", "--stop-grace 2m - x", "stop-grace=2m", "- x", ""},
		{"run", "--json x", "", "x", "--json"},
		{"run", "--user", "", "", "--user"},
		{"", "--json --root /r doctor", "json=true root=/r", "doctor", ""},
		{"snapshot", "-o x.tgz", "output=x.tgz", "", ""},
		{"version", "--root /r", "", "/r", "--root"},
	} {
		t.Run(tc.command+" "+tc.args, func(t *testing.T) {
			flags, rest, bad := Parse(tc.command, strings.Fields(tc.args))
			var got []string
			for _, a := range flags {
				got = append(got, a.Flag.Name+"="+a.Value)
			}
			assert.Equal(t, tc.flags, strings.Join(got, " "))
			assert.Equal(t, tc.rest, strings.Join(rest, " "))
			assert.Equal(t, tc.bad, bad)
		})
	}
}

// TestDocumented: docs/cli.md's flag table names every flag with its
// variable, and its command table every command's flags.
func TestDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	doc := string(b)
	for _, f := range Flags {
		if f.Commands[0] == "probe-mlock" {
			continue // hidden
		}
		assert.Contains(t, doc, "`--"+f.Name, f.Name)
		if f.Env != "" {
			assert.Contains(t, doc, "`"+f.Env+"`", f.Name)
		}
	}
}

// TestCheck: a Bool takes what strconv.ParseBool takes and a Duration a
// Go duration, as the flag parser checks them; a String with Words takes
// those, without case or surrounding blanks; another String's meaning is
// its command's.
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		flag, value string
		ok          bool
	}{
		{"quiet", "true", true}, {"quiet", "0", true}, {"quiet", "yes", false},
		{"stop-grace", "90s", true}, {"stop-grace", "1h30m", true}, {"stop-grace", "90", false}, {"stop-grace", "2 minutes", false},
		{"on-hang", "stop", true}, {"on-hang", " Warn ", true}, {"on-hang", "", true}, {"on-hang", "anything", false},
		{"on-degraded", "FAIL", true}, {"on-degraded", "stop", false},
		{"nccl-ib", "no", true}, {"nccl-ib", "maybe", false},
		{"nccl-debug", "info", true}, {"nccl-debug", "", false}, {"nccl-debug", "LOUD", false},
		{"checkpoint-signal", "anything", true},
	} {
		f, ok := Lookup("run", c.flag)
		require.True(t, ok, c.flag)
		assert.Equal(t, c.ok, f.Check(c.value) == nil, "--%s=%s", c.flag, c.value)
	}
}

// TestWord: a value means the first word of its group; the error lists
// the meanings as run says them.
func TestWord(t *testing.T) {
	f, ok := Lookup("run", "nccl-ib")
	require.True(t, ok)
	for in, want := range map[string]string{"on": "on", "YES": "on", "1": "on", " off": "off", "false": "off"} {
		got, err := f.Word(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	_, err := f.Word("maybe")
	assert.EqualError(t, err, `"maybe" is not on or off`)
	f, _ = Lookup("run", "nccl-debug")
	_, err = f.Word("loud")
	assert.EqualError(t, err, `"loud" is not VERSION, WARN, INFO, ABORT or TRACE`)
}

// TestHelpNamesWords: a flag of a few words says them in its help, as
// `warn|stop`, so that help and the table cannot disagree (--nccl-debug
// names its value LEVEL, NCCL's word).
func TestHelpNamesWords(t *testing.T) {
	n := 0
	for _, f := range Flags {
		if f.Words == nil || f.Name == "nccl-debug" {
			continue
		}
		var names []string
		for _, g := range f.Words {
			names = append(names, g[0])
		}
		assert.Contains(t, f.Usage, "`"+strings.Join(names, "|")+"`", "--%s", f.Name)
		assert.Contains(t, names, f.Default, "--%s: its default is one of its words", f.Name)
		n++
	}
	assert.Equal(t, 3, n)
}
