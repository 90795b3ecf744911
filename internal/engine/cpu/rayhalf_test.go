package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/prep/preptest"
)

// The ray model's half-plane cut (prep.TileAhead) drops only tiles where every pixel's ray
// has its closest approach to the splat behind the camera, which the rasterizer skips: on a
// scene whose splats surround the camera (many straddle its plane, footprint "the whole
// image"), the lists shrink and the render and every gradient stay bit for bit those of box
// binning, which drops nothing.
func TestRayHalfPlaneCutKeepsTheRender(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 7))
	g := randomGaussians(rng, 3000, 0.15)
	for i := 0; i < g.Len(); i++ { // around the camera at (0, 0, 1.2), some behind it
		g.Means[i*3+2] += 1.0
		g.OpacityLogits[i] = float32(2 + rng.Float64())
	}
	const w, h = 128, 96
	cam := lookAt([3]float64{0, 0, 1.2}, w, h)
	target := make([]float32, w*h*3)
	for i := range target {
		target[i] = float32(rng.Float64())
	}
	type run struct {
		img, grads []float32
		entries    int
	}
	render := func(mode engine.BinMode) run {
		set := engine.DefaultSettings()
		set.Render = prep.Ray
		set.BinMode = mode
		set.Workers = 2
		p := NewPipeline[float32](set)
		if err := p.Forward(&cam, g, 1, [3]float32{0.1, 0.2, 0.3}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Loss(target); err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(g); err != nil {
			t.Fatal(err)
		}
		var grads []float32
		for _, f := range p.Grads.Fields() {
			grads = append(grads, f.Data...)
		}
		return run{slices.Clone(p.Fwd.Image), grads, len(p.Lists.IDs)}
	}
	conic, box := render(engine.BinGPUConic), render(engine.BinGPURadiusAABB)
	if conic.entries >= box.entries {
		t.Fatalf("conic binning kept %d entries, box binning %d: nothing was cut", conic.entries, box.entries)
	}
	for i := range box.img {
		if math.Float32bits(conic.img[i]) != math.Float32bits(box.img[i]) {
			t.Fatalf("image value %d: %v with the cuts, %v without", i, conic.img[i], box.img[i])
		}
	}
	for i := range box.grads {
		if math.Float32bits(conic.grads[i]) != math.Float32bits(box.grads[i]) {
			t.Fatalf("gradient value %d: %v with the cuts, %v without", i, conic.grads[i], box.grads[i])
		}
	}

	// The half-plane alone: with every splat's RayHalf reset to keep all, the same conic
	// binning keeps more entries, so the cut is what dropped them.
	set := engine.DefaultSettings()
	set.Render = prep.Ray
	ps := set.Prep(1)
	pr := prep.NewProjected[float32](prep.Ray, g.Len())
	prep.Project(prep.NewCam[float32](&cam), &ps, g, pr, 1)
	with, without := preptest.HalfPlaneEntries(t, pr, w, h, set.TileSize)
	if with >= without {
		t.Fatalf("the half-plane cut dropped nothing: %d entries with it, %d without", with, without)
	}
	t.Logf("entries: box %d, conic without the half-plane %d, with it %d", box.entries, without, with)

	// The hyperbolas alone: a splat whose footprint reaches behind the camera plane keeps its
	// silhouette, the insides of a hyperbola's branches, for the tile test, and the tiles it
	// reaches as its box (prep.HyperbolaRect), not the whole image; with every such Q reset to
	// 0 (the whole box), the same binning keeps more entries, so the hyperbolas are what
	// dropped them (and the render above is unchanged).
	hyper, boxTiles := 0, 0
	flat := *pr
	flat.BoundQ = slices.Clone(pr.BoundQ)
	for i := 0; i < g.Len(); i++ {
		if pr.Valid[i] && prep.Hyperbolic(pr.BoundQ[3*i], pr.BoundQ[3*i+1], pr.BoundQ[3*i+2]) {
			hyper++
			r := pr.Rect[4*i : 4*i+4]
			boxTiles += int((r[2] - r[0]) * (r[3] - r[1]))
			flat.BoundQ[3*i], flat.BoundQ[3*i+1], flat.BoundQ[3*i+2] = 0, 0, 0
		}
	}
	whole := hyper * ((w + set.TileSize - 1) / set.TileSize) * ((h + set.TileSize - 1) / set.TileSize)
	if hyper == 0 || boxTiles*4 > whole*3 {
		t.Fatalf("%d hyperbolic footprints' boxes hold %d tiles, the whole image %d for each: want them cut", hyper, boxTiles, whole)
	}
	t.Logf("%d hyperbolic footprints' boxes: %d tiles, against %d for whole images", hyper, boxTiles, whole)
	entries := func(p *prep.Projected) int {
		var b prep.Binner
		if err := prep.Emit(&b, p, w, h, set.TileSize, true, 1); err != nil {
			t.Fatal(err)
		}
		var tl prep.TileLists
		b.SortInto(&tl)
		return len(tl.IDs)
	}
	withH, withoutH := entries(pr), entries(&flat)
	if hyper == 0 || withH >= withoutH {
		t.Fatalf("%d hyperbolic footprints; %d entries with them, %d with the whole box instead", hyper, withH, withoutH)
	}
	t.Logf("%d hyperbolic footprints: %d entries, %d with the whole box instead", hyper, withH, withoutH)
}
