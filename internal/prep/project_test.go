package prep

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

const testSeed = 7

// testCamera looks from (0.3, −0.2, −4) roughly at the origin, slightly rotated.
func testCamera(w, h int, dist camera.Distortion) camera.Camera {
	r := camera.RotationFromQuat(0.995, 0.05, -0.07, 0.03)
	c := [3]float64{0.3, -0.2, -4}
	var t [3]float64
	for i := 0; i < 3; i++ {
		t[i] = -(r[i][0]*c[0] + r[i][1]*c[1] + r[i][2]*c[2])
	}
	return camera.Camera{Width: w, Height: h, Fx: 1.1 * float64(w), Fy: 1.05 * float64(w), Cx: 0.52 * float64(w), Cy: 0.47 * float64(h), R: r, T: t, Distortion: dist}
}

// randomScene makes n float64 splats near the origin with moderate sizes,
// opacities in (0.2, 0.9) and colours away from the zero clamp.
func randomScene(rng *rand.Rand, n int) *splat.GaussiansOf[float64] {
	g := splat.NewOf[float64](n)
	for i := 0; i < n; i++ {
		for k := 0; k < 3; k++ {
			g.Means[i*3+k] = (rng.Float64()*2 - 1) * 0.8
			g.LogScales[i*3+k] = math.Log(0.05 + 0.15*rng.Float64())
		}
		for k := 0; k < 4; k++ {
			g.Quats[i*4+k] = rng.NormFloat64()
		}
		g.OpacityLogits[i] = splatLogit(0.2 + 0.7*rng.Float64())
		for k := 0; k < splat.SHCoeffs; k++ {
			for c := 0; c < 3; c++ {
				v := rng.NormFloat64() * 0.15
				if k == 0 {
					v = 0.5 + 0.5*rng.Float64()
				}
				g.SH[(i*splat.SHCoeffs+k)*3+c] = v
			}
		}
	}
	return g
}

func splatLogit(p float64) float64 { return math.Log(p / (1 - p)) }

// flatten lists every parameter of g in Fields order.
func flatten(g *splat.GaussiansOf[float64]) [][]float64 {
	var out [][]float64
	for _, f := range g.Fields() {
		out = append(out, f.Data)
	}
	return out
}

// weighted is Σ w·(projected data) over valid splats: a scalar whose
// gradient with respect to the projected data is w itself.
func weighted(p *ProjectedOf[float64], w *PrepGradsOf[float64]) float64 {
	var s float64
	dot := func(a, b []float64, i, k int) {
		for j := 0; j < k; j++ {
			s += a[i*k+j] * b[i*k+j]
		}
	}
	for i := 0; i < p.N; i++ {
		if !p.Valid[i] {
			continue
		}
		dot(p.Color, w.Color, i, 3)
		dot(p.Opacity, w.Opacity, i, 1)
		if p.Model == Ray {
			dot(p.RayU, w.RayU, i, 3)
			dot(p.RayA, w.RayA, i, 9)
		} else {
			dot(p.Mean2D, w.Mean2D, i, 2)
			dot(p.Conic, w.Conic, i, 3)
		}
	}
	return s
}

func randomPrepGrads(rng *rand.Rand, m Model, n int) *PrepGradsOf[float64] {
	g := NewPrepGrads[float64](m, n)
	for _, s := range [][]float64{g.Color, g.Opacity, g.Mean2D, g.Conic, g.RayU, g.RayA} {
		for i := range s {
			s[i] = rng.NormFloat64()
		}
	}
	// Conic entries are ~1/σ² px⁻²: weight them so every term matters.
	for i := range g.Conic {
		g.Conic[i] *= 100
	}
	return g
}

