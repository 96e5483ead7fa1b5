package diagnosis

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFeedChunkSameAsLines: FeedChunk leaves a matcher as FeedAll of each
// line does (shed nil), or of each line Noise does not call noise (shed
// Noise): the same diagnoses found in the same order, the same final
// diagnoses and line count, over every testdata log (alone and after a
// healthy burst) cut into chunks of whole lines of random sizes, the last
// one without its newline; also on the unfiltered path.
func TestFeedChunkSameAsLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, nl := range logsAndBursts(t) {
		p := nl.name
		in := bytes.TrimSuffix(nl.b, []byte("\n"))
		lines := bytes.SplitAfter(in, []byte("\n"))
		if len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1] // in ended in a newline
		}
		for _, shed := range []func([]byte) bool{nil, Noise} {
			for _, nofilter := range []bool{false, true} {
				ref, m := NewMatcher(Facts{}), NewMatcher(Facts{})
				ref.nofilter, m.nofilter = nofilter, nofilter
				var want, got []Diagnosis
				nShed := 0
				for _, l := range lines {
					if shed != nil && shed(trimEOL(l)) && !ref.unseenMarker(l) {
						ref.lineNo++
						nShed++
						continue
					}
					want = append(want, ref.FeedAll(l)...)
				}
				gotShed := 0
				for rest := lines; len(rest) > 0; {
					k := min(len(rest), 1+rng.IntN(200))
					n, _ := m.FeedChunk(bytes.Join(rest[:k], nil), shed, func(ds []Diagnosis) { got = append(got, ds...) })
					gotShed += n
					rest = rest[k:]
				}
				require.Equal(t, want, got, "%s: found while feeding", p)
				require.Equal(t, ref.Diagnoses(), m.Diagnoses(), "%s", p)
				require.Equal(t, ref.lineNo, m.lineNo, "%s: lines", p)
				// Only the lines the filter passes are judged: the others
				// are fed (a no-op), not shed.
				require.LessOrEqual(t, gotShed, nShed, "%s: shed", p)
				if nofilter {
					require.Equal(t, nShed, gotShed, "%s: shed", p)
				}
			}
		}
	}
}
