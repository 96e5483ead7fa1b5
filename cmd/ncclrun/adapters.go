package main

// Adapters for parts of the package contracts that had not landed when
// cmd/ncclrun was wired. Each says what replaces it.

import (
	"reflect"
	"strings"

	"github.com/ncclrun/ncclrun/diagnosis"
	"github.com/ncclrun/ncclrun/preflight"
)

// maybeTrampoline stands for launcher.MaybeTrampoline (re-exec helper
// entry point); replace the call in main.go when it lands.
func maybeTrampoline() {}

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

// setProber sets opts.Prober when preflight.Options has that field
// (preflight was adding it when this was written) and reports whether it
// did; doctor falls back to recording the probe itself. Replace with a plain
// assignment once preflight.Options.Prober is committed.
func setProber(opts *preflight.Options, f func(size int64) error) bool {
	v := reflect.ValueOf(opts).Elem().FieldByName("Prober")
	if !v.IsValid() || !v.CanSet() || !reflect.TypeOf(f).AssignableTo(v.Type()) {
		return false
	}
	v.Set(reflect.ValueOf(f))
	return true
}
