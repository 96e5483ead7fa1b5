package main

import "github.com/urfave/cli/v2"

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
func (f *cachedString) Names() []string      { return once(&f.names, f.StringFlag.Names) }
func (f *cachedBool) Names() []string        { return once(&f.names, f.BoolFlag.Names) }
func (f *cachedDuration) Names() []string    { return once(&f.names, f.DurationFlag.Names) }
func (f *cachedStringSlice) Names() []string { return once(&f.names, f.StringSliceFlag.Names) }

// once returns *names, set from compute the first time (the CLI runs on
// one goroutine).
func once(names *[]string, compute func() []string) []string {
	if *names == nil {
		*names = compute()
	}
	return *names
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
