package diagnosis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ncclrun/ncclrun/internal/lazy"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Line
	}{
		{"info", "node013:37715:38896 [0] NCCL INFO NET/IB : No device found.",
			Line{Host: "node013", PID: 37715, TID: 38896, Dev: 0, Level: "INFO", Msg: "NET/IB : No device found.", Start: 0}},
		{"warn with location", "gpu1:77:90 [3] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory",
			Line{Host: "gpu1", PID: 77, TID: 90, Dev: 3, Loc: "misc/ibvwrap.cc:190", Level: "WARN", Msg: "Call to ibv_create_cq failed with error Cannot allocate memory", Start: 0}},
		{"2.26 timestamp", "[2026-04-22 21:34:20] mt-l-x86:202016:202235 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend",
			Line{Host: "mt-l-x86", PID: 202016, TID: 202235, Dev: 0, Time: "2026-04-22 21:34:20", Loc: "misc/shmutils.cc:88", Level: "WARN", Msg: "Error: failed to extend", Start: 0}},
		{"2.30 function", "h:1:2 [1] misc/ibvwrap.cc:254 (wrap_ibv_create_qp) NCCL WARN x",
			Line{Host: "h", PID: 1, TID: 2, Dev: 1, Loc: "misc/ibvwrap.cc:254 (wrap_ibv_create_qp)", Level: "WARN", Msg: "x", Start: 0}},
		{"plugin pretty function", "ip-10-0-0-1:55:66 [0] int nccl_net_ofi_rdma_domain_t::reg_mr(void*, size_t, int, nccl_net_ofi_mr_handle**):617 NCCL WARN NET/OFI Couldn't",
			Line{Host: "ip-10-0-0-1", PID: 55, TID: 66, Dev: 0, Loc: "int nccl_net_ofi_rdma_domain_t::reg_mr(void*, size_t, int, nccl_net_ofi_mr_handle**):617", Level: "WARN", Msg: "NET/OFI Couldn't", Start: 0}},
		{"mpirun tag", "[1,3]<stderr>:gpu1:77:90 [3] NCCL INFO Init COMPLETE",
			Line{Host: "gpu1", PID: 77, TID: 90, Dev: 3, Level: "INFO", Msg: "Init COMPLETE", Start: 14}},
		{"rank tag", "[rank3]:gpu1:77:90 [3] NCCL INFO x",
			Line{Host: "gpu1", PID: 77, TID: 90, Dev: 3, Level: "INFO", Msg: "x", Start: 8}},
		{"pdsh twice", "10.0.87.143: 10.0.87.143: node-7:12:13 [2] NCCL INFO y",
			Line{Host: "node-7", PID: 12, TID: 13, Dev: 2, Level: "INFO", Msg: "y", Start: 26}},
		{"cloudwatch", "  | 2024-11-28T07:42:11.527Z | algo-1:100:200 [0] NCCL INFO z",
			Line{Host: "algo-1", PID: 100, TID: 200, Dev: 0, Level: "INFO", Msg: "z", Start: 31}},
		{"tqdm cr padding", " 50%|█████     | 5/10 [00:01<00:01]\rnode1:12:13 [0] NCCL WARN boom\r",
			Line{Host: "node1", PID: 12, TID: 13, Dev: 0, Level: "WARN", Msg: "boom", Start: 46}},
		{"pre-2.3 with pid", "gpu-bql-144-103:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out",
			Line{Host: "gpu-bql-144-103", PID: 18553, TID: 18611, Dev: 0, Loc: "include/socket.h:360", Level: "WARN", Msg: "Call to connect failed : Connection timed out", Start: 0}},
		{"pre-2.3 no pid", "machine [0] misc/ibvwrap.cu:269 WARN Call to ibv_create_qp failed",
			Line{Host: "machine", Dev: 0, Loc: "misc/ibvwrap.cu:269", Level: "WARN", Msg: "Call to ibv_create_qp failed", Start: 0}},
		{"no prefix, token", "NCCL WARN NET/IB : Got completion",
			Line{Dev: -1, Level: "WARN", Msg: "NET/IB : Got completion", Start: -1}},
		{"bare echo", "[rank0]: Bootstrap : no socket interface found\r\n",
			Line{Dev: -1, Msg: "[rank0]: Bootstrap : no socket interface found", Start: -1}},
		{"ray", "(WorkerDict pid=830, ip=172.26.143.83) Watchdog caught collective operation timeout",
			Line{Host: "172.26.143.83", PID: 830, Dev: -1, Msg: "(WorkerDict pid=830, ip=172.26.143.83) Watchdog caught collective operation timeout", Start: -1}},
		{"vllm prefix before nccl", "(Worker_TP0 pid=281) node:281:300 [0] NCCL INFO a",
			Line{Host: "node", PID: 281, TID: 300, Dev: 0, Level: "INFO", Msg: "a", Start: 21}},
		{"prose is not a prefix", "see item [3] below WARN me",
			Line{Dev: -1, Msg: "see item [3] below WARN me", Start: -1}},
		{"empty", "", Line{Dev: -1, Start: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ParseLine([]byte(tt.in)))
		})
	}
}