// projectionGradErr checks ProjectBackward against central differences of
// Project for every parameter group and returns the first failure.
func projectionGradErr(t *testing.T, set Settings, breakIt func(*splat.GaussiansOf[float64])) error {
	t.Helper()
	rng := rand.New(rand.NewPCG(testSeed, uint64(set.SHDegree)))
	cam := testCamera(40, 30, camera.Distortion{})
	k := NewCam[float64](&cam)
	g := randomScene(rng, 12)
	w := randomPrepGrads(rng, set.Model, g.Len())
	p := NewProjected[float64](set.Model, g.Len())
	Project(k, &set, g, p, 1)
	valid := append([]bool(nil), p.Valid...)
	nValid := 0
	for _, v := range valid {
		if v {
			nValid++
		}
	}
	if nValid < 6 {
		t.Fatalf("only %d of %d splats valid: the test scene is wrong", nValid, g.Len())
	}
	grads := splat.NewOf[float64](g.Len())
	ProjectBackward(k, &set, g, p, w, grads, nil, 1)
	if breakIt != nil {
		breakIt(grads)
	}
	f := func() float64 {
		Project(k, &set, g, p, 1)
		for i := range valid {
			if p.Valid[i] != valid[i] {
				t.Fatalf("splat %d changed validity under a finite-difference step", i)
			}
		}
		return weighted(p, w)
	}
	names := []string{"means", "log_scales", "quats", "opacity_logits", "sh"}
	an := flatten(grads)
	for gi, x := range flatten(g) {
		fd := check.Central(x, 1e-6, f)
		if err := check.Grad(names[gi], an[gi], fd, 1e-4); err != nil {
			return err
		}
	}
	return nil
}

