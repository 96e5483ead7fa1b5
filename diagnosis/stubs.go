package diagnosis

import "io"

// Matcher watches lines and collects diagnoses. (Stub.)
type Matcher struct{}

// NewMatcher returns a matcher over the shipped catalog. (Stub.)
func NewMatcher(f Facts) *Matcher { return &Matcher{} }

// Feed offers one line (without newline). It returns the diagnosis when this
// line is the first sighting of a cause, so that run can print it at once;
// nil otherwise. (Stub.)
func (m *Matcher) Feed(line []byte) *Diagnosis { return nil }

// Diagnoses returns every cause seen, most specific / root cause first. (Stub.)
func (m *Matcher) Diagnoses() []Diagnosis { return nil }

// Explain reads a saved log and returns its diagnoses. (Stub.)
func Explain(r io.Reader, f Facts) ([]Diagnosis, error) { return nil, nil }
