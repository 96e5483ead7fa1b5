package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/lint"
)

// Exit statuses of lint (docs/contract.md): 0 no error finding, 1 an error
// finding, 2 usage or an input that could not be read or parsed.
const exitLintFinding = 1

func lintFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: flagFormat, Usage: "`text|json|sarif`", Value: "text", EnvVars: []string{envName("lint-format")}},
	}
}

// cmdLint judges manifests: every input is checked, a bad one is one line
// on stderr and exit 2 whatever the others gave.
func cmdLint(c *cli.Context, e *env) error {
	format := c.String(flagFormat)
	switch format {
	case "text", "json", "sarif":
	default:
		return usagef("lint --format: %q is not text, json or sarif", format)
	}
	paths := c.Args().Slice()
	if len(paths) == 0 {
		return usagef("lint needs a FILE, DIR or - (stdin)")
	}
	rep := lint.Paths(paths, e.stdin)
	var err error
	switch format {
	case "json":
		err = lint.WriteJSON(e.stdout, rep)
	case "sarif":
		err = lint.WriteSARIF(e.stdout, rep, version)
	default:
		err = lint.WriteText(e.stdout, rep)
	}
	if err != nil {
		return fmt.Errorf("write lint %s: %w", format, err)
	}
	for _, ie := range rep.Errors {
		fprintf(e.stderr, "ncclrun: lint: %v\n", ie)
	}
	switch {
	case len(rep.Errors) > 0:
		return exitWith(ExitUsage)
	case rep.HasError():
		return exitWith(exitLintFinding)
	}
	return nil
}
