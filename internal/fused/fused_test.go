package fused

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/emu"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/prep/preptest"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

func testLR() engine.LR {
	return engine.LR{Means: 1.6e-4, LogScales: 5e-3, Quats: 1e-3, Opacity: 5e-2, SHDC: 2.5e-3, SHRest: 1.25e-4}
}

type parityCase struct {
	name        string
	model       prep.Model
	bin         engine.BinMode
	loss        loss.Kind
	sh          int
	aa          bool
	bg          [3]float32
	maxSteps    int
	visibleOnly bool
	clip        float32
	overflow    bool   // start with tiny tile lists, so that the step must grow them and run again
	absGrad     bool   // AbsGS's densification statistic
	sparseSH    bool   // the SH rest updated for the splats in view only
	tile        int    // tile edge when not the default 16 (the backward's two pixels a thread at 8 and 32)
	seed        uint64 // RandomScene's seed: fixed per case, so that adding a case changes no other case's scene
}

var parityCases = []parityCase{
	{name: "ewa/gpu-conic/l1-ssim/sh3", model: prep.EWA, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 3, seed: 0},
	{name: "ewa/gpu-radius-aabb/mse/sh1/aa", model: prep.EWA, bin: engine.BinGPURadiusAABB, loss: loss.MSE, sh: 1, aa: true, bg: [3]float32{0.2, 0.5, 0.9}, seed: 1},
	{name: "ewa/cpu-conic/mse-ssim/sh2/cap", model: prep.EWA, bin: engine.BinCPUConic, loss: loss.MSESSIM, sh: 2, maxSteps: 7, seed: 2},
	{name: "ewa/gpu-conic/l1-ssim/sh3/absgrad", model: prep.EWA, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 3, absGrad: true, seed: 3},
	{name: "ewa/gpu-conic/l1-ssim/sh3/sparse-sh", model: prep.EWA, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 3, sparseSH: true, seed: 4},
	{name: "ewa/gpu-conic/l1-ssim/sh1/tile8", model: prep.EWA, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 1, tile: 8, seed: 5},
	{name: "ewa/gpu-conic/mse/sh0/tile32/absgrad", model: prep.EWA, bin: engine.BinGPUConic, loss: loss.MSE, sh: 0, tile: 32, absGrad: true, seed: 6},
	{name: "ewa/gpu-conic/l1-ssim/sh0/sparse-adam/overflow", model: prep.EWA, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 0, visibleOnly: true, clip: 1e-3, overflow: true, seed: 4},
	{name: "ray/gpu-conic/l1-ssim/sh3", model: prep.Ray, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 3, bg: [3]float32{1, 1, 1}, seed: 5},
	{name: "ray/gpu-radius-aabb/l1-ssim/sh0", model: prep.Ray, bin: engine.BinGPURadiusAABB, loss: loss.L1SSIM, sh: 0, seed: 6},
	{name: "ray/cpu-conic/mse/sh2", model: prep.Ray, bin: engine.BinCPUConic, loss: loss.MSE, sh: 2, seed: 7},
	{name: "ray/gpu-conic/l1-ssim/sh1/tile8", model: prep.Ray, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 1, tile: 8, seed: 8},
	{name: "ray/gpu-conic/mse/sh0/tile32", model: prep.Ray, bin: engine.BinGPUConic, loss: loss.MSE, sh: 0, tile: 32, bg: [3]float32{0.3, 0.6, 0.1}, seed: 9},
}

// TestStageParity runs one step on the fused and the CPU engine for every case and compares
// each stage: projection, tile lists, image, loss and its pixel gradient, the prepared-data and
// parameter gradients, the densification statistics, and the parameters after Adam.
func TestStageParity(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 4000, 160, 120
	if emu {
		n, w, h = 300, 48, 40
	}
	for _, c := range parityCases {
		t.Run(c.name, func(t *testing.T) {
			g, v := RandomScene(c.seed, n, w, h)
			set := engine.DefaultSettings()
			set.Render, set.BinMode, set.Loss, set.Antialiased = c.model, c.bin, c.loss, c.aa
			set.MaxSplatSteps = c.maxSteps
			set.Adam.VisibleOnly, set.Adam.GradClip = c.visibleOnly, c.clip
			set.AbsGrad = c.absGrad
			set.Adam.VisibleOnlySH = c.sparseSH
			if c.tile != 0 {
				set.TileSize = c.tile
			}
			set.Workers = 2
			o := engine.StepOptions{SHDegree: c.sh, LR: testLR(), Background: c.bg, AccumulateStats: true, WantImage: true}
			checkStep(t, dev, set, g, v, o, c.overflow)
		})
	}
}

