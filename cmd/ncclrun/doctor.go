package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/units"
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
	opts := preflightOptions(s, e.environ)
	report := preflight.Run(c.Context, opts)
	if s.probe > 0 {
		// Second pass: the probe child gets the credentials the first pass
		// says CMD will get (CAP_IPC_LOCK ambient or not).
		ambient := report.Command.Ambient
		prober := func(size int64) error { return probeMlock(c.Context, e, s, ambient, size) }
		switch {
		case setProber(&opts, prober):
			opts.Probe = s.probe
			report = preflight.Run(c.Context, opts)
		case liveRoot(s.root):
			report = applyProbe(report, s.probe, prober(s.probe))
		default:
			report = applyProbeSkipped(report)
		}
	}
	if c.Bool(flagJSON) {
		if err := writeJSON(e.stdout, report); err != nil {
			return fmt.Errorf("write doctor JSON: %w", err)
		}
	} else if err := writeDoctorTable(e.stdout, report); err != nil {
		return fmt.Errorf("write doctor table: %w", err)
	}
	if report.Failed() {
		return exitWith(ExitCheckFailed)
	}
	return nil
}

// probeMlock pins size bytes in `ncclrun probe-mlock SIZE`, started through
// the launcher with exactly the credentials CMD would get. It returns nil
// when the pin held, else the child's reason.
func probeMlock(_ context.Context, e *env, s settings, ambient bool, size int64) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find ncclrun's own binary: %w", err)
	}
	args := []string{"probe-mlock"}
	if ambient {
		args = append(args, "--ambient")
	}
	args = append(args, strconv.FormatInt(size, 10))
	var errBuf bytes.Buffer
	res, err := launcher.Run(launcher.Config{
		Path: self, Args: args, Env: e.environ,
		Stdin: bytes.NewReader(nil), Stdout: io.Discard, Stderr: &errBuf,
		User:           s.user,
		AmbientIPCLock: ambient,
		DropCaps:       s.dropCaps,
		Memlock:        s.launcherMemlock(),
		KillAfter:      time.Second,
	})
	if err != nil {
		return fmt.Errorf("start the probe: %w", err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(errBuf.String()), "ncclrun: "))
		if msg == "" {
			msg = fmt.Sprintf("probe exited with status %d", res.ExitCode)
		}
		return errors.New(msg)
	}
	return nil
}

// applyProbe records a probe's outcome in the memlock check; a failed pin
// fails the check. Used only while preflight.Options has no Prober (see
// adapters.go).
func applyProbe(r preflight.Report, size int64, perr error) preflight.Report {
	return editCheck(r, preflight.IDMemlock, func(c *preflight.Result) {
		c.Details["probe_bytes"] = size
		c.Details["probe_ok"] = perr == nil
		if perr == nil {
			return
		}
		c.Details["probe_error"] = perr.Error()
		c.Status = preflight.Fail
		c.Summary = fmt.Sprintf("CMD could not pin %s with mlock: %v", units.FormatSize(size), perr)
	})
}

// applyProbeSkipped records that --probe was not run (a --root snapshot).
func applyProbeSkipped(r preflight.Report) preflight.Report {
	return editCheck(r, preflight.IDMemlock, func(c *preflight.Result) {
		c.Details["probe"] = "skipped: --root reads a snapshot, probes need the live system"
	})
}

// editCheck applies f to a copy of the check with id, adding the check
// when preflight did not report it.
func editCheck(r preflight.Report, id string, f func(*preflight.Result)) preflight.Report {
	checks := append([]preflight.Result(nil), r.Checks...)
	i := -1
	for j := range checks {
		if checks[j].ID == id {
			i = j
		}
	}
	if i < 0 {
		checks = append(checks, preflight.Result{ID: id, Status: preflight.OK, Summary: "probe only"})
		i = len(checks) - 1
	}
	d := make(map[string]any, len(checks[i].Details)+3)
	for k, v := range checks[i].Details {
		d[k] = v
	}
	checks[i].Details = d
	f(&checks[i])
	r.Checks = checks
	return r
}
