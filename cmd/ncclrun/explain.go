package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/advice"
	"github.com/ncclrun/ncclrun/nccllog"
)

func cmdExplain(c *cli.Context, e *env) error {
	names := c.Args().Slice()
	if len(names) == 0 {
		names = []string{"-"}
		if terminal(e.stdin) {
			// A pasted log is fine, but a silent wait is not: say what
			// is wanted, and read on.
			say(e.stderr, "explain: no FILE given: reading a log from the terminal; paste it and end with Ctrl-D")
		}
	}
	stdinUsed := false
	for _, name := range names {
		if name == "-" {
			if stdinUsed {
				return usagef("explain: - (stdin) given twice")
			}
			stdinUsed = true
		}
	}
	// One matcher over every input, which are opened one at a time and
	// closed (file and decoder) before the next: memory is the matcher's
	// bounded state plus one gzip decoder.
	m := diagnosis.NewMatcher(diagnosis.Facts{})
	names, err := expandDirs(names) // jobinput.go: reports, pods, log directories
	if err != nil {
		return err
	}
	var ji jobInput
	for _, name := range names {
		if err := ji.explainInput(m, name, e.stdin); err != nil {
			return err
		}
	}
	ji.flush(m)
	hang := ji.hang()
	ds, first := diagnosis.ApplyHang(m.Diagnoses(), m.FirstFailure(), hang)
	if c.Bool(flagJSON) {
		return writeJSON(e.stdout, struct {
			FirstFailure *diagnosis.Failure    `json:"first_failure,omitempty"`
			Diagnoses    []diagnosis.Diagnosis `json:"diagnoses"`
			Hang         *diagnosis.Hang       `json:"hang,omitempty"`
		}{first, nonNil(ds), hang})
	}
	if hang != nil {
		if _, err := e.stdout.Write(layoutHang(diagnosis.HangText(hang))); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	_ = diagnosis.WriteExplain(&b, ds, first) // a Buffer does not fail
	_, err = e.stdout.Write(layoutExplain(b.String()))
	return err
}

// layoutHang wraps HangText's lines to explainWidth: the headline, then
// each "  evidence: " line under its label.
func layoutHang(text string) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		lead, indent := "", "      "
		if rest, ok := strings.CutPrefix(line, "  evidence: "); ok {
			line, lead, indent = rest, "  evidence: ", "            "
		}
		for i, l := range advice.Wrap(line, max(40, explainWidth-len(indent))) {
			if i == 0 {
				b.WriteString(lead + l + "\n")
			} else {
				b.WriteString(indent + l + "\n")
			}
		}
	}
	return b.Bytes()
}

// explainWidth is the width explain's text is wrapped to, doctor's.
const explainWidth = 100

// fixIndent is where WriteExplain starts a fix's text and its other
// alternatives ("  fix:   ").
const fixIndent = "         "

// layoutExplain lays out WriteExplain's text as doctor lays out its
// table: the text of a cause, a fix and a "to be sure" wrapped to
// explainWidth under its label, and each platform of a fix on a line of
// its own, its text wrapped two columns further in. The other lines
// (titles, the log lines quoted) stay as written.
func layoutExplain(text string) []byte {
	var b bytes.Buffer
	wrapped := func(lead, indent, body string) {
		for i, l := range advice.Wrap(body, max(40, explainWidth-len(indent))) {
			if i == 0 {
				b.WriteString(lead + l + "\n")
			} else {
				b.WriteString(indent + l + "\n")
			}
		}
	}
	inFix := false
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		lead, body := "", ""
		switch {
		case strings.HasPrefix(line, "  fix:   "):
			inFix, lead, body = true, "  fix:   ", line[len("  fix:   "):]
		case inFix && strings.HasPrefix(line, fixIndent) && !strings.HasPrefix(line, fixIndent+" "):
			lead, body = fixIndent, line[len(fixIndent):]
		case strings.HasPrefix(line, "  cause: "), strings.HasPrefix(line, "  to be sure: "):
			inFix = false
			label, rest, _ := strings.Cut(line, ": ")
			wrapped(label+": ", strings.Repeat(" ", len(label)+2), rest)
			continue
		default:
			inFix = false
			b.WriteString(line + "\n")
			continue
		}
		for i, p := range advice.PlatformLines(body) {
			if i == 0 {
				wrapped(lead, fixIndent+"  ", p)
			} else {
				wrapped(fixIndent, fixIndent+"  ", p)
			}
		}
	}
	return b.Bytes()
}

// inputError is the one-line usage error for an input that could not be
// read: what went wrong, or why it is not decompressed (bzip2, zstd, xz) and how
// to decompress it instead.
func inputError(name string, err error) error {
	var (
		ue *nccllog.UnsupportedError
		re *nccllog.ReadError
	)
	switch {
	case errors.As(err, &ue):
		err = fmt.Errorf("%w (decompress it first: %s -dc FILE | ncclrun explain -)", ue, ue.Format)
	case errors.As(err, &re):
		err = re.Err
	}
	return &usageError{fmt.Errorf("explain: %s: %w", displayName(name), err)}
}

func displayName(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}
