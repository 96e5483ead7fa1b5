package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/cmdline"
)

// TestEachCommandOwnsItsFlags: the app's commands are internal/cmdline's,
// each with exactly the flags the table gives it (and the variables), and
// the app itself has none of its own.
func TestEachCommandOwnsItsFlags(t *testing.T) {
	app := newApp(&env{})
	assert.Empty(t, app.Flags)
	var names []string
	for _, c := range app.Commands {
		names = append(names, c.Name)
		var got, want []string
		for _, f := range c.Flags {
			got = append(got, f.Names()...)
			if d, ok := f.(cli.DocGenerationFlag); ok {
				got = append(got, d.GetEnvVars()...)
			}
		}
		for _, f := range cmdline.For(c.Name) {
			want = append(want, f.Names()...)
			if f.Env != "" {
				want = append(want, f.Env)
			}
		}
		assert.Equal(t, want, got, c.Name)
	}
	assert.Equal(t, cmdline.Commands, names)
	for _, c := range []string{"version", "demo", "fake-nccl"} {
		assert.Empty(t, cmdline.For(c), c)
	}
}
