package viewer

import (
	"encoding/binary"
	"fmt"
	"github.com/rlxsplat/rlxsplat/internal/io/quant"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// The scene travels to the page in a compact binary layout of its own, quantised the way SPZ
// quantises (fixed-point positions, byte opacities and colours), so that a live refresh of a
// million splats is tens of megabytes, not the 236 of float32 parameters:
//
//	header (64 bytes, little endian):
//	  0  magic "RLXV"        4  version (1)        8  N            12 SH degree (0..3)
//	  16 position min x,y,z (float32)              28 position max x,y,z (float32)
//	  40 log-scale min (float32)                   44 log-scale max (float32)
//	  48 SH rest bound (float32)                   52..63 zero
//	then planar arrays, splat-major within each:
//	  positions   N×3 uint24: (p − min)/(max − min)·(2²⁴−1), per axis
//	  log-scales  N×3 uint16: (s − smin)/(smax − smin)·65535
//	  rotations   N×4 int8:   the unit quaternion (w,x,y,z) with w ≥ 0, ·127
//	  opacities   N   uint8:  sigmoid(logit)·255
//	  colours     N×3 uint8:  (0.5 + SHC0·dc + 0.5)/2·255, i.e. [−0.5, 1.5] in 255 steps
//	  SH rest     N×K×3 int8: coefficient/bound·127, K = (deg+1)²−1, coefficient-major
//
// The page turns these back into floats; nothing in it depends on the trainer's layout.
const (
	sceneMagic   = "RLXV"
	sceneVersion = 1
	headerSize   = 64
	posMax       = 1<<24 - 1
	// colourLo and colourSpan place the DC colour's byte range: trained colours stray beyond
	// [0, 1] before the final clamp, and the render keeps max(0, ·) of them.
	colourLo   = -0.5
	colourSpan = 2.0
)

// BytesPerSplat is the size of one splat in the encoded scene at SH degree deg.
func BytesPerSplat(deg int) int { return 9 + 6 + 4 + 1 + 3 + (splat.NumCoeffs(deg)-1)*3 }

// Encode quantises g (at SH degree deg) into the page's scene layout. g must be valid
// (splat.Gaussians.Validate): Encode reads it and does not keep it.
func Encode(g *splat.Gaussians, deg int) ([]byte, error) {
	if deg < 0 || deg > splat.MaxSHDegree {
		return nil, fmt.Errorf("viewer: SH degree %d outside 0..%d", deg, splat.MaxSHDegree)
	}
	n := g.Len()
	if len(g.Means) != 3*n || len(g.LogScales) != 3*n || len(g.Quats) != 4*n || len(g.SH) != n*splat.SHCoeffs*3 {
		return nil, fmt.Errorf("viewer: the scene's arrays do not agree on %d splats", n)
	}
	k := splat.NumCoeffs(deg) - 1
	out := make([]byte, headerSize+n*BytesPerSplat(deg))
	le := binary.LittleEndian
	copy(out, sceneMagic)
	le.PutUint32(out[4:], sceneVersion)
	le.PutUint32(out[8:], uint32(n))
	le.PutUint32(out[12:], uint32(deg))

	lo := [3]float32{}
	hi := [3]float32{}
	slo, shi := float32(0), float32(0)
	var shBound float32
	for i := 0; i < n; i++ {
		for a := 0; a < 3; a++ {
			p, s := g.Means[3*i+a], g.LogScales[3*i+a]
			if i == 0 || p < lo[a] {
				lo[a] = p
			}
			if i == 0 || p > hi[a] {
				hi[a] = p
			}
			if (i == 0 && a == 0) || s < slo {
				slo = s
			}
			if (i == 0 && a == 0) || s > shi {
				shi = s
			}
		}
		sh := g.SH[i*splat.SHCoeffs*3:]
		for j := 3; j < (k+1)*3; j++ {
			shBound = max(shBound, float32(math.Abs(float64(sh[j]))))
		}
	}
	for a := 0; a < 3; a++ {
		le.PutUint32(out[16+4*a:], math.Float32bits(lo[a]))
		le.PutUint32(out[28+4*a:], math.Float32bits(hi[a]))
	}
	le.PutUint32(out[40:], math.Float32bits(slo))
	le.PutUint32(out[44:], math.Float32bits(shi))
	le.PutUint32(out[48:], math.Float32bits(shBound))

	pos := out[headerSize:]
	scl := pos[9*n:]
	rot := scl[6*n:]
	opa := rot[4*n:]
	col := opa[n:]
	rest := col[3*n:]
	for i := 0; i < n; i++ {
		for a := 0; a < 3; a++ {
			v := uint32(unitFixed(g.Means[3*i+a], lo[a], hi[a], posMax))
			pos[9*i+3*a], pos[9*i+3*a+1], pos[9*i+3*a+2] = byte(v), byte(v>>8), byte(v>>16)
			le.PutUint16(scl[6*i+2*a:], uint16(unitFixed(g.LogScales[3*i+a], slo, shi, 65535)))
		}
		q := g.Quats[4*i : 4*i+4]
		qn := math.Sqrt(float64(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3]))
		sign := 1.0
		if q[0] < 0 {
			sign = -1
		}
		for c := 0; c < 4; c++ {
			v := 0.0
			if qn > 0 {
				v = sign * float64(q[c]) / qn
			} else if c == 0 {
				v = 1 // a zero quaternion renders as the identity, as the projection normalises it
			}
			rot[4*i+c] = byte(int8(math.Round(v * 127)))
		}
		opa[i] = quant.Byte(float64(splat.Sigmoid(g.OpacityLogits[i])) * 255)
		sh := g.SH[i*splat.SHCoeffs*3:]
		for c := 0; c < 3; c++ {
			rgb := 0.5 + splat.SHC0*float64(sh[c])
			col[3*i+c] = quant.Byte((rgb - colourLo) / colourSpan * 255)
		}
		r := rest[i*k*3:]
		for j := 0; j < k*3; j++ {
			v := 0.0
			if shBound > 0 {
				v = float64(sh[3+j]) / float64(shBound) * 127
			}
			r[j] = byte(int8(math.Round(min(max(v, -127), 127))))
		}
	}
	return out, nil
}

