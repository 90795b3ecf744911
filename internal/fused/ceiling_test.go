package fused

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// TestCeilingKernels checks what ceiling.cu computes, at sizes the emulator runs in moments:
// the copy over several whole sweeps plus a tail, and the FMA chains against the host.
func TestCeilingKernels(t *testing.T) {
	dev, _ := testDevice(t)
	ck, err := loadCeilingKernels(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.close()

	// 2 blocks: a sweep is 2048 floats; 3 sweeps and a 123-float tail.
	const n, blocks = 3*2048 + 123, 2
	src := make([]float32, n)
	rng := rand.New(rand.NewPCG(seedScene, 31))
	for i := range src {
		src[i] = rng.Float32()
	}
	sb, db := allocBuf(t, dev, n*4), allocBuf(t, dev, n*4)
	if err := gpu.UploadF32(dev, sb, src); err != nil {
		t.Fatal(err)
	}
	if err := gpu.Zero(dev, db); err != nil {
		t.Fatal(err)
	}
	if err := ck.launchCopy(sb, db, n, blocks); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := gpu.DownloadF32(dev, got, db); err != nil {
		t.Fatal(err)
	}
	for i := range src {
		if got[i] != src[i] {
			t.Fatalf("copy: element %d is %v, want %v", i, got[i], src[i])
		}
	}

	const fmaBlocks, iters = 2, 5
	ob := allocBuf(t, dev, fmaBlocks*ceilingThreads*4)
	if err := ck.launchFMA(ob, fmaBlocks, iters); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, fmaBlocks*ceilingThreads)
	if err := gpu.DownloadF32(dev, out, ob); err != nil {
		t.Fatal(err)
	}
	for i, v := range out {
		want := fmaChains(uint32(i%ceilingThreads), iters)
		if math.Abs(float64(v-want)) > 1e-6*math.Abs(float64(want)) {
			t.Fatalf("fma: thread %d wrote %v, want %v", i, v, want)
		}
	}
}

// fmaChains is ceiling_fma's result for thread tid. In float64 a·x + y is exact here (a ≥ 2⁻¹⁰
// or 0 has a 24-bit significand, x an 11-bit one, and the sum spans under 53 bits), so one
// rounding to float32 is the fused multiply-add's.
func fmaChains(tid uint32, iters int) float32 {
	var a [8]float32
	for k := range a {
		a[k] = float32(tid+uint32(k)) * float32(1e-3)
	}
	for it := 0; it < iters*8; it++ {
		for k := range a {
			a[k] = float32(float64(a[k])*float64(fmaX) + float64(fmaY))
		}
	}
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

func allocBuf(t *testing.T, dev gpu.Device, n int) gpu.Buffer {
	t.Helper()
	b, err := dev.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Free(b) })
	return b
}

// TestCeilings runs the whole measurement: tiny on the emulator (the numbers mean nothing
// there, the code path is what is checked), at the default sizes on a GPU.
func TestCeilings(t *testing.T) {
	dev, emu := testDevice(t)
	var o CeilingOptions
	if emu {
		o = CeilingOptions{CopyBytes: 4 * 5000, CopyLaunches: 2, FMABlocks: 2, FMAIters: 3, Reps: 3}
	}
	c, err := MeasureCeilings(dev, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("copy %.0f GB/s (%.3f ms), FP32 %.0f GFLOP/s (%.3f ms), options %+v", c.CopyGBs, c.CopyMs, c.FP32GFlops, c.FMAMs, c.Options)
	for name, v := range map[string]float64{"copy bandwidth": c.CopyGBs, "FP32 rate": c.FP32GFlops} {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s %v, want a positive finite rate", name, v)
		}
	}
	if emu {
		if c.Options.CopyBytes != o.CopyBytes || c.Options.Reps != o.Reps {
			t.Errorf("options %+v, want %+v", c.Options, o)
		}
		return
	}
	if c.Options != DefaultCeilingOptions() {
		t.Errorf("options %+v, want the defaults %+v", c.Options, DefaultCeilingOptions())
	}
	// Loose sanity bounds for any GPU this engine runs on (an H200 measures about 4 TB/s and
	// 60 TFLOP/s): far outside them, the timing or the byte/flop counts are wrong.
	if c.CopyGBs < 50 || c.CopyGBs > 20000 || c.FP32GFlops < 500 || c.FP32GFlops > 500000 {
		t.Errorf("copy %.0f GB/s, FP32 %.0f GFLOP/s: implausible for a GPU", c.CopyGBs, c.FP32GFlops)
	}
}

