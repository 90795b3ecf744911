package engine

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/fmath"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// randomSplats returns n splats with random geometry and opacity logits in [−6, 6].
func randomSplats(rng *rand.Rand, n int) *splat.Gaussians {
	g := splat.New(n)
	for i := 0; i < n; i++ {
		for a := 0; a < 3; a++ {
			g.Means[3*i+a] = float32(rng.NormFloat64())
			g.LogScales[3*i+a] = float32(-3 + 2*rng.Float64())
		}
		for a := 0; a < 4; a++ {
			g.Quats[4*i+a] = float32(rng.NormFloat64())
		}
		g.OpacityLogits[i] = float32(12*rng.Float64() - 6)
	}
	return g
}

// With RegInView the regularisers' gradients reach the splats valid marks and no other, and
// those they reach take the same values as without it.
func TestRegularizerGradsInView(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 9))
	const n = 9
	g := randomSplats(rng, n)
	valid := make([]bool, n)
	for i := range valid {
		valid[i] = i%3 != 1
	}
	m := MCMCStep{OpacityReg: 0.01, ScaleReg: 0.02}
	all := splat.Zeros[float32](n)
	RegularizerGrads(all, g, m, valid, 0, n) // RegInView off: valid is not read
	m.RegInView = true
	in := splat.Zeros[float32](n)
	RegularizerGrads(in, g, m, valid, 0, n)
	for i := range n {
		for a := 0; a < 3; a++ {
			want := all.LogScales[3*i+a]
			if !valid[i] {
				want = 0
			}
			if got := in.LogScales[3*i+a]; got != want || all.LogScales[3*i+a] == 0 {
				t.Errorf("splat %d (in view %v) log-scale %d: gradient %g, want %g (every splat's: %g)", i, valid[i], a, got, want, all.LogScales[3*i+a])
			}
		}
		want := all.OpacityLogits[i]
		if !valid[i] {
			want = 0
		}
		if got := in.OpacityLogits[i]; got != want || all.OpacityLogits[i] == 0 {
			t.Errorf("splat %d (in view %v) opacity: gradient %g, want %g (every splat's: %g)", i, valid[i], got, want, all.OpacityLogits[i])
		}
	}
}

// The regularisers' gradients match central differences of RegularizerLoss (float64).
func TestRegularizerGradsFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 8))
	const n = 7
	g := randomSplats(rng, n)
	for _, m := range []MCMCStep{{OpacityReg: 0.01, ScaleReg: 0.01}, {OpacityReg: 0.3}, {ScaleReg: 2}} {
		grads := splat.Zeros[float32](n)
		RegularizerGrads(grads, g, m, nil, 0, n)
		logits := make([]float64, n)
		scales := make([]float64, 3*n)
		for i := range logits {
			logits[i] = float64(g.OpacityLogits[i])
		}
		for i := range scales {
			scales[i] = float64(g.LogScales[i])
		}
		loss := func() float64 {
			return RegularizerLoss(logits, scales, float64(m.OpacityReg), float64(m.ScaleReg))
		}
		const h = 1e-4
		check := func(what string, x []float64, i int, got float32) {
			t.Helper()
			x0 := x[i]
			x[i] = x0 + h
			up := loss()
			x[i] = x0 - h
			down := loss()
			x[i] = x0
			want := (up - down) / (2 * h)
			if math.Abs(float64(got)-want) > 1e-5*math.Abs(want)+1e-12 {
				t.Errorf("%+v: d/d%s[%d] = %v, finite difference %v", m, what, i, got, want)
			}
		}
		for i := range logits {
			check("logit", logits, i, grads.OpacityLogits[i])
		}
		for i := range scales {
			check("log_scale", scales, i, grads.LogScales[i])
		}
	}
}

// The noise moves a splat by Σ·ε·gate(o)·scale: against a float64 evaluation of the same
// samples, and not at all for an opaque splat (the gate is below float32's smallest normal).
func TestPerturbMeans(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 40
	g := randomSplats(rng, n)
	g.OpacityLogits[0] = splat.Logit(0.001) // gate ≈ 1
	g.OpacityLogits[1] = splat.Logit(0.9)   // gate ≈ 0
	before := g.Clone()
	m := MCMCStep{NoiseScale: 3, NoiseSeed: 99, NoiseStep: 1234}
	PerturbMeans(g, m, 0, n)
	for i := 0; i < n; i++ {
		q := before.Quats[4*i : 4*i+4]
		r := camera.RotationFromQuat(float64(q[0]), float64(q[1]), float64(q[2]), float64(q[3]))
		o := 1 / (1 + math.Exp(-float64(before.OpacityLogits[i])))
		gate := 1 / (1 + math.Exp(-100*((1-o)-0.995)))
		var eps, s2 [3]float64
		for a := range eps {
			eps[a] = float64(fmath.Normal(fmath.NormalKey(99, 1234, uint32(i), uint32(a)))) * gate * 3
			s := math.Exp(float64(before.LogScales[3*i+a]))
			s2[a] = s * s
		}
		for a := 0; a < 3; a++ {
			want := 0.0
			norm := 0.0
			for b := 0; b < 3; b++ {
				cov := 0.0
				for c := 0; c < 3; c++ {
					cov += r[a][c] * s2[c] * r[b][c]
				}
				want += cov * eps[b]
				norm += math.Abs(cov * eps[b])
			}
			got := float64(g.Means[3*i+a]) - float64(before.Means[3*i+a])
			// float32 rounding of the mean itself (|μ| ≲ 4) and of the products.
			if math.Abs(got-want) > 1e-6*norm+4e-7*math.Abs(float64(before.Means[3*i+a]))+1e-12 {
				t.Errorf("splat %d axis %d: moved %v, want %v", i, a, got, want)
			}
		}
	}
	if g.Means[3] != before.Means[3] || g.Means[4] != before.Means[4] || g.Means[5] != before.Means[5] {
		t.Errorf("an opaque splat moved: %v → %v", before.Means[3:6], g.Means[3:6])
	}
	if g.Means[0] == before.Means[0] {
		t.Error("a transparent splat did not move")
	}
	// Zero scale: no noise at all.
	h := before.Clone()
	PerturbMeans(h, MCMCStep{NoiseSeed: 99, NoiseStep: 1234}, 0, n)
	for i, x := range h.Means {
		if x != before.Means[i] {
			t.Fatalf("means[%d] moved with NoiseScale 0", i)
		}
	}
}

