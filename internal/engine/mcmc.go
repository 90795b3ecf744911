package engine

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/fmath"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// MCMCStep holds the per-step terms of the MCMC densifier ("3D Gaussian Splatting as Markov
// Chain Monte Carlo", Kheradmand et al. 2024, as gsplat's MCMCStrategy and simple_trainer run
// it). The zero value turns them off.
type MCMCStep struct {
	// OpacityReg and ScaleReg weigh the regularisers OpacityReg·mean σ(logit) and
	// ScaleReg·mean exp(log s), means over all splats (and axes); their gradients are added to
	// the loss gradients before Adam.
	OpacityReg, ScaleReg float32
	// NoiseScale is noise_lr times the step's means learning rate; after Adam every mean moves
	// by Σ·(ε·gate(o)·NoiseScale) (see PerturbMeans). 0 = no noise.
	NoiseScale float32
	// NoiseSeed and NoiseStep key the noise samples (fmath.NormalKey), so that every engine
	// draws the same ones and a resumed run the same as an uninterrupted one.
	NoiseSeed uint64
	NoiseStep uint32
	// RegInView keeps the regularisers' gradients to the splats in the step's view, where the
	// loss gradient is (mcmc.regularize: in_view); false gives them to every splat, as gsplat
	// and the paper's code do (all). Adam scales each element's step by its own gradient
	// history, so a splat out of view whose moments are small (new, relocated, or long
	// unseen) takes learning-rate-sized steps from the regularisers' gradients alone (opacity:
	// at most 0.01/n·¼, 2.5e-9 at a million splats).
	RegInView bool
	// Scene and Base place an engine's splats in a scene it holds a share of (Gaussian
	// sharding, internal/multi): the regularisers' means are over Scene splats (0: the
	// engine's own count) and splat i's noise is keyed by Base + i, its id in the whole scene.
	// Both zero for an engine holding the whole scene.
	Scene int
	Base  uint32
}

// Active says whether any term is on.
func (m MCMCStep) Active() bool { return m.OpacityReg != 0 || m.ScaleReg != 0 || m.NoiseScale != 0 }

// RegCoeffs are the per-element gradient weights of the regularisers for an engine of n
// splats: the means divide by the scene's count (m.Scene, or n when 0) for the opacities and
// three times it for the scales, in float32; a device engine passes them to its kernel.
func RegCoeffs(m MCMCStep, n int) (co, cs float32) {
	if m.Scene > 0 {
		n = m.Scene
	}
	return m.OpacityReg / float32(n), m.ScaleReg / float32(3*n)
}

// RegularizerLoss is OpacityReg·mean σ(logit) + ScaleReg·mean exp(log s) in float64 (for
// reporting and for the finite-difference check of RegularizerGrads).
func RegularizerLoss(logits, logScales []float64, opacityReg, scaleReg float64) float64 {
	var so, ss float64
	for _, x := range logits {
		so += 1 / (1 + math.Exp(-x))
	}
	for _, x := range logScales {
		ss += math.Exp(x)
	}
	return opacityReg*so/float64(len(logits)) + scaleReg*ss/float64(len(logScales))
}

// RegularizerGrads adds the regularisers' gradients to those of splats [lo, hi) (with
// m.RegInView, to those valid marks in view only):
// d/dlogit = co·σ(1−σ) and d/dlog s = cs·exp(log s). Every operation is float32 and rounded
// on its own, with the kernels' Exp and sigmoid, so that a GPU engine adds the same bits.
func RegularizerGrads(grads, params *splat.Gaussians, m MCMCStep, valid []bool, lo, hi int) {
	co, cs := RegCoeffs(m, params.Len())
	for i := lo; i < hi; i++ {
		if m.RegInView && !valid[i] {
			continue
		}
		if co != 0 {
			s := fmath.Sigmoid(params.OpacityLogits[i])
			grads.OpacityLogits[i] += float32(co * float32(s*(1-s)))
		}
		if cs != 0 {
			for a := 0; a < 3; a++ {
				grads.LogScales[i*3+a] += float32(cs * fmath.Exp(params.LogScales[i*3+a]))
			}
		}
	}
}

