package raster

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Test scenes are built directly as prepared data (what internal/prep would
// produce) in float64, binned naively, and converted to float32 when needed.

// genOpts describes a random test scene.
type genOpts struct {
	model          prep.Model
	n, w, h, tile  int
	opMin, opMax   float64 // opacity range
	sigMin, sigMax float64 // screen-space standard deviations, pixels
	// tight bins each splat into the tiles of its footprint at alphaMin;
	// otherwise every splat goes into every tile.
	tight    bool
	alphaMin float64
	// invalid adds splats marked invalid, with NaN data, that are never binned.
	invalid int
}

// testScene is a scene in float64 with its tile lists.
type testScene struct {
	proj  *prep.ProjectedOf[float64]
	rays  []float64 // ray model only
	lists *prep.TileLists
	w, h  int
	bg    [3]float64
	focal float64
}

// The ray model's test camera: at the origin, looking down +z, pinhole.
func (s *testScene) cx() float64 { return float64(s.w) / 2 }
func (s *testScene) cy() float64 { return float64(s.h) / 2 }

func genScene(seed uint64, o genOpts) *testScene {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := o.n + o.invalid
	s := &testScene{
		proj:  prep.NewProjected[float64](o.model, n),
		w:     o.w,
		h:     o.h,
		bg:    [3]float64{0.2 + 0.6*rng.Float64(), 0.2 + 0.6*rng.Float64(), 0.2 + 0.6*rng.Float64()},
		focal: float64(o.w) * 0.9,
	}
	p := s.proj
	if o.model == prep.Ray {
		s.rays = make([]float64, o.w*o.h*3)
		for y := 0; y < o.h; y++ {
			for x := 0; x < o.w; x++ {
				d := normalize([3]float64{(float64(x) + 0.5 - s.cx()) / s.focal, (float64(y) + 0.5 - s.cy()) / s.focal, 1})
				copy(s.rays[3*(y*o.w+x):], d[:])
			}
		}
	}
	uni := func(a, b float64) float64 { return a + (b-a)*rng.Float64() }
	for i := 0; i < n; i++ {
		if i >= o.n {
			p.Valid[i] = false
			garbage := [][]float64{p.Depth[i : i+1], p.Opacity[i : i+1], p.Color[3*i : 3*i+3], p.Mean2D[2*i : 2*i+2], p.Conic[3*i : 3*i+3]}
			if o.model == prep.Ray {
				garbage = append(garbage, p.RayU[3*i:3*i+3], p.RayA[9*i:9*i+9])
			}
			for _, sl := range garbage {
				for j := range sl {
					sl[j] = math.NaN()
				}
			}
			continue
		}
		p.Valid[i] = true
		p.Opacity[i] = uni(o.opMin, o.opMax)
		for c := 0; c < 3; c++ {
			p.Color[3*i+c] = rng.Float64()
		}
		mx := uni(-0.15, 1.15) * float64(o.w)
		my := uni(-0.15, 1.15) * float64(o.h)
		p.Mean2D[2*i], p.Mean2D[2*i+1] = mx, my
		s1, s2 := uni(o.sigMin, o.sigMax), uni(o.sigMin, o.sigMax)
		if o.model == prep.EWA {
			p.Depth[i] = uni(1, 10)
			th := uni(0, math.Pi)
			cs, sn := math.Cos(th), math.Sin(th)
			// Σ = R·diag(s1², s2²)·Rᵀ; conic = Σ⁻¹ = R·diag(1/s1², 1/s2²)·Rᵀ.
			a := cs*cs/(s1*s1) + sn*sn/(s2*s2)
			b := cs * sn * (1/(s1*s1) - 1/(s2*s2))
			c := sn*sn/(s1*s1) + cs*cs/(s2*s2)
			p.Conic[3*i], p.Conic[3*i+1], p.Conic[3*i+2] = a, b, c
			p.BoundCenter[2*i], p.BoundCenter[2*i+1] = mx, my
			k2 := 2 * math.Log(p.Opacity[i]/prep.AlphaMin)
			p.BoundQ[3*i], p.BoundQ[3*i+1], p.BoundQ[3*i+2] = a/k2, b/k2, c/k2
			setRect(s, o, i, mx, my, a, b, c, 2*math.Log(p.Opacity[i]/o.alphaMin))
			continue
		}
		z := uni(3, 8)
		p.Depth[i] = z
		mu := [3]float64{z * (mx - s.cx()) / s.focal, z * (my - s.cy()) / s.focal, z}
		sig := [3]float64{s1 * z / s.focal, s2 * z / s.focal, uni(o.sigMin, o.sigMax) * z / s.focal}
		r := randRot(rng)
		// A = diag(1/σ)·Rᵀ: row k of A is column k of R over σ_k.
		var A [3][3]float64
		for k := 0; k < 3; k++ {
			for c := 0; c < 3; c++ {
				A[k][c] = r[c][k] / sig[k]
				p.RayA[9*i+3*k+c] = A[k][c]
			}
		}
		for k := 0; k < 3; k++ {
			p.RayU[3*i+k] = -(A[k][0]*mu[0] + A[k][1]*mu[1] + A[k][2]*mu[2])
		}
		var M [3][3]float64 // AᵀA
		for a := 0; a < 3; a++ {
			for b := 0; b < 3; b++ {
				for k := 0; k < 3; k++ {
					M[a][b] += A[k][a] * A[k][b]
				}
			}
		}
		if c, q, ok := s.silhouette(mu, M, 2*math.Log(p.Opacity[i]/prep.AlphaMin)); ok {
			p.BoundCenter[2*i], p.BoundCenter[2*i+1] = c[0], c[1]
			p.BoundQ[3*i], p.BoundQ[3*i+1], p.BoundQ[3*i+2] = q[0], q[1], q[2]
		} else {
			p.BoundQ[3*i], p.BoundQ[3*i+1], p.BoundQ[3*i+2] = 0, 0, 0 // no crop
		}
		k2 := 2 * math.Log(p.Opacity[i]/o.alphaMin)
		if c, q, ok := s.silhouette(mu, M, k2); ok {
			setRect(s, o, i, c[0], c[1], q[0], q[1], q[2], 1)
		} else if k2 <= 0 {
			setRect(s, o, i, 0, 0, 0, 0, 0, -1)
		} else {
			setRect(s, o, i, 0, 0, 0, 0, 0, 1) // degenerate silhouette: every tile
		}
	}
	s.lists = binNaive(p, o.w, o.h, o.tile)
	return s
}

// setRect sets the tile rectangle of splat i: with tight, the tiles of the
// pixel ellipse (p−c)ᵀQ(p−c) ≤ r2 (none when r2 < 0: the splat cannot reach
// the cutoff; every tile when the ellipse is degenerate); otherwise the whole
// image.
func setRect(s *testScene, o genOpts, i int, cx, cy, qa, qb, qc, r2 float64) {
	tx, ty := (o.w+o.tile-1)/o.tile, (o.h+o.tile-1)/o.tile
	rect := []int32{0, 0, int32(tx), int32(ty)}
	det := qa*qc - qb*qb
	switch {
	case !o.tight:
	case r2 < 0:
		rect = []int32{0, 0, 0, 0}
	case qa > 0 && det > 0:
		hx, hy := math.Sqrt(r2*qc/det), math.Sqrt(r2*qa/det)
		clip := func(v float64, hi int) int32 { return int32(max(0, min(float64(hi), v))) }
		rect = []int32{
			clip(math.Floor((cx-hx)/float64(o.tile)), tx), clip(math.Floor((cy-hy)/float64(o.tile)), ty),
			clip(math.Floor((cx+hx)/float64(o.tile))+1, tx), clip(math.Floor((cy+hy)/float64(o.tile))+1, ty),
		}
	}
	copy(s.proj.Rect[4*i:], rect)
}

// silhouette returns the pixel ellipse, as centre and Q with
// (p − c)ᵀ·Q·(p − c) ≤ 1, of the test camera's rays that pass within
// Mahalanobis distance √k2 of a Gaussian with mean mu and inverse
// covariance M. A ray from the camera centre (the origin) with direction r
// meets the ellipsoid iff (rᵀMw)² − (rᵀMr)(wᵀMw − k2) ≥ 0, w = −mu; with
// r = K⁻¹·(px, py, 1) that is a conic in pixel coordinates.
func (s *testScene) silhouette(mu [3]float64, M [3][3]float64, k2 float64) (c [2]float64, q [3]float64, ok bool) {
	if !(k2 > 0) {
		return c, q, false
	}
	w := [3]float64{-mu[0], -mu[1], -mu[2]}
	var mw [3]float64
	for a := 0; a < 3; a++ {
		mw[a] = M[a][0]*w[0] + M[a][1]*w[1] + M[a][2]*w[2]
	}
	wmw := w[0]*mw[0] + w[1]*mw[1] + w[2]*mw[2]
	var n3 [3][3]float64
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			n3[a][b] = mw[a]*mw[b] - (wmw-k2)*M[a][b]
		}
	}
	kinv := [3][3]float64{{1 / s.focal, 0, -s.cx() / s.focal}, {0, 1 / s.focal, -s.cy() / s.focal}, {0, 0, 1}}
	var c3 [3][3]float64 // −K⁻ᵀ·N·K⁻¹: inside ⇔ p̃ᵀ·c3·p̃ ≤ 0
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			var v float64
			for k := 0; k < 3; k++ {
				for l := 0; l < 3; l++ {
					v += kinv[k][a] * n3[k][l] * kinv[l][b]
				}
			}
			c3[a][b] = -v
		}
	}
	qa, qb, qc := c3[0][0], c3[0][1], c3[1][1]
	det := qa*qc - qb*qb
	if !(qa > 0 && det > 0) {
		return c, q, false
	}
	// Centre −Q⁻¹·l with l = (c3[0][2], c3[1][2]); level ρ = lᵀQ⁻¹l − c3[2][2].
	l0, l1 := c3[0][2], c3[1][2]
	i00, i01, i11 := qc/det, -qb/det, qa/det
	c = [2]float64{-(i00*l0 + i01*l1), -(i01*l0 + i11*l1)}
	rho := l0*(i00*l0+i01*l1) + l1*(i01*l0+i11*l1) - c3[2][2]
	if !(rho > 0) {
		return c, q, false
	}
	return c, [3]float64{qa / rho, qb / rho, qc / rho}, true
}

