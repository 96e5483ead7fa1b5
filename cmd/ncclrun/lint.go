package main

import (
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/printable"
	"github.com/ncclrun/ncclrun/lint"
)

// Exit statuses of lint (docs/contract.md): 0 no finding at or above
// --fail-on (default error), 1 such a finding, 2 usage or an input that
// could not be read or parsed.
const exitLintFinding = 1

const flagFailOn = "fail-on"

// cmdLint judges manifests: every input is checked, a bad one is one line
// on stderr and exit 2 whatever the others gave.
func cmdLint(c *cli.Context, e *env) error {
	format := c.String(flagFormat)
	switch format {
	case "text", "json", "sarif":
	default:
		return usagef("lint --format: %q is not text, json or sarif", format)
	}
	failOn := c.String(flagFailOn)
	if _, err := (lint.Report{}).FailsAt(failOn); err != nil {
		return usagef("lint --fail-on: %q is not error, warning or info", failOn)
	}
	paths := c.Args().Slice()
	if len(paths) == 0 {
		// No FILE reads stdin, as explain does (`helm template . | ncclrun
		// lint`), unless it is a terminal or a device: nobody types a
		// manifest, and lint would wait for one.
		if charDevice(e.stdin) {
			return usagef("lint needs a FILE, DIR or -: stdin is not a pipe or a file")
		}
		paths = []string{"-"}
	}
	if i := slices.Index(paths, "-"); i >= 0 && slices.Contains(paths[i+1:], "-") {
		return usagef("lint: - (stdin) given twice")
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
	// The inputs that could not be read are said whether or not the
	// report could be written.
	for _, ie := range rep.Errors {
		fprintf(e.stderr, "ncclrun: lint: %s\n", printable.String(ie.Error()))
	}
	if err = quietEPIPE(err); err != nil {
		return fmt.Errorf("write lint %s: %w", format, err)
	}
	fails, _ := rep.FailsAt(failOn)
	switch {
	case len(rep.Errors) > 0:
		return exitWith(ExitUsage)
	case fails:
		return exitWith(exitLintFinding)
	}
	return nil
}

// charDevice reports whether r is a terminal or another character device
// (/dev/null): not a stream of manifests.
func charDevice(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
