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
	roL1        = 4  // float64 in words 4,5
	roSq        = 6  // float64 in words 6,7
	roSSIM      = 8  // float64 in words 8,9
	roBig       = 10 // splats bin_count queued for a warp each
	roBigBits   = 11 // words of hit bits they asked for (bin.cu)
	roWords     = 16
)

// readout is the step's readout block as read back.
type readout [roWords]uint32

func (r *readout) f64(word int) float64 {
	return math.Float64frombits(uint64(r[word]) | uint64(r[word+1])<<32)
}

func readoutFromBytes(b []byte) readout {
	var r readout
	for i := range r {
		r[i] = binary.LittleEndian.Uint32(b[i*4:])
	}
	return r
}
