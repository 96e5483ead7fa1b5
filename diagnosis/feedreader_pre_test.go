package diagnosis

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// feedByWorkers is FeedReader's parallel path with every job scanned as
// a worker scans it, with the filter m had lag jobs earlier (a worker reads the filter of
// the last job fed, which may be a few jobs behind the one it scans), on
// this goroutine: the schedule in which the feeder never scans a job
// itself, which feedChunks with workers only sometimes takes.
func feedByWorkers(m *Matcher, b []byte, lag int) {
	jobs := [2]*feedJob{newFeedJob(), newFeedJob()}
	k := 0
	var filters []*gramFilter // m's wide filter before each job was fed
	_ = readChunks(bytes.NewReader(b), func() *feedJob { k ^= 1; return jobs[k] }, func(j *feedJob) {
		filters = append(filters, m.wide)
		j.scan(filters[max(len(filters)-1-lag, 0)])
		m.feedScanned(j)
	})
}

// requireSameFeed checks that m and ref, fed the same input, agree on
// everything the matcher reports, on the line count, and on what later
// lines' results depend on.
func requireSameFeed(t *testing.T, ref, m *Matcher, msg string) {
	t.Helper()
	require.Equal(t, ref.Diagnoses(), m.Diagnoses(), msg)
	require.Equal(t, ref.FirstFailure(), m.FirstFailure(), msg+": first failure")
	require.Equal(t, ref.lineNo, m.lineNo, msg+": lines")
	// What decides later lines' results: the markers on, the hosts seen;
	// and how many lines went past the candidates (a line fed by one path
	// only because of a stale filter stops before).
	require.Equal(t, ref.markers, m.markers, msg+": markers")
	require.Equal(t, ref.seq, m.seq, msg+": lines counted")
	require.Equal(t, [2]bool{ref.otherHost, ref.twoProcs}, [2]bool{m.otherHost, m.twoProcs}, msg+": hosts")
}

// TestFeedScannedLongLine: a complete line longer than MaxLine (up to a
// chunk's length, so it lies whole in a job's lines) is fed cut to what
// a terminal shows of it (shownPart); only what lies in that part counts,
// or a literal past the cut makes a line count that feeding it line by line ignores: here a second
// host, which turns the multi-node marker on and with it bad-if.
func TestFeedScannedLongLine(t *testing.T) {
	const lo = "bootstrap.cc:1 NCCL INFO Bootstrap : Using lo:127.0.0.1<0>"
	for name, log := range map[string]string{
		"second host's literal past MaxLine": "nodeA:1:2 [0] " + lo + "\n" +
			"nodeB:3:4 [0] NCCL INFO " + strings.Repeat("x", MaxLine) + " " + lo + "\n",
		"literal before the last CR": "nodeA:1:2 [0] " + lo + "\n" +
			"nodeB:3:4 [0] NCCL INFO " + lo + strings.Repeat("y", MaxLine) + "\rnodeB:3:4 [0] NCCL INFO ok\n",
	} {
		ref := NewMatcher(Facts{})
		require.NoError(t, feedLineByLine(ref, strings.NewReader(log)))
		for lag := range 2 {
			m := NewMatcher(Facts{})
			feedByWorkers(m, []byte(log), lag)
			requireSameFeed(t, ref, m, fmt.Sprintf("%s (lag %d)", name, lag))
		}
	}
}

// TestFeedReaderPrecomputedRandom: over generated logs (WARN lines of
// many processes and hosts, repeats of a few texts, torchrun summaries,
// markers, exceptions, long lines with and without CRs, healthy INFO
// lines), a matcher fed as FeedReader's workers scan ahead ends in the
// state that feeding line by line leaves it in; and so does one fed by
// FeedReader's pipe, whichever goroutine scans each job.
func TestFeedReaderPrecomputedRandom(t *testing.T) {
	rounds := 40
	if raceEnabled || testing.Short() {
		rounds = 6
	}
	for seed := range uint64(rounds) {
		log := randomLog(t, rand.New(rand.NewPCG(seed, 7)))
		ref := NewMatcher(Facts{})
		require.NoError(t, feedLineByLine(ref, bytes.NewReader(log)))
		for _, lag := range []int{0, 1, 3} {
			m := NewMatcher(Facts{})
			feedByWorkers(m, log, lag)
			requireSameFeed(t, ref, m, fmt.Sprintf("seed %d, lag %d", seed, lag))
		}
		m := NewMatcher(Facts{})
		require.NoError(t, feedChunks(m, bytes.NewReader(log), 3))
		requireSameFeed(t, ref, m, fmt.Sprintf("seed %d, pipe", seed))
	}
}

