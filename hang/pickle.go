package hang

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// checkPickle walks the opcodes of a pickle (protocols 0 to 5, as
// Python's Lib/pickletools.py lists them) without building anything, and
// refuses one that the unpickler could not read within the bounds: a
// length field that points past the end of the data (the unpickler would
// allocate what it claims before finding it short), marks nested deeper
// than maxMarks, an estimate of the unpickler's memory over maxCost bytes
// (every opcode takes a stack slot, a container or a memo entry some more:
// one byte of input can cost a hundred), or an opcode it does not know. It
// returns the number of bytes up to and including STOP.
func checkPickle(b []byte, maxCost int) (int, error) {
	i, cost, marks := 0, 0, 0
	for i < len(b) {
		op := b[i]
		cost += opCost(op)
		if cost > maxCost {
			return 0, fmt.Errorf("unpickling would take more than %d MiB", maxCost>>20)
		}
		switch op {
		case '(':
			if marks++; marks > maxMarks {
				return 0, fmt.Errorf("pickle marks nested deeper than %d", maxMarks)
			}
		case '1', 'e', 'u', 't', 'l', 'd', 'i', 'o', 0x90, 0x91:
			marks-- // these pop a mark (or fail, unpickling)
		}
		i++
		rest := len(b) - i
		var n int     // bytes of the argument
		var text bool // a newline-terminated argument
		switch op {
		case '.': // STOP
			return i, nil
		// no argument
		case '(', '0', '1', '2', 'N', 'R', 'a', 'b', 'd', '}', 'e', 'l', ']', 'o', 's', 't', ')', 'u',
			'Q', 0x81, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x97, 0x98:
		// fixed-size arguments
		case 'K', 'q', 'h', 0x80, 0x82: // BININT1 BINPUT BINGET PROTO EXT1
			n = 1
		case 'M', 0x83: // BININT2 EXT2
			n = 2
		case 'J', 'r', 'j', 0x84: // BININT LONG_BINPUT LONG_BINGET EXT4
			n = 4
		case 'G', 0x95: // BINFLOAT, FRAME (its payload is the opcodes that follow)
			n = 8
			if op == 0x95 && rest >= 8 && binary.LittleEndian.Uint64(b[i:]) > uint64(rest-8) {
				return 0, errors.New("pickle frame longer than the data")
			}
		// a length, then that many bytes
		case 'U', 0x8c, 'C', 0x8a: // SHORT_BINSTRING SHORT_BINUNICODE SHORT_BINBYTES LONG1
			if rest < 1 {
				return 0, errTruncated
			}
			n = 1 + int(b[i])
		case 'T', 'X', 'B', 0x8b: // BINSTRING BINUNICODE BINBYTES LONG4
			if rest < 4 {
				return 0, errTruncated
			}
			l := binary.LittleEndian.Uint32(b[i:])
			if uint64(l) > uint64(rest-4) {
				return 0, errTruncated
			}
			n = 4 + int(l)
		case 0x8d, 0x8e, 0x96: // BINUNICODE8 BINBYTES8 BYTEARRAY8
			if rest < 8 {
				return 0, errTruncated
			}
			l := binary.LittleEndian.Uint64(b[i:])
			if l > uint64(rest-8) {
				return 0, errTruncated
			}
			n = 8 + int(l)
		// newline-terminated (text, protocol 0) arguments
		case 'I', 'L', 'F', 'S', 'V', 'p', 'g', 'P':
			n, text = lineLen(b[i:], 1), true
		case 'c', 'i': // GLOBAL INST: module and name lines
			n, text = lineLen(b[i:], 2), true
		default:
			return 0, fmt.Errorf("unknown pickle opcode 0x%02x at byte %d", op, i-1)
		}
		if text && n > maxPickleLine {
			// A number that long would cost the unpickler's
			// big-integer parse quadratic time.
			return 0, fmt.Errorf("pickle text argument over %d bytes at byte %d", maxPickleLine, i-1)
		}
		if n < 0 || n > rest {
			return 0, errTruncated
		}
		i += n
		cost += n
	}
	return 0, errTruncated
}

// maxMarks bounds the marks open at once: each holds a stack of its own.
const maxMarks = 256

// opCost estimates what an opcode costs the unpickler in memory, besides
// its argument's bytes: a stack slot, and a container or memo entry for
// those that make one.
func opCost(op byte) int {
	switch op {
	case '(', '}', ']', ')', 'd', 'l', 't', 0x8f, 0x91, 0x85, 0x86, 0x87, 'R', 0x81, 0x92, 'o', 'i', 'c', 0x93:
		return 160
	case 'p', 'q', 'r', 0x94:
		return 64
	}
	return 16
}

// lineLen is the length of the first k newline-terminated lines of b, -1
// when b holds fewer.
func lineLen(b []byte, k int) int {
	n := 0
	for ; k > 0; k-- {
		j := bytes.IndexByte(b[n:], '\n')
		if j < 0 {
			return -1
		}
		n += j + 1
	}
	return n
}

// maxPickleLine bounds a text (protocol 0) argument; the pickles torch
// writes use the binary opcodes.
const maxPickleLine = 4096

var errTruncated = errors.New("pickle truncated (a length or line runs past the end of the data)")
