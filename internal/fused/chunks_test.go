package fused

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/raster"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// seedChunks draws the scenes of the chunked-backward tests.
const seedChunks = 17

// TestSegmentEntries: the CPU engine's forward folds its walks where raster_fwd's blocks end
// (raster.h's SEGMENT), whose batches of BATCH (256) staged splats must not straddle two
// segments; and the items of any lists stay within maxSegments.
func TestSegmentEntries(t *testing.T) {
	if segmentEntries != raster.SegmentEntries {
		t.Fatalf("kernels' SEGMENT %d, CPU forward's SegmentEntries %d", segmentEntries, raster.SegmentEntries)
	}
	if segmentEntries%256 != 0 || segmentEntries%chunkEntries != 0 {
		t.Fatalf("SEGMENT %d is not a multiple of BATCH (256) and CHUNK (%d)", segmentEntries, chunkEntries)
	}
	rng := rand.New(rand.NewPCG(seedChunks, 99))
	for range 200 {
		tiles := 1 + rng.IntN(40)
		total, items := 0, 0
		for range tiles {
			l := rng.IntN(4 * segmentEntries)
			if rng.IntN(3) == 0 {
				l = rng.IntN(3) * segmentEntries // empty lists and exact multiples
			}
			total += l
			items += max(1, (l+segmentEntries-1)/segmentEntries)
		}
		if b := maxSegments(total, tiles); items > b {
			t.Fatalf("%d tiles, %d entries: %d segments, bound %d", tiles, total, items, b)
		}
		if b := maxQueued(total); items-tiles > b {
			t.Fatalf("%d tiles, %d entries: %d segments after the first, bound %d", tiles, total, items-tiles, b)
		}
	}
}

// TestChunkEntriesDividesBatch: raster_fwd finds the chunk boundaries in a batch of BATCH
// (raster.h: 256) staged splats with a mask, so CHUNK must be a power of two dividing it.
func TestChunkEntriesDividesBatch(t *testing.T) {
	if 256%chunkEntries != 0 || chunkEntries&(chunkEntries-1) != 0 {
		t.Errorf("chunkEntries %d: want a power of two dividing raster.h's BATCH (256)", chunkEntries)
	}
}

func TestMaxChunks(t *testing.T) {
	// Lists of 0, 1, 64, 65 and 130 entries: 0 + 1 + 1 + 2 + 3 = 7 chunks ≤ 260/64 + 5 = 9.
	lens := []int{0, 1, chunkEntries, chunkEntries + 1, 2*chunkEntries + 2}
	total, chunks := 0, 0
	for _, l := range lens {
		total += l
		chunks += (l + chunkEntries - 1) / chunkEntries
	}
	if m := maxChunks(total, len(lens)); chunks > m {
		t.Errorf("%d chunks, bound %d", chunks, m)
	}
}

// denseScene is n faint, overlapping splats in front of a w×h camera: the tile lists run to
// several chunks and the pixels' walks end anywhere in them (faint splats leave T far above
// the termination threshold, so the last contributor is deep in the list).
func denseScene(seed uint64, n, w, h int) (*splat.Gaussians, *engine.View) {
	rng := rand.New(rand.NewPCG(seedChunks, seed))
	g := randomScene(rng, n, 0.07)
	for i := range g.OpacityLogits {
		g.OpacityLogits[i] = float32(-3 + 0.6*rng.NormFloat64())
	}
	for i := range g.LogScales { // no huge splats: they would end every walk at the list's end
		g.LogScales[i] = min(g.LogScales[i], float32(math.Log(0.15)))
	}
	for i := range g.Means {
		g.Means[i] *= 0.7
	}
	cam := lookAt([3]float64{0.3, -0.9, -3.2}, w, h)
	return g, &engine.View{Index: int(seed), Camera: cam, Target: randomImage(rand.New(rand.NewPCG(seedTarget, seed)), w, h)}
}

