//go:build !purego

#include "textflag.h"

// func gramScanAVX2(words *[2048]uint32, p []byte) (i int, mask uint32)
//
// Tests the windows at even offsets of p, sixteen at a time (the 4-byte
// windows at i, i+2, ..., i+30, from two 32-byte loads at i and i+2), as
// gramFilter.has does (gramProbe: h = (x ^ x>>15) * gramMul, word h>>21,
// bits h>>15&31, h>>10&31, h>>5&31). It returns the first i (a multiple of 32) of a
// block in which a window hits, with the windows that hit (bit k: the
// window at i+4k for k < 8, at i+4(k-8)+2 for k >= 8), or the first i for
// which i+34 > len(p) and no bit (no block left to test).
TEXT ·gramScanAVX2(SB), NOSPLIT, $0-44
	MOVQ words+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	SUBQ $34, CX
	XORQ DX, DX
	// VEX moves only: a legacy SSE instruction here, with the upper
	// halves dirty, costs a state transition each.
	MOVL  $0x85EBCA77, R8
	VMOVD R8, X15
	VPBROADCASTD X15, Y15
	MOVL  $31, R8
	VMOVD R8, X13
	VPBROADCASTD X13, Y13
	MOVL  $1, R8
	VMOVD R8, X12
	VPBROADCASTD X12, Y12

loop:
	CMPQ DX, CX
	JGT  done
	VMOVDQU (SI)(DX*1), Y0
	VMOVDQU 2(SI)(DX*1), Y1
	VPSRLD  $15, Y0, Y2
	VPSRLD  $15, Y1, Y3
	VPXOR   Y2, Y0, Y0
	VPXOR   Y3, Y1, Y1
	VPMULLD Y15, Y0, Y0 // h = (x ^ x>>15) * gramMul
	VPMULLD Y15, Y1, Y1
	VPSRLD  $21, Y0, Y4 // the words
	VPSRLD  $21, Y1, Y5
	VPCMPEQD Y6, Y6, Y6
	VPXOR   Y7, Y7, Y7
	VPGATHERDD Y6, (AX)(Y4*4), Y7
	VPCMPEQD Y8, Y8, Y8
	VPXOR   Y9, Y9, Y9
	VPGATHERDD Y8, (AX)(Y5*4), Y9
	// The three bits of each window's word: 1<<(h>>15&31) | 1<<(h>>10&31) | 1<<(h>>5&31).
	VPSRLD  $15, Y0, Y2
	VPAND   Y13, Y2, Y2
	VPSLLVD Y2, Y12, Y10
	VPSRLD  $10, Y0, Y2
	VPAND   Y13, Y2, Y2
	VPSLLVD Y2, Y12, Y2
	VPOR    Y2, Y10, Y10
	VPSRLD  $5, Y0, Y2
	VPAND   Y13, Y2, Y2
	VPSLLVD Y2, Y12, Y2
	VPOR    Y2, Y10, Y10
	VPSRLD  $15, Y1, Y3
	VPAND   Y13, Y3, Y3
	VPSLLVD Y3, Y12, Y11
	VPSRLD  $10, Y1, Y3
	VPAND   Y13, Y3, Y3
	VPSLLVD Y3, Y12, Y3
	VPOR    Y3, Y11, Y11
	VPSRLD  $5, Y1, Y3
	VPAND   Y13, Y3, Y3
	VPSLLVD Y3, Y12, Y3
	VPOR    Y3, Y11, Y11
	// A window hits when its word has all three: (word & bits) == bits.
	VPAND    Y10, Y7, Y7
	VPAND    Y11, Y9, Y9
	VPCMPEQD Y10, Y7, Y7
	VPCMPEQD Y11, Y9, Y9
	VPOR     Y7, Y9, Y10
	VPTEST   Y10, Y10
	JNZ      hit
	ADDQ     $32, DX
	JMP      loop

hit:
	// Which windows: lane k of Y7 is the window at i+4k, of Y9 at i+4k+2.
	VMOVMSKPS Y7, R9
	VMOVMSKPS Y9, R10
	SHLL      $8, R10
	ORL       R10, R9
	VZEROUPPER
	MOVQ DX, i+32(FP)
	MOVL R9, mask+40(FP)
	RET

done:
	VZEROUPPER
	MOVQ DX, i+32(FP)
	MOVL $0, mask+40(FP)
	RET

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv0() (eax, edx uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET
