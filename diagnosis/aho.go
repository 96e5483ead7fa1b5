package diagnosis

import (
	"slices"
)

// ahoCorasick finds, in one pass over a line, which patterns have one of
// their literals in it. The automaton is a full transition table over
// byte classes (the bytes that occur in some literal, plus one class for
// all others), so the scan costs one table lookup per byte whatever the
// number of literals: throughput stays flat as the catalog grows.
//
// The automaton reads the literals' first acLen bytes only: a literal
// longer than that is checked at each place its start occurs (the rest
// compared in place, a few nanoseconds), so the scan still reports
// exactly the patterns with a literal in the line. The literals' tails
// would be two thirds of the states: the table is 0.34 MB on the shipped
// catalog, 1.1 MB with whole literals, at the same speed.
type ahoCorasick struct {
	class  [256]uint16
	nclass int
	// delta[row+class] is the next state as (its row<<1 | 1 if it has
	// output), where row = state*nclass: the scan needs no multiply and
	// no second load to learn that a state reports nothing.
	delta []int32
	// out[state]: the literals (indices in lits) whose first acLen
	// bytes end here, including via failure links.
	out      [][]int32
	lits     []string
	owners   []int32 // lits' patterns
	npattern int
}

// acLen is how many bytes of each literal the automaton reads.
const acLen = 8

func acPrefix(l string) string { return l[:min(len(l), acLen)] }

func newAhoCorasick(lits []string, owners []int) *ahoCorasick {
	a := &ahoCorasick{lits: lits}
	for _, o := range owners {
		a.owners = append(a.owners, int32(o))
	}
	// Byte classes.
	n := 1
	for _, l := range lits {
		l = acPrefix(l)
		for i := 0; i < len(l); i++ {
			if a.class[l[i]] == 0 {
				a.class[l[i]] = uint16(n)
				n++
			}
		}
	}
	a.nclass = n
	for _, o := range owners {
		if o+1 > a.npattern {
			a.npattern = o + 1
		}
	}
	// Trie, one flat row of n entries a state; the rows become the DFA's
	// in place, in a table allocated at its final size: a trie has a
	// state for each distinct prefix of the literals, counted from them
	// sorted.
	const none = -1
	var sorted []string
	for _, l := range lits {
		sorted = append(sorted, acPrefix(l))
	}
	slices.Sort(sorted)
	states := 1
	for i, l := range sorted {
		common := 0
		for i > 0 && common < min(len(l), len(sorted[i-1])) && l[common] == sorted[i-1][common] {
			common++
		}
		states += len(l) - common
	}
	trie := newRow(make([]int32, 0, states*n), n, none)
	out := [][]int32{nil}
	for k, l := range lits {
		l = acPrefix(l)
		s := int32(0)
		for i := 0; i < len(l); i++ {
			c := int32(a.class[l[i]])
			if trie[s*int32(n)+c] == none {
				trie = newRow(trie, n, none)
				out = append(out, nil)
				trie[s*int32(n)+c] = int32(len(out) - 1)
			}
			s = trie[s*int32(n)+c]
		}
		out[s] = appendUnique(out[s], int32(k))
	}
	// BFS for failure links, turning the trie into a full DFA.
	fail := make([]int32, len(out))
	queue := make([]int32, 0, len(out))
	for c := 0; c < n; c++ {
		if t := trie[c]; t == none {
			trie[c] = 0
		} else {
			fail[t] = 0
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, o := range out[fail[s]] {
			out[s] = appendUnique(out[s], o)
		}
		row, frow := trie[int(s)*n:int(s+1)*n], trie[int(fail[s])*n:int(fail[s]+1)*n]
		for c := 0; c < n; c++ {
			t := row[c]
			if t == none {
				row[c] = frow[c]
				continue
			}
			fail[t] = frow[c]
			queue = append(queue, t)
		}
	}
	// Every state's transitions are final now: encode them in place.
	for i, t := range trie {
		v := t * int32(n) << 1
		if out[t] != nil {
			v |= 1
		}
		trie[i] = v
	}
	a.delta = trie
	a.out = out
	return a
}

// newRow appends a row of n entries v to t.
func newRow(t []int32, n int, v int32) []int32 {
	for i := 0; i < n; i++ {
		t = append(t, v)
	}
	return t
}

func appendUnique(s []int32, v int32) []int32 {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// scan appends to dst every pattern index whose literal occurs in b,
// once each: stamp (len npattern) holds gen for indices already added.
func (a *ahoCorasick) scan(b []byte, stamp []uint32, gen uint32, dst []int32) []int32 {
	v := int32(0)
	delta, class := a.delta, &a.class
	for i, c := range b {
		v = delta[v>>1+int32(class[c])]
		if v&1 != 0 {
			for _, k := range a.out[v>>1/int32(a.nclass)] {
				p := a.owners[k]
				if stamp[p] == gen {
					continue
				}
				// The literal's first acLen bytes end at i: it occurs
				// here when the rest follows.
				if l, start := a.lits[k], i+1-acLen; len(l) > acLen && (len(b)-start < len(l) || string(b[start:start+len(l)]) != l) {
					continue
				}
				stamp[p] = gen
				dst = append(dst, p)
			}
		}
	}
	return dst
}

// has reports whether b holds one of the literals: scan's answer for a
// single owner, ending at the first one found.
func (a *ahoCorasick) has(b []byte) bool {
	v := int32(0)
	delta, class := a.delta, &a.class
	for i, c := range b {
		v = delta[v>>1+int32(class[c])]
		if v&1 == 0 {
			continue
		}
		for _, k := range a.out[v>>1/int32(a.nclass)] {
			if l, start := a.lits[k], i+1-acLen; len(l) <= acLen || (len(b)-start >= len(l) && string(b[start:start+len(l)]) == l) {
				return true
			}
		}
	}
	return false
}

// automatonScan runs a catalog's automaton over lines with scratch of its
// own (a Matcher's).
type automatonScan struct {
	cat   *Catalog
	stamp []uint32 // by pattern index: gen when added to this line's result
	gen   uint32
}

func newAutomatonScan(c *Catalog) automatonScan {
	return automatonScan{cat: c, stamp: make([]uint32, c.ncand)}
}

// run appends to dst, once each, the patterns whose literals the
// automaton finds in text.
func (s *automatonScan) run(text []byte, dst []int32) []int32 {
	s.gen++
	if s.gen == 0 {
		clear(s.stamp)
		s.gen = 1
	}
	return s.cat.automaton().scan(text, s.stamp, s.gen, dst)
}