// checkStep compares one step of both engines stage by stage through Compare (the same code
// `rlxsplat parity` runs), failing the test on every row out of tolerance.
func checkStep(t *testing.T, dev gpu.Device, set engine.Settings, g *splat.Gaussians, v *engine.View, o engine.StepOptions, overflow bool) {
	t.Helper()
	rows, err := compare(dev, set, g, v, o, compareOpts{overflow: overflow})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.Pass {
			t.Errorf("%s: max abs %.3g, rel %.3g, cosine %.8f, tol %g: %s", r.Name, r.MaxAbs, r.RelErr, r.Cosine, r.Tol, r.Note)
		} else if r.Note != "" {
			t.Logf("%s: %s", r.Name, r.Note)
		}
	}
}

// TestEditsAndState checks the host-side operations against the CPU engine: a state round trip,
// a densification edit, the opacity reset and the statistics reset.
func TestEditsAndState(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 2000, 96, 72
	if emu {
		n, w, h = 200, 32, 24
	}
	rng := rand.New(rand.NewPCG(seedEdit, 1))
	g := randomScene(rng, n, 0.05)
	set := engine.DefaultSettings()
	set.Workers = 2
	cam := lookAt([3]float64{0.5, -1, -3}, w, h)
	v := &engine.View{Camera: cam, Target: randomImage(rng, w, h)}
	o := engine.StepOptions{SHDegree: 1, LR: testLR(), AccumulateStats: true}
	ce, err := cpu.New(set, g)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ce.Step(v, o); err != nil {
		t.Fatal(err)
	}
	fe, err := newOnDevice(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	st, err := ce.State()
	if err != nil {
		t.Fatal(err)
	}
	if err := fe.SetState(st); err != nil {
		t.Fatal(err)
	}
	sameState(t, "state round trip", fe, ce)

	ed := RandomEdit(rng, n)
	if err := ce.Apply(ed); err != nil {
		t.Fatal(err)
	}
	if err := fe.Apply(ed); err != nil {
		t.Fatal(err)
	}
	if fe.Len() != ce.Len() {
		t.Fatalf("after the edit: %d splats, cpu %d", fe.Len(), ce.Len())
	}
	sameState(t, "after the edit", fe, ce)

	if err := ce.ResetOpacity(0.01); err != nil {
		t.Fatal(err)
	}
	if err := fe.ResetOpacity(0.01); err != nil {
		t.Fatal(err)
	}
	sameState(t, "after the opacity reset", fe, ce)
	if err := fe.ResetOpacity(1.5); err == nil {
		t.Error("ResetOpacity(1.5) accepted")
	}

	// A step after the edit trains the new layout like the CPU does.
	fres, err := fe.Step(v, o)
	if err != nil {
		t.Fatal(err)
	}
	cres, err := ce.Step(v, o)
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(fres.Loss - cres.Loss); !(d <= 1e-6) {
		t.Errorf("loss after the edit %.9g, cpu %.9g", fres.Loss, cres.Loss)
	}
	if err := fe.ResetStats(); err != nil {
		t.Fatal(err)
	}
	fst, _ := fe.Stats()
	for i := range fst.Count {
		if fst.Count[i] != 0 || fst.GradAccum[i] != 0 || fst.MaxRadius[i] != 0 {
			t.Fatalf("statistics of splat %d not reset", i)
		}
	}

	// An edit that outgrows the device buffers (every splat cloned, a few split in 3) must
	// move the trained parameters and moments into the larger buffers intact.
	var grow engine.Edit
	m := ce.Len()
	for i := 0; i < m; i++ {
		grow.Clone = append(grow.Clone, int32(i))
	}
	grow.Split, grow.SplitN, grow.SplitScaleDiv = []int32{0, int32(m / 2), int32(m - 1)}, 3, 1.6
	for range len(grow.Split) * grow.SplitN * 3 {
		grow.SplitSamples = append(grow.SplitSamples, float32(rng.NormFloat64()))
	}
	// The step above leaves last-bit differences (the gradients' summation order), so start
	// the edit from the CPU's state.
	st, err = ce.State()
	if err != nil {
		t.Fatal(err)
	}
	if err := fe.SetState(st); err != nil {
		t.Fatal(err)
	}
	capBefore := fe.capN
	if err := ce.Apply(grow); err != nil {
		t.Fatal(err)
	}
	if err := fe.Apply(grow); err != nil {
		t.Fatal(err)
	}
	if fe.capN <= capBefore {
		t.Errorf("the growing edit kept the capacity %d (now %d splats)", capBefore, fe.Len())
	}
	sameState(t, "after the growing edit", fe, ce)
	if err := fe.Apply(engine.Edit{Remove: make([]bool, fe.Len())}); err != nil {
		t.Errorf("an edit that removes nothing: %v", err)
	}
	all := make([]bool, fe.Len())
	for i := range all {
		all[i] = true
	}
	if err := fe.Apply(engine.Edit{Remove: all}); !errors.Is(err, engine.ErrEmpty) {
		t.Errorf("an edit that removes every splat: %v, want ErrEmpty", err)
	}
	if fe.Len() != ce.Len() {
		t.Errorf("the refused edit changed the engine: %d splats, want %d", fe.Len(), ce.Len())
	}
}

func sameState(t *testing.T, what string, fe *Engine, ce *cpu.Engine) {
	t.Helper()
	a, err := fe.State()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ce.State()
	// StateInto fills arrays an earlier read left, larger, smaller or none, with the same
	// values (engine.StateReader).
	re := &engine.State{Params: splat.New(fe.Len() + 7), AdamM: splat.New(fe.Len() / 2)}
	for _, f := range re.Params.Fields() {
		for i := range f.Data {
			f.Data[i] = float32(i)
		}
	}
	if err := fe.StateInto(re); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		name string
		a, b *splat.Gaussians
	}{{"params", a.Params, re.Params}, {"adam m", a.AdamM, re.AdamM}, {"adam v", a.AdamV, re.AdamV}} {
		if d := check.BitsDiffer(pack(x.a), pack(x.b)); d > 0 || x.a.Len() != x.b.Len() {
			t.Errorf("%s: %s read into reused arrays: %d values differ, %d splats against %d", what, x.name, d, x.b.Len(), x.a.Len())
		}
	}
	if a.AdamStep != b.AdamStep {
		t.Errorf("%s: Adam step %d, cpu %d", what, a.AdamStep, b.AdamStep)
	}
	for _, x := range []struct {
		name string
		a, b *splat.Gaussians
	}{{"params", a.Params, b.Params}, {"adam m", a.AdamM, b.AdamM}, {"adam v", a.AdamV, b.AdamV}} {
		if d := check.BitsDiffer(pack(x.a), pack(x.b)); d > 0 {
			t.Errorf("%s: %s: %d values differ", what, x.name, d)
		}
	}
	if d := check.BitsDiffer(a.Stats.GradAccum, b.Stats.GradAccum) + check.BitsDiffer(a.Stats.MaxRadius, b.Stats.MaxRadius); d > 0 {
		t.Errorf("%s: statistics: %d values differ", what, d)
	}
}