func normalize(v [3]float64) [3]float64 {
	n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])
	return [3]float64{v[0] / n, v[1] / n, v[2] / n}
}

// randRot returns a uniformly random rotation matrix (from a normalised
// Gaussian quaternion).
func randRot(rng *rand.Rand) [3][3]float64 {
	w, x, y, z := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
	n := math.Sqrt(w*w + x*x + y*y + z*z)
	w, x, y, z = w/n, x/n, y/n, z/n
	return [3][3]float64{
		{1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y)},
		{2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x)},
		{2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y)},
	}
}

// binNaive puts every valid splat into every tile of its Rect and sorts the
// entries by (tile, depth, id).
func binNaive[F splat.Float](p *prep.ProjectedOf[F], w, h, ts int) *prep.TileLists {
	tx, ty := (w+ts-1)/ts, (h+ts-1)/ts
	type entry struct {
		tile  int
		depth F
		id    int32
	}
	var es []entry
	for i := 0; i < p.N; i++ {
		if !p.Valid[i] {
			continue
		}
		r := p.Rect[4*i : 4*i+4]
		for y := r[1]; y < r[3]; y++ {
			for x := r[0]; x < r[2]; x++ {
				es = append(es, entry{int(y)*tx + int(x), p.Depth[i], int32(i)})
			}
		}
	}
	sort.Slice(es, func(a, b int) bool {
		ea, eb := es[a], es[b]
		if ea.tile != eb.tile {
			return ea.tile < eb.tile
		}
		if ea.depth != eb.depth {
			return ea.depth < eb.depth
		}
		return ea.id < eb.id
	})
	l := &prep.TileLists{TileSize: ts, TilesX: tx, TilesY: ty, Offsets: make([]int32, tx*ty+1)}
	for _, e := range es {
		l.Keys = append(l.Keys, uint64(e.tile)<<32|uint64(math.Float32bits(float32(e.depth))))
		l.IDs = append(l.IDs, e.id)
		l.Offsets[e.tile+1]++
	}
	for t := 0; t < tx*ty; t++ {
		l.Offsets[t+1] += l.Offsets[t]
	}
	return l
}

