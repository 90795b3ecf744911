package spz

import (
	"math"

	"github.com/rlxsplat/rlxsplat/internal/io/quant"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Header fields and encoding constants of the format.
const (
	// Magic is the first header word: "NGSP" read as a little-endian u32.
	Magic = 0x5053474e
	// HeaderSize is the size of the header in bytes.
	HeaderSize = 16
	// FlagAntialiased marks a scene trained with the Mip-Splatting 2D
	// filter, which viewers must then apply too.
	FlagAntialiased = 0x1

	// maxFractionalBits is what writers use by default: 1/4096 of a unit
	// (a quarter millimetre for a scene in metres) over ±2048 units.
	maxFractionalBits = 12
	// maxFixed is the largest magnitude a 24-bit signed integer holds
	// symmetrically.
	maxFixed = 1<<23 - 1

	// colorScale is how much of the DC coefficient the colour byte holds:
	// the spec stores dc·0.15·255 + 127.5, a narrower scale than SHC0 so
	// that base colours somewhat outside [0,1] (pulled back by the higher
	// bands) survive.
	colorScale = 0.15

	// sh1Bucket and shRestBucket are the default SH bit depths (5 bits for
	// degree 1, 4 above) as the step between the byte values written.
	sh1Bucket    = 1 << (8 - 5)
	shRestBucket = 1 << (8 - 4)
)

// Info describes an SPZ file as read.
type Info struct {
	Version        int  // 2 or 3
	Count          int  // number of splats
	SHDegree       int  // 0..3
	FractionalBits int  // fractional bits of the fixed-point positions
	Antialiased    bool // flag 0x1
}

// shDims is the number of SH coefficients per channel above DC for
// degree d: what the SH array holds per splat, times 3 channels.
func shDims(d int) int { return splat.NumCoeffs(d) - 1 }

// shSign is the sign of SH basis function k (0..15) under the RDF↔RUB map
// (x, y, z) → (x, −y, −z): Y_k(x,−y,−z) = shSign[k]·Y_k(x,y,z). A function
// keeps its sign when its total power of y and z is even. Colour is
// Σ c_k·Y_k(d), so negating c_k where shSign is −1 gives the mapped splat
// the same colour in the mapped direction. TestConvertColour checks these
// against splat.SHBasis.
var shSign = [splat.SHCoeffs]float32{
	1,     // 1
	-1,    // y
	-1,    // z
	1,     // x
	-1,    // xy
	1,     // yz
	1,     // 2z² − x² − y²
	-1,    // xz
	1,     // x² − y²
	-1, 1, // y(3x² − y²), xyz
	-1, -1, // y(4z² − x² − y²), z(2z² − 3x² − 3y²)
	1, -1, 1, // x(4z² − x² − y²), z(x² − y²), x(x² − 3y²)
}

// encodeSH quantises an SH coefficient to a byte: round(x·128)+128, then to
// the nearest multiple of bucket (the format's reduced bit depth, which
// leaves gzip less entropy), clamped to 0..255. The error is at most
// (bucket/2 + 1/2)/128 for x in [−1, 1 − bucket/256].
func encodeSH(x float32, bucket int) byte {
	q := int(math.Round(float64(x)*128)) + 128
	q = min(max(q, 0), 255)
	q = (q + bucket/2) / bucket * bucket
	return byte(min(q, 255))
}

func decodeSH(b byte) float32 { return (float32(b) - 128) / 128 }

// encodeColor quantises a DC coefficient: error ≤ 0.5/(255·0.15) ≈ 0.0131
// for dc in [−0.5/0.15, 0.5/0.15] ≈ ±3.33.
func encodeColor(dc float32) byte {
	return quant.Byte(float64(dc)*colorScale*255 + 0.5*255)
}

func decodeColor(b byte) float32 { return float32((float64(b)/255 - 0.5) / colorScale) }

// minLogScale and maxLogScale bound the log scales a scale byte holds.
const (
	minLogScale = -10.0
	maxLogScale = 255.0/16 - 10
)

// encodeScale quantises a log scale as round((s+10)·16): error ≤ 1/32 for s
// in [−10, 5.9375] (scales from 4.5e−5 to 380 units).
func encodeScale(s float32) byte { return quant.Byte((float64(s) + 10) * 16) }

func decodeScale(b byte) float32 { return float32(b)/16 - 10 }

// smallest3Max is the largest a non-largest component of a unit quaternion
// can be, |q_i| ≤ |q_max| ⇒ q_i² ≤ 1/2; the 9-bit magnitudes span it.
const smallest3Max = math.Sqrt2 / 2

// packSmallest3 encodes a unit quaternion given in the format's order
// (x, y, z, w) in version 3's 4 bytes: the index of the largest-magnitude
// component in the top 2 bits of a little-endian u32, then for each other
// component in order (the first in the highest bits) a sign bit and a 9-bit
// magnitude of |q_i|/√½. The quaternion is negated first, if needed, so the
// largest component is positive (q and −q are the same rotation). Each
// stored component is within √½·0.5/511 ≈ 6.9e−4.
func packSmallest3(q [4]float64) [4]byte {
	big := 0
	for i := 1; i < 4; i++ {
		if math.Abs(q[i]) > math.Abs(q[big]) {
			big = i
		}
	}
	s := 1.0
	if q[big] < 0 {
		s = -1
	}
	word := uint32(big)
	for i := 0; i < 4; i++ {
		if i == big {
			continue
		}
		v := s * q[i]
		mag := uint32(min(math.Round(math.Abs(v)/smallest3Max*511), 511))
		var neg uint32
		if v < 0 {
			neg = 1
		}
		word = word<<10 | neg<<9 | mag
	}
	return [4]byte{byte(word), byte(word >> 8), byte(word >> 16), byte(word >> 24)}
}

// unpackSmallest3 is the inverse of packSmallest3. The largest component
// is √(1 − Σ others²), floored at 0 for bytes no writer makes.
func unpackSmallest3(b [4]byte) [4]float64 {
	word := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	big := int(word >> 30)
	var q [4]float64
	sum := 0.0
	for i := 3; i >= 0; i-- {
		if i == big {
			continue
		}
		v := smallest3Max * float64(word&511) / 511
		if word&(1<<9) != 0 {
			v = -v
		}
		word >>= 10
		q[i] = v
		sum += v * v
	}
	q[big] = math.Sqrt(max(0, 1-sum))
	return q
}

// packFirst3 encodes a unit quaternion (x, y, z, w) in version 2's 3 bytes:
// x, y, z of the representative with w ≥ 0, each as round(v·127.5 + 127.5).
// Each is within 0.5/127.5 ≈ 3.9e−3; w = √(1 − x² − y² − z²) is only as good
// as that allows, which is poor when w is small (why version 3 exists).
func packFirst3(q [4]float64) [3]byte {
	s := 1.0
	if q[3] < 0 {
		s = -1
	}
	return [3]byte{quant.Byte(s*q[0]*127.5 + 127.5), quant.Byte(s*q[1]*127.5 + 127.5), quant.Byte(s*q[2]*127.5 + 127.5)}
}

func unpackFirst3(b [3]byte) [4]float64 {
	var q [4]float64
	sum := 0.0
	for i := 0; i < 3; i++ {
		q[i] = float64(b[i])/127.5 - 1
		sum += q[i] * q[i]
	}
	q[3] = math.Sqrt(max(0, 1-sum))
	return q
}

// toRUB maps splat quaternion (w,x,y,z), RDF, to the format's order
// (x, y, z, w) in RUB, normalised. The axis map F = diag(1,−1,−1) is a half
// turn about x, so the rotation R becomes F·R·F, whose quaternion is
// (w, x, −y, −z). ok is false for a zero (or non-finite) quaternion.
func toRUB(w, x, y, z float32) (q [4]float64, ok bool) {
	n := math.Sqrt(float64(w)*float64(w) + float64(x)*float64(x) + float64(y)*float64(y) + float64(z)*float64(z))
	if n == 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return q, false
	}
	return [4]float64{float64(x) / n, -float64(y) / n, -float64(z) / n, float64(w) / n}, true
}

// fromRUB is the inverse of toRUB (without the normalisation): (x,y,z,w)
// in RUB to the splat's (w,x,y,z) in RDF.
func fromRUB(q [4]float64) [4]float32 {
	return [4]float32{float32(q[3]), float32(q[0]), float32(-q[1]), float32(-q[2])}
}

// posSign maps a position component between RDF and RUB.
var posSign = [3]float32{1, -1, -1}