// closeCounter is a device that only counts Close calls: New must refuse bad settings before
// it touches the device, and close an owned device when it fails.
type closeCounter struct {
	gpu.Device
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestNew checks the constructor: it runs on the device it is given and leaves it open unless
// it owns it; settings the engine cannot run are refused before the device is used, and an
// owned device is closed on that failure.
func TestNew(t *testing.T) {
	g := randomScene(rand.New(rand.NewPCG(seedScene, 99)), 10, 0.05)
	if _, err := New(nil, engine.DefaultSettings(), g); err == nil {
		t.Error("New accepted a nil device")
	}
	for _, c := range []struct {
		name string
		mod  func(*engine.Settings)
		g    *splat.Gaussians
		want string
	}{
		{"tile size", func(s *engine.Settings) { s.TileSize = 64 }, g, "tile size 64"},
		{"empty", func(*engine.Settings) {}, splat.New(0), "no Gaussians"},
		{"lambda", func(s *engine.Settings) { s.SSIMLambda = 2 }, g, "lambda"},
		{"bin mode", func(s *engine.Settings) { s.BinMode = "nope" }, g, "bin mode"},
	} {
		s := engine.DefaultSettings()
		c.mod(&s)
		dev := &closeCounter{}
		if _, err := New(dev, s, c.g, OwnDevice()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error mentioning %q", c.name, err, c.want)
		}
		if dev.closed != 1 {
			t.Errorf("%s: the owned device was closed %d times, want once", c.name, dev.closed)
		}
	}

	dev, _ := testDevice(t)
	e, err := New(dev, engine.DefaultSettings(), g)
	if err != nil {
		t.Fatal(err)
	}
	if want := "fused " + dev.Info().Backend; e.Len() != 10 || !strings.HasPrefix(e.Name(), want) {
		t.Errorf("New: %d splats, name %q (want the prefix %q)", e.Len(), e.Name(), want)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// The device is the caller's: still open.
	b, err := dev.Alloc(16)
	if err != nil {
		t.Fatalf("the device was closed with the engine: %v", err)
	}
	dev.Free(b)
}

// TestNewDeviceCapabilities trains the same steps on the emulator with graph capture and
// timing events each switched off, as on a device without them (gpu.ErrUnsupported), and
// requires bit-identical losses and parameters (the emulator sums in a fixed order), per-stage
// timings exactly where events exist, and one note for each feature the device lacks.
func TestNewDeviceCapabilities(t *testing.T) {
	if os.Getenv(envEmu) != "1" {
		t.Skip("runs on the host emulator: set " + envEmu + "=1")
	}
	const steps = 4
	g, views := trainingScene(true, 5, 78)
	type result struct {
		losses []float64
		params []float32
	}
	run := func(t *testing.T, cfg emu.Config) result {
		dev := newEmu(t, cfg)
		var noticed []string
		fe, err := New(dev, engine.DefaultSettings(), g, WithNotice(func(m string) { noticed = append(noticed, m) }))
		if err != nil {
			t.Fatal(err)
		}
		defer fe.Close()
		fe.SetGraphs(true)
		if err := fe.growLists(16); err != nil {
			t.Fatal(err)
		}
		fe.listCap = 16 // the first step overflows and runs again
		var r result
		for s := 0; s < steps; s++ {
			o := engine.StepOptions{SHDegree: 1 + s/2, LR: testLR(), Background: [3]float32{0.2, float32(s) / steps, 0.5},
				AccumulateStats: s%2 == 0, WantTimings: true}
			res, err := fe.Step(views[s%len(views)], o)
			if err != nil {
				t.Fatal(err)
			}
			_, whole := res.Timings[engine.StageStep]
			switch {
			case cfg.NoEvents && res.Timings != nil:
				t.Fatalf("step %d: timings %v without events", s, res.Timings)
			case !cfg.NoEvents && len(res.Timings) == 0:
				t.Fatalf("step %d: no timings with events", s)
			case !cfg.NoEvents && whole == cfg.NoGraphs:
				t.Fatalf("step %d: timings %v (graphs off: %v)", s, res.Timings, cfg.NoGraphs)
			}
			r.losses = append(r.losses, res.Loss)
		}
		p, err := fe.Gaussians()
		if err != nil {
			t.Fatal(err)
		}
		r.params = flat(p)
		want := 0
		for _, off := range []struct {
			off  bool
			word string
		}{{cfg.NoGraphs, "graph capture"}, {cfg.NoEvents, "timing events"}} {
			if !off.off {
				continue
			}
			want++
			if !slices.ContainsFunc(noticed, func(m string) bool { return strings.Contains(m, "emu device has no "+off.word) }) {
				t.Errorf("no notice of the missing %s: %q", off.word, noticed)
			}
		}
		if len(noticed) != want || !slices.Equal(noticed, fe.Notes()) {
			t.Errorf("notices %q, notes %q: want %d, each once", noticed, fe.Notes(), want)
		}
		fe.SetGraphs(false)
		if err := fe.TimeLaunches(true); cfg.NoEvents != (err != nil) {
			t.Errorf("TimeLaunches (events off: %v): %v", cfg.NoEvents, err)
		}
		if err := fe.TimeLaunches(false); err != nil {
			t.Error(err)
		}
		return r
	}
	var base result
	for i, cfg := range []emu.Config{{}, {NoGraphs: true}, {NoEvents: true}, {NoGraphs: true, NoEvents: true}} {
		name := fmt.Sprintf("graphs=%v,events=%v", !cfg.NoGraphs, !cfg.NoEvents)
		t.Run(name, func(t *testing.T) {
			r := run(t, cfg)
			if i == 0 {
				base = r
				return
			}
			if base.losses == nil {
				t.Skip("the run with every feature failed")
			}
			if !slices.Equal(r.losses, base.losses) {
				t.Errorf("losses %v, with every feature %v", r.losses, base.losses)
			}
			if d := check.BitsDiffer(r.params, base.params); d > 0 {
				t.Errorf("%d parameters differ from the run with every feature", d)
			}
		})
	}
}

// TestDuckView compares every stage on a real view: the duck's COLMAP points as splats, seen
// from its first training camera (downscaled 4×; ../shared/data/duck, skipped when absent).
func TestDuckView(t *testing.T) {
	dir := sharedDir(t, "data/duck")
	dev, _ := testDevice(t)
	opt := dataset.DefaultOptions()
	opt.Downscale = 4
	opt.Workers = 2
	ds, err := dataset.Load(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	g := pointSplats(rand.New(rand.NewPCG(seedScene, 30)), ds, 0.004)
	vw := ds.Train[0]
	v := &engine.View{Index: 0, Camera: vw.Camera, Target: vw.Image.RGB}
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			set := engine.DefaultSettings()
			set.Render = m
			set.Workers = 2
			o := engine.StepOptions{SHDegree: 0, LR: testLR(), AccumulateStats: true, WantImage: true}
			checkStep(t, dev, set, g, v, o, false)
		})
	}
}

