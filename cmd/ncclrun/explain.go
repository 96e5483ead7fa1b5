package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/nccllog"
)

func cmdExplain(c *cli.Context, e *env) error {
	names := c.Args().Slice()
	if len(names) == 0 {
		names = []string{"-"}
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
	for _, name := range names {
		if err := explainInput(m, name, e.stdin); err != nil {
			return err
		}
	}
	ds, first := m.Diagnoses(), m.FirstFailure()
	if c.Bool(flagJSON) {
		return writeJSON(e.stdout, struct {
			FirstFailure *diagnosis.Failure    `json:"first_failure,omitempty"`
			Diagnoses    []diagnosis.Diagnosis `json:"diagnoses"`
		}{first, nonNil(ds)})
	}
	return diagnosis.WriteExplain(e.stdout, ds, first)
}

// explainInput feeds one input (a file, or stdin for "-") to m, to its
// end: each input ends a line, so the last line of one never joins the
// first of the next. An input that cannot be opened, read or decompressed,
// or that is bzip2, zstd or xz, is a usage error naming it.
func explainInput(m *diagnosis.Matcher, name string, stdin io.Reader) error {
	in, err := nccllog.Open(name, stdin)
	if err != nil {
		var re *nccllog.ReadError
		if errors.As(err, &re) {
			return inputError(name, err)
		}
		return &usageError{fmt.Errorf("explain: %w", err)}
	}
	defer in.Close()
	if err := diagnosis.FeedReader(m, in); err != nil {
		return inputError(name, err)
	}
	return nil
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
