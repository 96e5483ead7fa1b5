package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// urfave/cli computes a flag's names (Names) with a regexp replace on every
// call, and it looks flags up by name through them: each IsSet, and at every
// parse, for every flag, an IsSet of each of its names (runFlagActions). With
// the ~16 global flags that is hundreds of regexp runs per start (~0.3 ms of
// `ncclrun run -- true`, docs/performance.md). cacheFlagNames gives every
// flag of app and of its commands a Names that returns the slice computed
// once; everything else is the flag's own (embedded), so parsing and help are
// unchanged. A flag type not listed here keeps the library's Names.
func cacheFlagNames(app *cli.App) {
	app.Flags = cachedNames(app.Flags)
	for _, c := range app.Commands {
		c.Flags = cachedNames(c.Flags)
	}
}

type (
	cachedString struct {
		*cli.StringFlag
		names []string
	}
	cachedBool struct {
		*cli.BoolFlag
		names []string
	}
	cachedDuration struct {
		*cli.DurationFlag
		names []string
	}
	cachedStringSlice struct {
		*cli.StringSliceFlag
		names []string
	}
)

// Each Names computes the library's once, on first use: a start parses one
// command's flags, so the other commands' are never computed.
func (f *cachedString) Names() []string      { return once(&f.names, f.Name, f.Aliases) }
func (f *cachedBool) Names() []string        { return once(&f.names, f.Name, f.Aliases) }
func (f *cachedDuration) Names() []string    { return once(&f.names, f.Name, f.Aliases) }
func (f *cachedStringSlice) Names() []string { return once(&f.names, f.Name, f.Aliases) }

// once returns *names, set from flagNames the first time (the CLI runs on
// one goroutine).
func once(names *[]string, name string, aliases []string) []string {
	if *names == nil {
		*names = flagNames(name, aliases)
	}
	return *names
}

// flagNames is the library's cli.FlagNames without its regular expression
// (`[, ]+.*` replaced by nothing in the name and each alias: the v1 form
// "name, n" cut to "name"): a start computes ~35 names, and the regexp
// runs were ~8 % of the instructions of `ncclrun version`.
func flagNames(name string, aliases []string) []string {
	out := make([]string, 0, 1+len(aliases))
	for _, part := range append([]string{name}, aliases...) {
		out = append(out, cutV1(part))
	}
	return out
}

// cutV1 removes each run from a comma or space to the end of its line.
func cutV1(s string) string {
	i := strings.IndexAny(s, ", ")
	if i < 0 {
		return s
	}
	var b strings.Builder
	for i >= 0 {
		b.WriteString(s[:i])
		s = s[i:]
		if j := strings.IndexByte(s, '\n'); j >= 0 {
			s = s[j:]
		} else {
			s = ""
		}
		i = strings.IndexAny(s, ", ")
	}
	b.WriteString(s)
	return b.String()
}

func cachedNames(fs []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(fs))
	for i, f := range fs {
		switch t := f.(type) {
		case *cli.StringFlag:
			out[i] = &cachedString{StringFlag: t}
		case *cli.BoolFlag:
			out[i] = &cachedBool{BoolFlag: t}
		case *cli.DurationFlag:
			out[i] = &cachedDuration{DurationFlag: t}
		case *cli.StringSliceFlag:
			out[i] = &cachedStringSlice{StringSliceFlag: t}
		default:
			out[i] = f
		}
	}
	return out
}
