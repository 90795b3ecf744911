package gltfsplat

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
)

// sceneSeed seeds every random scene of these tests.
const sceneSeed = 20260512

// randomScene is splattest's random scene with DC coefficients in ±3.
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

// chunks splits a GLB the writer made into its JSON (decoded into a
// generic map, so tests can edit it) and BIN chunk.
func chunks(t testing.TB, data []byte) (map[string]any, []byte) {
	t.Helper()
	js, bin, err := splitGLB(data)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, bin
}

// glb packs a JSON document and a BIN chunk into a GLB, padding both to 4
// bytes as the format requires.
func glb(t testing.TB, doc any, bin []byte) []byte {
	t.Helper()
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	for len(js)%4 != 0 {
		js = append(js, ' ')
	}
	bin = append([]byte(nil), bin...)
	for len(bin)%4 != 0 {
		bin = append(bin, 0)
	}
	var out bytes.Buffer
	le := binary.LittleEndian
	total := glbHeaderLen + chunkHdrLen + len(js)
	if bin != nil {
		total += chunkHdrLen + len(bin)
	}
	_ = binary.Write(&out, le, []uint32{glbMagic, glbVersion, uint32(total), uint32(len(js)), chunkJSON})
	out.Write(js)
	if bin != nil {
		_ = binary.Write(&out, le, []uint32{uint32(len(bin)), chunkBIN})
		out.Write(bin)
	}
	return out.Bytes()
}

// unitQuat is q (w,x,y,z) normalised in float64 and rounded to float32, as
// Write stores it.
func unitQuat(q []float32) [4]float32 {
	n := 0.0
	for _, v := range q {
		n += float64(v) * float64(v)
	}
	n = math.Sqrt(n)
	var r [4]float32
	for i, v := range q {
		r[i] = float32(float64(v) / n)
	}
	return r
}

// opacityBound is how far a round trip may move an opacity: float32
// rounding of the sigmoid and of the logit (|logit| ≤ 17, slope ≤ ¼).
const opacityBound = 1e-6

// same fails the test unless got is want as the format keeps it: means,
// log scales and SH up to deg exact, SH above deg zero, quaternions equal
// to want's normalised ones, opacities within opacityBound.
func same(t testing.TB, got, want *splat.Gaussians, deg int) {
	t.Helper()
	if got.Len() != want.Len() {
		t.Fatalf("%d splats, want %d", got.Len(), want.Len())
	}
	for i := 0; i < want.Len(); i++ {
		for c := 0; c < 3; c++ {
			if g, w := got.Means[3*i+c], want.Means[3*i+c]; g != w {
				t.Fatalf("splat %d mean %d: got %g, want %g", i, c, g, w)
			}
			// Log scales pass through float32 exp and log: within
			// a few float32 ulps.
			if g, w := got.LogScales[3*i+c], want.LogScales[3*i+c]; math.Abs(float64(g-w)) > 1e-6*max(1, math.Abs(float64(w))) {
				t.Fatalf("splat %d log scale %d: got %g, want %g", i, c, g, w)
			}
		}
		if g, w := [4]float32(got.Quats[4*i:4*i+4]), unitQuat(want.Quats[4*i:4*i+4]); g != w {
			t.Fatalf("splat %d quaternion: got %v, want %v", i, g, w)
		}
		ga, wa := float64(splat.Sigmoid(got.OpacityLogits[i])), float64(splat.Sigmoid(want.OpacityLogits[i]))
		if d := math.Abs(ga - wa); !(d <= opacityBound) {
			t.Fatalf("splat %d opacity: got %g, want %g (error %.3g > %.3g)", i, ga, wa, d, opacityBound)
		}
		for k := 0; k < splat.SHCoeffs; k++ {
			for c := 0; c < 3; c++ {
				g, w := got.SH[(i*splat.SHCoeffs+k)*3+c], want.SH[(i*splat.SHCoeffs+k)*3+c]
				if k >= splat.NumCoeffs(deg) {
					w = 0
				}
				if g != w {
					t.Fatalf("splat %d SH coefficient %d channel %d: got %g, want %g", i, k, c, g, w)
				}
			}
		}
	}
}
