package diagnosis

// ahoCorasick finds, in one pass over a line, which patterns have one of
// their literals in it. The automaton is a full transition table over
// byte classes (the bytes that occur in some literal, plus one class for
// all others), so the scan costs one table lookup per byte whatever the
// number of literals: throughput stays flat as the catalog grows.
type ahoCorasick struct {
	class  [256]uint16
	nclass int
	// delta[row+class] is the next state as (its row<<1 | 1 if it has
	// output), where row = state*nclass: the scan needs no multiply and
	// no second load to learn that a state reports nothing.
	delta    []int32
	out      [][]int32 // state -> pattern indices whose literal ends here (incl. via failure links)
	npattern int
}

func newAhoCorasick(lits []string, owners []int) *ahoCorasick {
	a := &ahoCorasick{}
	// Byte classes.
	n := 1
	for _, l := range lits {
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
	// Trie.
	const none = -1
	trie := [][]int32{newRow(n, none)}
	out := [][]int32{nil}
	for k, l := range lits {
		s := int32(0)
		for i := 0; i < len(l); i++ {
			c := a.class[l[i]]
			if trie[s][c] == none {
				trie = append(trie, newRow(n, none))
				out = append(out, nil)
				trie[s][c] = int32(len(trie) - 1)
			}
			s = trie[s][c]
		}
		out[s] = appendUnique(out[s], int32(owners[k]))
	}
	// BFS for failure links, turning the trie into a full DFA.
	fail := make([]int32, len(trie))
	queue := make([]int32, 0, len(trie))
	for c := 0; c < n; c++ {
		if t := trie[0][c]; t == none {
			trie[0][c] = 0
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
		for c := 0; c < n; c++ {
			t := trie[s][c]
			if t == none {
				trie[s][c] = trie[fail[s]][c]
				continue
			}
			fail[t] = trie[fail[s]][c]
			queue = append(queue, t)
		}
	}
	a.delta = make([]int32, len(trie)*n)
	for s, row := range trie {
		for c, t := range row {
			v := t * int32(n) << 1
			if out[t] != nil {
				v |= 1
			}
			a.delta[s*n+c] = v
		}
	}
	a.out = out
	return a
}

func newRow(n int, v int32) []int32 {
	r := make([]int32, n)
	for i := range r {
		r[i] = v
	}
	return r
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
	for _, c := range b {
		v = delta[v>>1+int32(class[c])]
		if v&1 != 0 {
			for _, p := range a.out[v>>1/int32(a.nclass)] {
				if stamp[p] != gen {
					stamp[p] = gen
					dst = append(dst, p)
				}
			}
		}
	}
	return dst
}
