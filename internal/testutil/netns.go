package testutil

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// RemoveNetns kills every process in each network namespace whose name
// match accepts and deletes the namespace (its veth pairs and bridges go
// with it). The suites that make nodes of namespaces (acceptance's
// multi-node jobs, the Slurm cluster) call it as they end.
func RemoveNetns(match func(ns string) bool) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range netnsNames(out) {
		if match(ns) {
			deleteNetns(ns)
		}
	}
}

// RemoveStaleNetns deletes the namespaces named prefix + PID + "-..." that
// an earlier run left, once process PID is gone (a run killed before its
// cleanup); a namespace of a live run is left alone.
func RemoveStaleNetns(t testing.TB, prefix string) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, ns := range netnsNames(out) {
		rest, ok := strings.CutPrefix(ns, prefix)
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err != nil {
			t.Logf("removing %s, left by process %s", ns, pid)
			deleteNetns(ns)
		}
	}
}

// netnsNames parses `ip netns list` ("name" or "name (id: 3)" a line).
func netnsNames(out []byte) []string {
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

func deleteNetns(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
}
