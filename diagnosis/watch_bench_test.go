package diagnosis

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkWatchFeedWarn feeds a Watch, as run's tap does, a chunk of
// just under 128 KiB of WARN lines only: warnLog's five failure texts
// cycled over a job's 16 ranks (every line a repeat the memo knows),
// judged against facts of another host. It is the tap's cost when a
// failing job floods its output.
func BenchmarkWatchFeedWarn(b *testing.B) {
	chunk := warnLog(128<<10-300, 16)
	for _, behind := range []bool{false, true} {
		b.Run(fmt.Sprintf("behind=%v", behind), func(b *testing.B) {
			w := NewWatch(Facts{Known: true, Host: "login-node"}, io.Discard, nil)
			b.SetBytes(int64(len(chunk)))
			b.ReportAllocs()
			for b.Loop() {
				w.Feed(chunk, behind)
			}
		})
	}
}