// cpuWalk runs the CPU forward and reports the longest tile list, the longest pixel walk,
// how many pixels walk past a chunk boundary, how many of those end inside a chunk (not at
// its last entry), and in how many distinct chunks the walks end.
func cpuWalk(t *testing.T, set engine.Settings, g *splat.Gaussians, v *engine.View, o engine.StepOptions) (longestList, longestWalk, crossing, midChunk, endChunks int) {
	t.Helper()
	pipe := cpu.NewPipeline[float32](set)
	if err := pipe.Forward(&v.Camera, g, o.SHDegree, o.Background); err != nil {
		t.Fatal(err)
	}
	off := pipe.Lists.Offsets
	for i := 0; i+1 < len(off); i++ {
		longestList = max(longestList, int(off[i+1]-off[i]))
	}
	ends := map[int32]bool{}
	for _, c := range pipe.Fwd.Count {
		longestWalk = max(longestWalk, int(c))
		if c > 0 {
			ends[(c-1)/chunkEntries] = true
		}
		if c > chunkEntries {
			crossing++
			if c%chunkEntries != 0 {
				midChunk++
			}
		}
	}
	return longestList, longestWalk, crossing, midChunk, len(ends)
}

// TestChunkedBackward checks raster_bwd's chunks against the CPU engine on lists of several
// chunks whose pixels' walks end mid-chunk, in both render models, with and without the
// max_splat_steps cap: every stage through Compare, then a step whose chunk buffers hold
// poison beforehand (NaN states, out-of-range tables), so that a state the forward failed to
// store, or a chunk mapped to the wrong tile, shows in the gradients.
func TestChunkedBackward(t *testing.T) {
	// 3×2 tiles, the right-hand column 8 pixels wide: small enough for the emulator, and the
	// same scene on a GPU, whose walks the coverage check below was tuned on.
	dev, _ := testDevice(t)
	w, h := 40, 32
	for i, c := range []struct {
		name      string
		model     prep.Model
		maxSteps  int
		bg        [3]float32
		maxBlocks int // raster_bwd's grid cap (Engine.bwdMaxBlocks); 0 keeps it
		n         int // splats: 1500 make lists of two forward segments, 3200 of three
	}{
		{"ewa", prep.EWA, 0, [3]float32{0.2, 0.5, 0.9}, 0, 1500},
		{"ewa/cap", prep.EWA, 90, [3]float32{}, 0, 1500},
		{"ewa/3-segments", prep.EWA, 0, [3]float32{0.7, 0.1, 0.3}, 0, 3200},
		{"ray", prep.Ray, 0, [3]float32{1, 1, 1}, 0, 1500},
		{"ray/7-blocks", prep.Ray, 0, [3]float32{}, 7, 1500}, // each block strides over many chunks
	} {
		t.Run(c.name, func(t *testing.T) {
			g, v := denseScene(uint64(i), c.n, w, h)
			set := engine.DefaultSettings()
			set.Render, set.Loss, set.MaxSplatSteps, set.Workers = c.model, loss.L1SSIM, c.maxSteps, 2
			o := engine.StepOptions{SHDegree: 1, LR: testLR(), Background: c.bg, AccumulateStats: true, WantImage: true}
			list, walk, crossing, mid, ends := cpuWalk(t, set, g, v, o)
			t.Logf("longest list %d entries, longest walk %d; %d pixels walk past a chunk boundary, %d of them end mid-chunk; the walks end in %d distinct chunks",
				list, walk, crossing, mid, ends)
			if list <= 4*chunkEntries || walk <= 3*chunkEntries || mid == 0 || ends < 3 {
				t.Fatalf("the scene does not exercise the chunks: want a list of more than %d entries, a walk of more than %d, walks past a boundary ending mid-chunk, and walks ending in at least 3 chunks", 4*chunkEntries, 3*chunkEntries)
			}
			// Without the cap the forward walks lists of more than segmentEntries in segments
			// (raster.h), which raster_fwd_join folds: the walks must pass a segment's end.
			if segs := (c.n / 1500) + 1; c.maxSteps == 0 && (list <= (segs-1)*segmentEntries || walk <= (segs-1)*segmentEntries) {
				t.Fatalf("the scene does not exercise %d forward segments: want a list and a walk of more than %d entries", segs, (segs-1)*segmentEntries)
			}
			rows, err := compare(dev, set, g, v, o, compareOpts{bwdMaxBlocks: c.maxBlocks})
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for _, r := range rows {
				if !r.Pass {
					t.Errorf("%s: max abs %.3g, rel %.3g, cosine %.8f, tol %g: %s", r.Name, r.MaxAbs, r.RelErr, r.Cosine, r.Tol, r.Note)
				}
				if r.Tol == TolGrad {
					worst = max(worst, r.RelErr)
				}
			}
			t.Logf("worst gradient relative L2 error %.3g (tolerance %g)", worst, TolGrad)
			checkPoisonedChunks(t, dev, set, g, v, o, c.maxBlocks)
		})
	}
}

