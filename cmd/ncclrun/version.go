package main

import (
	"runtime"

	"github.com/urfave/cli/v2"
)

// cmdVersion prints `ncclrun VERSION (commit COMMIT, GOVERSION OS/ARCH)`.
func cmdVersion(c *cli.Context, e *env) error {
	if c.NArg() > 0 {
		return usagef("version takes no arguments")
	}
	fprintf(e.stdout, "ncclrun %s (commit %s, %s %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