func TestProjectionBackwardMatchesFiniteDifferences(t *testing.T) {
	for _, model := range []Model{EWA, Ray} {
		for deg := 0; deg <= 3; deg++ {
			for _, aa := range []bool{false, true} {
				if aa && model == Ray {
					continue
				}
				set := Settings{Model: model, SHDegree: deg, Near: 0.01, RadiusScale: 1.3, Antialiased: aa, TileSize: 8}
				name := model.String() + "/deg" + string(rune('0'+deg))
				if aa {
					name += "/antialiased"
				}
				t.Run(name, func(t *testing.T) {
					if err := projectionGradErr(t, set, nil); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// The check must be able to fail: a gradient scaled by 1.01 in one group,
// or a single entry flipped, is caught.
func TestProjectionCheckCatchesBrokenGradients(t *testing.T) {
	breaks := map[string]func(*splat.GaussiansOf[float64]){
		"means×1.01":      func(g *splat.GaussiansOf[float64]) { scale(g.Means, 1.01) },
		"log_scales sign": func(g *splat.GaussiansOf[float64]) { g.LogScales[4] = -g.LogScales[4] },
		"quats×0.99":      func(g *splat.GaussiansOf[float64]) { scale(g.Quats, 0.99) },
		"opacity×2":       func(g *splat.GaussiansOf[float64]) { scale(g.OpacityLogits, 2) },
		"sh zeroed":       func(g *splat.GaussiansOf[float64]) { clear(g.SH[48*2 : 48*3]) },
	}
	for _, model := range []Model{EWA, Ray} {
		for name, br := range breaks {
			set := Settings{Model: model, SHDegree: 3, Near: 0.01, RadiusScale: 1, TileSize: 8}
			if err := projectionGradErr(t, set, br); err == nil {
				t.Errorf("%v: broken gradient %q passed the check", model, name)
			}
		}
	}
}

func scale(s []float64, f float64) {
	for i := range s {
		s[i] *= f
	}
}

// The frustum clamp of the EWA Jacobian has its own derivative branch.
func TestEWAClampedJacobianGradient(t *testing.T) {
	cam := testCamera(40, 30, camera.Distortion{})
	k := NewCam[float64](&cam)
	g := splat.NewOf[float64](1)
	// Far to the right of the frustum (x/z ≈ 0.9 > limit ≈ 0.83 + margin), but large.
	copy(g.Means, []float64{3.2, 0.1, 0})
	copy(g.LogScales, []float64{math.Log(1.5), math.Log(0.8), math.Log(1.1)})
	copy(g.Quats, []float64{0.9, 0.2, 0.3, -0.1})
	g.OpacityLogits[0] = 1
	g.SH[0], g.SH[1], g.SH[2] = 1, 1, 1
	set := Settings{Model: EWA, SHDegree: 0, Near: 0.01, TileSize: 8}
	p := NewProjected[float64](EWA, 1)
	Project(k, &set, g, p, 1)
	if !p.Valid[0] {
		t.Fatal("clamped splat not valid")
	}
	if _, _, _, cx, _ := ewaJacobian(k, vec3[float64]{g.Means[0], 0, 4}); !cx {
		t.Fatal("test splat is not clamped")
	}
	rng := rand.New(rand.NewPCG(testSeed, 99))
	w := randomPrepGrads(rng, EWA, 1)
	grads := splat.NewOf[float64](1)
	ProjectBackward(k, &set, g, p, w, grads, nil, 1)
	f := func() float64 { Project(k, &set, g, p, 1); return weighted(p, w) }
	for name, pair := range map[string][2][]float64{"means": {g.Means, grads.Means}, "log_scales": {g.LogScales, grads.LogScales}, "quats": {g.Quats, grads.Quats}} {
		if err := check.Grad(name, pair[1], check.Central(pair[0], 1e-6, f), 1e-4); err != nil {
			t.Error(err)
		}
	}
}

// Float32 projection agrees with float64 (what the engine runs vs what the
// checks run).
func TestProjectFloat32MatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 3))
	cam := testCamera(64, 48, camera.Distortion{})
	g64 := randomScene(rng, 200)
	g32 := splat.NewOf[float32](200)
	for fi, f := range g64.Fields() {
		dst := g32.Fields()[fi].Data
		for j, v := range f.Data {
			dst[j] = float32(v)
		}
	}
	for _, m := range []Model{EWA, Ray} {
		set := Settings{Model: m, SHDegree: 3, Near: 0.01, RadiusScale: 1, TileSize: 16}
		p64 := NewProjected[float64](m, 200)
		p32 := NewProjected[float32](m, 200)
		Project(NewCam[float64](&cam), &set, g64, p64, 2)
		Project(NewCam[float32](&cam), &set, g32, p32, 2)
		for i := 0; i < 200; i++ {
			if p64.Valid[i] != p32.Valid[i] {
				t.Fatalf("%v splat %d: validity differs", m, i)
			}
			if !p64.Valid[i] {
				continue
			}
			for j := 0; j < 3; j++ {
				if d := math.Abs(p64.Color[i*3+j] - float64(p32.Color[i*3+j])); d > 1e-5 {
					t.Fatalf("%v splat %d colour differs by %g", m, i, d)
				}
			}
			if d := math.Abs(p64.Mean2D[i*2]-float64(p32.Mean2D[i*2])) / 64; d > 1e-5 {
				t.Fatalf("%v splat %d mean2D differs by %g", m, i, d)
			}
		}
	}
}

// The ray model's footprint conic is the exact silhouette: rays just inside
// reach AlphaMin, rays just outside do not.
func TestRayFootprintIsTheSilhouette(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 5))
	cam := testCamera(80, 60, camera.Distortion{})
	k := NewCam[float64](&cam)
	g := randomScene(rng, 30)
	set := Settings{Model: Ray, SHDegree: 0, Near: 0.01, RadiusScale: 1, TileSize: 16}
	p := NewProjected[float64](Ray, g.Len())
	Project(k, &set, g, p, 1)
	checked := 0
	for i := 0; i < g.Len(); i++ {
		if !p.Valid[i] || p.BoundQ[i*3] == 0 {
			continue
		}
		l1, l2, vx, vy := eigSym2(p.BoundQ[i*3], p.BoundQ[i*3+1], p.BoundQ[i*3+2])
		for s := 0; s < 16; s++ {
			th := 2 * math.Pi * float64(s) / 16
			for _, f := range []float64{0.98, 1.02} {
				ca, sa := f*math.Cos(th)/math.Sqrt(l1), f*math.Sin(th)/math.Sqrt(l2)
				px := p.BoundCenter[i*2] + ca*vx - sa*vy
				py := p.BoundCenter[i*2+1] + ca*vy + sa*vx
				dir, _ := cam.PixelRay(px, py)
				a := rayAlpha(p, i, dir)
				if f < 1 && a < AlphaMin*0.999 {
					t.Fatalf("splat %d: inside the footprint alpha %g < %g", i, a, AlphaMin)
				}
				if f > 1 && a >= AlphaMin {
					t.Fatalf("splat %d: outside the footprint alpha %g ≥ %g", i, a, AlphaMin)
				}
			}
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d splats checked", checked)
	}
}

// rayAlpha evaluates the ray model without the 0.99 clamp or the u·v sign test.
func rayAlpha(p *ProjectedOf[float64], i int, d [3]float64) float64 {
	var v [3]float64
	for k := 0; k < 3; k++ {
		v[k] = p.RayA[i*9+k*3]*d[0] + p.RayA[i*9+k*3+1]*d[1] + p.RayA[i*9+k*3+2]*d[2]
	}
	u := p.RayU[i*3 : i*3+3]
	uu := u[0]*u[0] + u[1]*u[1] + u[2]*u[2]
	uv := u[0]*v[0] + u[1]*v[1] + u[2]*v[2]
	vv := v[0]*v[0] + v[1]*v[1] + v[2]*v[2]
	return p.Opacity[i] * math.Exp(-0.5*(uu-uv*uv/vv))
}

// setRectF64 is the box in float64 division and floor: the reference
// setRect's exactness is checked against.
func setRectF64(tilesX, tilesY, ts int, mx, my, ex, ey float32) ([4]int32, bool) {
	fx0 := math.Floor((float64(mx-ex) - 0.5) / float64(ts))
	fx1 := math.Floor((float64(mx+ex)-0.5)/float64(ts)) + 1
	fy0 := math.Floor((float64(my-ey) - 0.5) / float64(ts))
	fy1 := math.Floor((float64(my+ey)-0.5)/float64(ts)) + 1
	if math.IsNaN(fx0+fx1+fy0+fy1) || fx1 <= 0 || fy1 <= 0 || fx0 >= float64(tilesX) || fy0 >= float64(tilesY) {
		return [4]int32{}, false
	}
	x0, x1 := int32(max(fx0, 0)), int32(min(fx1, float64(tilesX)))
	y0, y1 := int32(max(fy0, 0)), int32(min(fy1, float64(tilesY)))
	if x0 >= x1 || y0 >= y1 {
		return [4]int32{}, false
	}
	return [4]int32{x0, y0, x1, y1}, true
}

// rectEdgeValues are centres and half extents around every tile boundary
// (k·ts + 0.5 and its float32 neighbours), the image ends, zero, huge values,
// the infinities and NaN.
func rectEdgeValues(ts, tiles int) []float32 {
	inf := float32(math.Inf(1))
	vs := []float32{0, float32(math.Copysign(0, -1)), 0.5, -0.5, 1, -1, 1e-30, -1e-30, 3.4e38, -3.4e38, 1e20, -1e20,
		1 << 23, -(1 << 23), 1 << 24, inf, -inf, float32(math.NaN())}
	for k := -2; k <= tiles+2; k++ {
		b := float32(k*ts) + 0.5
		vs = append(vs, b, math.Nextafter32(b, inf), math.Nextafter32(b, -inf), float32(k*ts), b+0.25)
	}
	return vs
}

// setRect's float32-and-integer box is the float64 one, decision for decision:
// every pair of edge values as centre and half extent, and random ones, for tile
// sizes that do and do not divide the image.
func TestSetRectMatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 21))
	cases := []struct{ w, h, ts int }{{64, 48, 16}, {70, 33, 16}, {50, 50, 12}, {31, 17, 1}, {1000, 700, 32}, {5, 3, 8}}
	for _, tc := range cases {
		cam := &Cam[float32]{W: tc.w, H: tc.h}
		tx, ty := cam.TilesX(tc.ts), cam.TilesY(tc.ts)
		out := NewProjected[float32](EWA, 1)
		vs := rectEdgeValues(tc.ts, max(tx, ty))
		checked, accepted := 0, 0
		try := func(mx, my, ex, ey float32) {
			want, wantOK := setRectF64(tx, ty, tc.ts, mx, my, ex, ey)
			out.Rect[0], out.Rect[1], out.Rect[2], out.Rect[3] = -7, -7, -7, -7
			ok := setRect(cam, tc.ts, mx, my, ex, ey, 0, out)
			got := [4]int32(out.Rect[:4])
			if ok != wantOK || (ok && got != want) {
				t.Fatalf("%dx%d ts %d: setRect(%v, %v, %v, %v) = %v %v, float64 form %v %v",
					tc.w, tc.h, tc.ts, mx, my, ex, ey, got, ok, want, wantOK)
			}
			checked++
			if ok {
				accepted++
			}
		}
		for _, m := range vs {
			for _, e := range vs {
				try(m, m, e, e)
				try(m, 0.5*m+1, e, 0.25*e)
			}
		}
		for range 200000 {
			mx := float32(rng.NormFloat64() * float64(tc.w))
			my := float32(rng.NormFloat64() * float64(tc.h))
			ex := float32(math.Abs(rng.NormFloat64()) * float64(tc.ts) * 2)
			ey := float32(rng.ExpFloat64() * float64(tc.ts))
			try(mx, my, ex, ey)
		}
		if accepted < checked/10 || accepted == checked {
			t.Fatalf("%dx%d ts %d: %d of %d boxes accepted: the cases do not exercise both outcomes", tc.w, tc.h, tc.ts, accepted, checked)
		}
	}
}

