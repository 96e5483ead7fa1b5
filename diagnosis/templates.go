package diagnosis

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ncclrun/ncclrun/internal/units"
)

// The catalog's fact-dependent sentences are templates: text with named
// facts in braces. A template is used only when every fact it names is
// known; otherwise the entry's plain text stands.
//
//	{seen}        Facts.Seen, when Facts.Known (what run saw of the limits)
//	{shm_size}    Facts.ShmBytes as "64 MiB", when not 0
//	{rdma_ports}  Facts.RDMAPorts joined by ", ", when Facts.Known
//	{failure}     the id ranked first (Entry.KnockOnNote only)

// templateFacts are the names the catalog may use, and whether each is
// allowed in knock-on notes only.
var templateFacts = map[string]bool{"seen": false, "shm_size": false, "rdma_ports": false, "failure": true}

// expand fills t from vals; ok is false when t names a fact vals lacks.
func expand(t string, vals map[string]string) (string, bool) {
	var b strings.Builder
	for {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			b.WriteString(t)
			return b.String(), true
		}
		j := strings.IndexByte(t[i:], '}')
		v, ok := vals[t[i+1:i+j]]
		if !ok {
			return "", false
		}
		b.WriteString(t[:i])
		b.WriteString(v)
		t = t[i+j+1:]
	}
}

// factValues are the template facts f makes known.
func factValues(f Facts) map[string]string {
	v := map[string]string{}
	if f.Known && f.Seen != "" {
		v["seen"] = f.Seen
	}
	if f.ShmBytes > 0 {
		v["shm_size"] = units.FormatSize(f.ShmBytes)
	}
	if f.Known && len(f.RDMAPorts) > 0 {
		v["rdma_ports"] = strings.Join(f.RDMAPorts, ", ")
	}
	return v
}

// checkTemplates rejects an entry whose templates are malformed or name
// unknown facts, and a knock-on entry without its note.
func checkTemplates(e *Entry) error {
	if e.KnockOn && e.KnockOnNote == "" {
		return errors.New("knock_on needs knock_on_note")
	}
	for _, t := range []struct {
		field, text string
		knockOn     bool
	}{{"fact_cause", e.FactCause, false}, {"fact_note", e.FactNote, false}, {"knock_on_note", e.KnockOnNote, true}} {
		s := t.text
		for {
			i := strings.IndexAny(s, "{}")
			if i < 0 {
				break
			}
			j := strings.IndexByte(s[i:], '}')
			if s[i] == '}' || j < 0 {
				return fmt.Errorf("%s: unbalanced braces in %q", t.field, t.text)
			}
			name := s[i+1 : i+j]
			onlyKnockOn, known := templateFacts[name]
			if !known || onlyKnockOn != t.knockOn {
				return fmt.Errorf("%s: {%s} is not a fact it may name", t.field, name)
			}
			s = s[i+j+1:]
		}
	}
	return nil
}