// pointSplats makes one splat per point of the dataset, of about the given world scale, with
// random anisotropy and rotation (an isotropic splat's rotation gradient is pure rounding
// noise, which no two summation orders agree on).
func pointSplats(rng *rand.Rand, ds *dataset.Dataset, scale float64) *splat.Gaussians {
	n := len(ds.Points) / 3
	g := splat.New(n)
	copy(g.Means, ds.Points)
	for i := 0; i < n; i++ {
		for a := 0; a < 3; a++ {
			g.LogScales[i*3+a] = float32(math.Log(scale * ds.Extent * (0.4 + 1.2*rng.Float64())))
			g.SH[i*48+a] = splat.RGBToDC(ds.PointColors[i*3+a])
		}
		for k := 0; k < 4; k++ {
			g.Quats[i*4+k] = float32(rng.NormFloat64())
		}
		g.OpacityLogits[i] = float32(rng.NormFloat64())
	}
	return g
}

// TestGraphStepsMatchEager trains the same scene for a few steps twice, once with every step
// replayed as a graph and once launch by launch, and compares the losses step by step and the
// parameters' total change. The views, learning rates and background change every step and
// the SH degree once (a graph of another shape), and the tile lists start too small (a step
// that must grow them and run again), so that a replay that kept a stale argument, buffer or
// shape would train differently. Atomics in the backward pass sum in no fixed order, so the
// runs agree to rounding, not bit for bit.
func TestGraphStepsMatchEager(t *testing.T) {
	dev, emu := testDevice(t)
	const steps = 6
	g, views := trainingScene(emu, 5, 77)
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			set := engine.DefaultSettings()
			set.Render = m
			run := func(graphs bool) ([]float64, []float32) {
				fe, err := newOnDevice(dev, set, g)
				if err != nil {
					t.Fatal(err)
				}
				defer fe.Close()
				fe.SetGraphs(graphs)
				if err := fe.growLists(16); err != nil {
					t.Fatal(err)
				}
				fe.listCap = 16 // growLists allocates at least 1024 entries, more than these views need
				var losses []float64
				for s := 0; s < steps; s++ {
					lr := testLR()
					lr.Means *= float32(1 + s)
					sh := 1
					if s >= 3 {
						sh = 2
					}
					o := engine.StepOptions{SHDegree: sh, LR: lr, Background: [3]float32{float32(s) / steps, 0.3, 0.6},
						AccumulateStats: s%2 == 0, WantTimings: s != 4}
					res, err := fe.Step(views[s%len(views)], o)
					if err != nil {
						t.Fatal(err)
					}
					_, whole := res.Timings[engine.StageStep]
					switch {
					case !o.WantTimings && res.Timings != nil:
						t.Fatalf("step %d with graphs %v: timings %v, none asked for", s, graphs, res.Timings)
					case o.WantTimings && (whole != fe.graphs || len(res.Timings) == 0):
						// fe.graphs: still replaying graphs (a device without them turns them off).
						t.Fatalf("step %d with graphs %v: timings %v (a graph replay reports only %q)", s, fe.graphs, res.Timings, engine.StageStep)
					}
					losses = append(losses, res.Loss)
				}
				if graphs && !fe.graphs {
					t.Logf("the %s device has no graph capture: both runs go launch by launch (%v)", dev.Info().Backend, fe.Notes())
				}
				p, err := fe.Gaussians()
				if err != nil {
					t.Fatal(err)
				}
				return losses, flat(p)
			}
			gl, gp := run(true)
			el, ep := run(false)
			for s := range gl {
				if d := math.Abs(gl[s]-el[s]) / math.Abs(el[s]); !(d <= 1e-5) {
					t.Errorf("step %d: loss %.9g with graphs, %.9g launch by launch (rel %.2g)", s, gl[s], el[s], d)
				}
			}
			start := flat(g)
			var diff, change float64
			for i := range gp {
				dg, de := float64(gp[i]-start[i]), float64(ep[i]-start[i])
				diff += (dg - de) * (dg - de)
				change += de * de
			}
			if rel := math.Sqrt(diff / change); !(rel <= 1e-3) {
				t.Errorf("parameter change after %d steps differs by %.3g relative (graphs vs launch by launch)", steps, rel)
			} else {
				t.Logf("losses agree to 1e-5; parameter change agrees to %.2g relative", rel)
			}
		})
	}
}

