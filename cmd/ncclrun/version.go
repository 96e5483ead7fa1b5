package main

import (
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"
)

// cmdVersion prints versionLine.
func cmdVersion(c *cli.Context, e *env) error {
	if c.NArg() > 0 {
		return usagef("version takes no arguments")
	}
	fprintf(e.stdout, "%s\n", versionLine(version, commit))
	return nil
}

// versionLine is `ncclrun VERSION (commit COMMIT, GOVERSION OS/ARCH)`,
// with the commit left out where VERSION already names it (the Makefile's
// `git describe --always` is the commit itself in a tree without tags,
// COMMIT-dirty, or TAG-N-gCOMMIT) or it is not known.
func versionLine(version, commit string) string {
	build := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	if commit != "" && commit != "unknown" && !namesCommit(version, commit) {
		build = "commit " + commit + ", " + build
	}
	return "ncclrun " + version + " (" + build + ")"
}

// namesCommit reports whether a version from git describe names commit.
func namesCommit(version, commit string) bool {
	return version == commit || strings.HasPrefix(version, commit+"-") || strings.Contains(version, "-g"+commit)
}
