package diagnosis

import (
	"fmt"
	"io"
	"testing"
)

// BenchmarkWatchFeedWarn feeds a Watch, as run's tap does, 128 KiB chunks
// of WARN lines only: five failure texts cycled over a 2x8 job's ranks
// (every line a repeat the memo knows), judged against facts of another
// host. It is the tap's cost when a failing job floods its output.
func BenchmarkWatchFeedWarn(b *testing.B) {
	texts := []string{
		"misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer gpu-node-02<48730>",
		"transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.1.0.2<53412> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.0.1 remoteGidsfe80::1",
		"proxy.cc:1523 NCCL WARN [Service thread] Error encountered progressing operation=Connect, res=3, closing connection",
		"misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
		"include/socket.h:409 NCCL WARN Net : Connection closed by remote peer 10.1.0.2<60210>",
	}
	var chunk []byte
	for i := 0; len(chunk) < 128<<10-300; i++ {
		p := i % 16
		chunk = fmt.Appendf(chunk, "gpu-node-%02d:%d:%d [%d] %s\n", p/8, 31000+p%8, 31097+p%8, p%8, texts[i%len(texts)])
	}
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