// rayRef is a ray-model pinhole silhouette; kind: 0 rejected, 1 whole image,
// 2 ellipse. rayFootprintF64 evaluates the quadric form of rayFootprint's
// comment in float64 from float32 inputs, for comparison.
type rayRef struct {
	kind               int
	cx, cy, pa, pb, pc float64
	ex, ey, radius     float64
}

func rayFootprintF64(cam *Cam[float32], st *splatGeom[float32], r2 float32) rayRef {
	var wr [3][3]float64
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			wr[r][c] = float64(cam.R[r][0]*st.rq[0][c] + cam.R[r][1]*st.rq[1][c] + cam.R[r][2]*st.rq[2][c])
		}
	}
	var k [3][3]float64
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			var v float64
			for j := 0; j < 3; j++ {
				s := float64(st.s[j])
				v += wr[r][j] * wr[c][j] / (s * s * float64(r2))
			}
			k[r][c] = v
		}
	}
	m := [3]float64{float64(st.p[0]), float64(st.p[1]), float64(st.p[2])}
	var km [3]float64
	for r := 0; r < 3; r++ {
		km[r] = k[r][0]*m[0] + k[r][1]*m[1] + k[r][2]*m[2]
	}
	mkm := km[0]*m[0] + km[1]*m[1] + km[2]*m[2]
	if mkm <= 1 {
		return rayRef{kind: 1}
	}
	var mm [3][3]float64
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			mm[r][c] = km[r]*km[c] - (mkm-1)*k[r][c]
		}
	}
	n2a, n2b, n2c := mm[0][0], mm[0][1], mm[1][1]
	det := n2a*n2c - n2b*n2b
	if !(det > 0) || !(n2a < 0) {
		return rayRef{kind: 1}
	}
	nx, ny := mm[0][2], mm[1][2]
	c0x := -(n2c*nx - n2b*ny) / det
	c0y := -(-n2b*nx + n2a*ny) / det
	kk := mm[2][2] + nx*c0x + ny*c0y
	if !(kk > 0) {
		return rayRef{}
	}
	qa, qb, qc := -n2a/kk, -n2b/kk, -n2c/kk
	qdet := qa*qc - qb*qb
	fx, fy := float64(cam.Fx), float64(cam.Fy)
	o := rayRef{kind: 2, cx: fx*c0x + float64(cam.Cx), cy: fy*c0y + float64(cam.Cy)}
	o.pa, o.pb, o.pc = qa/(fx*fx), qb/(fx*fy), qc/(fy*fy)
	o.ex, o.ey = fx*math.Sqrt(qc/qdet), fy*math.Sqrt(qa/qdet)
	mid := 0.5 * (o.pa + o.pc)
	d := math.Sqrt(math.Max(0.25*(o.pa-o.pc)*(o.pa-o.pc)+o.pb*o.pb, 0))
	o.radius = 3 / math.Sqrt(float64(r2)) / math.Sqrt(mid-d)
	return o
}

