package preflight

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/caps"
	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// Capability numbers (include/uapi/linux/capability.h), from internal/caps.
const (
	capSetgid      = caps.SetGID
	capSetuid      = caps.SetUID
	capIPCLock     = caps.IPCLock
	capSysResource = caps.SysResource
)

// ErrMalformed is wrapped by the errors of the parsers of this package when
// the input does not have the kernel's format.
var ErrMalformed = errors.New("malformed")

// ErrUnsupported is returned by the live-system probes on systems other
// than Linux; the checks that need them report skip.
var ErrUnsupported = errors.New("live checks need Linux")

// procStatus is what preflight needs from /proc/<pid>/status
// (Documentation/filesystems/proc.rst, "Contents of the status fields").
type procStatus struct {
	UID, GID                int // effective ids
	Inh, Prm, Eff, Bnd, Amb uint64
	HasAmb                  bool // CapAmb exists (Linux >= 4.3)
	NoNewPrivs              bool
	HasNNP                  bool // NoNewPrivs exists (Linux >= 4.10)
	// NoRoot: SECBIT_NOROOT is set (prctl(2) on the live system only;
	// status files do not show securebits).
	NoRoot bool
	// NoAmbientRaise: SECBIT_NO_CAP_AMBIENT_RAISE is set (live only).
	NoAmbientRaise bool
}

// parseStatus parses the Uid, Gid, Cap* and NoNewPrivs lines of a status
// file. Uid, Gid, CapPrm, CapEff and CapBnd are required.
func parseStatus(r io.Reader) (procStatus, error) {
	var st procStatus
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		var err error
		switch key {
		case "Uid", "Gid":
			f := strings.Fields(val)
			if len(f) < 2 {
				return st, fmt.Errorf("%w: %s line %q", ErrMalformed, key, val)
			}
			n, perr := strconv.ParseUint(f[1], 10, 32)
			if perr != nil {
				return st, fmt.Errorf("%w: %s line %q: %v", ErrMalformed, key, val, perr)
			}
			if key == "Uid" {
				st.UID = int(n)
			} else {
				st.GID = int(n)
			}
		case "CapInh":
			st.Inh, err = caps.ParseMask(val)
		case "CapPrm":
			st.Prm, err = caps.ParseMask(val)
		case "CapEff":
			st.Eff, err = caps.ParseMask(val)
		case "CapBnd":
			st.Bnd, err = caps.ParseMask(val)
		case "CapAmb":
			st.Amb, err = caps.ParseMask(val)
			st.HasAmb = true
		case "NoNewPrivs":
			switch val {
			case "0":
			case "1":
				st.NoNewPrivs = true
			default:
				return st, fmt.Errorf("%w: NoNewPrivs %q", ErrMalformed, val)
			}
			st.HasNNP = true
		default:
			continue
		}
		if err != nil {
			return st, fmt.Errorf("%w: %s: %w", ErrMalformed, key, err)
		}
		seen[key] = true
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("read status: %w", err)
	}
	for _, k := range []string{"Uid", "Gid", "CapPrm", "CapEff", "CapBnd"} {
		if !seen[k] {
			return st, fmt.Errorf("%w: no %s line", ErrMalformed, k)
		}
	}
	return st, nil
}

// CapSets are the five capability sets of one capability, as booleans
// (capabilities.details.ipc_lock and .sys_resource).
type CapSets = pinrule.CapSets

func (st procStatus) sets(c int) CapSets {
	return CapSets{
		Effective:   caps.Has(st.Eff, c),
		Permitted:   caps.Has(st.Prm, c),
		Inheritable: caps.Has(st.Inh, c),
		Bounding:    caps.Has(st.Bnd, c),
		Ambient:     caps.Has(st.Amb, c),
	}
}

// parseMemlockLimits finds "Max locked memory" in /proc/<pid>/limits
// (fs/proc/base.c proc_pid_limits) and returns its soft and hard values.
func parseMemlockLimits(r io.Reader) (Rlimit, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return Rlimit{}, fmt.Errorf("%w: limits line %q", ErrMalformed, line)
		}
		soft, err1 := rlimit.ParseProc(f[0])
		hard, err2 := rlimit.ParseProc(f[1])
		if err := errors.Join(err1, err2); err != nil {
			return Rlimit{}, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return Rlimit{Soft: soft, Hard: hard}, nil
	}
	if err := sc.Err(); err != nil {
		return Rlimit{}, fmt.Errorf("read limits: %w", err)
	}
	return Rlimit{}, fmt.Errorf("%w: no \"Max locked memory\" line", ErrMalformed)
}

