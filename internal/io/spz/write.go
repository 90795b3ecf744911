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
	// Version is 4 (the default when 0: what Niantic's reference library
	// writes), 3 (gzip, read by viewers that predate 4) or 2 (gzip, coarser
	// rotations, for the oldest viewers).
	Version int
	// Warn, when set, receives one message when log scales fall outside
	// the [−10, 5.9375] the scale byte holds and are clamped, with their
	// count.
	Warn func(msg string)
}

// DefaultVersion is the version Write writes when Options.Version is 0.
const DefaultVersion = 4

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

// packed is a scene quantised to the format's arrays, before compression.
type packed struct {
	hdr                                   [HeaderSize]byte // the legacy header
	pos, alphas, colors, scales, rots, sh []byte
}

// encode is Write without the package prefix on its errors.
func encode(w io.Writer, g *splat.Gaussians, o Options) error {
	version := o.Version
	if version == 0 {
		version = DefaultVersion
	}
	if version < 2 || version > 4 {
		return fmt.Errorf("version %d, want 2, 3 or 4", o.Version)
	}
	p, err := pack(g, o, version)
	if err != nil {
		return err
	}
	if version == 4 {
		return writeNGSP(w, p)
	}
	zw := gzip.NewWriter(w)
	bw := bufio.NewWriterSize(zw, 1<<16)
	for _, b := range [][]byte{p.hdr[:], p.pos, p.alphas, p.colors, p.scales, p.rots, p.sh} {
		bw.Write(b) // bufio keeps the first error; Flush reports it.
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// pack checks g and quantises it to the arrays of the given version.
func pack(g *splat.Gaussians, o Options, version int) (*packed, error) {
	if o.SHDegree < 0 || o.SHDegree > splat.MaxSHDegree {
		return nil, fmt.Errorf("SH degree %d, want 0..%d", o.SHDegree, splat.MaxSHDegree)
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	n := g.Len()
	if uint64(n) > math.MaxUint32 {
		return nil, fmt.Errorf("%d splats, the header holds at most %d", n, uint32(math.MaxUint32))
	}
	fb, err := fractionalBits(g.Means)
	if err != nil {
		return nil, err
	}
	// Check every rotation before writing anything, so a bad scene leaves
	// no half-written stream behind in w.
	for i := 0; i < n; i++ {
		q := g.Quats[4*i : 4*i+4]
		if _, ok := toRUB(q[0], q[1], q[2], q[3]); !ok {
			return nil, fmt.Errorf("splat %d: quaternion (%g, %g, %g, %g) cannot be normalised", i, q[0], q[1], q[2], q[3])
		}
	}

	p := &packed{}
	hdr := &p.hdr
	binary.LittleEndian.PutUint32(hdr[0:], Magic)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(version))
	binary.LittleEndian.PutUint32(hdr[8:], uint32(n))
	hdr[12] = byte(o.SHDegree)
	hdr[13] = byte(fb)
	if o.Antialiased {
		hdr[14] = FlagAntialiased
	}

	// Positions: 24-bit two's complement little-endian, RDF → RUB.
	p.pos = make([]byte, 0, 9*n)
	scale := float64(int(1) << fb)
	for j, v := range g.Means {
		f := int32(math.Round(float64(posSign[j%3]*v) * scale))
		p.pos = append(p.pos, byte(f), byte(f>>8), byte(f>>16))
	}
	p.alphas = make([]byte, n)
	for i, l := range g.OpacityLogits {
		p.alphas[i] = quant.AlphaByte(l)
	}
	p.colors = make([]byte, 0, 3*n)
	for i := 0; i < n; i++ {
		dc := g.SH[i*splat.SHCoeffs*3 : i*splat.SHCoeffs*3+3]
		p.colors = append(p.colors, encodeColor(dc[0]), encodeColor(dc[1]), encodeColor(dc[2]))
	}
	p.scales = make([]byte, len(g.LogScales))
	clamped := 0
	for j, s := range g.LogScales {
		if s < minLogScale || s > maxLogScale {
			clamped++
		}
		p.scales[j] = encodeScale(s)
	}
	if clamped > 0 && o.Warn != nil {
		o.Warn(fmt.Sprintf("%d of %d log scales lie outside the [%g, %g] an SPZ scale byte holds and were clamped to it", clamped, len(g.LogScales), minLogScale, maxLogScale))
	}
	rotBytes := 4
	if version == 2 {
		rotBytes = 3
	}
	p.rots = make([]byte, 0, rotBytes*n)
	for i := 0; i < n; i++ {
		q := g.Quats[4*i : 4*i+4]
		r, _ := toRUB(q[0], q[1], q[2], q[3])
		if version == 2 {
			b := packFirst3(r)
			p.rots = append(p.rots, b[:]...)
		} else {
			b := packSmallest3(r)
			p.rots = append(p.rots, b[:]...)
		}
	}
	k := shDims(o.SHDegree)
	p.sh = make([]byte, 0, 3*k*n)
	for i := 0; i < n; i++ {
		sh := g.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		for j := 1; j <= k; j++ {
			bucket := shRestBucket
			if j <= 3 {
				bucket = sh1Bucket
			}
			for c := 0; c < 3; c++ {
				p.sh = append(p.sh, encodeSH(shSign[j]*sh[j*3+c], bucket))
			}
		}
	}
	return p, nil
}
