package diagnosis

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// warnLog is size bytes of a failing job's NCCL WARN lines (five texts in
// turn, as a lost peer makes every rank print them) from procs distinct
// processes, 30000 a host.
func warnLog(size, procs int) []byte {
	texts := []string{
		"misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer gpu-node-02<48730>",
		"transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.0.2<53412> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.0.1 remoteGidsfe80::1",
		"proxy.cc:1523 NCCL WARN [Service thread] Error encountered progressing operation=Connect, res=3, closing connection",
		"misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
		"include/socket.h:409 NCCL WARN Net : Connection closed by remote peer 10.1.0.2<60210>",
	}
	var b []byte
	for i := 0; len(b) < size; i++ {
		p := i % procs
		b = fmt.Appendf(b, "gpu-node-%02d:%d:%d [%d] %s\n", p/30000, 1000+p%30000, 1097+p%30000, p%8, texts[i%len(texts)])
	}
	return b
}

// BenchmarkExplainDistinctProcesses explains WARN lines that each come
// from a new process (a hostile log: every line misses the memo, and the
// state fills its budgets). x-ranks is its time over the same run's
// explain of as many bytes of the same lines from a job's 16 ranks.
func BenchmarkExplainDistinctProcesses(b *testing.B) {
	hostile, ranks := warnLog(8<<20, 1_100_000), warnLog(8<<20, 16)
	explain := func(log []byte) {
		if _, err := Explain(bytes.NewReader(log), Facts{}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(hostile)))
	b.ReportAllocs()
	var ref time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		start := time.Now()
		explain(ranks)
		ref += time.Since(start)
		b.StartTimer()
		explain(hostile)
	}
	b.ReportMetric(float64(b.Elapsed())/float64(ref), "x-ranks")
}