// relDiff is |a − b| over max(|b|, floor).
func relDiff(a, b, floor float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), floor) }

// rayErr is how far a silhouette is from the 256-bit one: the centre relative
// to max(|c|, 1 px), Q relative to max(|pa|, |pc|), the half extents and the
// radius relative to themselves.
func rayErr(got, ref rayRef) (c, q, e, r float64) {
	qs := math.Max(math.Abs(ref.pa), math.Abs(ref.pc))
	c = max(relDiff(got.cx, ref.cx, 1), relDiff(got.cy, ref.cy, 1))
	q = max(relDiff(got.pa, ref.pa, qs), relDiff(got.pb, ref.pb, qs), relDiff(got.pc, ref.pc, qs))
	e = max(relDiff(got.ex, ref.ex, 0), relDiff(got.ey, ref.ey, 0))
	return c, q, e, relDiff(got.radius, ref.radius, 0)
}

// The ray model's silhouette in df arithmetic, and the float64 form it
// replaces, against the formula in 256-bit arithmetic, over random splats from
// near (z 0.05) to far (z 10⁴), sizes from 10⁻⁴ to 10 and axis ratios to 10⁻³,
// grouped by distance over the smallest axis (the conditioning). Wherever the
// 256-bit silhouette is an ellipse the df one must be within float32 rounding
// of it; the log lists both forms' worst errors for every group (the float64
// form loses digits to cancellation as z/σ grows).
func TestRayFootprintDFAgainstExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 23))
	cam := testCamera(640, 480, camera.Distortion{})
	k := NewCam[float32](&cam)
	set := Settings{Model: Ray, Near: 0.01, RadiusScale: 1, TileSize: 16}
	out := NewProjected[float32](Ray, 1)
	type group struct {
		n, kindDF, kindF64, boxDF, boxF64 int
		df, f64                           [4]float64
	}
	names := []string{"z/σ ≤ 1e2", "z/σ ≤ 1e4", "z/σ ≤ 1e6", "z/σ > 1e6"}
	groups := make([]group, len(names))
	box := func(cx, cy, ex, ey float64) [5]int32 {
		p := NewProjected[float32](Ray, 1)
		ok := setRect(k, 16, float32(cx), float32(cy), float32(ex), float32(ey), 0, p)
		if !ok {
			return [5]int32{}
		}
		return [5]int32{1, p.Rect[0], p.Rect[1], p.Rect[2], p.Rect[3]}
	}
	const n = 30000
	for trial := 0; trial < n; trial++ {
		var st splatGeom[float32]
		q := [4]float32{float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64())}
		st.rq, st.qh, st.qn = quatToMat(q)
		size := math.Pow(10, -4+5*rng.Float64())
		for j := range 3 {
			st.s[j] = float32(size * math.Pow(10, -3*rng.Float64()))
		}
		z := math.Pow(10, math.Log10(0.05)+(4-math.Log10(0.05))*rng.Float64())
		st.p = vec3[float32]{float32(z * (rng.Float64() - 0.5)), float32(z * 0.75 * (rng.Float64() - 0.5)), float32(z)}
		r2 := float32(2 * math.Log((0.02+0.98*rng.Float64())/AlphaMin))
		exact := rayFootprintBig(k, &st, r2)
		if exact.kind != 2 {
			continue
		}
		cond := z / float64(min(st.s[0], st.s[1], st.s[2]))
		g := &groups[min(int(math.Max(math.Log10(cond), 0)/2), 3)]
		g.n++
		ref := rayFootprintF64(k, &st, r2)
		ok := rayFootprint(k, &set, &st, r2, 0, out)
		got := rayRef{kind: 2, cx: float64(out.BoundCenter[0]), cy: float64(out.BoundCenter[1]),
			pa: float64(out.BoundQ[0]), pb: float64(out.BoundQ[1]), pc: float64(out.BoundQ[2]), radius: float64(out.Radius[0])}
		if out.BoundQ[0] == 0 && out.BoundQ[1] == 0 && out.BoundQ[2] == 0 {
			g.kindDF++ // whole image: conservative
		}
		if ref.kind != 2 {
			g.kindF64++
		}
		wantBox := box(exact.cx, exact.cy, exact.ex, exact.ey)
		if ref.kind == 2 && box(ref.cx, ref.cy, ref.ex, ref.ey) != wantBox {
			g.boxF64++
		}
		gotBox := [5]int32{}
		if ok {
			gotBox = [5]int32{1, out.Rect[0], out.Rect[1], out.Rect[2], out.Rect[3]}
		}
		if got.pa != 0 && gotBox != wantBox {
			g.boxDF++
		}
		if got.pa != 0 {
			// ex, ey are not kept: recover them from the box test's inputs.
			c, q, _, r := rayErr(got, exact)
			g.df = [4]float64{max(g.df[0], c), max(g.df[1], q), 0, max(g.df[3], r)}
		}
		if ref.kind == 2 {
			// The float64 form's outputs as it stored them: rounded to float32.
			r32 := func(x float64) float64 { return float64(float32(x)) }
			ref = rayRef{kind: 2, cx: r32(ref.cx), cy: r32(ref.cy), pa: r32(ref.pa), pb: r32(ref.pb), pc: r32(ref.pc),
				ex: r32(ref.ex), ey: r32(ref.ey), radius: r32(ref.radius)}
			c, q, e, r := rayErr(ref, exact)
			g.f64 = [4]float64{max(g.f64[0], c), max(g.f64[1], q), max(g.f64[2], e), max(g.f64[3], r)}
		}
	}
	for i, g := range groups {
		t.Logf("%-10s %5d ellipses | df: %4d whole, %4d boxes off, worst centre %.2g Q %.2g radius %.2g | float64: %4d not ellipses, %4d boxes off, worst centre %.2g Q %.2g radius %.2g",
			names[i], g.n, g.kindDF, g.boxDF, g.df[0], g.df[1], g.df[3], g.kindF64, g.boxF64, g.f64[0], g.f64[1], g.f64[3])
	}
	// The guarantee, at every distance: the float32 outputs within one float32
	// rounding and a little (2⁻²³ ≈ 1.2e-7) of the exact ones, the same tile box,
	// never the whole image in place of an ellipse.
	for i, g := range groups {
		if g.n < 1000 {
			t.Fatalf("%s: only %d ellipses", names[i], g.n)
		}
		if g.kindDF > 0 || g.boxDF > 0 || !(g.df[0] <= 0x1p-23 && g.df[1] <= 0x1p-23 && g.df[3] <= 0x1p-23) {
			t.Errorf("%s: df silhouette off the exact one beyond the bound", names[i])
		}
	}
}