// trainingScene is a random scene and three views of it with random targets, for the tests
// that train a few steps (smaller on the emulator).
func trainingScene(emu bool, sceneSeed, viewSeed uint64) (*splat.Gaussians, [3]*engine.View) {
	n, w, h := 3000, 128, 96
	if emu {
		n, w, h = 200, 40, 32
	}
	g, _ := RandomScene(sceneSeed, n, w, h)
	rng := rand.New(rand.NewPCG(seedTarget, viewSeed))
	var views [3]*engine.View
	for i := range views {
		cam := lookAt([3]float64{0.6*rng.Float64() - 0.3, -0.9 + 0.2*rng.Float64(), -3.2}, w, h)
		views[i] = &engine.View{Index: i, Camera: cam, Target: randomImage(rng, w, h)}
	}
	return g, views
}

// flat concatenates every parameter group of g.
func flat(g *splat.Gaussians) []float32 {
	var out []float32
	for _, p := range [][]float32{g.Means, g.LogScales, g.Quats, g.OpacityLogits, g.SH} {
		out = append(out, p...)
	}
	return out
}

// TestPipelinedStepsMatchSteps trains the same scene twice, once step by step and once with
// every step submitted behind the one before it (Submit/Collect), and requires the same losses,
// images and parameters: bit for bit on the emulator, which sums in a fixed order. The lists
// start too small, and are shrunk again half way, so that a step overflows while another is
// queued behind it: the queued step must then skip, and both run again in order; a missed skip
// would apply the second step's update to parameters the first never changed.
func TestPipelinedStepsMatchSteps(t *testing.T) {
	dev, emu := testDevice(t)
	const steps = 8
	g, views := trainingScene(emu, 9, 78)
	w, h := views[0].Camera.Width, views[0].Camera.Height
	opts := func(s int) engine.StepOptions {
		lr := testLR()
		lr.Means *= float32(1 + s)
		return engine.StepOptions{SHDegree: min(s/3, 2), LR: lr, Background: [3]float32{float32(s) / steps, 0.3, 0.6},
			AccumulateStats: s%2 == 0, WantTimings: s%3 != 1, WantImage: s == 5}
	}
	const shrinkAt = 4 // the lists are shrunk before this step, which then overflows
	type run struct {
		res   []engine.StepResult
		final *splat.Gaussians
		stats engine.Stats
	}
	finish := func(fe *Engine, r *run) {
		var err error
		if r.final, err = fe.Gaussians(); err != nil {
			t.Fatal(err)
		}
		if r.stats, err = fe.Stats(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			set := engine.DefaultSettings()
			set.Render = m
			open := func() *Engine {
				fe, err := newOnDevice(dev, set, g)
				if err != nil {
					t.Fatal(err)
				}
				// Every buffer sized for 1024 entries (growLists' least) before tight() plays with
				// the capacity the kernels see.
				if err := fe.growPixels(w, h); err != nil {
					t.Fatal(err)
				}
				if err := fe.growLists(16); err != nil {
					t.Fatal(err)
				}
				fe.listCap = 16 // growLists allocates at least 1024 entries, more than these views need
				return fe
			}
			var one, piped run
			fe := open()
			for s := range steps {
				if s == shrinkAt {
					fe.listCap = 16
				}
				res, err := fe.Step(views[s%len(views)], opts(s))
				if err != nil {
					t.Fatal(err)
				}
				one.res = append(one.res, res)
			}
			finish(fe, &one)
			fe.Close()

			fe = open()
			defer fe.Close()
			submit := func(s int) {
				if err := fe.Submit(views[s%len(views)], opts(s)); err != nil {
					t.Fatalf("submit %d: %v", s, err)
				}
			}
			// tight submits step s with lists too small for it, then gives the step queued
			// behind it room enough for its own, so that only s overflows.
			tight := func(s int) {
				fe.listCap = 16
				submit(s)
				fe.listCap = 1024
			}
			tight(0)
			overflowed := 0
			for s := range steps {
				if s+1 < steps && s+1 != shrinkAt {
					submit(s + 1)
				}
				if s == 0 {
					if _, err := fe.Gaussians(); err == nil {
						t.Fatal("Gaussians with two steps queued: no error")
					}
					if err := fe.Submit(views[0], opts(0)); err == nil {
						t.Fatal("a third step queued: no error")
					}
				}
				q := fe.queue[0]
				res, err := fe.Collect()
				if err != nil {
					t.Fatalf("collect %d: %v", s, err)
				}
				if q.overflows > 0 {
					overflowed++
				}
				piped.res = append(piped.res, res)
				if s+1 == shrinkAt {
					tight(shrinkAt) // nothing is queued here
				}
			}
			if _, err := fe.Collect(); err == nil {
				t.Fatal("Collect with nothing submitted: no error")
			}
			finish(fe, &piped)
			if overflowed != 2 {
				t.Fatalf("%d steps overflowed, want 2 (the overflows this test is about did not happen)", overflowed)
			}

			// The emulator sums in a fixed order: the runs must agree bit for bit. A GPU's
			// atomics sum in no fixed order, so its runs drift apart by rounding from the
			// first backward on (TestGraphStepsMatchEager sees the same): losses to 1e-5,
			// images to 1e-4, parameters to 1e-3, and a tile entry or a visibility count may
			// change where a splat sits on a boundary. A missed skip moves the loss by ~1e-3.
			lossTol, imageTol, paramTol, countSlack := 1e-5, 1e-4, 1e-3, 0.001
			if emu {
				lossTol, imageTol, paramTol, countSlack = 0, 0, 0, 0
			}
			near := func(a, b int) bool { return math.Abs(float64(a-b)) <= countSlack*float64(max(a, b)) }
			for s := range steps {
				a, b := one.res[s], piped.res[s]
				if d := math.Abs(a.Loss-b.Loss) / math.Abs(a.Loss); !(d <= lossTol) || !near(a.Entries, b.Entries) || !near(a.Visible, b.Visible) {
					t.Errorf("step %d: loss %.9g, %d entries, %d visible step by step; %.9g, %d, %d pipelined",
						s, a.Loss, a.Entries, a.Visible, b.Loss, b.Entries, b.Visible)
				}
				if (a.Timings == nil) != (b.Timings == nil) || (a.Image == nil) != (b.Image == nil) {
					t.Errorf("step %d: timings/image present %v/%v step by step, %v/%v pipelined", s,
						a.Timings != nil, a.Image != nil, b.Timings != nil, b.Image != nil)
				}
				if a.Image != nil {
					if len(b.Image) != len(a.Image) {
						t.Errorf("step %d: images of %d and %d values", s, len(a.Image), len(b.Image))
					} else if rel := check.RelErr(b.Image, a.Image); !(rel <= imageTol) {
						t.Errorf("step %d: the images differ by %.3g relative", s, rel)
					}
				}
			}
			if rel := check.RelErr(flat(piped.final), flat(one.final)); !(rel <= paramTol) {
				t.Errorf("parameters after %d steps differ by %.3g relative", steps, rel)
			}
			differ := 0
			for i := range one.stats.Count {
				if piped.stats.Count[i] != one.stats.Count[i] {
					differ++
				}
			}
			if rel := check.RelErr(piped.stats.GradAccum, one.stats.GradAccum); !(rel <= paramTol) || !near(differ+len(one.stats.Count), len(one.stats.Count)) {
				t.Errorf("statistics differ: gradient sums by %.3g relative, %d visibility counts", rel, differ)
			}
		})
	}
}

