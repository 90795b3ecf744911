package spz

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
)

// sceneSeed seeds every random scene of these tests.
const sceneSeed = 20260511

// randomScene is splattest's random scene with DC coefficients in ±3: inside what the
// format represents, so the round-trip bounds apply.
func randomScene(seed uint64, n, deg int) *splat.Gaussians {
	return splattest.RandomScene(seed, n, deg, 3)
}

// encodeBytes writes g with o, failing the test on error.
func encodeBytes(t testing.TB, g *splat.Gaussians, o Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, g, o); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gunzip returns the decompressed payload of an SPZ file.
func gunzip(t testing.TB, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gzipBytes compresses a payload the tests built by hand.
func gzipBytes(t testing.TB, payload []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// unit returns q (w,x,y,z) normalised, with the sign that makes its
// largest-magnitude component positive, so q and −q compare equal.
func unit(q []float32) [4]float64 {
	var r [4]float64
	n, big := 0.0, 0
	for i, v := range q {
		r[i] = float64(v)
		n += r[i] * r[i]
		if math.Abs(r[i]) > math.Abs(r[big]) {
			big = i
		}
	}
	n = math.Sqrt(n)
	if r[big] < 0 {
		n = -n
	}
	for i := range r {
		r[i] /= n
	}
	return r
}

// bounds are the largest round-trip errors a file may introduce, by field.
type bounds struct {
	pos     float64 // position, units
	opacity float64 // sigmoid(logit)
	dc      float64 // DC coefficient
	logS    float64 // log scale
	quat    float64 // each component of the unit quaternion, up to sign
	quatW   float64 // its w (version 2 derives w from x, y, z)
	sh1     float64 // degree-1 coefficients
	shRest  float64 // degree 2 and 3
}

// boundsFor states the quantisation error of each field for a file of
// the given version and fractional bits; each comes from the encoder's
// step (half a step of rounding), plus 1e−5 for float32 arithmetic.
func boundsFor(version, fb int) bounds {
	const eps = 1e-5
	b := bounds{
		pos:     math.Ldexp(0.5, -fb) + eps,
		opacity: 0.5/255 + eps,
		dc:      0.5/(255*colorScale) + eps,
		logS:    1.0/32 + eps,
		sh1:     (sh1Bucket/2+0.5)/128 + eps,
		shRest:  (shRestBucket/2+0.5)/128 + eps,
	}
	if version == 3 {
		// Stored components: √½·0.5/511 ≈ 6.9e−4. The largest, derived as
		// √(1 − Σ others²), moves by at most |ΔΣ|/(2·½) ≤ 3·2·√½·6.9e−4
		// ≈ 2.9e−3 since it is at least ½.
		b.quat = 3e-3
		b.quatW = 3e-3
	} else {
		// x, y, z: 0.5/127.5 ≈ 3.9e−3; w = √(1 − Σ): |Δw| ≤ √|ΔΣ| with
		// |ΔΣ| ≤ 6·3.9e−3 + 3·3.9e−3², so ≈ 0.154 in the worst case.
		e := 0.5 / 127.5
		b.quat = e + eps
		b.quatW = math.Sqrt(6*e+3*e*e) + eps
	}
	return b
}

// within fails the test when got differs from want by more than b in any
// field; deg is the SH degree the file held, coefficients above it must be
// zero in got.
func within(t testing.TB, got, want *splat.Gaussians, deg int, b bounds) {
	t.Helper()
	if got.Len() != want.Len() {
		t.Fatalf("%d splats, want %d", got.Len(), want.Len())
	}
	check := func(field string, i int, g, w, bound float64) {
		t.Helper()
		if d := math.Abs(g - w); !(d <= bound) {
			t.Fatalf("splat %d %s: got %g, want %g (error %.3g > bound %.3g)", i, field, g, w, d, bound)
		}
	}
	for i := 0; i < want.Len(); i++ {
		for c := 0; c < 3; c++ {
			check("mean", i, float64(got.Means[3*i+c]), float64(want.Means[3*i+c]), b.pos)
			check("log scale", i, float64(got.LogScales[3*i+c]), float64(want.LogScales[3*i+c]), b.logS)
		}
		check("opacity", i, float64(splat.Sigmoid(got.OpacityLogits[i])), float64(splat.Sigmoid(want.OpacityLogits[i])), b.opacity)
		// The decoded quaternion is compared as read, not renormalised:
		// the bounds are on the stored components and the derived one.
		// Its sign is matched to want's (q and −q are one rotation).
		var gq [4]float64
		for c := range gq {
			gq[c] = float64(got.Quats[4*i+c])
		}
		wq := unit(want.Quats[4*i : 4*i+4])
		dot := 0.0
		for c := range gq {
			dot += gq[c] * wq[c]
		}
		if dot < 0 {
			for c := range gq {
				gq[c] = -gq[c]
			}
		}
		check("quat w", i, gq[0], wq[0], b.quatW)
		for c := 1; c < 4; c++ {
			check("quat xyz", i, gq[c], wq[c], b.quat)
		}
		sg := got.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		sw := want.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		for j := 0; j < splat.SHCoeffs; j++ {
			for c := 0; c < 3; c++ {
				switch {
				case j == 0:
					check("sh dc", i, float64(sg[c]), float64(sw[c]), b.dc)
				case j >= splat.NumCoeffs(deg):
					check("sh above degree", i, float64(sg[j*3+c]), 0, 0)
				case j <= 3:
					check("sh degree 1", i, float64(sg[j*3+c]), float64(sw[j*3+c]), b.sh1)
				default:
					check("sh degree 2-3", i, float64(sg[j*3+c]), float64(sw[j*3+c]), b.shRest)
				}
			}
		}
	}
}
