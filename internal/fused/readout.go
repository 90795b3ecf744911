package fused

import (
	"encoding/binary"
	"math"
)

// Word indices of the readout block (shaders/readout.h).
const (
	roVisible   = 0
	roEntries   = 1
	roAbort     = 2
	roNonFinite = 3
	roL1        = 4  // two-float sum in words 4,5
	roSq        = 6  // two-float sum in words 6,7
	roSSIM      = 8  // two-float sum in words 8,9
	roBig       = 10 // splats bin_count queued for a warp each
	roBigBits   = 11 // words of hit bits they asked for (bin.cu)
	roPeer      = 13 // a data-parallel step: some rank overflowed (SetReduce)
	roWords     = 16
)

// readout is the step's readout block as read back.
type readout [roWords]uint32

// sum is the two-float sum at word: float32 hi in word, lo in word+1 (the kernels have no
// float64, which Metal lacks; hi + lo carries about 48 bits).
func (r *readout) sum(word int) float64 {
	return float64(math.Float32frombits(r[word])) + float64(math.Float32frombits(r[word+1]))
}

func readoutFromBytes(b []byte) readout {
	var r readout
	for i := range r {
		r[i] = binary.LittleEndian.Uint32(b[i*4:])
	}
	return r
}
