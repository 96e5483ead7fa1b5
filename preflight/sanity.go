package preflight

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/ncclrun/ncclrun/internal/lazy"
	"github.com/ncclrun/ncclrun/internal/rlimit"
)

// NCCLVersion is an NCCL release, as preflight learns it from the library
// on disk. The zero value means it could not be learnt.
type NCCLVersion struct {
	Major, Minor, Patch int
	// From is where it was read: a file name, or a file whose contents
	// hold NCCL's version string.
	From string
}

// Known reports whether the version was found.
func (v NCCLVersion) Known() bool { return v.Major > 0 }

// Before reports whether v is older than major.minor.
func (v NCCLVersion) Before(major, minor int) bool {
	return v.Major < major || v.Major == major && v.Minor < minor
}

func (v NCCLVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// ncclLibDirs are where NCCL's packages (deb, rpm, tarball, the CUDA
// containers) put libnccl.so, relative to the root; LD_LIBRARY_PATH's
// directories are looked at first.
var ncclLibDirs = []string{"usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib/powerpc64le-linux-gnu", "usr/lib64", "usr/lib",
	"usr/local/lib", "usr/local/lib64", "usr/local/cuda/lib64", "usr/local/nccl/lib", "opt/nccl/lib", "lib/x86_64-linux-gnu", "lib64", "lib"}

// maxLibScan bounds the bytes of a libnccl.so read for the version string
// when no file name carries the version (a pip wheel's libnccl.so.2).
const maxLibScan = 64 << 20

var libVersionName = &lazy.Regexp{Expr: `^libnccl\.so\.(\d+)\.(\d+)\.(\d+)$`}

// ncclVersion learns NCCL's version from the first library directory
// holding libnccl.so*: a libnccl.so.X.Y.Z name, else "NCCL version X.Y.Z"
// inside the libnccl.so* it finds, read up to maxLibScan bytes. On the
// live system a directory that is one already listed (lib and usr/lib
// under a merged /usr: the same device and inode) is not listed again:
// listing it again would find the same names.
func ncclVersion(s sysRoot, env map[string]string) NCCLVersion {
	var dirs []string
	for _, d := range strings.Split(env["LD_LIBRARY_PATH"], ":") {
		if d = path.Clean("/" + d); d != "/" && strings.HasPrefix(d, "/") {
			dirs = append(dirs, strings.TrimPrefix(d, "/"))
		}
	}
	dirs = append(dirs, ncclLibDirs...)
	seen := map[string]bool{}
	var listed []os.FileInfo // live: the directories listed so far
	isLib := func(n string) bool { return strings.HasPrefix(n, "libnccl.so") }
next:
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		if s.live {
			fi, err := os.Stat(s.path(d))
			if err != nil {
				continue // listing it fails too
			}
			for _, l := range listed {
				if os.SameFile(fi, l) {
					continue next
				}
			}
			listed = append(listed, fi)
		}
		names, err := s.list(d, isLib)
		if err != nil || len(names) == 0 {
			continue
		}
		for _, n := range names {
			if m := libVersionName.Get().FindStringSubmatch(n); m != nil {
				return versionOf(m[1:], d+"/"+n)
			}
		}
		for _, n := range names {
			if v, ok := scanLibVersion(s, d+"/"+n); ok {
				return v
			}
		}
	}
	return NCCLVersion{}
}

func versionOf(parts []string, from string) NCCLVersion {
	a, _ := strconv.Atoi(parts[0])
	b, _ := strconv.Atoi(parts[1])
	c, _ := strconv.Atoi(parts[2])
	return NCCLVersion{Major: a, Minor: b, Patch: c, From: from}
}

// scanLibVersion looks for "NCCL version X.Y.Z" in the first maxLibScan
// bytes of rel, reading in chunks (a library is hundreds of MiB; only
// regular files are opened under a tree).
func scanLibVersion(s sysRoot, rel string) (NCCLVersion, bool) {
	f, err := s.open(rel)
	if err != nil {
		return NCCLVersion{}, false
	}
	defer f.Close()
	v, ok := findVersionString(io.LimitReader(f, maxLibScan))
	if ok {
		v.From = rel + " (its version string)"
	}
	return v, ok
}

