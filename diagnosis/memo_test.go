package diagnosis

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoSameResults feeds every testdata log with its lines repeated
// (each line twice in a row and once more as another rank's, then the
// whole log again, as a failing job repeats its WARN lines) through a
// matcher with the memo and one without (the unfiltered reference): every
// FeedAll and the final diagnoses must be identical, and the memo must
// have been used.
func TestMemoSameResults(t *testing.T) {
	logs, err := filepath.Glob("testdata/*/*.log")
	require.NoError(t, err)
	require.Greater(t, len(logs), 100)
	c := DefaultCatalog()
	hits := 0
	for i, p := range logs {
		if raceEnabled && i%8 != 0 {
			continue // a sample under the race detector
		}
		var lines []string
		for _, l := range logLines(t, p) {
			lines = append(lines, l, l, otherRank(l))
		}
		lines = append(lines, lines...)
		for _, f := range []Facts{{}, {Known: true, MemlockAdequate: true, ShmBytes: 1 << 26}} {
			fast := feedBoth(t, c, f, p, lines)
			if fast.memo != nil {
				for _, e := range fast.memo.slot {
					if e.known != 0 {
						hits++
					}
				}
			}
		}
	}
	assert.Greater(t, hits, 100, "memo slots that remembered a match")
}

// otherRank is line as another rank would print it: NCCL's host:pid:tid
// replaced, the rest (the text the memo keys on) kept.
func otherRank(line string) string {
	f, ok := scanPrefixAt0([]byte(line))
	if !ok {
		return line
	}
	return line[:f.hostStart] + "other-node-7:4242:4243" + line[f.tidEnd:]
}

// TestMemoSlotReplaced: a line that lands in an occupied slot replaces
// the one there, and each is still matched right afterwards.
func TestMemoSlotReplaced(t *testing.T) {
	var tab memoTable
	a := []byte("host:1:2 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node-b<45678>")
	e, ok := tab.lookup(a)
	require.False(t, ok)
	va := lineView{line: a, text: a}
	e.store(&va, []int32{3, 5}, false)
	e2, ok := tab.lookup(a)
	require.True(t, ok)
	require.Same(t, e, e2)
	// Force b into a's slot: its hash differs, so the slot is not a hit.
	b := []byte("host:1:2 [0] NCCL WARN something else")
	e.hash = hashBytes(b) + 1
	_, ok = tab.lookup(a)
	require.False(t, ok, "a slot whose hash differs is not a hit")
	e.hash = hashBytes(a)
	e.text = append(e.text[:0], b...)
	_, ok = tab.lookup(a)
	require.False(t, ok, "a slot holding other bytes is not a hit")
}

// TestMemoRepeatsAtTheCaps: lines repeated while the counting caps are
// reached (more processes, hosts and texts than a matcher keeps) count
// as they do without the memo.
func TestMemoRepeatsAtTheCaps(t *testing.T) {
	fast, slow := NewMatcher(Facts{}), NewMatcher(Facts{})
	slow.nofilter = true
	texts := []string{"NET/IB : Got completion from peer 10.1.0.2<53412> with status=12 opcode=0 len=0 vendor err 129", "socketProgress: Connection closed by remote peer node-b<45678>"}
	for i := 0; i < 3*maxProcs; i++ {
		for r := 0; r < 2; r++ {
			l := []byte(fmt.Sprintf("node-%d:%d:%d [0] misc/x.cc:1 NCCL WARN %s %d", i%(2*maxHosts), 1000+i, 7, texts[i%2], i%(maxTexts+7)))
			require.Equal(t, slow.FeedAll(l), fast.FeedAll(l), "line %q", l)
		}
	}
	d := fast.Diagnoses()
	require.Equal(t, slow.Diagnoses(), d)
	require.NotEmpty(t, d)
	assert.True(t, d[0].CountCapped || d[0].HostsCapped, "the caps were reached: %+v", d[0])
}

// viewOf is the view of line as the matcher reads it.
func viewOf(line []byte) lineView {
	f, who := scanWho(line)
	return viewAfterWho(line, f, who)
}