// NoiseGate is the MCMC noise's opacity gate 1/(1 + exp(−100·((1 − o) − 0.995))): near 1 for
// splats of opacity below ~0.005, near 0 for the others, so that the noise moves dead and
// dying splats and leaves those that contribute where they are (gsplat's op_sigmoid, k = 100,
// x0 = 0.995).
func NoiseGate(logit float32) float32 {
	o := fmath.Sigmoid(logit)
	return fmath.Sigmoid(float32(100 * float32((1-o)-0.995)))
}

// PerturbMeans adds the MCMC position noise to splats [lo, hi) of g: mean += Σ·n with
// n_a = ε_a·(gate(o)·NoiseScale), ε_a = fmath.Normal(NormalKey(seed, step, Base + i, a)), and
// Σ = R S Sᵀ Rᵀ the splat's covariance (R from the normalised quaternion, S = diag(exp(log s))).
// gsplat applies Σ itself, not its square root, to the noise; so does this. Every product is
// rounded on its own so that the kernel (shaders/mcmc.cu) gives the same bits.
func PerturbMeans(g *splat.Gaussians, m MCMCStep, lo, hi int) {
	if m.NoiseScale == 0 {
		return
	}
	for i := lo; i < hi; i++ {
		f := float32(NoiseGate(g.OpacityLogits[i]) * m.NoiseScale)
		if f == 0 {
			// An opaque splat's gate is 0 (o ≳ 0.89): it stays put, and is spared drawing
			// samples and the 0·∞ of a covariance that overflowed.
			continue
		}
		var n [3]float32
		for a := range n {
			n[a] = float32(fmath.Normal(fmath.NormalKey(m.NoiseSeed, m.NoiseStep, m.Base+uint32(i), uint32(a))) * f)
		}
		cov, ok := covariance32(g.Quats[i*4:i*4+4], g.LogScales[i*3:i*3+3])
		if !ok {
			continue // a zero or non-finite quaternion has no rotation to move along
		}
		for a := 0; a < 3; a++ {
			d := float32(cov[a][0]*n[0]) + float32(cov[a][1]*n[1])
			d = d + float32(cov[a][2]*n[2])
			g.Means[i*3+a] += d
		}
	}
}

// covariance32 is R S Sᵀ Rᵀ in float32 with every product rounded on its own; ok is false
// when the quaternion's norm is zero or not finite.
func covariance32(q, logScale []float32) (cov [3][3]float32, ok bool) {
	nn := float32(q[0]*q[0]) + float32(q[1]*q[1])
	nn = nn + float32(q[2]*q[2])
	nn = nn + float32(q[3]*q[3])
	norm := float32(math.Sqrt(float64(nn)))
	if !(norm > 0) || norm-norm != 0 {
		return cov, false
	}
	w, x, y, z := q[0]/norm, q[1]/norm, q[2]/norm, q[3]/norm
	xx, yy, zz := float32(x*x), float32(y*y), float32(z*z)
	xy, xz, yz := float32(x*y), float32(x*z), float32(y*z)
	wx, wy, wz := float32(w*x), float32(w*y), float32(w*z)
	r := [3][3]float32{
		{1 - float32(2*(yy+zz)), float32(2 * (xy - wz)), float32(2 * (xz + wy))},
		{float32(2 * (xy + wz)), 1 - float32(2*(xx+zz)), float32(2 * (yz - wx))},
		{float32(2 * (xz - wy)), float32(2 * (yz + wx)), 1 - float32(2*(xx+yy))},
	}
	var s [3]float32
	for b := range s {
		s[b] = fmath.Exp(logScale[b])
	}
	var m [3][3]float32 // R·S
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			m[a][b] = float32(r[a][b] * s[b])
		}
	}
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			c := float32(m[a][0]*m[b][0]) + float32(m[a][1]*m[b][1])
			cov[a][b] = c + float32(m[a][2]*m[b][2])
		}
	}
	return cov, true
}

