package main

// Adapters for parts of the package contracts that had not landed when
// cmd/ncclrun was wired. Each says what replaces it.

import (
	"strings"

	"github.com/ncclrun/ncclrun/diagnosis"
)

// terminationMessage stands for diagnosis.TerminationMessage(ds, limit):
// the diagnoses, most specific first, as a Kubernetes termination message
// of at most limit bytes.
func terminationMessage(ds []diagnosis.Diagnosis, limit int) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("ncclrun: " + d.ID + ": " + d.Title)
		if d.Cause != "" {
			b.WriteString(": " + d.Cause)
		}
		b.WriteString("\n")
		if d.Fix != "" {
			b.WriteString("  fix: " + d.Fix + "\n")
		}
		if d.FirstLine != "" {
			b.WriteString("  first: " + d.FirstLine + "\n")
		}
	}
	return truncate(b.String(), limit)
}