func TestCeilingOptionsRejected(t *testing.T) {
	for _, o := range []CeilingOptions{{CopyBytes: 2}, {CopyBytes: 1<<31 + 4}, {FMAIters: -1}, {Reps: -2}} {
		if err := o.withDefaults().check(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestRasterWalkAndDeviceBytes checks the two step measurements bench's roofline and memory
// report read from the engine.
func TestRasterWalkAndDeviceBytes(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 2000, 96, 72
	if emu {
		n, w, h = 200, 32, 24
	}
	rng := rand.New(rand.NewPCG(seedScene, 37))
	g := randomScene(rng, n, 0.05)
	set := engine.DefaultSettings()
	set.TileSize = 8
	fe, err := newOnDevice(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close() // a no-op after the Close below
	if _, err := fe.RasterWalk(); err == nil {
		t.Error("RasterWalk before any forward: no error")
	}
	cur, peak := fe.DeviceBytes()
	if packed := int64(4 * paramFloats * n * 4); cur < packed || peak < cur {
		t.Errorf("after upload: %d bytes held, peak %d; want at least the 4 packed buffers' %d", cur, peak, packed)
	}
	cam := lookAt([3]float64{0.4, -0.9, -3}, w, h)
	v := &engine.View{Camera: cam, Target: randomImage(rng, w, h)}
	res, err := fe.Step(v, engine.StepOptions{SHDegree: 1, LR: testLR()})
	if err != nil {
		t.Fatal(err)
	}
	wk, err := fe.RasterWalk()
	if err != nil {
		t.Fatal(err)
	}
	ts := int64(set.TileSize)
	t.Logf("%d entries, %d visible; walked %+v", res.Entries, res.Visible, wk)
	if wk.Entries <= 0 || wk.Entries > int64(res.Entries) || wk.Pairs < wk.Entries || wk.Pairs > wk.Entries*ts*ts {
		t.Errorf("walk %+v of %d entries: want 0 < entries ≤ %d and entries ≤ pairs ≤ entries·%d", wk, res.Entries, res.Entries, ts*ts)
	}
	// A tile's list names distinct splats, so the walk names at least as many as the longest
	// walk of one tile, and at most the visible ones it walked.
	count := dl[uint32](t, fe, fe.count, w*h)
	var longest uint32
	for _, c := range count {
		longest = max(longest, c)
	}
	if wk.Splats < int64(longest) || wk.Splats > min(int64(res.Visible), wk.Entries) {
		t.Errorf("walk names %d splats: want between the longest pixel walk %d and min(visible %d, walked %d)", wk.Splats, longest, res.Visible, wk.Entries)
	}
	// The longest tile walk is the longest pixel's, and the walks of all tiles add up to more.
	tilesX, tilesY := (w+int(ts)-1)/int(ts), (h+int(ts)-1)/int(ts)
	if wk.Longest != int64(longest) || wk.Tiles != int64(tilesX*tilesY) || wk.Entries < wk.Longest {
		t.Errorf("walk %+v: want the longest tile walk %d (the longest pixel's), %d tiles and entries ≥ longest", wk, longest, tilesX*tilesY)
	}
	cur2, peak2 := fe.DeviceBytes()
	if cur2 <= cur || peak2 < cur2 {
		t.Errorf("after a step: %d bytes held, peak %d; want more than the %d before (lists, image buffers) and peak ≥ held", cur2, peak2, cur)
	}
	if err := fe.Close(); err != nil {
		t.Fatal(err)
	}
	if cur3, peak3 := fe.DeviceBytes(); cur3 != 0 || peak3 != peak2 {
		t.Errorf("after Close: %d bytes held, peak %d; want 0 and %d", cur3, peak3, peak2)
	}
}
