package diagnosis

import (
	"bytes"
	"reflect"
	"regexp"
)

// A failing job's ranks print the same WARN text under as many prefixes
// ("node-a:1234:1301 [3] ..."): the memo (memo.go), keyed by the whole
// line, misses every one of them, and each pays its candidates' regular
// expressions again. An expression with a literal prefix, though, answers
// from the line's text at the prefix's first occurrence on: every match
// starts at an occurrence of it and reads no byte before. A matcher
// therefore remembers the answers of such expressions by that tail: the
// lines of a thousand ranks run each expression once. The answer is the
// expression's by construction (the tail is compared byte for byte);
// TestMemoSameResults and FuzzFastPath compare a matcher with and without
// it line by line.
//
// The memory is a direct-mapped table of tailSlots answers for tails of
// at most memoMaxLine bytes, allocated with the memo (on the first line
// of at most memoMaxLine bytes): about 150 KiB at most.
const tailSlots = 512

type tailMemo [tailSlots]tailEntry

type tailEntry struct {
	re   *regexp.Regexp
	tail []byte
	hash uint64
	ok   bool
}

// match is re.Match(line) where pre is re's literal prefix (regexp's
// LiteralPrefix, nil when it has none), remembered in t (nil: not).
func (t *tailMemo) match(re *regexp.Regexp, pre, line []byte) bool {
	if t == nil || pre == nil {
		return re.Match(line)
	}
	k := bytes.Index(line, pre)
	if k < 0 {
		return false
	}
	tail := line[k:]
	if len(tail) > memoMaxLine {
		return re.Match(line)
	}
	h := hashBytes(tail)
	e := &t[(h^uint64(reflect.ValueOf(re).Pointer())*0x9E3779B97F4A7C15)>>(64-9)&(tailSlots-1)]
	if e.re == re && e.hash == h && bytes.Equal(e.tail, tail) {
		return e.ok
	}
	ok := re.Match(line)
	e.re, e.hash, e.ok = re, h, ok
	e.tail = append(e.tail[:0], tail...)
	return ok
}
