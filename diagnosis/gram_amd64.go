//go:build !purego

package diagnosis

import (
	"math/bits"
	"sync"
)

// gramScanAVX2 is in gram_amd64.s.
//
//go:noescape
func gramScanAVX2(words *[1 << gramWordBits]uint32, p []byte) (i int, mask uint32)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)
func xgetbv0() (eax, edx uint32)

// hasAVX2 reports whether the CPU and the OS support AVX2 (asked on first
// use, not at start-up: CPUID is slow in a virtual machine).
var hasAVX2 = sync.OnceValue(func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const osxsave, avx = 1 << 27, 1 << 28
	if c1&osxsave == 0 || c1&avx == 0 {
		return false
	}
	if xcr0, _ := xgetbv0(); xcr0&6 != 6 { // XMM and YMM state enabled
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	return b7&(1<<5) != 0
})

// firstHitWide is firstHit's vector path: it returns the first window
// that hits, or -1 with the offset from which the windows are still to be
// tested.
func (f *gramFilter) firstHitWide(b []byte) (hit, from int) {
	if len(b) < 64 || !hasAVX2() {
		return -1, 0
	}
	i, mask := gramScanAVX2(&f.words, b)
	if mask == 0 {
		return -1, i
	}
	// The first window of the block: 4k from the low byte, 4k+2 from the high.
	lo, hi := bits.TrailingZeros32(mask&0xff), bits.TrailingZeros32(mask>>8)
	return i + min(4*lo, 4*hi+2), 0
}