var versionString = &lazy.Regexp{Expr: `NCCL version (\d+)\.(\d+)\.(\d+)`}

// findVersionString reads r in 1 MiB chunks, keeping the tail of each so a
// string split between two is still found.
func findVersionString(r io.Reader) (NCCLVersion, bool) {
	const chunk, keep = 1 << 20, 64
	buf := make([]byte, 0, chunk+keep)
	tmp := make([]byte, chunk)
	for {
		n, err := r.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if m := versionString.Get().FindSubmatch(buf); m != nil {
			return versionOf([]string{string(m[1]), string(m[2]), string(m[3])}, ""), true
		}
		if len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
		if err != nil {
			return NCCLVersion{}, false
		}
	}
}

// sanityProblem is one warning of the env-sanity check.
type sanityProblem struct {
	Variable string `json:"variable"`
	Problem  string `json:"problem"`
	Fix      string `json:"fix"`
}

// sanityInput is what the env-sanity check looks at besides the tree.
type sanityInput struct {
	env  map[string]string
	kind Platform
	uid  int // CMD's uid
	gpus int
	// ranks and ranksFrom: how many ranks CMD starts as its arguments
	// say (Options.Ranks), 0 unknown.
	ranks     int
	ranksFrom string
}

// versionUnknown is what the env-sanity check assumes when NCCL's version
// is not found.
const versionUnknown = "NCCL's version was not found (no libnccl.so.X.Y.Z, or no version string in a libnccl.so, under LD_LIBRARY_PATH or the usual library directories)"

// checkSanity warns about settings that break NCCL in ways no other check
// sees: an unlimited stack limit, a shared NCCL_DEBUG_FILE, a missing
// NCCL_TOPO_FILE, an NCCL_IB_GID_INDEX without a GID, logind's RemoveIPC,
// and socket interfaces that NCCL and Gloo choose apart. Where NCCL's
// version decides, it is read from the library on disk; where it cannot
// be, the summary says what is assumed. version gives ncclVersion's answer;
// with onDemand it is asked only when a rule's verdict depends on it, and
// the details report it only then.
func checkSanity(s sysRoot, in sanityInput, version func() NCCLVersion, onDemand bool) (Result, NCCLVersion) {
	var ver NCCLVersion
	asked := false
	get := func() NCCLVersion {
		if !asked {
			ver, asked = version(), true
		}
		return ver
	}
	if !onDemand {
		get()
	}
	var ps []sanityProblem
	ps = append(ps, stackProblem(s, get)...)
	ps = append(ps, debugFileProblem(in)...)
	ps = append(ps, topoFileProblem(s, in.env)...)
	ps = append(ps, gidIndexProblem(s, in.env, get)...)
	ps = append(ps, removeIPCProblem(s, in)...)
	ps = append(ps, ifnameProblem(in.env)...)
	d := map[string]any{}
	switch {
	case !asked:
	case ver.Known():
		d["nccl_version"], d["nccl_version_from"] = ver.String(), ver.From
	default:
		d["nccl_version"] = nil
		d["assumed"] = versionUnknown + ": the rules for NCCL before 2.28 (stack) and 2.21 (GID index) apply"
	}
	if len(ps) == 0 {
		sum := "No known trap in RLIMIT_STACK, NCCL_DEBUG_FILE, NCCL_TOPO_FILE, NCCL_IB_GID_INDEX, logind's RemoveIPC or the socket interfaces"
		if ver.Known() {
			sum += " (NCCL " + ver.String() + ")"
		}
		return Result{ID: IDEnvSanity, Status: OK, Summary: sum, Details: d}, ver
	}
	d["problems"] = ps
	var sums, fixes []string
	for _, p := range ps {
		sums, fixes = append(sums, p.Problem), append(fixes, p.Fix)
	}
	return Result{ID: IDEnvSanity, Status: Warn, Summary: strings.Join(sums, "; "), Fix: strings.Join(fixes, "; "), Details: d}, ver
}

