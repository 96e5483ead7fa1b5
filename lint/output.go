package lint

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ncclrun/ncclrun/internal/printable"
)

// WriteJSON writes {"findings": [...]} (docs/contract.md "lint").
func WriteJSON(w io.Writer, r Report) error {
	fs := r.Findings
	if fs == nil {
		fs = []Finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		Findings []Finding `json:"findings"`
	}{fs})
}

// WriteText writes a table a person reads, grouped by file and object; a
// clean run is one line. A silenced finding is not printed: the last line
// counts them. What it quotes from the inputs (a file's,
// object's or container's name, in the messages and fixes too) goes
// through printable.String: a terminal shows their control characters,
// and does not act on them.
func WriteText(w io.Writer, r Report) error {
	var b strings.Builder
	file, object := "", ""
	shown := 0
	for _, f := range r.Findings {
		if f.Silenced != nil {
			continue
		}
		shown++
		if f.File != file {
			if file != "" {
				b.WriteString("\n")
			}
			file, object = f.File, ""
			b.WriteString(printable.String(f.File) + "\n")
		}
		if f.Object != object {
			object = f.Object
			b.WriteString("  " + printable.String(f.Object) + "\n")
		}
		fmt.Fprintf(&b, "    %d:%s %-7s  %-17s %s\n", f.Line, pad(f.Line), f.Severity, f.ID, "container "+printable.String(f.Container))
		b.WriteString(wrap(printable.String(f.Message), "      ", "      ", 96))
		if f.Fix != "" {
			b.WriteString("      fix:\n")
			for _, l := range strings.Split(f.Fix, "\n") {
				b.WriteString("        " + printable.String(l) + "\n")
			}
		}
		if len(f.Assumed) > 0 {
			b.WriteString("      assumed (check with `ncclrun doctor` in the pod):\n")
			for _, a := range f.Assumed {
				b.WriteString(wrap("- "+printable.String(a), "        ", "          ", 96))
			}
		}
	}
	n := len(r.Containers)
	word := "containers"
	if n == 1 {
		word = "container"
	}
	unread := ""
	if k := len(r.Errors); k == 1 {
		unread = "; 1 input could not be read (see stderr)"
	} else if k > 1 {
		unread = fmt.Sprintf("; %d inputs could not be read (see stderr)", k)
	}
	silenced := ""
	if k := r.Silenced(); k > 0 {
		silenced = fmt.Sprintf(" (%d silenced by annotation)", k)
	}
	switch {
	case shown == 0 && unread != "":
		fmt.Fprintf(&b, "%d %s checked%s%s\n", n, word, silenced, unread)
	case shown == 0:
		fmt.Fprintf(&b, "%d %s checked, no finding%s\n", n, word, silenced)
	default:
		fmt.Fprintf(&b, "\n%d %s checked: %d error(s), %d warning(s), %d info%s%s\n", n, word, r.count(Error), r.count(Warning), r.count(Info), silenced, unread)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pad(line int) string {
	s := fmt.Sprint(line)
	if len(s) >= 4 {
		return ""
	}
	return strings.Repeat(" ", 4-len(s))
}

// wrap breaks s into lines of at most width, the first starting with
// first, the others with rest.
func wrap(s, first, rest string, width int) string {
	var b strings.Builder
	cur, indent := first, first
	for _, w := range strings.Fields(s) {
		if len(cur) > len(indent) && len(cur)+1+len(w) > width {
			b.WriteString(cur + "\n")
			cur, indent = rest, rest
		}
		if len(cur) > len(indent) {
			cur += " "
		}
		cur += w
	}
	b.WriteString(cur + "\n")
	return b.String()
}

// SARIF 2.1.0, the subset code scanning reads.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Version        string      `json:"version,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string      `json:"id"`
	ShortDescription     sarifText   `json:"shortDescription"`
	DefaultConfiguration sarifConfig `json:"defaultConfiguration"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID       string             `json:"ruleId"`
	Level        string             `json:"level"`
	Message      sarifText          `json:"message"`
	Locations    []sarifLocation    `json:"locations"`
	Suppressions []sarifSuppression `json:"suppressions,omitempty"`
}

// sarifSuppression is a silenced finding: inSource, the manifest's own
// annotation, with its reason.
type sarifSuppression struct {
	Kind          string `json:"kind"`
	Justification string `json:"justification,omitempty"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           sarifRegion   `json:"region"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

// sarifLevel maps a severity to SARIF's level (info is "note").
func sarifLevel(sev string) string {
	if sev == Info {
		return "note"
	}
	return sev
}

// WriteSARIF writes SARIF 2.1.0: ruleId = finding id, level, the physical
// location with startLine; the message carries the fix. A silenced finding
// carries an inSource suppression whose justification is its reason.
func WriteSARIF(w io.Writer, r Report, version string) error {
	log := sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0"}
	run := sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: "ncclrun lint", InformationURI: "https://github.com/ncclrun/ncclrun/blob/main/docs/lint.md", Version: version}}, Results: []sarifResult{}}
	for _, rule := range Rules() {
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sarifRule{ID: rule.ID, ShortDescription: sarifText{rule.Meaning}, DefaultConfiguration: sarifConfig{sarifLevel(rule.Severity)}})
	}
	for _, f := range r.Findings {
		msg := fmt.Sprintf("%s (%s): %s", f.Object, f.Container, f.Message)
		if f.Fix != "" {
			msg += "\nFix:\n" + f.Fix
		}
		res := sarifResult{RuleID: f.ID, Level: sarifLevel(f.Severity), Message: sarifText{msg},
			Locations: []sarifLocation{{PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: f.File}, Region: sarifRegion{StartLine: max(f.Line, 1)}}}}}
		if f.Silenced != nil {
			res.Suppressions = []sarifSuppression{{Kind: "inSource", Justification: f.Silenced.Reason}}
		}
		run.Results = append(run.Results, res)
	}
	log.Runs = []sarifRun{run}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(log)
}