// TestShortLists checks the backward where every tile's list is shorter than one chunk (a
// block per non-empty tile, no chunk state read), in both render models.
func TestShortLists(t *testing.T) {
	dev, _ := testDevice(t)
	for i, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			g, v := RandomScene(uint64(40+i), 40, 48, 40)
			set := engine.DefaultSettings()
			set.Render, set.Workers = m, 2
			o := engine.StepOptions{SHDegree: 2, LR: testLR(), AccumulateStats: true, WantImage: true}
			list, walk, _, _, _ := cpuWalk(t, set, g, v, o)
			if list == 0 || list >= chunkEntries || walk == 0 {
				t.Fatalf("longest list %d entries, longest walk %d: want lists shorter than one chunk (%d), not all empty", list, walk, chunkEntries)
			}
			checkStep(t, dev, set, g, v, o, false)
			checkPoisonedChunks(t, dev, set, g, v, o, 0)
		})
	}
}

// TestLongListsShortWalks checks the forward where lists take several segments but every pixel
// finishes in the first (opaque splats), so that its first pass writes the tiles itself and
// queues nothing, in both render models.
func TestLongListsShortWalks(t *testing.T) {
	dev, _ := testDevice(t)
	for i, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			g, v := denseScene(uint64(60+i), 1500, 40, 32)
			// Six opaque splats between the camera (at (0.3, −0.9, −3.2), looking at the origin)
			// and the others, each wider than the view: every pixel finishes on them.
			for k := range 6 {
				for a, c := range [3]float32{0.3, -0.9, -3.2} {
					g.Means[3*k+a] = c * (0.3 + 0.01*float32(k))
				}
				for a := range 3 {
					g.LogScales[3*k+a] = float32(math.Log(3 + float64(a+k)/2)) // anisotropic: the quaternions get a gradient
				}
				g.OpacityLogits[k] = 6
			}
			set := engine.DefaultSettings()
			set.Render, set.Workers = m, 2
			o := engine.StepOptions{SHDegree: 2, LR: testLR(), AccumulateStats: true, WantImage: true}
			list, walk, _, _, _ := cpuWalk(t, set, g, v, o)
			t.Logf("longest list %d entries, longest walk %d", list, walk)
			if list <= segmentEntries || walk >= segmentEntries || walk == 0 {
				t.Fatalf("want lists of more than %d entries whose walks end in the first %d", segmentEntries, segmentEntries)
			}
			checkStep(t, dev, set, g, v, o, false)
			checkPoisonedChunks(t, dev, set, g, v, o, 0)
		})
	}
}