func TestRelocationValidate(t *testing.T) {
	ok := Relocation{Rows: []int32{2}, OpacityLogits: []float32{0}, LogScales: []float32{0, 0, 0}, Dst: []int32{0, 1}, Src: []int32{2, 2}, Append: []int32{2, 3}}
	if err := ok.Validate(4); err != nil {
		t.Fatalf("valid relocation refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(r *Relocation)
		want string
	}{
		{"index out of range", func(r *Relocation) { r.Append = []int32{4} }, "append[0] = 4 outside 0..3"},
		{"negative", func(r *Relocation) { r.Src = []int32{-1, 2} }, "src[0] = -1"},
		{"values short", func(r *Relocation) { r.LogScales = r.LogScales[:2] }, "1 rows with 1 opacity logits and 2 log-scales"},
		{"dst/src lengths", func(r *Relocation) { r.Src = r.Src[:1] }, "2 destinations for 1 sources"},
		{"row twice", func(r *Relocation) {
			r.Rows = []int32{2, 2}
			r.OpacityLogits = []float32{0, 0}
			r.LogScales = make([]float32, 6)
		}, "row 2 corrected twice"},
		{"dst twice", func(r *Relocation) { r.Dst = []int32{0, 0} }, "splat 0 is a destination twice"},
		{"dst is corrected", func(r *Relocation) {
			r.Rows = []int32{0}
			r.Src = []int32{2, 3}
		}, "splat 0 is both corrected and a destination"},
		{"dst is a source", func(r *Relocation) { r.Src = []int32{1, 2} }, "splat 1 is both a source and a destination"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			err := r.Validate(4)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestMCMCShare: an engine holding a share of a scene (Gaussian sharding) gets its splats'
// regulariser gradients and noise as the whole scene's engine gets them for the same splats,
// given the scene's count (Scene) and its first splat's id (Base).
func TestMCMCShare(t *testing.T) {
	const n, lo, hi = 40, 13, 29
	rng := rand.New(rand.NewPCG(5, 6))
	g := splat.New(n)
	for _, f := range g.Fields() {
		for i := range f.Data {
			f.Data[i] = float32(rng.NormFloat64())
		}
	}
	for i := 0; i < n; i += 3 {
		g.OpacityLogits[i] = -7 // let the noise through
	}
	m := MCMCStep{OpacityReg: 0.01, ScaleReg: 0.02, NoiseScale: 3, NoiseSeed: 11, NoiseStep: 42}
	whole, share := g.Clone(), g.Range(lo, hi)
	PerturbMeans(whole, m, 0, n)
	ms := m
	ms.Scene, ms.Base = n, lo
	PerturbMeans(share, ms, 0, hi-lo)
	if d := check.BitsDiffer(share.Means, whole.Means[3*lo:3*hi]); d > 0 {
		t.Errorf("noise: %d of the share's mean coordinates differ from the whole scene's", d)
	}
	if check.BitsDiffer(share.Means, g.Means[3*lo:3*hi]) == 0 {
		t.Fatal("the noise moved nothing: the check above tells nothing")
	}
	gw, gs := splat.Zeros[float32](n), splat.Zeros[float32](hi-lo)
	RegularizerGrads(gw, g, m, nil, 0, n)
	RegularizerGrads(gs, g.Range(lo, hi), ms, nil, 0, hi-lo)
	if d := check.BitsDiffer(gs.OpacityLogits, gw.OpacityLogits[lo:hi]) + check.BitsDiffer(gs.LogScales, gw.LogScales[3*lo:3*hi]); d > 0 {
		t.Errorf("regularisers: %d of the share's gradients differ from the whole scene's", d)
	}
	ms.Scene = 0
	gs = splat.Zeros[float32](hi - lo)
	RegularizerGrads(gs, g.Range(lo, hi), ms, nil, 0, hi-lo)
	if check.BitsDiffer(gs.OpacityLogits, gw.OpacityLogits[lo:hi]) == 0 {
		t.Error("without Scene the share's regularisers are the whole scene's: the means are over the share")
	}
}
