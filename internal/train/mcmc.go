package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/par"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// The MCMC densifier ("3D Gaussian Splatting as Markov Chain Monte Carlo", Kheradmand et al.
// 2024) as gsplat's MCMCStrategy runs it: every refinement relocates the dead Gaussians onto
// live ones and then grows the set by 5% up to a budget, both by sampling sources in
// proportion to opacity and correcting each source and its copies so that together they
// render like the source did; every step adds position noise and the opacity and scale
// regularisers (engine.MCMCStep). The policy (which splats, which values) is computed here on
// the host from the engine's shapes, so every engine applies the same move.

// maxCopies caps the number of copies a correction accounts for, as gsplat's binomial table
// of 51 rows does (compute_relocation clamps its ratios to [1, 51]); beyond it the copies
// keep the correction of 51.
const maxCopies = 51

// float32Eps is float32's machine epsilon: corrected opacities stay below 1 − ε, so that
// their logit is finite (gsplat clamps with torch.finfo(float32).eps).
const float32Eps = 1.0 / (1 << 23)

// mcmcStep returns the per-step MCMC terms of step s with learning rates lr.
func (t *Trainer) mcmcStep(s int, lr engine.LR) engine.MCMCStep {
	if !t.opt.mcmc() {
		return engine.MCMCStep{}
	}
	m := &t.opt.Densify.MCMC
	return engine.MCMCStep{
		OpacityReg: float32(m.OpacityReg),
		ScaleReg:   float32(m.ScaleReg),
		RegInView:  m.RegInView,
		// gsplat scales the noise by noise_lr times the means learning rate (which holds
		// the scene extent, as ours does).
		NoiseScale: float32(m.NoiseLR * float64(lr.Means)),
		NoiseSeed:  t.opt.Seed,
		NoiseStep:  uint32(s),
	}
}

// mcmcRefine relocates the dead Gaussians (opacity ≤ min_opacity) onto live ones sampled in
// proportion to opacity, then adds min(cap, ⌊1.05·N⌋) − N copies of Gaussians sampled the same
// way from all of them (gsplat's _relocate_gs and _add_new_gs, in that order).
func (t *Trainer) mcmcRefine(s int) error {
	m := &t.opt.Densify.MCMC
	g, err := t.readShapes()
	if err != nil {
		return fmt.Errorf("train: step %d: %w", s, err)
	}
	n := g.Len()
	op := opacities(g, max(t.opt.Workers, 1))
	var dead []int32
	for i, o := range op {
		if !(o > m.MinOpacity) {
			dead = append(dead, int32(i))
		}
	}
	if len(dead) > 0 {
		if len(dead) == n {
			return fmt.Errorf("train: step %d: all %d Gaussians have opacity <= mcmc.min_opacity (%g): none is alive to relocate onto", s, n, m.MinOpacity)
		}
		src := sampleByOpacity(t.rng, op, m.MinOpacity, len(dead))
		r := correctSources(g, op, src, m.MinOpacity)
		r.Dst, r.Src = dead, src
		if err := t.eng.Relocate(r); err != nil {
			return fmt.Errorf("train: step %d: MCMC relocation of %d Gaussians: %w", s, len(dead), err)
		}
		relocateShapes(g, op, &r)
	}
	target := min(m.CapMax, int(1.05*float64(n)))
	add := max(target-n, 0)
	// How many were dead is the densifier's health: a share that stays large means splats
	// die as fast as they are placed.
	t.logJSON(map[string]any{"step": s, "mcmc_relocated": len(dead), "mcmc_added": add})
	if add > 0 {
		src := sampleByOpacity(t.rng, op, 0, add)
		if src == nil {
			return nil // every opacity is 0: nothing to sample from
		}
		r := correctSources(g, op, src, m.MinOpacity)
		r.Append = src
		if err := t.eng.Relocate(r); err != nil {
			return fmt.Errorf("train: step %d: MCMC growth by %d Gaussians: %w", s, add, err)
		}
	}
	return nil
}

// opacities are σ(logit) of every splat, as the engines' float32 sigmoid gives them, computed
// by workers goroutines over ranges of the splats (a million exponentials at the cap).
func opacities(g engine.Shapes, workers int) []float64 {
	op := make([]float64, g.Len())
	par.For(len(op), workers, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			op[i] = float64(splat.Sigmoid(g.OpacityLogits[i]))
		}
	})
	return op
}