// Relocation is one move of the MCMC densifier (gsplat's relocate and sample_add): first row
// Rows[k] takes the opacity logit OpacityLogits[k] and the log-scales LogScales[3k:3k+3] (the
// paper's correction of a sampled source for the copies it gets); then row Dst[j] becomes a
// copy of row Src[j] (every parameter) and a copy of each row of Append is added at the end,
// in order. Indices refer to the splats before the move. Both Adam moments of every row
// written (Rows, Dst and the appended ones) start at zero; the densification statistics are
// reset for all.
type Relocation struct {
	Rows          []int32
	OpacityLogits []float32 // [len(Rows)]
	LogScales     []float32 // [len(Rows)*3]
	Dst, Src      []int32
	Append        []int32
}

// Validate checks r against n splats: indices in range, Rows and Dst without repeats, and no
// destination that is also a source or a corrected row (so that neither the copies nor the
// corrections depend on the order they are written in).
func (r *Relocation) Validate(n int) error {
	inRange := func(what string, idx []int32) error {
		for k, i := range idx {
			if i < 0 || int(i) >= n {
				return fmt.Errorf("engine: relocation: %s[%d] = %d outside 0..%d", what, k, i, n-1)
			}
		}
		return nil
	}
	for _, c := range []struct {
		what string
		idx  []int32
	}{{"rows", r.Rows}, {"dst", r.Dst}, {"src", r.Src}, {"append", r.Append}} {
		if err := inRange(c.what, c.idx); err != nil {
			return err
		}
	}
	if len(r.OpacityLogits) != len(r.Rows) || len(r.LogScales) != 3*len(r.Rows) {
		return fmt.Errorf("engine: relocation: %d rows with %d opacity logits and %d log-scales", len(r.Rows), len(r.OpacityLogits), len(r.LogScales))
	}
	if len(r.Dst) != len(r.Src) {
		return fmt.Errorf("engine: relocation: %d destinations for %d sources", len(r.Dst), len(r.Src))
	}
	seen := make([]uint8, n)
	for _, i := range r.Rows {
		if seen[i]&1 != 0 {
			return fmt.Errorf("engine: relocation: row %d corrected twice", i)
		}
		seen[i] |= 1
	}
	for _, i := range r.Dst {
		if seen[i]&2 != 0 {
			return fmt.Errorf("engine: relocation: splat %d is a destination twice", i)
		}
		if seen[i]&1 != 0 {
			return fmt.Errorf("engine: relocation: splat %d is both corrected and a destination", i)
		}
		seen[i] |= 2
	}
	for _, i := range r.Src {
		if seen[i]&2 != 0 {
			return fmt.Errorf("engine: relocation: splat %d is both a source and a destination", i)
		}
	}
	return nil
}

// ApplyRelocation performs r on g in place (the corrections and copies; Append grows g) and
// returns the rows whose optimizer moments must be zeroed (Rows and Dst; the appended rows
// start with zero moments by construction). The caller has validated r.
func ApplyRelocation(g *splat.Gaussians, r *Relocation) []int32 {
	for k, i := range r.Rows {
		g.OpacityLogits[i] = r.OpacityLogits[k]
		copy(g.LogScales[i*3:i*3+3], r.LogScales[k*3:k*3+3])
	}
	fields := g.Fields()
	for j, d := range r.Dst {
		s := r.Src[j]
		for _, f := range fields {
			w := f.Width
			copy(f.Data[int(d)*w:int(d+1)*w], f.Data[int(s)*w:int(s+1)*w])
		}
	}
	if len(r.Append) > 0 {
		add := splat.Gather(g, r.Append)
		g.Means = append(g.Means, add.Means...)
		g.LogScales = append(g.LogScales, add.LogScales...)
		g.Quats = append(g.Quats, add.Quats...)
		g.OpacityLogits = append(g.OpacityLogits, add.OpacityLogits...)
		g.SH = append(g.SH, add.SH...)
	}
	return append(append([]int32(nil), r.Rows...), r.Dst...)
}
