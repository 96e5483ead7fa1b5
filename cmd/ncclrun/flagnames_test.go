package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// TestCachedFlagNames: every flag keeps its names, its type's other methods
// (help text) and its place, and a second Names returns the same slice.
func TestCachedFlagNames(t *testing.T) {
	plain, cached := newApp(&env{}), newApp(&env{})
	cacheFlagNames(cached)
	require.Len(t, cached.Commands, len(plain.Commands))
	for i, c := range cached.Commands {
		p := plain.Commands[i]
		require.Len(t, c.Flags, len(p.Flags), c.Name)
		for j, f := range c.Flags {
			assert.Equal(t, p.Flags[j].Names(), f.Names(), "%s flag %d", c.Name, j)
			assert.Equal(t, p.Flags[j].String(), f.String(), "%s flag %d help", c.Name, j)
			if n := f.Names(); len(n) > 0 {
				assert.Same(t, &n[0], &f.Names()[0], "%s flag %d computed once", c.Name, j)
			}
		}
	}
}

// TestBuildAppOnlyTheRunningCommand: the command that runs gets exactly
// newApp's flags, the others none; the app keeps the global flags (parsed
// before every command) unless the command parses them itself; args that
// select no command, or help, get every flag.
func TestBuildAppOnlyTheRunningCommand(t *testing.T) {
	names := func(fs []cli.Flag) (out []string) {
		for _, f := range fs {
			out = append(out, f.Names()...)
		}
		return out
	}
	full := newApp(&env{})
	require.NotEmpty(t, full.Flags)
	for _, c := range full.Commands {
		app := buildApp(&env{}, c.Name)
		hasGlobals := false
		for i, b := range app.Commands {
			if b.Name == c.Name {
				assert.Equal(t, names(c.Flags), names(b.Flags), c.Name)
				hasGlobals = len(b.Flags) >= len(full.Flags) && assert.ObjectsAreEqual(names(full.Flags), names(b.Flags)[:len(full.Flags)])
				continue
			}
			assert.Empty(t, b.Flags, "%s: %s", c.Name, full.Commands[i].Name)
		}
		if hasGlobals {
			assert.Empty(t, app.Flags, c.Name)
		} else {
			assert.Equal(t, names(full.Flags), names(app.Flags), c.Name)
		}
	}
	for _, args := range [][]string{{"ncclrun", "--help"}, {"ncclrun", "help", "run"}, {"ncclrun"}} {
		assert.Equal(t, "", flagsFor(args), args)
	}
	assert.Equal(t, "run", flagsFor(normalize([]string{"ncclrun", "--", "true"})))
	assert.Equal(t, "doctor", flagsFor(normalize([]string{"ncclrun", "--strict", "doctor"})))
}

// TestFlagNamesAsTheLibrary: the same names as cli.FlagNames, v1 forms and
// lines included.
func TestFlagNamesAsTheLibrary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		aliases []string
	}{
		{"root", nil}, {"kill-after", []string{"k"}}, {"", nil}, {"a, b", []string{"c d", ",", " "}},
		{"a,b\nc d", nil}, {"x ,\n,y\n", []string{"\n", "p\n q"}}, {"  lead", []string{"t  "}},
	} {
		assert.Equal(t, cli.FlagNames(tc.name, tc.aliases), flagNames(tc.name, tc.aliases), "%q %q", tc.name, tc.aliases)
	}
}
