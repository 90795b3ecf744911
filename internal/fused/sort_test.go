package fused

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// TestScan checks the multi-level exclusive scan at sizes around its block and level
// boundaries (1024 and 1024² elements), each with the block sums added up by every block
// (scan_add_sums) and scanned level by level.
func TestScan(t *testing.T) {
	dev, _ := testDevice(t)
	rng := rand.New(rand.NewPCG(seedScene, 21))
	fe, err := newOnDevice(dev, engine.DefaultSettings(), randomScene(rng, 8, 0.05))
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	for _, c := range []struct{ n, direct int }{
		{1, maxDirectSums}, {1023, maxDirectSums}, {1024, maxDirectSums}, {1025, maxDirectSums}, {70001, maxDirectSums},
		{1<<20 + 77, maxDirectSums}, {1025, 0}, {70001, 0}, {1<<20 + 77, 0}, {1<<20 + 77, 1024},
	} {
		n := c.n
		fe.scanDirect = c.direct
		in := make([]uint32, n)
		for i := range in {
			in[i] = uint32(rng.IntN(9))
		}
		buf, err := gpu.AllocSlice[uint32](dev, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := fe.ensureScan(n); err != nil {
			t.Fatal(err)
		}
		if err := gpu.UploadU32(dev, buf, in); err != nil {
			t.Fatal(err)
		}
		if err := fe.scan(buf, n); err != nil {
			t.Fatal(err)
		}
		got := dl[uint32](t, fe, buf, n)
		sum := uint32(0)
		for i, v := range in {
			if got[i] != sum {
				t.Fatalf("scan of %d values (direct sums up to %d): element %d = %d, want %d", n, c.direct, i, got[i], sum)
			}
			sum += v
		}
		dev.Free(buf)
	}
}

// TestSortAndRanges runs both of binning's sorts on random keys with many ties over several
// sort blocks and checks the order against a stable sort (ties keep their input order): the
// tile sort, whose count the kernels read from the readout, with the tile ranges against
// prep's, and the depth sort of 32-bit keys over a count the host passes.
func TestSortAndRanges(t *testing.T) {
	dev, emu := testDevice(t)
	rng := rand.New(rand.NewPCG(seedScene, 22))
	fe, err := newOnDevice(dev, engine.DefaultSettings(), randomScene(rng, 8, 0.05))
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	m, tiles := 300000, 1700
	if emu {
		m = 30000
	}
	type kv struct{ k, id uint32 }
	stable := func(keys, ids []uint32) []kv {
		want := make([]kv, len(keys))
		for i := range want {
			want[i] = kv{keys[i], ids[i]}
		}
		slices.SortStableFunc(want, func(a, b kv) int { return cmp.Compare(a.k, b.k) })
		return want
	}
	check := func(what string, want []kv, p sortPair) {
		t.Helper()
		gk := dl[uint32](t, fe, p.keys, len(want))
		gi := dl[uint32](t, fe, p.vals, len(want))
		for i := range want {
			if gk[i] != want[i].k || gi[i] != want[i].id {
				t.Fatalf("%s: entry %d = (%#x, %d), want (%#x, %d)", what, i, gk[i], gi[i], want[i].k, want[i].id)
			}
		}
	}
	// Beyond the mixed cases: sort blocks filled exactly with every low digit present, and one
	// digit only (all keys 0) over less than a round of a block and just past a whole block.
	cases := []struct{ m, tiles int }{{m, tiles}, {0, tiles}, {5, 3}, {m / 3, 70000},
		{2 * sortChunk, 256}, {200, 1}, {sortChunk + 1, 1}}
	for _, c := range cases {
		keys := make([]uint32, c.m)
		ids := make([]uint32, c.m)
		for i := range keys {
			keys[i] = uint32(rng.IntN(c.tiles))
			ids[i] = uint32(rng.IntN(1 << 20)) // values travel with their keys, whatever they are
		}
		if err := fe.growLists(c.m); err != nil {
			t.Fatal(err)
		}
		if err := fe.ensure(&fe.tileOffsets, (c.tiles+1)*4); err != nil {
			t.Fatal(err)
		}
		poison(t, fe)
		if err := gpu.UploadSlice(dev, fe.keys, 0, keys); err != nil {
			t.Fatal(err)
		}
		if err := gpu.UploadSlice(dev, fe.ids, 0, ids); err != nil {
			t.Fatal(err)
		}
		if err := gpu.UploadU32(dev, fe.ro.B, []uint32{0, uint32(c.m), 0}); err != nil {
			t.Fatal(err)
		}
		if err := fe.sort(c.tiles); err != nil {
			t.Fatal(err)
		}
		if err := fe.ranges(c.tiles); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("%d entries over %d tiles", c.m, c.tiles)
		want := stable(keys, ids)
		check(what, want, sortPair{fe.sortedKeys, fe.sortedIDs})
		wk := make([]uint64, c.m)
		for i := range want {
			wk[i] = uint64(want[i].k) << 32
		}
		wantOff := make([]int32, c.tiles+1)
		prep.Ranges(wk, c.tiles, wantOff)
		gotOff := dl[uint32](t, fe, fe.tileOffsets, c.tiles+1)
		for i := range wantOff {
			if int32(gotOff[i]) != wantOff[i] {
				t.Fatalf("%s: offset %d = %d, want %d", what, i, gotOff[i], wantOff[i])
			}
		}

		// The depth sort: float bits of a few depths and their neighbours, over the first m2 of
		// the c.m keys the grids cover, m2 read from a device word other than the entry count.
		depths := []uint32{0x3f800000, 0x3f800001, 0x40000000, 0x3e000000, 0x41200000, 0xffffffff}
		for i := range keys {
			keys[i] = depths[rng.IntN(len(depths))] - uint32(rng.IntN(2))
			ids[i] = uint32(i)
		}
		m2 := c.m - c.m/7
		if err := gpu.UploadSlice(dev, fe.keys, 0, keys); err != nil {
			t.Fatal(err)
		}
		if err := gpu.UploadSlice(dev, fe.ids, 0, ids); err != nil {
			t.Fatal(err)
		}
		const countWord = 12 // a readout word no kernel here writes
		if err := gpu.UploadSlice(dev, fe.ro.B, 0, []uint32{0, 7, 0}); err != nil {
			t.Fatal(err)
		}
		if err := gpu.UploadSlice(dev, fe.ro.B, countWord, []uint32{uint32(m2)}); err != nil {
			t.Fatal(err)
		}
		got, err := fe.radixSort(sortPair{fe.keys, fe.ids}, sortPair{fe.keysTmp, fe.idsTmp}, c.m,
			abi.At(fe.ro.B, countWord*4), depthSortPasses)
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("depth sort of %d of %d keys", m2, c.m), stable(keys[:m2], ids[:m2]), got)
	}
}