// parseUIDMap reports whether a uid_map (user_namespaces(7)) is something
// other than the initial namespace's identity map "0 0 4294967295".
func parseUIDMap(b []byte) (userns bool, err error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return true, nil // a namespace whose map was never written
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			return false, fmt.Errorf("%w: uid_map line %q", ErrMalformed, l)
		}
		for _, x := range f {
			if _, err := strconv.ParseUint(x, 10, 32); err != nil {
				return false, fmt.Errorf("%w: uid_map line %q", ErrMalformed, l)
			}
		}
	}
	if len(lines) == 1 {
		f := strings.Fields(lines[0])
		if f[0] == "0" && f[1] == "0" && f[2] == "4294967295" {
			return false, nil
		}
	}
	return true, nil
}

// passwdEntry is one line of passwd(5) or group(5): name, id and, for
// passwd, the primary gid and home directory.
type passwdEntry struct {
	Name string
	ID   int
	GID  int
	Home string
}

// parsePasswd parses passwd(5) (group=false) or group(5) (group=true),
// skipping malformed lines.
func parsePasswd(b []byte, group bool) []passwdEntry {
	var out []passwdEntry
	for _, l := range bytes.Split(b, []byte("\n")) {
		f := strings.Split(string(l), ":")
		if len(f) < 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		id, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		e := passwdEntry{Name: f[0], ID: int(id), GID: -1}
		if !group && len(f) >= 6 {
			if g, err := strconv.ParseUint(f[3], 10, 32); err == nil {
				e.GID = int(g)
			}
			e.Home = f[5]
		}
		out = append(out, e)
	}
	return out
}

// resolveUser resolves a --user value USER[:GROUP] (names or numbers) with
// the passwd and group files under root, as gosu does: a user name gives
// its primary group unless GROUP is given; a number not in passwd gives
// gid 0 unless GROUP is given.
func (s sysRoot) resolveUser(spec string) (uid, gid int, err error) {
	// (uid_t)-1 and (gid_t)-1 name nobody (the set*id calls read them as
	// "leave unchanged"): run refuses them (launcher.ResolveUser), so
	// doctor does not judge a CMD that would run as them.
	const noID = 1<<32 - 1
	switch uid, gid, err = s.resolveUserIDs(spec); {
	case err != nil:
		return 0, 0, err
	case uid == noID:
		return 0, 0, fmt.Errorf("user %q: uid %d is (uid_t)-1, not a user", spec, uid)
	case gid == noID:
		return 0, 0, fmt.Errorf("user %q: gid %d is (gid_t)-1, not a group", spec, gid)
	}
	return uid, gid, nil
}

func (s sysRoot) resolveUserIDs(spec string) (uid, gid int, err error) {
	u, g, hasGroup := strings.Cut(spec, ":")
	if u == "" {
		return 0, 0, fmt.Errorf("%w: user %q: empty user", ErrMalformed, spec)
	}
	passwd, perr := s.readFile("etc/passwd")
	users := parsePasswd(passwd, false)
	gid = 0
	if n, err := strconv.ParseUint(u, 10, 32); err == nil {
		uid = int(n)
		for _, e := range users {
			if e.ID == uid && e.GID >= 0 {
				gid = e.GID
				break
			}
		}
	} else {
		found := false
		for _, e := range users {
			if e.Name == u {
				uid, gid, found = e.ID, e.GID, true
				break
			}
		}
		if !found {
			if perr != nil {
				return 0, 0, fmt.Errorf("user %q: %w", u, perr)
			}
			return 0, 0, fmt.Errorf("user %q: no such user in etc/passwd", u)
		}
		if gid < 0 {
			gid = 0
		}
	}
	if !hasGroup || g == "" {
		return uid, gid, nil
	}
	if n, err := strconv.ParseUint(g, 10, 32); err == nil {
		return uid, int(n), nil
	}
	groups, gerr := s.readFile("etc/group")
	for _, e := range parsePasswd(groups, true) {
		if e.Name == g {
			return uid, e.ID, nil
		}
	}
	if gerr != nil {
		return 0, 0, fmt.Errorf("group %q: %w", g, gerr)
	}
	return 0, 0, fmt.Errorf("group %q: no such group in etc/group", g)
}