// TestRayHalfPlaneParity: splats all around the camera, many straddling its plane (the ray
// model's footprint is then the whole image), where the half-plane cut of prep.TileAhead drops
// tiles: the device's lists must drop the same ones, and every stage agree.
func TestRayHalfPlaneParity(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 3000, 128, 96
	if emu {
		n, w, h = 400, 48, 40
	}
	rng := rand.New(rand.NewPCG(seedEdit, 9))
	g := randomScene(rng, n, 0.15)
	for i := 0; i < g.Len(); i++ {
		g.Means[i*3+2] = float32(rng.NormFloat64()*0.5) + 1.0
		g.OpacityLogits[i] = float32(2 + rng.Float64())
	}
	cam := lookAt([3]float64{0, 0, 1.2}, w, h)
	v := &engine.View{Camera: cam, Target: randomImage(rng, w, h)}
	set := engine.DefaultSettings()
	set.Render, set.Workers = prep.Ray, 2
	// The scene must exercise the cut: the host's lists with it are shorter than without.
	ps := set.Prep(1)
	pr := prep.NewProjected[float32](prep.Ray, g.Len())
	prep.Project(prep.NewCam[float32](&cam), &ps, g, pr, 2)
	with, without := preptest.HalfPlaneEntries(t, pr, w, h, set.TileSize)
	if with >= without {
		t.Fatalf("the half-plane cut drops nothing on this scene (%d entries with it, %d without)", with, without)
	}
	t.Logf("the half-plane cut keeps %d of %d entries", with, without)
	// And the hyperbolic footprints (splats reaching behind the camera plane, binned by their
	// silhouette's conic, prep.TileHit): the device must drop the same tiles.
	hyper := 0
	for i := 0; i < g.Len(); i++ {
		if pr.Valid[i] && prep.Hyperbolic(pr.BoundQ[3*i], pr.BoundQ[3*i+1], pr.BoundQ[3*i+2]) {
			hyper++
		}
	}
	if hyper == 0 {
		t.Fatal("no hyperbolic footprint on this scene")
	}
	t.Logf("%d hyperbolic footprints", hyper)
	checkStep(t, dev, set, g, v, engine.StepOptions{SHDegree: 1, LR: testLR(), AccumulateStats: true, WantImage: true}, false)
}