// randomLog is a log of a few chunks drawn from the catalog's samples,
// the testdata logs' lines and the healthy INFO lines.
func randomLog(t *testing.T, r *rand.Rand) []byte {
	t.Helper()
	samples := allTestLines(t)
	healthy, _ := perfLines(t)
	// Two logs in three are of one host and have none of the samples' and
	// healthy lines, which name hosts of their own; the long lines come
	// from any host: a host only a long line names must count as it does
	// fed line by line.
	own := r.IntN(3) > 0
	hosts := []string{"gpu-a", "gpu-b", "node-c"}
	if own {
		hosts = hosts[:1]
	}
	prefixOf := func(hosts []string) string {
		return fmt.Sprintf("%s:%d:%d [%d] ", hosts[r.IntN(len(hosts))], 100+r.IntN(5000), 7, r.IntN(8))
	}
	prefix := func() string { return prefixOf(hosts) }
	warns := []string{
		"misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
		"misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer gpu-b<48730>",
		"transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with status=12 opcode=0",
		"bootstrap.cc:1 NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
		"NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 1000 commId 0x2 - Init COMPLETE nNodes 1",
		"NCCL INFO Channel 00 : 0[1000] -> 1[2000] via P2P/IPC",
		"NCCL INFO NET/Socket : Using [0]ib0:10.0.0.1<0>",
		"NCCL INFO Using network Socket",
	}
	var b bytes.Buffer
	size := feedChunk/2 + r.IntN(4*feedChunk)
	for b.Len() < size {
		k := r.IntN(100)
		if own && k < 75 && k >= 55 || own && k < 35 {
			k = 35 + r.IntN(20)
		}
		switch {
		case k < 35:
			b.Write(healthy[r.IntN(len(healthy))])
		case k < 55:
			b.WriteString(prefix() + warns[r.IntN(len(warns))])
		case k < 75:
			b.WriteString(samples[r.IntN(len(samples))])
		case k < 82:
			// the same few texts, repeated (the memo's and the cache's case)
			b.WriteString(warns[r.IntN(2)])
		case k < 85:
			b.WriteString(strings.TrimSuffix(summaryEntry(r.IntN(4), hosts[r.IntN(len(hosts))], r.IntN(8), 100+r.IntN(100),
				"RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, unhandled system error", "Last error:", warns[r.IntN(3)]), "\n"))
		case k < 87:
			b.WriteString("Traceback (most recent call last):\nKeyError: 'step'")
		default:
			b.WriteString(longLine(r, prefixOf([]string{"gpu-a", "gpu-b", "node-c"}), samples, warns))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// longLine is a line longer than MaxLine but shorter than a chunk (so
// that it may lie whole in a job's lines) with a literal before, inside
// or past the part a terminal shows of it, and a CR before or after the
// literal or none.
func longLine(r *rand.Rand, prefix string, samples, warns []string) string {
	lit := warns[r.IntN(len(warns))]
	if r.IntN(2) == 0 {
		lit = samples[r.IntN(len(samples))]
	}
	n := MaxLine + r.IntN(feedChunk-MaxLine-len(prefix)-len(lit)-8)
	at := r.IntN(n)
	line := prefix + strings.Repeat("x", at) + " " + lit + " " + strings.Repeat("x", n-at)
	if r.IntN(2) == 0 {
		cr := len(prefix) + r.IntN(len(line)-len(prefix))
		line = line[:cr] + "\r" + prefix + line[cr:]
	}
	return line
}
