package prep

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// TileHit is exact: it agrees with testing every pixel centre of the tile.
func TestTileHitMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 11))
	hits, misses := 0, 0
	for trial := 0; trial < 3000; trial++ {
		cx, cy := rng.Float64()*64-16, rng.Float64()*64-16
		// Random PD matrix with axes between 1 and 20 px.
		l1, l2 := 1/sq(1+19*rng.Float64()), 1/sq(1+19*rng.Float64())
		th := rng.Float64() * 3.14159
		c, s := math.Cos(th), math.Sin(th)
		qa := l1*c*c + l2*s*s
		qb := (l1 - l2) * c * s
		qc := l1*s*s + l2*c*c
		px0, py0 := 16, 8
		px1, py1 := 32, 24
		want := false
		for y := py0; y < py1 && !want; y++ {
			for x := px0; x < px1; x++ {
				dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy
				if qa*dx*dx+2*qb*dx*dy+qc*dy*dy <= 1 {
					want = true
					break
				}
			}
		}
		got := TileHit(cx, cy, qa, qb, qc, px0, py0, px1, py1)
		// The continuous test may accept a tile whose ellipse passes between
		// pixel centres only if it reaches the box of centres; brute force
		// on centres can miss that sliver, never the other way round.
		if want && !got {
			t.Fatalf("trial %d: pixel centre inside but TileHit false", trial)
		}
		if got && !want {
			// Must be a sliver: the continuous minimum over the box is ≤ 1.
			misses++
		}
		if want {
			hits++
		}
	}
	if hits < 300 {
		t.Fatalf("only %d hits: the test does not exercise TileHit", hits)
	}
	if misses > hits/20 {
		t.Fatalf("%d continuous-only hits of %d: the test is not tight", misses, hits)
	}
}

func sq(x float64) float64 { return x * x }

// Bin agrees with a naive binning: every (tile, splat) pair the footprint
// reaches, ordered by tile, depth and splat id.
func TestBinMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 13))
	cam := testCamera(120, 90, camera.Distortion{})
	g := randomScene(rng, 400)
	g32 := splat.NewOf[float32](g.Len())
	for fi, f := range g.Fields() {
		for j, v := range f.Data {
			g32.Fields()[fi].Data[j] = float32(v)
		}
	}
	// Duplicate depths on purpose so the splat-id tie-break matters.
	copy(g32.Means[3:6], g32.Means[0:3])
	for _, m := range []Model{EWA, Ray} {
		for _, conic := range []bool{true, false} {
			set := Settings{Model: m, SHDegree: 1, Near: 0.01, RadiusScale: 1, TileSize: 16}
			p := NewProjected[float32](m, g.Len())
			Project(NewCam[float32](&cam), &set, g32, p, 2)
			var b Binner
			var lists TileLists
			if err := Bin(&b, p, cam.Width, cam.Height, 16, conic, 2, &lists); err != nil {
				t.Fatal(err)
			}
			type entry struct {
				tile int
				key  uint64
				id   int32
			}
			var want []entry
			tx := (cam.Width + 15) / 16
			for i := 0; i < g.Len(); i++ {
				if !p.Valid[i] {
					continue
				}
				r := p.Rect[i*4:]
				for ty := int(r[1]); ty < int(r[3]); ty++ {
					for x := int(r[0]); x < int(r[2]); x++ {
						if conic && !TileHit(p.BoundCenter[i*2], p.BoundCenter[i*2+1], p.BoundQ[i*3], p.BoundQ[i*3+1], p.BoundQ[i*3+2], x*16, ty*16, min(x*16+16, cam.Width), min(ty*16+16, cam.Height)) {
							continue
						}
						tile := ty*tx + x
						want = append(want, entry{tile, uint64(tile)<<32 | uint64(DepthBits(p.Depth[i])), int32(i)})
					}
				}
			}
			sort.Slice(want, func(a, b int) bool {
				if want[a].key != want[b].key {
					return want[a].key < want[b].key
				}
				return want[a].id < want[b].id
			})
			if len(want) < 100 {
				t.Fatalf("only %d entries: scene too small", len(want))
			}
			if len(want) != len(lists.IDs) {
				t.Fatalf("%v conic=%v: %d entries, want %d", m, conic, len(lists.IDs), len(want))
			}
			for j, e := range want {
				if lists.IDs[j] != e.id || lists.Keys[j] != e.key {
					t.Fatalf("%v conic=%v entry %d: got id %d key %x, want id %d key %x", m, conic, j, lists.IDs[j], lists.Keys[j], e.id, e.key)
				}
			}
			for tile := 0; tile < lists.TilesX*lists.TilesY; tile++ {
				for j := lists.Offsets[tile]; j < lists.Offsets[tile+1]; j++ {
					if int(lists.Keys[j]>>32) != tile {
						t.Fatalf("offsets: entry %d of tile %d has tile %d", j, tile, lists.Keys[j]>>32)
					}
				}
			}
			if int(lists.Offsets[len(lists.Offsets)-1]) != len(want) {
				t.Fatal("last offset is not the entry count")
			}
		}
	}
}

