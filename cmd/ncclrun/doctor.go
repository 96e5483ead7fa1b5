package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/preflight"
)

func cmdDoctor(c *cli.Context, e *env) error {
	s, err := parseSettings(c)
	if err != nil {
		return err
	}
	if c.NArg() > 0 {
		return usagef("doctor takes no arguments (got %q)", c.Args().First())
	}
	opts := preflightOptions(s, e.environ, raiseLimits(s))
	// --user resolved once, as run does: the probe and preflight use the
	// same ids. One that does not resolve is left to preflight, which
	// reports it as a failed check.
	var user *launcher.User
	if s.user != "" && liveRoot(s.root) {
		if u, err := launcher.ResolveUser(s.user); err == nil {
			user = &u
			resolvedPlan(&opts, user)
		}
	}
	report := preflight.Run(c.Context, opts)
	printTreeWarnings(e.stderr, report)
	if s.probe > 0 {
		// Second pass: the probe child gets the credentials the first pass
		// says CMD will get (CAP_IPC_LOCK ambient or not).
		ambient := report.Command.Ambient
		opts.Probe = s.probe
		opts.Prober = func(size int64) error { return probeMlock(e, s, user, ambient, size) }
		report = preflight.Run(c.Context, opts)
	}
	if c.Bool(flagJSON) {
		if err := quietEPIPE(writeJSON(e.stdout, report)); err != nil {
			return fmt.Errorf("write doctor JSON: %w", err)
		}
	} else if err := quietEPIPE(report.WriteTable(e.stdout)); err != nil {
		return fmt.Errorf("write doctor table: %w", err)
	}
	if report.Failed() {
		return exitWith(ExitCheckFailed)
	}
	return nil
}

// probeMlock pins size bytes in a child with exactly the credentials CMD
// would get (pinProbe). It returns nil when the pin held, else why not.
func probeMlock(e *env, s settings, user *launcher.User, ambient bool, size int64) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find ncclrun's own binary: %w", err)
	}
	if user == nil && s.user != "" { // under --root, or a user preflight reports
		u, err := launcher.ResolveUser(s.user)
		if err != nil {
			return fmt.Errorf("start the probe: %w", err)
		}
		user = &u
	}
	return pinProbe(self, launcher.Config{Env: e.environ, User: user, AmbientIPCLock: ambient,
		DropCaps: s.dropCaps, Memlock: s.memlock}, size)
}