// unitFixed maps v in [lo, hi] to the integers 0..top (a degenerate range gives 0).
func unitFixed(v, lo, hi float32, top float64) float64 {
	if !(hi > lo) {
		return 0
	}
	return math.Round(min(max(float64(v-lo)/float64(hi-lo), 0), 1) * top)
}

// Decode is the page's decoding written in Go: the tests check Encode against it, and it
// documents what the page must compute. SH coefficients above deg come back zero.
func Decode(b []byte) (*splat.Gaussians, int, error) {
	if len(b) < headerSize || string(b[:4]) != sceneMagic {
		return nil, 0, fmt.Errorf("viewer: not an encoded scene (no %q header)", sceneMagic)
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[4:]); v != sceneVersion {
		return nil, 0, fmt.Errorf("viewer: encoded scene version %d, want %d", v, sceneVersion)
	}
	n64, deg := uint64(le.Uint32(b[8:])), int(le.Uint32(b[12:]))
	if deg > splat.MaxSHDegree {
		return nil, 0, fmt.Errorf("viewer: encoded scene has SH degree %d", deg)
	}
	if want := uint64(headerSize) + n64*uint64(BytesPerSplat(deg)); uint64(len(b)) != want {
		return nil, 0, fmt.Errorf("viewer: encoded scene of %d splats needs %d bytes, has %d", n64, want, len(b))
	}
	n := int(n64)
	f32 := func(off int) float32 { return math.Float32frombits(le.Uint32(b[off:])) }
	g := splat.New(n)
	k := splat.NumCoeffs(deg) - 1
	pos := b[headerSize:]
	scl := pos[9*n:]
	rot := scl[6*n:]
	opa := rot[4*n:]
	col := opa[n:]
	rest := col[3*n:]
	slo, shi, bound := f32(40), f32(44), f32(48)
	for i := 0; i < n; i++ {
		for a := 0; a < 3; a++ {
			lo, hi := f32(16+4*a), f32(28+4*a)
			v := uint32(pos[9*i+3*a]) | uint32(pos[9*i+3*a+1])<<8 | uint32(pos[9*i+3*a+2])<<16
			g.Means[3*i+a] = lo + (hi-lo)*float32(float64(v)/posMax)
			g.LogScales[3*i+a] = slo + (shi-slo)*float32(float64(le.Uint16(scl[6*i+2*a:]))/65535)
		}
		for c := 0; c < 4; c++ {
			g.Quats[4*i+c] = float32(int8(rot[4*i+c])) / 127
		}
		a := min(max(float64(opa[i])/255, 0.25/255), 1-0.25/255)
		g.OpacityLogits[i] = float32(math.Log(a / (1 - a)))
		for c := 0; c < 3; c++ {
			rgb := float64(col[3*i+c])/255*colourSpan + colourLo
			g.SH[i*splat.SHCoeffs*3+c] = float32((rgb - 0.5) / splat.SHC0)
		}
		for j := 0; j < k*3; j++ {
			g.SH[i*splat.SHCoeffs*3+3+j] = float32(int8(rest[i*k*3+j])) / 127 * bound
		}
	}
	return g, deg, nil
}