// stackProblem: with RLIMIT_STACK unlimited, glibc gives a new thread its
// 2 MiB default stack, and NCCL before 2.28, which does not size its
// threads' stacks, can overflow it in the topology graph search.
func stackProblem(s sysRoot, version func() NCCLVersion) []sanityProblem {
	if lim, ok := stackLimit(s); !ok || lim.Soft != Unlimited {
		return nil
	}
	ver := version()
	if ver.Known() && !ver.Before(2, 28) {
		return nil
	}
	which := "NCCL " + ver.String() + " (before 2.28)"
	if !ver.Known() {
		which = "NCCL before 2.28 (assumed: " + versionUnknown + ")"
	}
	return []sanityProblem{{Variable: "RLIMIT_STACK",
		Problem: "RLIMIT_STACK is unlimited: glibc then gives each new thread a 2 MiB stack, and " + which + " can crash with a stack overflow in its topology graph search",
		Fix:     "start the job with a finite stack limit (`ulimit -s 8192`; Docker `--ulimit stack=8388608`; Slurm passes on the submitting shell's limit, or set `PropagateResourceLimitsExcept=STACK`), or use NCCL >= 2.28"}}
}

// stackLimit is RLIMIT_STACK: getrlimit(2) on the live system, where
// proc/self/limits says the same at the cost of the kernel writing out
// every limit; the file's "Max stack size" line under any other root.
func stackLimit(s sysRoot) (Rlimit, bool) {
	if s.live {
		l, err := liveStack()
		return l, err == nil
	}
	b, err := s.readFile("proc/self/limits")
	if err != nil {
		return Rlimit{}, false
	}
	return parseLimitLine(b, "Max stack size")
}

// parseLimitLine finds a line of /proc/<pid>/limits by its name.
func parseLimitLine(b []byte, name string) (Rlimit, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return Rlimit{}, false
		}
		soft, err1 := rlimit.ParseProc(f[0])
		hard, err2 := rlimit.ParseProc(f[1])
		if errors.Join(err1, err2) != nil {
			return Rlimit{}, false
		}
		return Rlimit{Soft: soft, Hard: hard}, true
	}
	return Rlimit{}, false
}

// severalRanks says whether more than one rank may write NCCL_DEBUG_FILE on
// this node: several GPUs, CMD that starts several ranks (torchrun
// --nproc-per-node, mpirun -np), or a launcher's world or local size over 1.
func severalRanks(in sanityInput) (bool, string) {
	if in.ranks > 1 {
		return true, "CMD starts several ranks: " + in.ranksFrom
	}
	if in.gpus > 1 {
		return true, fmt.Sprintf("%d GPUs", in.gpus)
	}
	env := in.env
	for _, k := range []string{"LOCAL_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"} {
		if n, err := strconv.Atoi(env[k]); err == nil && n > 1 {
			return true, k + "=" + env[k]
		}
	}
	return false, ""
}

