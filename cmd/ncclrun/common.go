package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/cmdline"
	"github.com/ncclrun/ncclrun/internal/lazy"
	"github.com/ncclrun/ncclrun/internal/rlimit"
	"github.com/ncclrun/ncclrun/launcher"
	"github.com/ncclrun/ncclrun/preflight"
)

// settings are the flags of run, doctor or env, parsed and checked once.
// A flag the command does not own keeps its default: the zero value, but
// WARN for ncclDebug and true for ncclIB.
type settings struct {
	root       string
	strict     bool
	noWatch    bool
	report     string
	termLog    string
	ncclDebug  string
	memlock    *rlimit.Limit
	dropCaps   []string
	quiet      bool
	user       string
	killAfter  time.Duration
	minMemlock int64
	probe      int64
	noIB       bool
	ncclIB     bool
	noPTY      bool
	// noTransportProbe turns the transport probe off (probe.go).
	noTransportProbe bool
	ff               failFast     // --on-degraded, --stop-grace, --misconfig-exit (failfast.go)
	hang             hangSettings // --hang-after, --on-hang (hang.go)
}

var userRE = &lazy.Regexp{Expr: `^[A-Za-z0-9_.][A-Za-z0-9_.-]*(:[A-Za-z0-9_.][A-Za-z0-9_.-]*)?$`}

// checkRoot refuses a --root that is not a directory: a typo or a
// snapshot's tarball not yet extracted would otherwise be read as an
// empty tree, and doctor would judge a node it never read.
func checkRoot(root string) error {
	if liveRoot(root) {
		return nil
	}
	if fi, err := os.Stat(root); err == nil && fi.IsDir() {
		return nil
	}
	if strings.HasSuffix(root, ".tar.gz") || strings.HasSuffix(root, ".tgz") {
		return usagef("--%s %q is not a directory (extract the snapshot first: tar xzf FILE)", flagRoot, root)
	}
	return usagef("--%s %q is not a directory", flagRoot, root)
}

// wordFlag is the row of flag name, which takes one of a few words, that
// the running command owns.
func wordFlag(c *cli.Context, name string) cmdline.Flag {
	f, ok := cmdline.Lookup(c.Command.Name, name)
	if !ok || f.Words == nil {
		panic(fmt.Sprintf("internal/cmdline: %s owns no --%s of a few words", c.Command.Name, name))
	}
	return f
}

// ownWord is what the value of flag name means among the words it takes
// (internal/cmdline's Words); another value is a usage error.
func ownWord(c *cli.Context, name string) (string, error) {
	f := wordFlag(c, name)
	w, err := f.Word(c.String(name))
	if err != nil {
		return "", usagef("--%s: %v", name, err)
	}
	return w, nil
}