// frame returns a Frame over the scene in float type F (converting from
// float64 when F is float32).
func frameOf[F splat.Float](s *testScene, alphaMin float64, maxSteps, workers int) *Frame[F] {
	return &Frame[F]{
		Width: s.w, Height: s.h,
		Background:    [3]F{F(s.bg[0]), F(s.bg[1]), F(s.bg[2])},
		Proj:          convertProj[F](s.proj),
		Lists:         s.lists,
		Rays:          convert[F](s.rays),
		MaxSplatSteps: maxSteps,
		AlphaMin:      F(alphaMin),
		Workers:       workers,
	}
}

func convert[F splat.Float](s []float64) []F {
	if s == nil {
		return nil
	}
	o := make([]F, len(s))
	for i, v := range s {
		o[i] = F(v)
	}
	return o
}

func convertProj[F splat.Float](p *prep.ProjectedOf[float64]) *prep.ProjectedOf[F] {
	return &prep.ProjectedOf[F]{
		Model: p.Model, N: p.N,
		Valid:   append([]bool(nil), p.Valid...),
		Depth:   convert[F](p.Depth),
		Opacity: convert[F](p.Opacity),
		Color:   convert[F](p.Color),
		Mean2D:  convert[F](p.Mean2D), Conic: convert[F](p.Conic),
		RayU: convert[F](p.RayU), RayA: convert[F](p.RayA),
		BoundCenter: convert[F](p.BoundCenter), BoundQ: convert[F](p.BoundQ),
		Rect:   append([]int32(nil), p.Rect...),
		Radius: convert[F](p.Radius),
	}
}