// rayFootprintBig is rayFootprintF64's formula in 256-bit arithmetic: the
// silhouette of the float32 inputs as exactly as the formula allows.
func rayFootprintBig(cam *Cam[float32], st *splatGeom[float32], r2 float32) rayRef {
	const prec = 256
	nf := func(x float64) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(x) }
	add := func(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(prec).Add(a, b) }
	sub := func(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(prec).Sub(a, b) }
	mul := func(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(prec).Mul(a, b) }
	quo := func(a, b *big.Float) *big.Float { return new(big.Float).SetPrec(prec).Quo(a, b) }
	f := func(a *big.Float) float64 { v, _ := a.Float64(); return v }
	var wr [3][3]*big.Float
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			wr[r][c] = nf(float64(cam.R[r][0]*st.rq[0][c] + cam.R[r][1]*st.rq[1][c] + cam.R[r][2]*st.rq[2][c]))
		}
	}
	var k [3][3]*big.Float
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			v := nf(0)
			for j := 0; j < 3; j++ {
				s := nf(float64(st.s[j]))
				v = add(v, quo(mul(wr[r][j], wr[c][j]), mul(mul(s, s), nf(float64(r2)))))
			}
			k[r][c] = v
		}
	}
	m := [3]*big.Float{nf(float64(st.p[0])), nf(float64(st.p[1])), nf(float64(st.p[2]))}
	var km [3]*big.Float
	for r := 0; r < 3; r++ {
		km[r] = add(add(mul(k[r][0], m[0]), mul(k[r][1], m[1])), mul(k[r][2], m[2]))
	}
	mkm := add(add(mul(km[0], m[0]), mul(km[1], m[1])), mul(km[2], m[2]))
	if mkm.Cmp(nf(1)) <= 0 {
		return rayRef{kind: 1}
	}
	var mm [3][3]*big.Float
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			mm[r][c] = sub(mul(km[r], km[c]), mul(sub(mkm, nf(1)), k[r][c]))
		}
	}
	n2a, n2b, n2c := mm[0][0], mm[0][1], mm[1][1]
	det := sub(mul(n2a, n2c), mul(n2b, n2b))
	if det.Sign() <= 0 || n2a.Sign() >= 0 {
		return rayRef{kind: 1}
	}
	nx, ny := mm[0][2], mm[1][2]
	c0x := new(big.Float).SetPrec(prec).Neg(quo(sub(mul(n2c, nx), mul(n2b, ny)), det))
	c0y := new(big.Float).SetPrec(prec).Neg(quo(add(mul(new(big.Float).Neg(n2b), nx), mul(n2a, ny)), det))
	kk := add(add(mm[2][2], mul(nx, c0x)), mul(ny, c0y))
	if kk.Sign() <= 0 {
		return rayRef{}
	}
	neg := func(a *big.Float) *big.Float { return new(big.Float).SetPrec(prec).Neg(a) }
	qa, qb, qc := neg(quo(n2a, kk)), neg(quo(n2b, kk)), neg(quo(n2c, kk))
	qdet := sub(mul(qa, qc), mul(qb, qb))
	fx, fy := nf(float64(cam.Fx)), nf(float64(cam.Fy))
	o := rayRef{kind: 2, cx: f(add(mul(fx, c0x), nf(float64(cam.Cx)))), cy: f(add(mul(fy, c0y), nf(float64(cam.Cy))))}
	pa, pb, pc := quo(qa, mul(fx, fx)), quo(qb, mul(fx, fy)), quo(qc, mul(fy, fy))
	o.pa, o.pb, o.pc = f(pa), f(pb), f(pc)
	sqrt := func(a *big.Float) *big.Float {
		if a.Sign() <= 0 {
			return nf(0)
		}
		return new(big.Float).SetPrec(prec).Sqrt(a)
	}
	o.ex, o.ey = f(mul(fx, sqrt(quo(qc, qdet)))), f(mul(fy, sqrt(quo(qa, qdet))))
	// The smaller eigenvalue as det/(the larger), which 256 bits need as well.
	mid := mul(nf(0.5), add(pa, pc))
	d := sqrt(add(mul(mul(nf(0.25), sub(pa, pc)), sub(pa, pc)), mul(pb, pb)))
	o.radius = 3 / math.Sqrt(float64(r2)) * f(sqrt(quo(add(mid, d), sub(mul(pa, pc), mul(pb, pb)))))
	return o
}