// tileHitF64 is the tile test in float64 from float32 inputs: the reference
// for TileHit's decisions.
func tileHitF64(cx, cy, qa, qb, qc float32, px0, py0, px1, py1 int) bool {
	if qa == 0 && qb == 0 && qc == 0 {
		return true
	}
	x0, x1 := float64(px0)+0.5, float64(px1)-0.5
	y0, y1 := float64(py0)+0.5, float64(py1)-0.5
	fcx, fcy := float64(cx), float64(cy)
	if fcx >= x0 && fcx <= x1 && fcy >= y0 && fcy <= y1 {
		return true
	}
	a, b, c := float64(qa), float64(qb), float64(qc)
	best := math.Inf(1)
	for _, xe := range [2]float64{x0, x1} {
		dx := xe - fcx
		y := min(max(fcy-b*dx/c, y0), y1)
		dy := y - fcy
		best = min(best, a*dx*dx+2*b*dx*dy+c*dy*dy)
	}
	for _, ye := range [2]float64{y0, y1} {
		dy := ye - fcy
		x := min(max(fcx-b*dy/a, x0), x1)
		dx := x - fcx
		best = min(best, a*dx*dx+2*b*dx*dy+c*dy*dy)
	}
	return best <= 1
}

// ellipseQ is the float32 footprint matrix of an ellipse with semi-axes s1, s2
// (pixels) at angle th, and its half extents.
func ellipseQ(s1, s2, th float64) (qa, qb, qc float32, ex, ey float64) {
	l1, l2 := 1/(s1*s1), 1/(s2*s2)
	c, s := math.Cos(th), math.Sin(th)
	qa, qb, qc = float32(l1*c*c+l2*s*s), float32((l1-l2)*c*s), float32(l1*s*s+l2*c*c)
	ex = math.Sqrt(s1*s1*c*c + s2*s2*s*s)
	ey = math.Sqrt(s1*s1*s*s + s2*s2*c*c)
	return
}

