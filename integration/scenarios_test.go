//go:build integration

package integration

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// pinBytes is what the probes try to mlock: more than the 8 MiB systemd and
// kernels >= 5.16 give by default, far less than a real NCCL job pins.
const pinBytes = 16 << 20

// ipc is the expected presence of CAP_IPC_LOCK in a process's sets.
type ipc struct{ Eff, Prm, Bnd, Amb bool }

// scenario is one way of starting a container, with what the runtime gives
// its first process (Raw*) and what ncclrun must make of it (Want*).
type scenario struct {
	Name string
	// Opts are the docker run options.
	Opts []string
	// FileCap: the entrypoint binary carries cap_ipc_lock+p.
	FileCap bool
	// Shell: the entrypoint is `/bin/sh -c "..."`, not the binary itself.
	Shell bool
	// NcclrunArgs go before the command (e.g. --user 1000:1000).
	NcclrunArgs []string

	// RawLimit is the memlock soft=hard the runtime sets; 0 means "the
	// daemon's own limit" (inherited, measured on the host).
	RawLimit int64
	RawUID   int
	RawIPC   ipc
	RawMlock bool // PID 1 itself can mlock pinBytes

	WantMemlock    string // doctor's memlock status
	WantVia        string // capabilities.details.command.via
	WantChildUID   int
	WantChildIPC   bool // CMD has CAP_IPC_LOCK effective
	WantChildMlock bool // CMD can mlock pinBytes
	WantDiagnosis  string
	// FixMustNot is advice doctor's memlock fix must not give here (it
	// would not work on this platform).
	FixMustNot string
}

const unlimited = -1

// scenarios are the Docker platforms, in the order of docs/containers.md.
var scenarios = []scenario{
	{
		Name:        "default",
		RawIPC:      ipc{},
		WantMemlock: "fail", WantVia: "none", WantDiagnosis: "memlock",
	},
	{
		Name: "ulimit-64k", Opts: []string{"--ulimit", "memlock=65536:65536"},
		RawLimit: 65536, WantMemlock: "fail", WantVia: "none", WantDiagnosis: "memlock",
	},
	{
		Name: "ulimit-unlimited", Opts: []string{"--ulimit", "memlock=-1:-1"},
		RawLimit: unlimited, RawMlock: true,
		WantMemlock: "ok", WantVia: "none", WantChildMlock: true,
	},
	{
		Name: "root-cap-add-ipc-lock-64k", Opts: []string{"--ulimit", "memlock=65536:65536", "--cap-add", "IPC_LOCK"},
		RawLimit: 65536, RawIPC: ipc{Eff: true, Prm: true, Bnd: true}, RawMlock: true,
		WantMemlock: "ok", WantVia: "inherited", WantChildIPC: true, WantChildMlock: true,
	},
	{
		Name: "user1000-cap-add-ipc-lock", Opts: []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK"},
		RawUID: 1000, RawIPC: ipc{Bnd: true},
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
	},
	{
		Name: "user1000-filecap-exec", FileCap: true,
		Opts:   []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK"},
		RawUID: 1000, RawIPC: ipc{Prm: true, Bnd: true},
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		Name: "user1000-filecap-shell", FileCap: true, Shell: true,
		Opts:   []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK"},
		RawUID: 1000, RawIPC: ipc{Prm: true, Bnd: true},
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
	{
		// docs/research/capabilities.md row 7b predicted the capability survives
		// here; on Docker it does not: Docker puts added capabilities of a
		// non-root user in the bounding set only (moby oci.SetCapabilities),
		// so runc-init holds nothing in its permitted set when it execs PID 1.
		Name: "user1000-filecap-nnp-exec", FileCap: true,
		Opts:   []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK", "--security-opt", "no-new-privileges"},
		RawUID: 1000, RawIPC: ipc{Bnd: true},
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
		// ncclrun already is the exec-form command here: on Docker that
		// does not save the file capability, so doctor must not offer it.
		FixMustNot: "container's command in exec form",
	},
	{
		Name: "user1000-filecap-nnp-shell", FileCap: true, Shell: true,
		Opts:   []string{"--user", "1000:1000", "--cap-drop", "ALL", "--cap-add", "IPC_LOCK", "--security-opt", "no-new-privileges"},
		RawUID: 1000, RawIPC: ipc{Bnd: true},
		WantMemlock: "fail", WantVia: "none", WantChildUID: 1000, WantDiagnosis: "memlock",
	},
	{
		Name:        "root-drop-all-user-switch",
		Opts:        []string{"--cap-drop", "ALL", "--cap-add", "IPC_LOCK", "--cap-add", "SETUID", "--cap-add", "SETGID"},
		NcclrunArgs: []string{"--user", "1000:1000"},
		RawIPC:      ipc{Eff: true, Prm: true, Bnd: true}, RawMlock: true,
		WantMemlock: "ok", WantVia: "ambient", WantChildUID: 1000, WantChildIPC: true, WantChildMlock: true,
	},
}

// entry returns the docker run options and command that start bin (a path
// in the scenario image, with "-cap" appended for FileCap) with args, as the
// exec-form entrypoint or behind /bin/sh -c.
func (s scenario) entry(bin string, args ...string) (opts, cmd []string) {
	if s.FileCap {
		bin += "-cap"
	}
	if s.Shell {
		q := make([]string, 0, len(args)+1)
		q = append(q, bin)
		for _, a := range args {
			q = append(q, "'"+a+"'")
		}
		// "; exit $?" keeps the shell from exec'ing the last command in place
		// (dash does that for a lone simple command), so the binary really
		// runs as the shell's child.
		return []string{"--entrypoint", "/bin/sh"}, []string{"-c", strings.Join(q, " ") + "; exit $?"}
	}
	return []string{"--entrypoint", bin}, args
}

// daemonMemlock returns the RLIMIT_MEMLOCK (soft, hard) of the containerd
// process on this host, which containers inherit when no --ulimit is given;
// ok is false when it cannot be read (a remote engine).
func daemonMemlock() (soft, hard int64, ok bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "containerd" {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "limits"))
		if err != nil {
			continue
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if !strings.HasPrefix(sc.Text(), "Max locked memory") {
				continue
			}
			fs := strings.Fields(strings.TrimPrefix(sc.Text(), "Max locked memory"))
			if len(fs) < 2 {
				return 0, 0, false
			}
			return parseLimit(fs[0]), parseLimit(fs[1]), true
		}
	}
	return 0, 0, false
}

func parseLimit(s string) int64 {
	if s == "unlimited" {
		return unlimited
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -2
	}
	return n
}

// fmtLimit renders a limit for the table.
func fmtLimit(n int64) string {
	switch {
	case n == unlimited:
		return "unlimited"
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

// engineCanRaiseLimits reports whether the container engine may set a hard
// limit above its own: containerd holds CAP_SYS_RESOURCE in its effective
// set. False also when containerd cannot be found (then the tests expect
// the lesser behaviour and say so).
func engineCanRaiseLimits() bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "containerd" {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			return false
		}
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				return err == nil && n&(1<<24) != 0 // CAP_SYS_RESOURCE
			}
		}
	}
	return false
}
