package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/printable"
	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/preflight"
)

// cmdEnv prints the variables run would add to CMD's environment on this
// node, the transport probe's included (envProbe), never those already set
// (by the user or NCCL's configuration files).
//
// --format shell (default): `export NAME='value'  # reason`, sorted by name.
// --format json: {"NAME": {"value": "...", "reason": "..."}}, the same shape
// as env_added in run's --report.
func cmdEnv(c *cli.Context, e *env) error {
	s, err := parseSettings(c)
	if err != nil {
		return err
	}
	format := c.String(flagFormat)
	if format != "shell" && format != "json" {
		return usagef("--%s: %q is not shell or json", flagFormat, format)
	}
	if c.NArg() > 0 {
		return usagef("env takes no arguments (got %q)", c.Args().First())
	}
	report := preflight.Run(c.Context, preflightOptions(s, e.environ, raiseLimits(s)))
	printTreeWarnings(e.stderr, report)
	var hang []launcher.EnvVar
	if !s.noWatch { // --no-watch execs CMD in place: no hang capture
		hang = hangEnv(e.environ, envHangPlan())
	}
	_, added := s.composeEnv(e.environ, report, envProbe(s, e.environ, report), hang...)
	if format == "json" {
		return writeJSON(e.stdout, envMap(added))
	}
	var b bytes.Buffer
	for _, a := range added {
		fmt.Fprintf(&b, "export %s=%s", a.Name, shellQuote(a.Value))
		if a.Reason != "" {
			// A reason may name what preflight read (a device of a --root
			// tree): quoted as printable text, unlike the value, which the
			// shell needs as it is.
			b.WriteString("  # " + printable.String(strings.Join(strings.Fields(a.Reason), " ")))
		}
		b.WriteString("\n")
	}
	_, err = e.stdout.Write(b.Bytes())
	return err
}

// shellQuote quotes s for POSIX sh in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
