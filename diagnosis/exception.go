package diagnosis

import "bytes"

// A program's own exception (a KeyError in rank 0's training loop, a
// FileNotFoundError) is no deployment failure and never a diagnosis. But
// when it is the first failure of a job, what the other ranks print next
// (a lost peer, a watchdog timeout, a generic NCCL error) is its
// consequence, and the report must lead with the exception, not with
// them. The matcher notes the first exception line that no catalog
// pattern claims, in the order it saw the lines (torch 1.13's failure
// summary orders ranks by whole-second timestamps, which ties).

// exception is the first exception line noted.
type exception struct {
	seq   int
	line  string
	place Place
}

// consequenceExceptions are exceptions that report another failure, not
// one of their own: torchrun's ChildFailedError (a worker failed) and
// SignalException (torchrun got a signal).
var consequenceExceptions = [][]byte{[]byte("ChildFailedError"), []byte("SignalException")}

// noteException remembers line when it is the first Python exception line
// ("KeyError: 'x'", "torch.distributed.DistStoreError: ..." after any
// launcher prefix) that no pattern claimed; m.mu is held.
func (m *Matcher) noteException(line []byte) {
	if m.exc != nil {
		return
	}
	b := stripCollector(line)
	if !isExceptionHeader(b) {
		return
	}
	name := b[:bytes.IndexByte(b, ':')]
	for _, c := range consequenceExceptions {
		if bytes.HasSuffix(name, c) {
			return
		}
	}
	pl := ParseLine(line)
	m.seq++
	m.exc = &exception{seq: m.seq, line: quoteLine(b), place: placeOf(line, pl)}
}

// FirstFailure returns the first failure of the output so far: the
// diagnosis ranked first (its place and first line), or, when that
// diagnosis is only the consequence of a program's exception seen before
// it (Diagnosis.KnockOnOf KnockOnException), that exception. nil when
// there is no diagnosis: an exception alone is the program's, not
// ncclrun's to report.
func (m *Matcher) FirstFailure() *Failure {
	ds := m.Diagnoses()
	if len(ds) == 0 {
		return nil
	}
	if ds[0].KnockOnOf == KnockOnException {
		m.mu.Lock()
		defer m.mu.Unlock()
		return &Failure{Place: m.exc.place, Line: m.exc.line}
	}
	f := &Failure{ID: ds[0].ID, Line: ds[0].FirstLine}
	if ds[0].FirstFailure != nil {
		f.Place = *ds[0].FirstFailure
	}
	return f
}
