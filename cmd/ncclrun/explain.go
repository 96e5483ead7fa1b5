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
		if _, err := io.WriteString(e.stdout, diagnosis.HangText(hang)+"\n"); err != nil {
			return err
		}
	}
	return diagnosis.WriteExplain(e.stdout, ds, first)
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
