package diagnosis

import (
	"encoding/binary"
	"math/bits"
	"strings"

	"github.com/ncclrun/ncclrun/internal/lazy"
)

// The gram filter is a cheaper first pass in front of the Aho-Corasick
// prefilter, for the lines that dominate a healthy job's output (NCCL
// INFO lines by the hundred thousand). Every literal of the catalog gets
// two consecutive 4-byte windows of itself (its grams); a line that
// contains a literal has one of them at an even offset, so a line in which
// no gram occurs at an even offset contains no literal and the automaton
// would find no candidate. The filter is therefore exact: it only decides
// whether the automaton needs to run.
//
// Grams are kept in a blocked Bloom filter: a gram's hash picks one
// 32-bit word of 2^gramWordBits (8 KiB) and three bits in it, so that one
// load tests them. The line is tested at every even offset with an
// unaligned 4-byte load, a multiply and that word's three bits: no state
// carried from byte to byte, so the loads of consecutive offsets overlap
// in the CPU instead of forming the chain of dependent table lookups the
// automaton is. One bit a gram was not enough: with ~150 grams, a gram
// of every healthy line ("node" of the host name) collided with one. A
// false positive only sends a line on to the automaton.
//
// A matcher keeps its own filter over the patterns that can still change
// its result: once a marker pattern has been seen, a later sighting of it
// changes nothing, so its literals leave the matcher's filter (healthy
// INFO lines carry marker literals such as "via P2P/" on every channel
// line).

const (
	gramLen      = 4
	gramWordBits = 11
)

// gramFilter is a set of hashed grams. all means "pass every line" (a
// live literal shorter than gramLen has no gram).
type gramFilter struct {
	all   bool
	words [1 << gramWordBits]uint32
}

// gramProbe returns the word and the three bits of gram x: fields of a
// 32-bit multiplicative hash of x (its high half folded in first, or the
// last byte would only reach the top bits), the word from the top bits.
func gramProbe(x uint32) (w, bits uint32) {
	h := (x ^ x>>15) * gramMul
	return h >> (32 - gramWordBits), 1<<(h>>15&31) | 1<<(h>>10&31) | 1<<(h>>5&31)
}

const gramMul = 0x85EBCA77

func (f *gramFilter) add(g uint32) {
	w, bits := gramProbe(g)
	f.words[w] |= bits
}

// mayMatch reports whether b may contain one of the filter's literals
// (false means it certainly contains none).
func (f *gramFilter) mayMatch(b []byte) bool { return f.firstHit(b) >= 0 }

// firstHit returns the offset of the first window of b in which one of
// the filter's grams may occur, -1 when none does (then b contains none
// of its literals).
//
// Only even offsets of b are tested: every literal put two consecutive
// grams of itself into the filter (patternGrams), and wherever the
// literal starts in b, one of those two windows starts at an even offset.
// That halves the probes, the filter's whole cost. The same holds for any
// b that holds a line (a chunk of lines, FeedReader): the line may match
// only when a window inside it hits.
func (f *gramFilter) firstHit(b []byte) int {
	if f.all {
		if len(b) == 0 {
			return -1
		}
		return 0
	}
	n := len(b)
	// Three windows (offsets 0, 2, 4) per 8-byte load, then 6 bytes on.
	for len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		switch {
		case f.has(uint32(v)):
			return n - len(b)
		case f.has(uint32(v >> 16)):
			return n - len(b) + 2
		case f.has(uint32(v >> 32)):
			return n - len(b) + 4
		}
		b = b[6:]
	}
	for len(b) >= gramLen {
		if f.has(binary.LittleEndian.Uint32(b)) {
			return n - len(b)
		}
		b = b[2:]
	}
	return -1
}

// has reports whether the three bits of gram x are set.
func (f *gramFilter) has(x uint32) bool {
	w, bits := gramProbe(x)
	return f.words[w]&bits == bits
}

