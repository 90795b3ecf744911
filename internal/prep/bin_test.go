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