// sampleByOpacity draws k indices with replacement, each splat with probability proportional
// to its opacity when that exceeds floor and never otherwise (torch.multinomial's law over the
// live splats), and returns them in increasing order: k uniforms from rng scaled to the total
// weight, sorted, and matched in one sweep to the first splat whose cumulative weight passes
// each. Which copy lands in which slot does not matter to the move, and the sweep costs two
// passes over the splats where a binary search per draw missed the cache twenty times. It
// returns nil when no splat has weight.
func sampleByOpacity(rng *rand.Rand, op []float64, floor float64, k int) []int32 {
	total := 0.0
	for _, o := range op {
		if o > floor { // NaN never counts
			total += o
		}
	}
	if !(total > 0) || k <= 0 {
		return nil
	}
	u := make([]float64, k)
	for i := range u {
		u[i] = rng.Float64() * total
	}
	slices.Sort(u)
	out := make([]int32, k)
	cum, j, last := 0.0, 0, int32(0)
	for i, o := range op {
		if !(o > floor) {
			continue
		}
		// The same additions in the same order as total: the last cum is total, above
		// every u, so every draw is matched inside the loop.
		cum += o
		last = int32(i)
		for j < k && u[j] < cum {
			out[j] = last
			j++
		}
		if j == k {
			break
		}
	}
	for ; j < k; j++ {
		out[j] = last
	}
	return out
}

// correctSources returns the corrections of the sampled sources src: a source drawn c times
// ends up as c+1 copies (itself included), and each gets the opacity and scale of the paper's
// Eq. 9 for n = min(c+1, 51) copies (mcmcCorrection), the opacity clamped to
// [minOpacity, 1 − ε] after the scale is computed from the unclamped one, as gsplat does.
func correctSources(g engine.Shapes, op []float64, src []int32, minOpacity float64) engine.Relocation {
	sorted := src
	if !slices.IsSorted(src) { // sampleByOpacity's draws already are
		sorted = slices.Clone(src)
		slices.Sort(sorted)
	}
	rows := make([]int32, 0, len(sorted))
	count := make([]int, 0, len(sorted))
	for _, i := range sorted {
		if len(rows) > 0 && rows[len(rows)-1] == i {
			count[len(count)-1]++
			continue
		}
		rows = append(rows, i)
		count = append(count, 1)
	}
	r := engine.Relocation{Rows: rows, OpacityLogits: make([]float32, len(rows)), LogScales: make([]float32, 3*len(rows))}
	for k, i := range rows {
		o, mul := mcmcCorrection(op[i], min(count[k]+1, maxCopies))
		o = min(max(o, minOpacity), 1-float32Eps)
		r.OpacityLogits[k] = float32(math.Log(o / (1 - o)))
		lm := math.Log(mul)
		for a := 0; a < 3; a++ {
			r.LogScales[3*k+a] = float32(float64(g.LogScales[3*int(i)+a]) + lm)
		}
	}
	return r
}

// mcmcCorrection is the paper's Eq. 9 for a Gaussian of opacity o standing for n copies of
// itself: each copy gets opacity o' = 1 − (1 − o)^(1/n), so that n of them stacked let as much
// light through as the original at its centre, and its scales multiplied by
// o / Σ_{i=1..n} Σ_{k=0..i−1} C(i−1, k) (−1)^k o'^(k+1) / √(k+1), so that along any ray through
// the centre the copies' composited opacity integrates to the original's. The binomials are
// exact in float64 up to n = 51.
func mcmcCorrection(o float64, n int) (newOpacity, scaleMul float64) {
	newOpacity = 1 - math.Pow(1-o, 1/float64(n))
	denom := 0.0
	for i := 1; i <= n; i++ {
		c, p := 1.0, newOpacity // C(i−1, k) and o'^(k+1), built along the row
		for k := 0; k < i; k++ {
			term := c * p / math.Sqrt(float64(k+1))
			if k%2 == 1 {
				term = -term
			}
			denom += term
			c = c * float64(i-1-k) / float64(k+1)
			p *= newOpacity
		}
	}
	return newOpacity, o / denom
}

// relocateShapes mirrors a relocation on the host's copy of the shapes and opacities, so that
// the growth that follows samples what the engine now holds.
func relocateShapes(g engine.Shapes, op []float64, r *engine.Relocation) {
	for k, i := range r.Rows {
		g.OpacityLogits[i] = r.OpacityLogits[k]
		copy(g.LogScales[3*i:3*i+3], r.LogScales[3*k:3*k+3])
		op[i] = float64(splat.Sigmoid(g.OpacityLogits[i]))
	}
	for j, d := range r.Dst {
		s := r.Src[j]
		g.OpacityLogits[d] = g.OpacityLogits[s]
		copy(g.LogScales[3*d:3*d+3], g.LogScales[3*s:3*s+3])
		op[d] = op[s]
	}
}
