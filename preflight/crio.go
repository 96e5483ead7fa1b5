package preflight

import (
	"strings"

	"github.com/ncclrun/ncclrun/internal/advice"
)

// crioSystemd reports whether the process runs in a CRI-O container under
// the systemd cgroup manager: its cgroup (proc/self/cgroup, else
// proc/1/cgroup) is a crio-<id>.scope unit. With the cgroupfs manager the
// path ends in crio-<id> without .scope; a private cgroup namespace shows
// "/" and tells nothing.
func crioSystemd(s sysRoot) bool {
	for _, f := range []string{"proc/self/cgroup", "proc/1/cgroup"} {
		b, err := s.readFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			for _, part := range strings.Split(l, "/") {
				if strings.HasPrefix(part, "crio-") && strings.HasSuffix(part, ".scope") {
					return true
				}
			}
		}
	}
	return false
}

// crioAdvice puts CRI-O's default_ulimits first in the memlock check's fix
// where CRI-O runs with the systemd cgroup manager: there the runtime's
// own setting is the one known to reach the container.
func crioAdvice(s sysRoot, kind Platform, r *Result) {
	if kind != Kubernetes || r.Fix == "" || (r.Status != Warn && r.Status != Fail) || !crioSystemd(s) {
		return
	}
	r.Fix = advice.Text(advice.CRIOUlimits, kind, advice.Who{}) + "; or " + r.Fix
	if r.Details != nil {
		r.Details["runtime"] = "cri-o (systemd cgroup manager)"
	}
}
