package fused

import (
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/raster"
)

// TestWalkEWAFollowsTheCPU walks every pixel of a few random scenes with walkEWA (raster_fwd's
// arithmetic, which the last-contributor row uses to explain a count the CPU's row recurrence
// ends elsewhere): its count must be the CPU rasterizer's at every pixel but those whose walk
// decides within borderTol of a threshold, and those must be rare.
func TestWalkEWAFollowsTheCPU(t *testing.T) {
	const w, h = 160, 120
	for _, seed := range []uint64{0, 3, 7} {
		g, v := RandomScene(seed, 4000, w, h)
		pipe := cpu.NewPipeline[float32](engine.DefaultSettings())
		if err := pipe.Forward(&v.Camera, g, 0, [3]float32{}); err != nil {
			t.Fatal(err)
		}
		l := pipe.Lists
		walked, blended, border, near := 0, 0, 0, 0
		for y := range h {
			for x := range w {
				tile := (y/l.TileSize)*l.TilesX + x/l.TileSize
				ids := l.IDs[l.Offsets[tile]:l.Offsets[tile+1]]
				if len(ids) > raster.SegmentEntries {
					continue
				}
				walked++
				c, nr := walkEWA(pipe.Proj, ids, x, y)
				want := int(pipe.Fwd.Count[y*w+x])
				if c > 0 {
					blended++
				}
				if nr {
					near++
				}
				if c != want {
					if !nr {
						t.Fatalf("seed %d pixel (%d, %d): walk %d, cpu %d, no decision near a threshold", seed, x, y, c, want)
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
