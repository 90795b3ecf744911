package fused

import (
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/raster"
)

// TestWalkFollowsTheCPU walks every pixel of a few random scenes with walkEWA (raster_fwd's
// arithmetic, which the last-contributor row uses to explain a count the CPU's row recurrence
// or a device's exponential ends elsewhere), and with walkRay for the ray model: its count
// must be the CPU rasterizer's at every pixel but those whose walk
// decides within borderTol of a threshold, where the CPU's must be one of the ends it reaches
// taking those decisions either way, and those must be rare.
func TestWalkFollowsTheCPU(t *testing.T) {
	for _, model := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(model.String(), func(t *testing.T) { walkFollowsTheCPU(t, model) })
	}
}

func walkFollowsTheCPU(t *testing.T, model prep.Model) {
	const w, h = 160, 120
	for _, seed := range []uint64{0, 3, 7} {
		g, v := RandomScene(seed, 4000, w, h)
		set := engine.DefaultSettings()
		set.Render = model
		pipe := cpu.NewPipeline[float32](set)
		if err := pipe.Forward(&v.Camera, g, 0, [3]float32{}); err != nil {
			t.Fatal(err)
		}
		rays := cpu.PixelRays[float32](&v.Camera, nil)
		l := pipe.Lists
		walked, blended, border, near := 0, 0, 0, 0
		for y := range h {
			for x := range w {
				tile := (y/l.TileSize)*l.TilesX + x/l.TileSize
				ids := l.IDs[l.Offsets[tile]:l.Offsets[tile+1]]
				var ends []int
				if model == prep.Ray {
					i := 3 * (y*w + x)
					ends = walkRay(pipe.Proj, ids, [3]float32{rays[i], rays[i+1], rays[i+2]})
				} else {
					if len(ids) > raster.SegmentEntries {
						continue
					}
					ends = walkEWA(pipe.Proj, ids, x, y)
				}
				walked++
				c := ends[0]
				want := int(pipe.Fwd.Count[y*w+x])
				if c > 0 {
					blended++
				}
				if len(ends) > 1 {
					near++
				}
				if c != want {
					if !slices.Contains(ends, want) {
						t.Fatalf("seed %d pixel (%d, %d): walk ends at %v, cpu %d", seed, x, y, ends, want)
					}
					border++
				}
			}
		}
		if walked < w*h/2 || blended < walked/2 {
			t.Fatalf("seed %d: %d pixels walked, %d with a blend: too few for the test to mean anything", seed, walked, blended)
		}
		if border > walked/1000 {
			t.Errorf("seed %d: %d of %d pixels end elsewhere than the CPU's (%d near a threshold)", seed, border, walked, near)
		}
		t.Logf("seed %d: %d pixels walked, %d blended, %d near a threshold, %d ending elsewhere", seed, walked, blended, near, border)
	}
}

// TestWalkForks checks the ends walkEWA and walkRay reach on hand-made walks of splats centred
// on the pixel (exponent 0, so alpha is the opacity; for the ray model the pixel's ray passes
// through each centre): a decision within borderTol of its threshold adds the end of its other
// side, exp32's side first; decisions far from one add nothing.
func TestWalkForks(t *testing.T) {
	amin := float32(prep.AlphaMin)
	// After two clamped splats T is (1 − 0.99)² ≈ 1e-4, the termination threshold itself.
	for _, tt := range []struct {
		name    string
		opacity []float32
		want    []int
	}{
		{"far from every threshold", []float32{0.5, 0.3}, []int{2}},
		{"just above the cut-off", []float32{amin * (1 + 1e-7)}, []int{1, 0}},
		{"just below the cut-off", []float32{amin * (1 - 1e-7)}, []int{0, 1}},
		{"well below the cut-off", []float32{amin / 2, 0.5}, []int{2}},
		{"termination within the tolerance", []float32{1, 1, 0.5}, nil},
		{"no splat", nil, []int{0}},
	} {
		for _, model := range []prep.Model{prep.EWA, prep.Ray} {
			t.Run(model.String()+"/"+tt.name, func(t *testing.T) {
				n := len(tt.opacity)
				p := &prep.ProjectedOf[float32]{N: n, Opacity: tt.opacity, Mean2D: make([]float32, 2*n), Conic: make([]float32, 3*n),
					RayU: make([]float32, 3*n), RayA: make([]float32, 9*n), Color: make([]float32, 3*n)}
				ids := make([]int32, n)
				for i := range n {
					p.Mean2D[2*i], p.Mean2D[2*i+1] = 0.5, 0.5 // pixel (0, 0)'s centre
					p.Conic[3*i], p.Conic[3*i+2] = 1, 1
					// Ray: A = I and u = −d for the direction d = (0, 0, 1): the ray's closest
					// approach is the centre, in front of the camera.
					p.RayA[9*i], p.RayA[9*i+4], p.RayA[9*i+8] = 1, 1, 1
					p.RayU[3*i+2] = -1
					ids[i] = int32(i)
				}
				var got []int
				if model == prep.Ray {
					got = walkRay(p, ids, [3]float32{0, 0, 1})
				} else {
					got = walkEWA(p, ids, 0, 0)
				}
				if tt.want == nil {
					// The second splat's termination test forks: stop before it (1), or blend it
					// and stop before the third, which takes T below the threshold for certain (2).
					if len(got) != 2 || !slices.Contains(got, 1) || !slices.Contains(got, 2) {
						t.Fatalf("ends %v, want 1 and 2", got)
					}
					return
				}
				if !slices.Equal(got, tt.want) {
					t.Fatalf("ends %v, want %v", got, tt.want)
				}
			})
		}
	}
}