// debugFileProblem: NCCL expands %h (host) and %p (pid) in NCCL_DEBUG_FILE;
// without them every rank opens the same file and they overwrite each
// other (on one node without %p; on a shared filesystem without %h).
func debugFileProblem(in sanityInput) []sanityProblem {
	v, ok := in.env["NCCL_DEBUG_FILE"]
	if !ok || v == "" {
		return nil
	}
	var missing, why []string
	if !strings.Contains(v, "%p") {
		if many, w := severalRanks(in); many {
			missing, why = append(missing, "%p"), append(why, w)
		}
	}
	if !strings.Contains(v, "%h") {
		if multi, w := multiNode(in.env); multi {
			missing, why = append(missing, "%h"), append(why, w)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []sanityProblem{{Variable: "NCCL_DEBUG_FILE",
		Problem: fmt.Sprintf("NCCL_DEBUG_FILE=%q has no %s while several ranks may write it (%s): each rank truncates the same file and the others' lines are lost", v, strings.Join(missing, " and no "), strings.Join(why, ", ")),
		Fix:     "put the host and the pid in the name: NCCL_DEBUG_FILE=" + debugFileFixed(v)}}
}

func debugFileFixed(v string) string {
	dir, file := path.Split(v)
	if file == "" {
		file = "nccl"
	}
	ext := path.Ext(file)
	base := strings.TrimSuffix(file, ext)
	for _, x := range []string{".%h", ".%p"} {
		if !strings.Contains(base+ext, x[1:]) {
			base += x
		}
	}
	return dir + base + ext
}

// topoFileProblem: NCCL_TOPO_FILE must name a readable file (an absolute
// path as CMD sees it, read under the root).
func topoFileProblem(s sysRoot, env map[string]string) []sanityProblem {
	v, ok := env["NCCL_TOPO_FILE"]
	if !ok || v == "" || !strings.HasPrefix(v, "/") {
		return nil
	}
	// Opened, never read: a snapshot records only that the path exists,
	// so a variable aimed at some other file copies nothing of it.
	rel := strings.TrimPrefix(path.Clean(v), "/")
	why := ""
	if !s.exists(rel) {
		why = "does not exist"
	} else if f, err := s.open(rel); err != nil {
		why = "cannot be read (" + reasonOf(err) + ")"
	} else {
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			why = "is a directory"
		}
		f.Close()
	}
	if why == "" {
		return nil
	}
	return []sanityProblem{{Variable: "NCCL_TOPO_FILE",
		Problem: fmt.Sprintf("NCCL_TOPO_FILE=%q %s: NCCL warns and detects the topology itself, without the file's settings", v, why),
		Fix:     "point NCCL_TOPO_FILE at the topology XML as the training process sees it (mount it into the container), or unset it"}}
}

// reasonOf is err's innermost cause, without the paths around it.
func reasonOf(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// gidIndexProblem: NCCL_IB_GID_INDEX=N needs a GID at index N on every
// RoCE port (sysfs ports/P/gids/N; all zeros is none).
func gidIndexProblem(s sysRoot, env map[string]string, version func() NCCLVersion) []sanityProblem {
	v, ok := env["NCCL_IB_GID_INDEX"]
	if !ok || v == "" {
		return nil
	}
	idx, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || idx < 0 {
		return nil // -1 asks NCCL (>= 2.21) to choose
	}
	devs, err := s.list("sys/class/infiniband")
	if err != nil {
		return nil
	}
	var bad []string
	for _, dev := range devs {
		ports, err := s.list("sys/class/infiniband/" + dev + "/ports")
		if err != nil {
			continue
		}
		for _, p := range ports {
			// NCCL addresses an InfiniBand port by LID and uses the GID
			// index only on RoCE (Ethernet) ports.
			if ll, err := s.readAttr(fmt.Sprintf("sys/class/infiniband/%s/ports/%s/link_layer", dev, p)); err == nil && ll == "InfiniBand" {
				continue
			}
			g, err := s.readAttr(fmt.Sprintf("sys/class/infiniband/%s/ports/%s/gids/%d", dev, p, idx))
			if err != nil || strings.Trim(g, "0:") == "" {
				bad = append(bad, dev+":"+p)
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	ver := version()
	fix := "set NCCL_IB_GID_INDEX to an index that holds a GID on every port (`show_gids`, or cat /sys/class/infiniband/DEV/ports/PORT/gids/N)"
	switch {
	case !ver.Known():
		fix += ", or unset it where NCCL is 2.21 or later (it then finds the RoCE v2 GID itself; NCCL's version was not found here)"
	case !ver.Before(2, 21):
		fix = "unset NCCL_IB_GID_INDEX: NCCL " + ver.String() + " finds the RoCE v2 GID itself; or " + fix
	}
	return []sanityProblem{{Variable: "NCCL_IB_GID_INDEX",
		Problem: fmt.Sprintf("NCCL_IB_GID_INDEX=%d but %s %s no GID at index %d: NCCL fails to set up its queue pairs there", idx, strings.Join(bad, ", "), plural(len(bad), "has", "have"), idx),
		Fix:     fix}}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// logindDirs are the drop-in directories of logind.conf, lowest priority
// first (a name in a later one replaces the same name in an earlier one).
var logindDirs = []string{"usr/lib/systemd/logind.conf.d", "run/systemd/logind.conf.d", "etc/systemd/logind.conf.d"}

// removeIPC reads systemd-logind's RemoveIPC as logind.conf(5) merges
// it: etc/systemd/logind.conf, then the drop-ins in name order, the last
// assignment wins. found is false when no logind configuration exists
// under the root (then nothing is claimed); set false means the default
// (yes).
func removeIPC(s sysRoot) (on, set, found bool, where string) {
	files := []string{}
	if s.exists("etc/systemd/logind.conf") {
		files = append(files, "etc/systemd/logind.conf")
	}
	dropins := map[string]string{}
	for _, d := range logindDirs {
		if !s.exists(d) {
			continue
		}
		names, err := s.list(d, func(n string) bool { return strings.HasSuffix(n, ".conf") })
		if err != nil {
			continue
		}
		for _, n := range names {
			dropins[n] = d + "/" + n
		}
	}
	var names []string
	for n := range dropins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, dropins[n])
	}
	on = true
	for _, f := range files {
		b, err := s.readFile(f)
		if err != nil {
			continue
		}
		found = true
		section := ""
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimSpace(l)
			switch {
			case l == "" || l[0] == '#' || l[0] == ';':
			case l[0] == '[':
				section = l
			case section == "[Login]":
				k, v, ok := strings.Cut(l, "=")
				if ok && strings.TrimSpace(k) == "RemoveIPC" {
					switch strings.ToLower(strings.TrimSpace(v)) {
					case "yes", "true", "on", "1":
						on, set, where = true, true, f
					case "no", "false", "off", "0":
						on, set, where = false, true, f
					}
				}
			}
		}
	}
	return on, set, found, where
}

// removeIPCProblem: on a host or a Slurm node, logind deletes a regular
// user's /dev/shm files and SysV segments when the user's last session
// ends, NCCL's /dev/shm/nccl-* under a running job included.
func removeIPCProblem(s sysRoot, in sanityInput) []sanityProblem {
	// Read first, whatever decides next: a snapshot (taken as root) then
	// carries the files for the user who runs the job. logind leaves
	// system users (uid below 1000, root among them) alone.
	on, set, found, where := removeIPC(s)
	if in.kind != Host && in.kind != Slurm || in.uid < 1000 || !found || !on {
		return nil
	}
	how := "RemoveIPC=yes in /" + where
	if !set {
		how = "RemoveIPC is not set in the logind configuration, and systemd's default is yes"
	}
	return []sanityProblem{{Variable: "RemoveIPC",
		Problem: fmt.Sprintf("systemd-logind's %s: when uid %d's last login session on this node ends, logind deletes the user's /dev/shm files, NCCL's /dev/shm/nccl-* segments of a running job included, and the job fails", how, in.uid),
		Fix:     "set `RemoveIPC=no` under [Login] in /etc/systemd/logind.conf.d/90-nccl.conf, then `systemctl restart systemd-logind`"}}
}

// ifnameProblem: torch.distributed's Gloo and NCCL bootstrap over the
// interfaces their variables name; a Gloo interface that NCCL's spec does
// not select puts the two on different networks.
func ifnameProblem(env map[string]string) []sanityProblem {
	n, g := env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]
	if n == "" || g == "" {
		return nil
	}
	spec := n
	exclude := strings.HasPrefix(spec, "^")
	spec = strings.TrimPrefix(spec, "^")
	exact := strings.HasPrefix(spec, "=")
	spec = strings.TrimPrefix(spec, "=")
	var entries []string
	for _, e := range strings.Split(spec, ",") {
		if e, _, _ = strings.Cut(e, ":"); e != "" {
			entries = append(entries, e)
		}
	}
	var apart []string
	for _, name := range strings.Split(g, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		sel := false
		for _, e := range entries {
			if name == e || !exact && strings.HasPrefix(name, e) {
				sel = true
			}
		}
		if sel == exclude {
			apart = append(apart, name)
		}
	}
	if len(apart) == 0 {
		return nil
	}
	return []sanityProblem{{Variable: "GLOO_SOCKET_IFNAME",
		Problem: fmt.Sprintf("GLOO_SOCKET_IFNAME=%q names %s, which NCCL_SOCKET_IFNAME=%q does not select: Gloo and NCCL bootstrap over different interfaces, and one of them may not reach the other nodes", g, strings.Join(apart, ", "), n),
		Fix:     "set both to the interface that connects the nodes (e.g. NCCL_SOCKET_IFNAME=eth0 and GLOO_SOCKET_IFNAME=eth0)"}}
}