func TestStripCollector(t *testing.T) {
	tests := map[string]string{
		"[rank0]: Bootstrap : no socket interface found":        "Bootstrap : no socket interface found",
		"[1,3]<stdout>:[rank3]: x":                              "x",
		"[pod/train-0/main] Last error:":                        "Last error:",
		"  | 2024-11-28T07:42:11.527Z | Duplicate GPU detected": "Duplicate GPU detected",
		"(Worker_TP0 pid=281) Failed to CUDA calloc 8 bytes":    "Failed to CUDA calloc 8 bytes",
		"[default0]:Failed to open libibverbs.so[.1]":           "Failed to open libibverbs.so[.1]",
		"KeyError: 'x'": "KeyError: 'x'",
	}
	for in, want := range tests {
		assert.Equal(t, want, string(stripCollector([]byte(in))), in)
	}
}

// TestLazyRegexpsCompile: the parser's expressions are compiled on first
// use, so a broken one would only panic there; compile each here.
func TestLazyRegexpsCompile(t *testing.T) {
	for _, re := range []*lazy.Regexp{ncclPrefixRe, ncclTokenRe, rayPidRe, collectorRe} {
		require.NotNil(t, re.Get())
		require.Same(t, re.Get(), re.Get(), "compiled once")
	}
}

// TestParsePrefixAt0SameAsRegexp: the hand parser of a line-initial NCCL
// prefix gives what the regular expressions give, on every test line and
// on variants of the prefix shapes it takes or leaves.
func TestParsePrefixAt0SameAsRegexp(t *testing.T) {
	lines := allTestLines(t)
	lines = append(lines,
		"h:1:2 [0] NCCL WARN x", "h:1:2 [0]  NCCL WARN x", "h:1:2 [0] a b NCCL INFO", "h:1:2 [0] NCCL WARNING x WARN y",
		"h:1:2 [0] misc/x.cc:1 (f g) NCCL WARN x", "[2025-01-02 03:04:05,123] h-1.x:10:20 [7] a.cc:3 NCCL WARN m",
		"[2025-01-02T03:04:05] h:1:2 [3] WARN m", "h:12345678901:2 [0] NCCL WARN x", "h:1:2 [1234567] NCCL WARN x",
		"_h:1:2 [0] NCCL WARN x", "h:1:2 [0] NCCL version 2.1 INFO", "h:1:2 [0] x\nNCCL WARN y", "h:1:2 [0] NCCL CALLx CALL",
		"h:1:2 [0] NCCL TRACE", "h:1 [0] NCCL WARN x", "h [0] NCCL WARN x", "[2025-01-02 03:04:05.] h:1:2 [0] WARN x")
	fast := 0
	for i, l := range lines {
		if raceEnabled && i%8 != 0 && i < len(lines)-20 {
			continue // a sample under the race detector, the hand-made lines always
		}
		b := []byte(l)
		if _, ok := parsePrefixAt0(trimEOL(b)); ok {
			fast++
		}
		assert.Equal(t, parseLineRe(trimEOL(b)), ParseLine(b), "%q", l)
	}
	if !raceEnabled {
		assert.Greater(t, fast, 100, "the hand parser takes the common lines")
	}
}

func FuzzParsePrefixAt0(f *testing.F) {
	for _, s := range []string{"h:1:2 [0] NCCL WARN x", "[2025-01-02 03:04:05] h:1:2 [0] a.cc:1 NCCL WARN x", "h:1:2 [0] a b INFO"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := trimEOL([]byte(s))
		if got, want := ParseLine(b), parseLineRe(b); got != want {
			t.Fatalf("%q: fast %+v, regexp %+v", s, got, want)
		}
	})
}
