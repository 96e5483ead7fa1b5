// Package corpus scores a suite of labelled logs (a directory with a
// cases.json and one NAME.log per case) against the diagnosis ids a
// caller found in each log. diagnosis's tests and cmd/ncclrun's explain
// tests score the real-log corpus with it, so both apply one rule.
//
// The rule (docs/diagnosis.md "Tests"): a case with an expect list is
// right when the first id is one of them; a case's forbid ids must not
// appear anywhere (["*"]: no id at all); skip cases are listed, not
// scored. A suite passes when at least MinRight percent of the cases with
// an expectation are right and no forbidden id appears in any case.
package corpus

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// MinRight is the share (percent) of expecting cases that must have the
// right id first (95% of the real logs).
const MinRight = 95

// Case is one row of cases.json.
type Case struct {
	Case   string   `json:"case"`
	Expect []string `json:"expect"`
	Forbid []string `json:"forbid"`
	Skip   bool     `json:"skip,omitempty"`
}

// Load reads dir/cases.json; it fails on an empty list or a row without
// a case name.
func Load(dir string) ([]Case, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		return nil, err
	}
	var cs []Case
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "cases.json"), err)
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("%s: no cases", filepath.Join(dir, "cases.json"))
	}
	for i, c := range cs {
		if c.Case == "" {
			return nil, fmt.Errorf("%s: row %d has no case name", filepath.Join(dir, "cases.json"), i)
		}
	}
	return cs, nil
}

// Verdicts of a Row.
const (
	OK      = "ok"     // scored right, or unscored without a forbidden id
	Miss    = "MISS"   // an expectation whose first id is wrong or missing
	Forbid  = "FORBID" // a forbidden id appears (also when the first is right)
	Skipped = "skip"   // skip: true
	Unrated = "clean"  // no expectation and no forbidden id
)

// Row is the outcome of one case.
type Row struct {
	Case      string
	Expect    []string
	IDs       []string
	Right     bool // expecting and the first id is expected
	Expecting bool
	Forbidden []string // forbidden ids found ("*" reports every id)
	Verdict   string
}

// Result is a scored suite.
type Result struct {
	Rows            []Row
	Right           int // expecting cases with the right id first
	Expecting       int // cases with an expect list (skip excluded)
	ForbiddenCases  int // cases where a forbidden id appears
	Skipped         int
	MinRightPercent int
}

// Score applies the rule to every case; ids returns the ids found in
// that case's log, ranked (an error aborts the scoring).
func Score(cases []Case, ids func(Case) ([]string, error)) (Result, error) {
	res := Result{MinRightPercent: MinRight}
	for _, c := range cases {
		r := Row{Case: c.Case, Expect: c.Expect}
		if c.Skip {
			r.Verdict = Skipped
			res.Skipped++
			res.Rows = append(res.Rows, r)
			continue
		}
		got, err := ids(c)
		if err != nil {
			return res, fmt.Errorf("%s: %w", c.Case, err)
		}
		r.IDs = got
		if len(c.Expect) > 0 {
			r.Expecting = true
			res.Expecting++
			r.Right = len(got) > 0 && slices.Contains(c.Expect, got[0])
			if r.Right {
				res.Right++
			}
		}
		for _, f := range c.Forbid {
			for _, id := range got {
				if (f == "*" || f == id) && !slices.Contains(r.Forbidden, id) {
					r.Forbidden = append(r.Forbidden, id)
				}
			}
		}
		switch {
		case len(r.Forbidden) > 0:
			r.Verdict = Forbid
			res.ForbiddenCases++
		case r.Expecting && !r.Right:
			r.Verdict = Miss
		case r.Expecting:
			r.Verdict = OK
		default:
			r.Verdict = Unrated
		}
		res.Rows = append(res.Rows, r)
	}
	return res, nil
}

// Percent is the share of expecting cases that are right, rounded down.
func (r Result) Percent() int {
	if r.Expecting == 0 {
		return 0
	}
	return r.Right * 100 / r.Expecting
}

// Summary is the one-line score, e.g. "right first 60/60 (100%), forbidden
// id in 0 cases, 3 skipped".
func (r Result) Summary() string {
	return fmt.Sprintf("right first %d/%d (%d%%), forbidden id in %d cases, %d skipped",
		r.Right, r.Expecting, r.Percent(), r.ForbiddenCases, r.Skipped)
}

// Err is nil when the suite passes: at least MinRightPercent of the
// expecting cases right (and at least one expecting case), and no
// forbidden id anywhere.
func (r Result) Err() error {
	var errs []error
	if r.Expecting == 0 {
		errs = append(errs, errors.New("no case with an expectation"))
	} else if r.Right*100 < r.MinRightPercent*r.Expecting {
		errs = append(errs, fmt.Errorf("right first in %d/%d cases, below %d%%", r.Right, r.Expecting, r.MinRightPercent))
	}
	if r.ForbiddenCases > 0 {
		var names []string
		for _, row := range r.Rows {
			if row.Verdict == Forbid {
				names = append(names, row.Case)
			}
		}
		errs = append(errs, fmt.Errorf("forbidden id in %d cases: %s", r.ForbiddenCases, strings.Join(names, ", ")))
	}
	return errors.Join(errs...)
}

// Table renders one line per case (verdict, case, expected ids, ids found)
// and the summary.
func (r Result) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "verdict\tcase\texpect\tgot")
	for _, row := range r.Rows {
		got := strings.Join(row.IDs, ",")
		if got == "" {
			got = "-"
		}
		if len(row.Forbidden) > 0 {
			got += " (forbidden: " + strings.Join(row.Forbidden, ",") + ")"
		}
		exp := strings.Join(row.Expect, "|")
		if exp == "" {
			exp = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", row.Verdict, row.Case, exp, got)
	}
	w.Flush()
	b.WriteString(r.Summary())
	b.WriteString("\n")
	return b.String()
}