// refResult is the brute-force reference rendering plus how close the scene
// comes to the places where the image is not smooth in its inputs.
type refResult struct {
	img    []float64 // [H*W*3]
	finalT []float64 // [H*W]
	hits   []int32   // [N] pixels each splat was blended into
	blend  []int32   // [H*W] splats blended per pixel
	// segmented counts the pixels' walks into a segment after the first.
	segmented int
	// termMargin is the smallest |ln(T·(1−α)/1e-4)| met (termination rule);
	// clampMargin the smallest |o·G − 0.99|; rayMargin the smallest
	// −u·v/(‖u‖‖v‖) over pairs where alpha would be noticeable.
	termMargin, clampMargin, rayMargin float64
	clamped                            int // pixel-splat pairs where the 0.99 clamp was active
}

// reference renders naively: every pixel loops over all valid splats sorted
// by (depth, id), evaluating the alpha formulas of design.md §4 directly.
// It shares no code with the package's rasterizer. Without maxSteps it walks
// in segments of seg splats of that order (0: one segment), folding them as
// Render documents: the tile lists of scenes binned whole are that order.
func reference(p *prep.ProjectedOf[float64], rays []float64, w, h int, bg [3]float64, amin float64, maxSteps, seg int) refResult {
	var order []int
	for i := 0; i < p.N; i++ {
		if p.Valid[i] {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		if p.Depth[order[a]] != p.Depth[order[b]] {
			return p.Depth[order[a]] < p.Depth[order[b]]
		}
		return order[a] < order[b]
	})
	res := refResult{
		img: make([]float64, w*h*3), finalT: make([]float64, w*h), hits: make([]int32, p.N), blend: make([]int32, w*h),
		termMargin: math.Inf(1), clampMargin: math.Inf(1), rayMargin: math.Inf(1),
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			px, py := float64(x)+0.5, float64(y)+0.5
			// T and col are the segment's, walkT and walkCol the walk's in front of it.
			T, walkT := 1.0, 1.0
			var col, walkCol [3]float64
			fold := func() {
				for c := 0; c < 3; c++ {
					walkCol[c] += walkT * col[c]
					col[c] = 0
				}
				walkT *= T
				T = 1
			}
			n := 0
			for k, i := range order {
				if seg > 0 && maxSteps == 0 && k > 0 && k%seg == 0 {
					fold()
					if walkT < 1e-4 {
						break
					}
					res.segmented++
				}
				var g float64
				if p.Model == prep.EWA {
					dx, dy := px-p.Mean2D[2*i], py-p.Mean2D[2*i+1]
					a, b, c := p.Conic[3*i], p.Conic[3*i+1], p.Conic[3*i+2]
					power := -0.5*(a*dx*dx+c*dy*dy) - b*dx*dy
					if power > 0 {
						continue
					}
					g = math.Exp(power)
				} else {
					d := rays[3*(y*w+x) : 3*(y*w+x)+3]
					u := p.RayU[3*i : 3*i+3]
					A := p.RayA[9*i : 9*i+9]
					var v [3]float64
					for r := 0; r < 3; r++ {
						v[r] = A[3*r]*d[0] + A[3*r+1]*d[1] + A[3*r+2]*d[2]
					}
					uv := u[0]*v[0] + u[1]*v[1] + u[2]*v[2]
					vv := v[0]*v[0] + v[1]*v[1] + v[2]*v[2]
					uu := u[0]*u[0] + u[1]*u[1] + u[2]*u[2]
					if p.Opacity[i]*math.Exp(-0.5*uu) > 1e-13 {
						res.rayMargin = min(res.rayMargin, -uv/math.Sqrt(uu*vv))
					}
					if uv >= 0 {
						continue
					}
					g = math.Exp(-0.5 * (uu - uv*uv/vv))
				}
				alpha := p.Opacity[i] * g
				if alpha > 0.5 {
					res.clampMargin = min(res.clampMargin, math.Abs(alpha-prep.AlphaMax))
				}
				if alpha > prep.AlphaMax {
					alpha = prep.AlphaMax
					res.clamped++
				}
				if alpha < amin {
					continue
				}
				tn := T * (1 - alpha)
				res.termMargin = min(res.termMargin, math.Abs(math.Log(tn/1e-4)))
				if tn < 1e-4 {
					break
				}
				for c := 0; c < 3; c++ {
					col[c] += p.Color[3*i+c] * alpha * T
				}
				T = tn
				res.hits[i]++
				n++
				if maxSteps > 0 && n == maxSteps {
					break
				}
			}
			fold()
			o := y*w + x
			for c := 0; c < 3; c++ {
				res.img[3*o+c] = walkCol[c] + walkT*bg[c]
			}
			res.finalT[o] = walkT
			res.blend[o] = int32(n)
		}
	}
	return res
}

// relL2 returns ‖a − b‖/‖b‖ (‖a − b‖ when b is zero).
func relL2[F splat.Float](a []F, b []float64) float64 {
	var num, den float64
	for i := range b {
		d := float64(a[i]) - b[i]
		num += d * d
		den += b[i] * b[i]
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}