// TestTileOrder checks the order raster_fwd takes the tiles in after a step: every tile once,
// their lists' length classes never increasing, on a scene whose lists differ in length.
func TestTileOrder(t *testing.T) {
	dev, _ := testDevice(t)
	n, w, h := 500, 96, 64
	g, _ := RandomScene(31, n, w, h)
	rng := rand.New(rand.NewPCG(seedTarget, 31))
	v := &engine.View{Camera: lookAt([3]float64{0.2, -0.5, -3}, w, h), Target: randomImage(rng, w, h)}
	fe, err := newOnDevice(dev, engine.DefaultSettings(), g)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	if _, err := fe.Step(v, engine.StepOptions{SHDegree: 1, LR: testLR()}); err != nil {
		t.Fatal(err)
	}
	ts := fe.set.TileSize
	tiles := ((w + ts - 1) / ts) * ((h + ts - 1) / ts)
	offs := make([]uint32, tiles+1)
	order := make([]uint32, tiles)
	if err := gpu.DownloadSlice(dev, offs, fe.tileOffsets, 0); err != nil {
		t.Fatal(err)
	}
	if err := gpu.DownloadSlice(dev, order, fe.tileOrder, 0); err != nil {
		t.Fatal(err)
	}
	class := func(n uint32) int { // four classes an octave, as ranges.cu's len_class
		if n < 4 {
			return int(n)
		}
		k := bits.Len32(n) - 1
		return 4*(k-1) + int(n>>(k-2)&3)
	}
	seen := make([]bool, tiles)
	lengths := map[uint32]bool{}
	prev := math.MaxInt
	for b, tile := range order {
		if int(tile) >= tiles || seen[tile] {
			t.Fatalf("block %d: tile %d (of %d) out of range or taken twice", b, tile, tiles)
		}
		seen[tile] = true
		l := offs[tile+1] - offs[tile]
		lengths[l] = true
		if c := class(l); c > prev {
			t.Fatalf("block %d: tile %d with %d entries (class %d) after class %d", b, tile, l, c, prev)
		} else {
			prev = c
		}
	}
	if len(lengths) < 4 {
		t.Fatalf("the tiles' lists take %d lengths: the order is hardly tested", len(lengths))
	}
}