// ulps is the distance of a from b in float32 steps.
func ulps(a, b float32) int64 {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if ia>>31 != 0 {
		ia = -(ia & 0x7fffffff)
	}
	if ib>>31 != 0 {
		ib = -(ib & 0x7fffffff)
	}
	if ia > ib {
		return ia - ib
	}
	return ib - ia
}

// RayCam's df pixel rays against the float64 ones rounded to float32, over
// random cameras (focal lengths 50 to 10⁴ px, principal points off centre, any
// rotation) and pixels all over images up to 8000 px wide: at most one float32
// step apart, and nearly always identical (they differ only where the exact
// value lies within about 2⁻⁴⁴ of a rounding boundary).
func TestRayCamMatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 29))
	var n, differ int
	var worst int64
	for trial := 0; trial < 200; trial++ {
		w, h := 1+rng.IntN(8000), 1+rng.IntN(6000)
		f := 50 * math.Pow(200, rng.Float64())
		q := [4]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		cam := camera.Camera{Width: w, Height: h, Fx: f, Fy: f * (0.9 + 0.2*rng.Float64()),
			Cx: float64(w) * (0.3 + 0.4*rng.Float64()), Cy: float64(h) * (0.3 + 0.4*rng.Float64()),
			R: camera.RotationFromQuat(q[0], q[1], q[2], q[3])}
		rc := NewRayCam(&cam)
		for range 2000 {
			x, y := rng.IntN(w), rng.IntN(h)
			want, _ := cam.PixelRay(float64(x)+0.5, float64(y)+0.5)
			got := rc.Ray(x, y)
			n++
			same := true
			for k := 0; k < 3; k++ {
				d := ulps(got[k], float32(want[k]))
				worst = max(worst, d)
				same = same && d == 0
			}
			if !same {
				differ++
			}
		}
	}
	t.Logf("%d rays: %d differ from the float64 ones rounded (%.4f%%), by at most %d float32 steps", n, differ, 100*float64(differ)/float64(n), worst)
	if worst > 1 || differ*1000 > n {
		t.Fatalf("df rays off the float64 ones: %d of %d differ, worst %d steps", differ, n, worst)
	}
}
