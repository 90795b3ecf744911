package spz

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
	"github.com/rlxsplat/rlxsplat/internal/io/quant"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Options says what Write writes.
type Options struct {
	// SHDegree is the degree of the SH coefficients written (0..3);
	// coefficients above it are dropped.
	SHDegree int
	// Antialiased sets flag 0x1: the scene was trained with the
	// Mip-Splatting 2D filter (config model.antialiased).
	Antialiased bool
	// Version is 3 (the default when 0) or 2, whose rotations are coarser
	// but which older viewers read.
	Version int
}

// Write writes g as SPZ to w. g must pass g.Validate(). Positions use 12
// fractional bits, or fewer when the scene reaches beyond ±2048 units
// (each bit fewer doubles both range and step); a coordinate beyond ±2²³
// units is an error, as is a zero quaternion.
func Write(w io.Writer, g *splat.Gaussians, o Options) error {
	if err := encode(w, g, o); err != nil {
		return fmt.Errorf("spz: write: %w", err)
	}
	return nil
}

// WriteFile writes g to path as Write does, atomically (atomicfile): a
// crash leaves the old file or the new one, never a partial one.
func WriteFile(path string, g *splat.Gaussians, o Options) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return encode(w, g, o) }, nil); err != nil {
		return fmt.Errorf("spz: write %s: %w", path, err)
	}
	return nil
}

// fractionalBits is the most fractional bits (≤ 12) at which every
// coordinate of means fits a 24-bit signed integer.
func fractionalBits(means []float32) (int, error) {
	worst, at := 0.0, 0
	for j, v := range means {
		if a := math.Abs(float64(v)); a > worst {
			worst, at = a, j
		}
	}
	for fb := maxFractionalBits; fb >= 0; fb-- {
		if math.Round(worst*float64(int(1)<<fb)) <= maxFixed {
			return fb, nil
		}
	}
	return 0, fmt.Errorf("splat %d: position %c = %g is beyond the ±%d units a 24-bit fixed-point coordinate holds", at/3, "xyz"[at%3], means[at], maxFixed)
}

// encode is Write without the package prefix on its errors.
func encode(w io.Writer, g *splat.Gaussians, o Options) error {
	version := o.Version
	if version == 0 {
		version = 3
	}
	if version != 2 && version != 3 {
		return fmt.Errorf("version %d, want 2 or 3", o.Version)
	}
	if o.SHDegree < 0 || o.SHDegree > splat.MaxSHDegree {
		return fmt.Errorf("SH degree %d, want 0..%d", o.SHDegree, splat.MaxSHDegree)
	}
	if err := g.Validate(); err != nil {
		return err
	}
	n := g.Len()
	if uint64(n) > math.MaxUint32 {
		return fmt.Errorf("%d splats, the header holds at most %d", n, uint32(math.MaxUint32))
	}
	fb, err := fractionalBits(g.Means)
	if err != nil {
		return err
	}
	// Check every rotation before writing anything, so a bad scene leaves
	// no half-written stream behind in w.
	for i := 0; i < n; i++ {
		q := g.Quats[4*i : 4*i+4]
		if _, ok := toRUB(q[0], q[1], q[2], q[3]); !ok {
			return fmt.Errorf("splat %d: quaternion (%g, %g, %g, %g) cannot be normalised", i, q[0], q[1], q[2], q[3])
		}
	}

	var hdr [HeaderSize]byte
	binary.LittleEndian.PutUint32(hdr[0:], Magic)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(version))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(n))
	hdr[12] = byte(o.SHDegree)
	hdr[13] = byte(fb)
	if o.Antialiased {
		hdr[14] = FlagAntialiased
	}

	zw := gzip.NewWriter(w)
	bw := bufio.NewWriterSize(zw, 1<<16)
	bw.Write(hdr[:]) // bufio keeps the first error; Flush reports it.

	// Positions: 24-bit two's complement little-endian, RDF → RUB.
	scale := float64(int(1) << fb)
	for j, v := range g.Means {
		f := int32(math.Round(float64(posSign[j%3]*v) * scale))
		bw.Write([]byte{byte(f), byte(f >> 8), byte(f >> 16)})
	}
	for _, l := range g.OpacityLogits {
		bw.WriteByte(quant.AlphaByte(l))
	}
	for i := 0; i < n; i++ {
		dc := g.SH[i*splat.SHCoeffs*3 : i*splat.SHCoeffs*3+3]
		bw.Write([]byte{encodeColor(dc[0]), encodeColor(dc[1]), encodeColor(dc[2])})
	}
	for _, s := range g.LogScales {
		bw.WriteByte(encodeScale(s))
	}
	for i := 0; i < n; i++ {
		q := g.Quats[4*i : 4*i+4]
		r, _ := toRUB(q[0], q[1], q[2], q[3])
		if version == 3 {
			b := packSmallest3(r)
			bw.Write(b[:])
		} else {
			b := packFirst3(r)
			bw.Write(b[:])
		}
	}
	k := shDims(o.SHDegree)
	for i := 0; i < n; i++ {
		sh := g.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		for j := 1; j <= k; j++ {
			bucket := shRestBucket
			if j <= 3 {
				bucket = sh1Bucket
			}
			for c := 0; c < 3; c++ {
				bw.WriteByte(encodeSH(shSign[j]*sh[j*3+c], bucket))
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}
