package diagnosis

import (
	"encoding/json"
	"strings"
)

// HangViewTag starts the line of the termination message that carries a
// node's view (TerminationView): explain reads it back from the pods'
// termination messages (`kubectl get pods -o json`).
const HangViewTag = "hang-view: "

// TerminationView is the node's view as one line of at most limit bytes
// ("" when even the smallest does not fit): HangViewTag and the view's
// JSON without the lines (evidence and last lines stay in --report);
// records are dropped from the end until it fits, and the view then says
// it is Capped.
func (v HangView) TerminationView(limit int) string {
	c := v
	c.Last, c.Warn = nil, ""
	c.Records = make([]HangRecord, len(v.Records))
	for i, r := range v.Records {
		r.Line = ""
		c.Records[i] = r
	}
	for {
		b, err := json.Marshal(c)
		if err != nil {
			return ""
		}
		if line := HangViewTag + string(b) + "\n"; len(line) <= limit {
			return line
		}
		switch {
		case len(c.Seen) > 0:
			c.Seen = nil
		case len(c.Hosts) > 0:
			c.Hosts = nil
		case len(c.Records) > 0:
			// The ranks whose records are dropped must not read as
			// silent: the merge then judges no silence (HangView.Capped).
			c.Records = c.Records[:len(c.Records)/2]
			c.Capped = true
		default:
			return ""
		}
	}
}

// ParseTerminationView reads the view a termination message carries;
// false when it carries none.
func ParseTerminationView(msg string) (HangView, bool) {
	for _, line := range strings.Split(msg, "\n") {
		if rest, ok := strings.CutPrefix(line, HangViewTag); ok {
			var v HangView
			if json.Unmarshal([]byte(rest), &v) == nil {
				return v, true
			}
		}
	}
	return HangView{}, false
}
