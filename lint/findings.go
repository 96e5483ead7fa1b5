package lint

import (
	"fmt"

	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/internal/pinrule"
	"github.com/ncclrun/ncclrun/internal/units"
)

// Severities of a finding.
const (
	Error   = "error"
	Warning = "warning"
	Info    = "info"
)

// Finding ids (docs/contract.md "lint"; docs/lint.md).
const (
	IDIPCLockInert   = "ipc-lock-inert"
	IDNNPShell       = "nnp-shell"
	IDNoIPCLock      = "no-ipc-lock"
	IDUserNeedsSetid = "user-needs-setuid"
	IDShmDefault     = "shm-default"
	IDPodSecurity    = "pod-security"
	IDMemlockLimit   = "memlock-limit"
	IDUserNamespace  = "user-namespace"
	IDNodeMemlock    = "node-memlock"
	IDNRIAnnotation  = "nri-annotation"
	IDPodCaps        = "pod-capabilities"
	IDNcclrunUsage   = "ncclrun-usage"
)

// Finding is one problem in one container (docs/contract.md "lint").
type Finding struct {
	ID        string `json:"id"`
	Severity  string `json:"severity"`
	File      string `json:"file"`
	Line      int    `json:"line"`
	Object    string `json:"object"`
	Container string `json:"container"`
	Message   string `json:"message"`
	Fix       string `json:"fix"`
	// Rule is the row of the decision table (doctor's memlock
	// details.rule for the same state), for the memlock findings.
	Rule string `json:"rule,omitempty"`
	// Assumed lists what the manifest could not tell.
	Assumed []string `json:"assumed,omitempty"`
	// Silenced, when set, is the annotation that silences the finding:
	// it is not printed as text and does not count for --fail-on.
	Silenced *Silence `json:"silenced,omitempty"`
}

// Container is one container checked, with its decision.
type Container struct {
	File, Object, Name string
	Line               int
	Platform           advice.Platform
	GPU                bool
	Cred               pinrule.Cred
	Verdict            pinrule.Verdict
	Assumed            []string
}

func (c container) spot(s state) advice.Spot {
	w := advice.Who{Unknown: true}
	switch {
	case c.uid != nil && *c.uid != 0:
		w = advice.Who{UID: int(*c.uid), GID: int(*c.uid)}
		if c.gid != nil {
			w.GID = int(*c.gid)
		}
	case s.cred.Plan.User && s.cred.Plan.UID >= 0:
		w = advice.Who{UID: s.cred.Plan.UID, GID: s.cred.Plan.GID}
	case c.uid != nil && *c.uid == 0 && !s.cred.Plan.User:
		w = advice.Who{UID: 1000, GID: 1000} // an example training user
	}
	return advice.Spot{Container: c.name, Command: c.launch.command(), Who: w}
}

// capLine is the line of an added or dropped capability, else def.
func capLine(list []capItem, name string, def int) int {
	for _, x := range list {
		if normCap(x.name) == name {
			return x.line
		}
	}
	return def
}

// entrypointDecides: the manifest leaves the entrypoint to the image, and
// an exec-form ncclrun there would make the verdict ok.
func (c container) entrypointDecides() bool {
	if c.launch.known || c.launch.ncclrun {
		return false
	}
	alt := c
	alt.launch = parseLaunch(append([]string{"/usr/local/bin/ncclrun", "--"}, c.launch.argv...), true)
	return alt.describe().verdict.Status == pinrule.OK
}

func line2(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}

func dropWords(c container) string {
	switch {
	case capLine(c.drop, "IPC_LOCK", 0) > 0:
		return "dropped"
	case capLine(c.drop, "ALL", 0) > 0:
		return "drop: [ALL] and not added"
	}
	return "not added; the runtime's default set has none"
}

func fmtLimit(l pinrule.Limit) string {
	if l.Soft == l.Hard {
		return units.FormatSize(l.Soft)
	}
	return fmt.Sprintf("%s (hard %s)", units.FormatSize(l.Soft), units.FormatSize(l.Hard))
}
