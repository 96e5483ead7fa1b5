package lint

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/pinrule"
)

// kepGate says what a container's securityContext.ulimits (KEP-5758,
// kubernetes/enhancements#5758) needs, for every finding about it.
const kepGate = "securityContext.ulimits exists only behind the ContainerUlimits feature gate (KEP-5758, alpha in Kubernetes 1.38 at the earliest; where the gate is off the apiserver drops the field and the node's limit applies), and the validation under review allows memlock up to 16 GiB for an unprivileged container and -1 (unlimited) only for a privileged one"

// kepMaxUnprivileged is the memlock an unprivileged container may ask for
// under KEP-5758's validation.
const kepMaxUnprivileged = 16 << 30

// kepUlimits reads securityContext.ulimits ([{name: memlock, soft, hard}],
// -1 unlimited): a value the validation rejects is a finding, an accepted
// one is the container's limit.
func (c *container) kepUlimits(list *yaml.Node) {
	for _, u := range items(list) {
		if n := strings.TrimPrefix(strings.ToLower(str(get(u, "name"))), "rlimit_"); n != "memlock" {
			continue
		}
		ln := line(u, c.line)
		soft, hard := integer(get(u, "soft")), integer(get(u, "hard"))
		var bad []string
		if soft == nil || hard == nil {
			bad = append(bad, "soft and hard must both be integers")
		} else {
			for _, v := range []int64{*soft, *hard} {
				switch {
				case v < -1:
					bad = append(bad, fmt.Sprintf("%d is below -1", v))
				case v == -1 && !c.privileged:
					bad = append(bad, "-1 (unlimited) is allowed only for a privileged container")
				case v > kepMaxUnprivileged && !c.privileged:
					bad = append(bad, fmt.Sprintf("%d is above the 16 GiB an unprivileged container may set", v))
				}
			}
			if *hard != -1 && (*soft == -1 || *soft > *hard) {
				bad = append(bad, "soft is above hard")
			}
		}
		if len(bad) > 0 {
			c.extra = append(c.extra, readFinding(Finding{ID: IDMemlockLimit, File: c.file, Line: ln, Object: c.object, Container: c.name,
				Message: fmt.Sprintf("securityContext.ulimits sets a memlock the apiserver rejects (%s), so the pod is not admitted; %s.", strings.Join(dedupe(bad), "; "), kepGate),
				Fix:     kepFix(c.privileged, c.name)}))
			c.kepRejected, c.noStart = true, true
			continue
		}
		lim := pinrule.Limit{Soft: kepLimit(*soft), Hard: kepLimit(*hard)}
		c.memlock, c.memlockLine, c.memlockFrom, c.kep = &lim, ln, "securityContext.ulimits", true
	}
}

func kepLimit(v int64) int64 {
	if v < 0 {
		return pinrule.Unlimited
	}
	return v
}

// kepFix is the field as the validation accepts it, and the annotation
// that works without the gate.
func kepFix(privileged bool, name string) string {
	v := fmt.Sprint(kepMaxUnprivileged)
	if privileged {
		v = "-1"
	}
	return "# with the ContainerUlimits feature gate on (Kubernetes >= 1.38)\nsecurityContext:\n  ulimits:\n    - {name: memlock, soft: " + v + ", hard: " + v + "}\n" +
		advice.Manifest(advice.PodMemlock, advice.Kubernetes, advice.Spot{Container: name})
}

func dedupe(l []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range l {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