// checkPoisonedChunks runs one step on a fresh engine whose chunk buffers are filled with
// 0xFF bytes first (NaN states, chunk starts and tiles of 2³²−1), then checks tile_chunks'
// tables against the tile offsets and the prepared-data gradients against the CPU pipeline.
func checkPoisonedChunks(t *testing.T, dev gpu.Device, set engine.Settings, g *splat.Gaussians, v *engine.View, o engine.StepOptions, maxBlocks int) {
	t.Helper()
	pipe := cpu.NewPipeline[float32](set)
	if err := pipe.Forward(&v.Camera, g, o.SHDegree, o.Background); err != nil {
		t.Fatal(err)
	}
	if _, err := pipe.Loss(v.Target); err != nil {
		t.Fatal(err)
	}
	if err := pipe.Backward(g); err != nil {
		t.Fatal(err)
	}
	fe, err := newOnDevice(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	if maxBlocks > 0 {
		fe.bwdMaxBlocks = maxBlocks
	}
	cam := &v.Camera
	if err := fe.growPixels(cam.Width, cam.Height); err != nil {
		t.Fatal(err)
	}
	if err := fe.growLists(len(pipe.Lists.IDs)); err != nil {
		t.Fatal(err)
	}
	// Chunk states for exactly the slots these lists can use (raster.h, chunk_slot), so that on
	// the emulator a slot past the bound faults on the guard page after the buffer.
	tiles := len(pipe.Lists.Offsets) - 1
	old := fe.chunkState.Size()
	if err := fe.dev.Free(fe.chunkState); err != nil {
		t.Fatal(err)
	}
	fe.chunkState, fe.devBytes = nil, fe.devBytes-int64(old)
	if err := fe.ensure(&fe.chunkState, maxChunks(len(pipe.Lists.IDs), tiles)*fe.chunkStateFloats()*4); err != nil {
		t.Fatal(err)
	}
	for _, b := range []gpu.Buffer{fe.tileWalk, fe.chunkStart, fe.chunkTile, fe.chunkState, fe.segState, fe.segCount} {
		if err := fe.dev.Memset(b, 0, b.Size(), 0xFF); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fe.Step(v, o); err != nil {
		t.Fatal(err)
	}

	// The roofline's chunk counts, from the device's per-pixel counts.
	wk, err := fe.RasterWalk()
	if err != nil {
		t.Fatal(err)
	}
	var boundaries, spanning int64
	for _, c := range pipe.Fwd.Count {
		if c > 0 {
			boundaries += int64((c - 1) / chunkEntries)
		}
		if c > chunkEntries {
			spanning++
		}
	}
	if wk.Boundaries != boundaries || wk.Spanning != spanning {
		t.Errorf("walk %+v: want %d boundaries, %d pixels spanning one", wk, boundaries, spanning)
	}

	// Each tile's walk (its longest count) and chunks: ⌈walk/chunkEntries⌉ of them, numbered in
	// tile order.
	w, ts := v.Camera.Width, set.TileSize
	tilesX := (w + ts - 1) / ts
	want := make([]uint32, tiles)
	for i, c := range pipe.Fwd.Count {
		tile := (i/w/ts)*tilesX + i%w/ts
		want[tile] = max(want[tile], uint32(c))
	}
	walks := dl[uint32](t, fe, fe.tileWalk, tiles)
	starts := dl[uint32](t, fe, fe.chunkStart, tiles+1)
	if int(starts[tiles]) > maxChunks(len(pipe.Lists.IDs), tiles) {
		t.Fatalf("%d chunks, more than the bound %d", starts[tiles], maxChunks(len(pipe.Lists.IDs), tiles))
	}
	owner := dl[uint32](t, fe, fe.chunkTile, int(starts[tiles]))
	next := uint32(0)
	for tile := 0; tile < tiles; tile++ {
		if walks[tile] != want[tile] {
			t.Fatalf("tile %d: walk %d, want %d", tile, walks[tile], want[tile])
		}
		nc := (want[tile] + chunkEntries - 1) / chunkEntries
		if starts[tile] != next {
			t.Fatalf("tile %d (walk %d): first chunk %d, want %d", tile, want[tile], starts[tile], next)
		}
		for c := next; c < next+nc; c++ {
			if owner[c] != uint32(tile) {
				t.Fatalf("chunk %d: tile %d, want %d", c, owner[c], tile)
			}
		}
		next += nc
	}
	if starts[tiles] != next {
		t.Fatalf("%d chunks in all, want %d", starts[tiles], next)
	}

	n := g.Len()
	for _, f := range pgFields(set.Render, pipe.PG) {
		got := dlAt(t, fe, fe.pg, f.off*fe.capV, n*f.width)
		for i, x := range got {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("poisoned chunks: %s[%d] = %v", f.name, i, x)
			}
		}
		if rel, cos := check.RelErr(got, f.want), check.Cosine(got, f.want); !(rel <= TolGrad && cos >= TolCosine) {
			t.Errorf("poisoned chunks: %s: relative L2 error %.3g, cosine %.8f", f.name, rel, cos)
		}
	}
}