// gramRef is typical healthy NCCL INFO output (docs/research/nccl-messages.md
// and a 2x8 job's log). gramChooser prefers windows of a literal that let
// few of its lines through, so that healthy lines rarely pass the filter;
// the choice only affects speed, never results.
const gramRef = `gpu-node-01:31010:31107 [2] NCCL INFO Channel 25/0 : 10[2] -> 11[3] via P2P/CUMEM/read
gpu-node-01:31010:31107 [2] NCCL INFO Channel 01/1 : 10[2] -> 11[3] via P2P/IPC
gpu-node-01:31010:31107 [2] NCCL INFO Channel 02/0 : 8[0] -> 9[1] via SHM/direct/direct
gpu-node-01:31010:31107 [2] NCCL INFO Channel 03/0 : 15[7] -> 0[0] [send] via NET/IB/3/GDRDMA/Shared
gpu-node-01:31010:31107 [2] NCCL INFO Channel 03/0 : 7[7] -> 8[0] [receive] via NET/IB/3/GDRDMA
gpu-node-01:31010:31107 [2] NCCL INFO Trees [0] 11/-1/-1->10->9 [1] 11/-1/-1->10->9
gpu-node-01:31010:31107 [2] NCCL INFO Ring 00 : 9 -> 10 -> 11
gpu-node-01:31010:31107 [2] NCCL INFO Connected all rings
gpu-node-01:31010:31107 [2] NCCL INFO Connected all trees
gpu-node-01:31010:31107 [2] NCCL INFO threadThresholds 8/8/64 | 128/8/64 | 512 | 512
gpu-node-01:31010:31107 [2] NCCL INFO comm 0x55d2c4a1b000 rank 10 nRanks 16 nNodes 2 localRanks 8 localRank 2 MNNVL 0
gpu-node-01:31010:31107 [2] NCCL INFO ncclCommInitRank comm 0x55d2c4a1b000 rank 10 nranks 16 cudaDev 2 nvmlDev 2 busId 1a000 commId 0x7c1d3e9a - Init COMPLETE
gpu-node-01:31010:31107 [2] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.1.0.1<0>
gpu-node-01:31010:31107 [2] NCCL INFO P2P Chunksize set to 131072
gpu-node-01:31010:31107 [2] NCCL INFO Setting affinity for GPU 2 to ffff,ffffffff
gpu-node-01:31010:31107 [2] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
gpu-node-01:31010:31107 [2] NCCL INFO GPU Direct RDMA Enabled for HCA 1 'mlx5_1'
gpu-node-01:31010:31107 [2] NCCL INFO AllReduce: opCount 3f sendbuff 0x7f0012ab00 recvbuff 0x7f0012ab00 count 4096 datatype 7 op 0 root 0 comm 0x55d2c4a1b000 [nranks=16] stream 0x5633
gpu-node-01:31010:31107 [2] NCCL INFO cudaDriverVersion 12040
gpu-node-01:31010:31107 [2] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
gpu-node-01:31010:31107 [2] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.
gpu-node-01:31010:31107 [2] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation
gpu-node-01:31010:31107 [2] NCCL INFO Using non-device net plugin version 0
gpu-node-01:31010:31107 [2] NCCL INFO Using network IB
gpu-node-01:31010:31107 [2] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0,mlx5_1
gpu-node-01:31010:31107 [2] NCCL INFO NVLS multicast support is not available on dev 2
gpu-node-01:31010:31107 [2] NCCL INFO DMA-BUF is available on GPU device 2
gpu-node-01:31010:31107 [2] NCCL INFO comm 0x55d2c4a1b000 rank 10 nranks 16 cudaDev 2 busId 1a000 - Destroy COMPLETE
`

// gramChooser picks the grams of literals so that as few lines of gramRef
// as possible contain one: each pair is charged the reference lines it
// would let through that earlier choices do not already let through
// (a healthy line that passes for one literal costs nothing more when it
// passes for another), then its windows' occurrences in gramRef. The
// choice only affects speed, never results.
type gramChooser struct {
	in      map[string]uint64 // window -> the reference lines holding it (bit k: line k)
	covered uint64
}

// gramRefLines indexes gramRef's windows by the lines that hold them (at
// most 64 lines).
var gramRefLines = &lazy.Value[map[string]uint64]{New: func() map[string]uint64 {
	in := map[string]uint64{}
	for k, l := range strings.Split(strings.TrimSpace(gramRef), "\n") {
		if k == 64 {
			break
		}
		for i := 0; i+gramLen <= len(l); i++ {
			in[l[i:i+gramLen]] |= 1 << k
		}
	}
	return in
}}

func newGramChooser() *gramChooser { return &gramChooser{in: gramRefLines.Get()} }

// choose returns two consecutive 4-byte windows of lit (len(lit) >=
// gramLen+1) as little-endian uint32s; keep marks the reference lines they let through as covered
// (false for a marker's literal, which leaves the filter once seen).
func (c *gramChooser) choose(lit string, keep bool) [2]uint32 {
	best, bestNew, bestN := 0, -1, -1
	for i := 0; i+gramLen+1 <= len(lit); i++ {
		lines := c.in[lit[i:i+gramLen]] | c.in[lit[i+1:i+1+gramLen]]
		fresh, n := bits.OnesCount64(lines&^c.covered), bits.OnesCount64(lines)
		if bestNew < 0 || fresh < bestNew || (fresh == bestNew && n < bestN) {
			best, bestNew, bestN = i, fresh, n
		}
	}
	a, b := lit[best:best+gramLen], lit[best+1:best+1+gramLen]
	if keep {
		c.covered |= c.in[a] | c.in[b]
	}
	return [2]uint32{binary.LittleEndian.Uint32([]byte(a)), binary.LittleEndian.Uint32([]byte(b))}
}

// litGrams are the grams of a set of literals, two a literal.
type litGrams struct{ grams []uint32 }

func (g *litGrams) add(lit string, c *gramChooser, keep bool) {
	pair := c.choose(lit, keep)
	g.grams = append(g.grams, pair[0], pair[1])
}

// patternGrams is the grams of p's literals; ok is false when a literal
// is shorter than gramLen+1 (the pattern cannot be filtered).
func (c *gramChooser) patternGrams(p *Pattern) (g litGrams, ok bool) {
	for _, l := range p.Literals {
		if len(l) < gramLen+1 {
			return litGrams{}, false
		}
		g.add(l, c, !p.Marker)
	}
	return g, true
}

// buildGramFilter is the filter over the patterns for which live returns
// true.
func buildGramFilter(pats []*cpattern, live func(i int) bool) *gramFilter {
	f := &gramFilter{}
	for i, p := range pats {
		if !live(i) {
			continue
		}
		if !p.gramsOK {
			return &gramFilter{all: true}
		}
		f.addAll(p.grams)
	}
	f.addAll(summaryGrams.Get())
	return f
}

func (f *gramFilter) addAll(g litGrams) {
	for _, x := range g.grams {
		f.add(x)
	}
}

// summaryGrams are the grams of summaryLits (torchrun.go), which every
// filter passes.
var summaryGrams = &lazy.Value[litGrams]{New: func() litGrams {
	c := newGramChooser()
	var g litGrams
	for _, l := range summaryLits {
		g.add(l, c, true)
	}
	return g
}}
