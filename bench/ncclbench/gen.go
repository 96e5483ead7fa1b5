package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
)

// lineGen produces realistic, healthy NCCL INFO lines of a job of n ranks,
// 8 per node, mostly the Channel/transport lines that dominate a real
// NCCL_DEBUG=INFO log. It is deterministic for a given seed.
type lineGen struct {
	rng  *rand.Rand
	n    int
	rank int // -1: every line from a random rank
	comm uint64
}

func newLineGen(seed uint64, n, rank int) *lineGen {
	return &lineGen{rng: rand.New(rand.NewPCG(seed, 0x6e63636c)), n: n, rank: rank, comm: 0x55d2c4a1b000 + seed}
}

// next appends one line, newline included, to b.
func (g *lineGen) next(b []byte) []byte {
	r := g.rank
	if r < 0 {
		r = g.rng.IntN(g.n)
	}
	node, gpu := r/8, r%8
	pid := 31000 + r
	b = fmt.Appendf(b, "gpu-node-%02d:%d:%d [%d] NCCL INFO ", node, pid, pid+g.rng.IntN(3)*97, gpu)
	peer := (r + 1) % g.n
	ch := g.rng.IntN(32)
	switch k := g.rng.IntN(100); {
	case k < 30:
		b = fmt.Appendf(b, "Channel %02d/0 : %d[%d] -> %d[%d] via P2P/CUMEM/read", ch, r, gpu, peer, peer%8)
	case k < 45:
		b = fmt.Appendf(b, "Channel %02d/1 : %d[%d] -> %d[%d] via P2P/IPC", ch, r, gpu, peer, peer%8)
	case k < 55:
		b = fmt.Appendf(b, "Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/IB/%d/GDRDMA", ch, r, gpu, peer, peer%8, ch%4)
	case k < 65:
		b = fmt.Appendf(b, "Channel %02d/0 : %d[%d] -> %d[%d] [receive] via NET/IB/%d/GDRDMA", ch, peer, peer%8, r, gpu, ch%4)
	case k < 70:
		b = fmt.Appendf(b, "Channel %02d/0 : %d[%d] -> %d[%d] via SHM/direct/direct", ch, r, gpu, peer, peer%8)
	case k < 74:
		b = fmt.Appendf(b, "Trees [0] %d/-1/-1->%d->%d [1] %d/-1/-1->%d->%d", peer, r, r-1, peer, r, r-1)
	case k < 77:
		b = append(b, "Connected all rings"...)
	case k < 80:
		b = append(b, "Connected all trees"...)
	case k < 83:
		b = append(b, "threadThresholds 8/8/64 | 128/8/64 | 512 | 512"...)
	case k < 86:
		b = fmt.Appendf(b, "comm %#x rank %d nRanks %d nNodes %d localRanks 8 localRank %d MNNVL 0", g.comm, r, g.n, (g.n+7)/8, gpu)
	case k < 88:
		b = fmt.Appendf(b, "ncclCommInitRank comm %#x rank %d nranks %d cudaDev %d nvmlDev %d busId %x000 commId 0x7c1d3e9a - Init COMPLETE", g.comm, r, g.n, gpu, gpu, 0x18+gpu)
	case k < 90:
		b = append(b, "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB ib0:10.1.0.1<0>"...)
	case k < 92:
		b = append(b, "P2P Chunksize set to 131072"...)
	case k < 94:
		b = fmt.Appendf(b, "Setting affinity for GPU %d to ffff,ffffffff", gpu)
	case k < 96:
		b = append(b, "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"...)
	case k < 98:
		b = fmt.Appendf(b, "GPU Direct RDMA Enabled for HCA %d 'mlx5_%d'", ch%4, ch%4)
	default:
		b = fmt.Appendf(b, "AllReduce: opCount %x sendbuff 0x7f%08x recvbuff 0x7f%08x count %d datatype 7 op 0 root 0 comm %#x [nranks=%d] stream 0x5633", g.rng.IntN(1<<20), g.rng.Uint32(), g.rng.Uint32(), 1<<g.rng.IntN(28), g.comm, g.n)
	}
	return append(b, '\n')
}

// Generate writes exactly size bytes of NCCL INFO lines of a 2x8 job to
// w; the last line is shortened to fit and still ends in a newline.
func Generate(w io.Writer, size int64) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	g := newLineGen(1, 16, -1)
	var line []byte
	for left := size; left > 0; {
		line = g.next(line[:0])
		if int64(len(line)) > left {
			line = append(line[:left-1], '\n')
		}
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		left -= int64(len(line))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// WriteRank writes about size bytes (whole lines, at least one) of rank
// id of an n-rank job to w, one Write per line as a line-buffered NCCL
// rank does, so that ranks sharing a pipe interleave line by line.
func WriteRank(w io.Writer, id, n int, size int64) error {
	g := newLineGen(uint64(id)+100, n, id)
	var line []byte
	for left := size; ; {
		line = g.next(line[:0])
		if _, err := w.Write(line); err != nil {
			return fmt.Errorf("rank %d: write: %w", id, err)
		}
		if left -= int64(len(line)); left <= 0 {
			return nil
		}
	}
}

// LongLine writes size bytes of one line with no newline to w, 64 KiB per
// Write.
func LongLine(w io.Writer, size int64) error {
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = "0123456789abcdef"[i%16]
	}
	for left := size; left > 0; {
		n := int64(len(buf))
		if n > left {
			n = left
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return fmt.Errorf("write: %w (%s bytes left)", err, strconv.FormatInt(left, 10))
		}
		left -= n
	}
	return nil
}
