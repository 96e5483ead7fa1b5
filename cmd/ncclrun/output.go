package main

import (
	"encoding/json"
	"io"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/internal/printable"
	"github.com/ncclrun/ncclrun/preflight"
)

// What run, doctor, env and explain print is laid out by the packages that
// own the words (preflight.Report.WriteTable and WriteChecks,
// diagnosis.Message, Summary and WriteExplain); the streams are these
// commands'.

// printTreeWarnings prints one line per file of a --root tree that
// preflight refused to read (a FIFO, a device, a link out of the tree, a
// file over the size bound). The path is the tree's, which may be
// anyone's snapshot: it is quoted as printable text.
func printTreeWarnings(w io.Writer, r preflight.Report) {
	for _, m := range r.Warnings {
		fprintf(w, "ncclrun: warning: --root: %s\n", printable.String(m))
	}
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// nonNil keeps an empty list an empty JSON array, not null.
func nonNil(ds []diagnosis.Diagnosis) []diagnosis.Diagnosis {
	if ds == nil {
		return []diagnosis.Diagnosis{}
	}
	return ds
}
