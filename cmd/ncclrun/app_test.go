package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

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