// TestEmptyView steps with every splat behind the camera: no entries, the image is the
// background, and nothing is read out of range.
func TestEmptyView(t *testing.T) {
	dev, _ := testDevice(t)
	rng := rand.New(rand.NewPCG(seedScene, 23))
	g := randomScene(rng, 50, 0.05)
	set := engine.DefaultSettings()
	cam := lookAt([3]float64{0, 0, -3}, 40, 30)
	cam.R[2] = [3]float64{-cam.R[2][0], -cam.R[2][1], -cam.R[2][2]} // turned 180° about y: looking away
	cam.R[0] = [3]float64{-cam.R[0][0], -cam.R[0][1], -cam.R[0][2]}
	cam.T = [3]float64{0, 0, -30}
	v := &engine.View{Camera: cam, Target: randomImage(rng, 40, 30)}
	o := engine.StepOptions{SHDegree: 2, LR: testLR(), Background: [3]float32{0.25, 0.5, 0.75}, WantImage: true}
	fe, err := newOnDevice(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	ce, err := cpu.New(set, g)
	if err != nil {
		t.Fatal(err)
	}
	fres, err := fe.Step(v, o)
	if err != nil {
		t.Fatal(err)
	}
	cres, err := ce.Step(v, o)
	if err != nil {
		t.Fatal(err)
	}
	if fres.Entries != 0 || fres.Visible != 0 || cres.Entries != 0 {
		t.Fatalf("entries %d, visible %d (cpu %d entries): the scene is not behind the camera", fres.Entries, fres.Visible, cres.Entries)
	}
	for i, x := range fres.Image {
		if x != o.Background[i%3] {
			t.Fatalf("pixel value %d = %v, want the background %v", i, x, o.Background[i%3])
		}
	}
	if fres.Loss != cres.Loss {
		t.Errorf("loss %.9g, cpu %.9g", fres.Loss, cres.Loss)
	}
}
