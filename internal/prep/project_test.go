package prep

import (
	"math"
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

// setRectF64 is the box in float64 division and floor, the form setRect had
// before it had to run without float64: the reference its exactness is checked
// against.
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