// TileHit's float32 instance never drops a tile the float64 test keeps, and adds
// few: every tile around random ellipses from 0.01 to 3000 px (thin ones with
// axis ratios to 10⁻⁵), centres up to 10⁵ px from the origin, and circles that
// touch a pixel centre of the tile exactly (minimum 1, the tie).
func TestTileHitFloat32IsConservative(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 17))
	const ts = 16
	type tally struct{ tiles, hits, extra, missing int }
	var all tally
	check := func(name string, cx, cy, qa, qb, qc float32, tx0, ty0, tx1, ty1 int, tl *tally) {
		for ty := ty0; ty < ty1; ty++ {
			for tx := tx0; tx < tx1; tx++ {
				px0, py0 := tx*ts, ty*ts
				want := tileHitF64(cx, cy, qa, qb, qc, px0, py0, px0+ts, py0+ts)
				got := TileHit(cx, cy, qa, qb, qc, px0, py0, px0+ts, py0+ts)
				tl.tiles++
				if want {
					tl.hits++
				}
				switch {
				case want && !got:
					tl.missing++
					if tl.missing <= 3 {
						t.Errorf("%s: tile (%d,%d) of c=(%v,%v) Q=(%v,%v,%v): float64 keeps it, float32 drops it",
							name, tx, ty, cx, cy, qa, qb, qc)
					}
				case got && !want:
					tl.extra++
				}
			}
		}
	}
	cases := []struct {
		name        string
		n           int
		smin, smax  float64 // semi-axis range, log-uniform
		ratio       float64 // smallest axis ratio
		centre      float64 // centres in [0, centre)
		axisAligned bool
	}{
		{"typical", 20000, 0.3, 300, 0.05, 4000, false},
		{"thin", 20000, 0.5, 3000, 1e-5, 4000, false},
		{"thin-1e-3", 20000, 0.5, 3000, 1e-3, 4000, false},
		{"tiny", 20000, 0.01, 1, 0.1, 4000, false},
		{"far", 5000, 1, 100, 0.01, 1e5, false},
		{"axis-aligned", 5000, 0.3, 300, 0.01, 4000, true},
	}
	for _, tc := range cases {
		var tl tally
		for range tc.n {
			s1 := tc.smin * math.Pow(tc.smax/tc.smin, rng.Float64())
			s2 := s1 * math.Pow(tc.ratio, rng.Float64())
			th := rng.Float64() * math.Pi
			if tc.axisAligned {
				th = float64(rng.IntN(4)) * math.Pi / 2
			}
			qa, qb, qc, ex, ey := ellipseQ(s1, s2, th)
			cx, cy := float32(rng.Float64()*tc.centre), float32(rng.Float64()*tc.centre)
			// The tiles of the box and one ring around it, at most 24×24.
			ex, ey = min(ex, 12*ts), min(ey, 12*ts)
			tx0, tx1 := int(math.Floor((float64(cx)-ex)/ts))-1, int(math.Floor((float64(cx)+ex)/ts))+2
			ty0, ty1 := int(math.Floor((float64(cy)-ey)/ts))-1, int(math.Floor((float64(cy)+ey)/ts))+2
			check(tc.name, cx, cy, qa, qb, qc, tx0, ty0, tx1, ty1, &tl)
		}
		t.Logf("%-12s %8d tiles, %7d hits, %5d extra (%.4f%%), %d missing", tc.name, tl.tiles, tl.hits, tl.extra,
			100*float64(tl.extra)/float64(tl.tiles), tl.missing)
		all.tiles, all.hits, all.extra, all.missing = all.tiles+tl.tiles, all.hits+tl.hits, all.extra+tl.extra, all.missing+tl.missing
		if tl.hits < tl.tiles/20 || tl.hits == tl.tiles {
			t.Fatalf("%s: %d hits of %d tiles: the case does not exercise both outcomes", tc.name, tl.hits, tl.tiles)
		}
	}
	// Ties: circles of radius r centred r to the left of (or above, or diagonal
	// to) a pixel centre of the tile, so that the minimum is 1 up to rounding.
	var tie tally
	for range 20000 {
		r := float64(float32(0.5 + rng.Float64()*200))
		px0, py0 := (1+rng.IntN(200))*ts, (1+rng.IntN(200))*ts
		q := float32(1 / (r * r))
		var cx, cy float32
		switch rng.IntN(3) {
		case 0:
			cx, cy = float32(float64(px0)+0.5-r), float32(float64(py0)+0.5+float64(rng.IntN(ts)))
		case 1:
			cx, cy = float32(float64(px0)+0.5+float64(rng.IntN(ts))), float32(float64(py0)+0.5-r)
		default:
			cx, cy = float32(float64(px0)+0.5-r/math.Sqrt2), float32(float64(py0)+0.5-r/math.Sqrt2)
		}
		check("tie", cx, cy, q, 0, q, px0/ts, py0/ts, px0/ts+1, py0/ts+1, &tie)
	}
	t.Logf("%-12s %8d tiles, %7d hits, %5d extra (%.4f%%), %d missing", "tie", tie.tiles, tie.hits, tie.extra,
		100*float64(tie.extra)/float64(tie.tiles), tie.missing)
	if all.missing+tie.missing > 0 {
		t.Fatalf("%d tiles the float64 test keeps were dropped", all.missing+tie.missing)
	}
	// The bound's price: at most 0.5% more tiles over the random cases.
	if all.extra*200 > all.tiles {
		t.Fatalf("%d extra tiles of %d: the error bound is too loose", all.extra, all.tiles)
	}
}

// The ray model's hyperbolic footprints ((p−c)ᵀQ(p−c) ≥ 1 with an indefinite Q, the insides of
// a hyperbola's branches): TileHit must keep every tile one of whose pixel centres lies in them
// by the float64 form, and should drop tiles whose centres all lie clear of them.
// randomHyperbola is Q = R(θ)·diag(1/s1², −1/s2²)·R(θ)ᵀ for a random direction θ and semi-axes
// s1, s2 log-uniform in [1, maxAxis]: a hyperbolic footprint (p−c)ᵀQ(p−c) ≥ 1 of any shape.
func randomHyperbola(rng *rand.Rand, maxAxis float64) (qa, qb, qc float32) {
	s1 := math.Pow(maxAxis, rng.Float64())
	s2 := math.Pow(maxAxis, rng.Float64())
	th := rng.Float64() * math.Pi
	l1, l2 := 1/(s1*s1), -1/(s2*s2)
	co, si := math.Cos(th), math.Sin(th)
	return float32(l1*co*co + l2*si*si), float32((l1 - l2) * co * si), float32(l1*si*si + l2*co*co)
}