// parseSettings reads and validates the flags the running command owns
// (internal/cmdline); every mistake is a usage error naming the flag.
func parseSettings(c *cli.Context) (settings, error) {
	s := settings{ncclDebug: "WARN", ncclIB: true}
	owns := func(name string) bool {
		_, ok := cmdline.Lookup(c.Command.Name, name)
		return ok
	}
	var err error
	if owns(flagRoot) {
		if s.root = c.String(flagRoot); checkRoot(s.root) != nil {
			return s, checkRoot(s.root)
		}
	}
	if owns(flagUser) {
		if s.user = c.String(flagUser); s.user != "" && !userRE.Get().MatchString(s.user) {
			return s, usagef("--%s: %q is not USER[:GROUP]", flagUser, s.user)
		}
	}
	if owns(flagDropCap) {
		if s.dropCaps, err = parseDropCaps(c.StringSlice(flagDropCap)); err != nil {
			return s, err
		}
	}
	if v := c.String(flagMemlock); owns(flagMemlock) && v != "" {
		l, err := rlimit.Parse(v)
		if err != nil {
			return s, usagef("--%s: %v", flagMemlock, err)
		}
		s.memlock = &l
	}
	if owns(flagMinMemlock) {
		if s.minMemlock, err = bytesFlag(c, flagMinMemlock); err != nil {
			return s, err
		}
	}
	if owns(flagProbe) {
		if s.probe, err = bytesFlag(c, flagProbe); err != nil {
			return s, err
		}
	}
	if owns(flagNCCLDebug) {
		if s.ncclDebug = strings.TrimSpace(c.String(flagNCCLDebug)); s.ncclDebug == "" {
			return s, usagef("--%s: empty level (want e.g. WARN, INFO, TRACE)", flagNCCLDebug)
		}
		f := wordFlag(c, flagNCCLDebug)
		if _, err := f.Word(s.ncclDebug); err != nil {
			return s, usagef("--%s: %q is not a level NCCL knows (%s); NCCL would print nothing", flagNCCLDebug, s.ncclDebug, f.Meanings())
		}
	}
	if owns(flagNCCLIB) {
		w, err := ownWord(c, flagNCCLIB)
		if err != nil {
			return s, err
		}
		s.ncclIB = w == "on"
	}
	s.noIB, s.noTransportProbe, s.noWatch = c.Bool(flagNoIB), c.Bool(flagNoTransportProbe), c.Bool(flagNoWatch)
	if c.Command.Name != "run" {
		return s, nil
	}
	s.strict, s.quiet, s.noPTY = c.Bool(flagStrict), c.Bool(flagQuiet), c.Bool(flagNoPTY)
	s.report, s.termLog = c.String(flagReport), c.String(flagTerminationLog)
	if s.killAfter = c.Duration(flagKillAfter); s.killAfter < 0 {
		return s, usagef("--%s: %v is negative", flagKillAfter, s.killAfter)
	}
	if s.ff, err = parseFailFast(c); err != nil {
		return s, err
	}
	if s.hang, err = parseHang(c); err != nil {
		return s, err
	}
	return s, nil
}

// parseDropCaps reads --drop-cap's values (each a comma list) as
// canonical capability names.
func parseDropCaps(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			c, err := caps.Parse(name)
			if err != nil {
				return nil, usagef("--%s: unknown capability %q", flagDropCap, name)
			}
			out = append(out, caps.Name(c))
		}
	}
	return out, nil
}

// plan is what the launcher will do to CMD, for preflight.
func (s settings) plan() preflight.Plan {
	return preflight.Plan{User: s.user, DropCaps: s.dropCaps, Memlock: s.memlock}
}

// minMemlockOrDefault is --min-memlock with preflight's documented default.
func (s settings) minMemlockOrDefault() int64 {
	if s.minMemlock > 0 {
		return s.minMemlock
	}
	return preflight.DefaultMinMemlock
}

// envAdds are the variables run would add, before ComposeEnv drops those
// already set: NCCL_DEBUG (the transport probe's variables in its place
// when transport holds them), NCCL_IB_DISABLE with --no-ib, and
// preflight's proven NCCL_IB_* values unless --nccl-ib=off.
func (s settings) envAdds(r preflight.Report, transport []launcher.EnvVar) []launcher.EnvVar {
	adds := []launcher.EnvVar{{
		Name: "NCCL_DEBUG", Value: s.ncclDebug,
		Reason: "so that NCCL prints its failures at all (ncclrun diagnoses them from the output)",
	}}
	if len(transport) > 0 {
		adds = append([]launcher.EnvVar(nil), transport...) // NCCL_DEBUG=INFO into a private file
	}
	if s.noIB && s.ncclIB {
		adds = append(adds, launcher.EnvVar{Name: "NCCL_IB_DISABLE", Value: "1", Reason: "--no-ib"})
	}
	if s.ncclIB {
		for _, sg := range preflight.SuggestEnv(r) {
			if s.noIB && strings.HasPrefix(sg.Name, "NCCL_IB_") {
				continue // IB is off: no other IB setting matters
			}
			adds = append(adds, launcher.EnvVar{Name: sg.Name, Value: sg.Value, Reason: sg.Reason})
		}
	}
	return adds
}

// composeEnv is the environment CMD gets and the variables added to it;
// transport are the transport probe's variables (nil: the probe is off).
func (s settings) composeEnv(base []string, r preflight.Report, transport []launcher.EnvVar, extra ...launcher.EnvVar) ([]string, []launcher.EnvVar) {
	env, added := launcher.ComposeEnv(base, append(s.envAdds(r, transport), extra...), r.NCCLConf)
	sort.Slice(added, func(i, j int) bool { return added[i].Name < added[j].Name })
	return env, added
}

// fileExists reports whether p names an existing file of any kind.
func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