func TestTileHitHyperbolaIsConservative(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 29))
	const ts, span = 16, 20
	var tiles, hits, extra, missing, hyperbolic int
	for range 400 {
		qa, qb, qc := randomHyperbola(rng, 300)
		if !Hyperbolic(qa, qb, qc) {
			continue // too near a parabola for the margin: the projection keeps the whole box
		}
		hyperbolic++
		cx, cy := float32(rng.Float64()*2000), float32(rng.Float64()*2000)
		tx0, ty0 := int(cx)/ts-span/2, int(cy)/ts-span/2
		for ty := ty0; ty < ty0+span; ty++ {
			for tx := tx0; tx < tx0+span; tx++ {
				px0, py0 := tx*ts, ty*ts
				want := false
				for y := py0; y < py0+ts && !want; y++ {
					for x := px0; x < px0+ts; x++ {
						dx, dy := float64(x)+0.5-float64(cx), float64(y)+0.5-float64(cy)
						if float64(qa)*dx*dx+2*float64(qb)*dx*dy+float64(qc)*dy*dy >= 1 {
							want = true
							break
						}
					}
				}
				got := TileHit(cx, cy, qa, qb, qc, px0, py0, px0+ts, py0+ts)
				tiles++
				switch {
				case want:
					hits++
					if !got {
						missing++
						if missing <= 3 {
							t.Errorf("tile (%d,%d) of c=(%v,%v) Q=(%v,%v,%v): a pixel centre is in the footprint, TileHit drops it",
								tx, ty, cx, cy, qa, qb, qc)
						}
					}
				case got:
					extra++
				}
			}
		}
	}
	t.Logf("%d hyperbolas: %d tiles, %d hit, %d kept beyond them, %d missing", hyperbolic, tiles, hits, extra, missing)
	if missing > 0 {
		t.Fatalf("%d tiles with a pixel centre in the footprint were dropped", missing)
	}
	if hyperbolic < 300 || hits < tiles/20 || hits == tiles {
		t.Fatalf("%d hyperbolas, %d hits of %d tiles: the case does not exercise both outcomes", hyperbolic, hits, tiles)
	}
	// Beyond the pixel centres' maximum, the continuous box's (and the bound's) price.
	if extra*10 > tiles-hits {
		t.Fatalf("%d of %d tiles clear of the footprint kept: the test drops too little", extra, tiles-hits)
	}
}

// HyperbolaRect's box holds every tile with a pixel centre in the footprint, and is the box
// of those tiles but where the conservative strip tests keep a strip clear of it: hyperbolas
// of every size and direction, centred on the image, beside it and far from it, on images
// whose sides are and are not whole tiles.
func TestHyperbolaRectHoldsTheFootprint(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 31))
	for _, tc := range []struct{ w, h, ts int }{{203, 131, 16}, {160, 96, 16}, {121, 77, 8}} {
		tx, ty := (tc.w+tc.ts-1)/tc.ts, (tc.h+tc.ts-1)/tc.ts
		var cases, off, exact, looser, missing int
		for range 600 {
			qa, qb, qc := randomHyperbola(rng, 200)
			if !Hyperbolic(qa, qb, qc) {
				continue
			}
			cases++
			cx := float32((rng.Float64()*3 - 1) * float64(tc.w))
			cy := float32((rng.Float64()*3 - 1) * float64(tc.h))
			// The exact box of the tiles holding a pixel centre of the footprint.
			want := [4]int32{int32(tx), int32(ty), -1, -1}
			for y := 0; y < tc.h; y++ {
				for x := 0; x < tc.w; x++ {
					dx, dy := float64(x)+0.5-float64(cx), float64(y)+0.5-float64(cy)
					if float64(qa)*dx*dx+2*float64(qb)*dx*dy+float64(qc)*dy*dy >= 1 {
						kx, ky := int32(x/tc.ts), int32(y/tc.ts)
						want = [4]int32{min(want[0], kx), min(want[1], ky), max(want[2], kx+1), max(want[3], ky+1)}
					}
				}
			}
			got, ok := HyperbolaRect(cx, cy, qa, qb, qc, tc.ts, tx, ty, tc.w, tc.h)
			switch {
			case want[2] < 0:
				off++
				if ok && got == [4]int32{0, 0, int32(tx), int32(ty)} {
					looser++
				}
			case !ok || got[0] > want[0] || got[1] > want[1] || got[2] < want[2] || got[3] < want[3]:
				missing++
				if missing <= 3 {
					t.Errorf("%dx%d/%d: c=(%v,%v) Q=(%v,%v,%v): box %v (ok %v) leaves out tiles of %v",
						tc.w, tc.h, tc.ts, cx, cy, qa, qb, qc, got, ok, want)
				}
			case got == want:
				exact++
			default:
				looser++
			}
		}
		t.Logf("%dx%d/%d: %d hyperbolas, %d off the image, %d boxes exact, %d looser, %d missing tiles",
			tc.w, tc.h, tc.ts, cases, off, exact, looser, missing)
		if missing > 0 {
			t.Fatalf("%d boxes leave out tiles of the footprint", missing)
		}
		if cases < 400 || off < cases/10 || exact < cases/4 {
			t.Fatalf("%d hyperbolas, %d off the image, %d exact: the case does not exercise every outcome", cases, off, exact)
		}
		if looser*20 > cases {
			t.Fatalf("%d of %d boxes looser than the tiles the footprint reaches (or whole for one off the image)", looser, cases)
		}
	}
}
