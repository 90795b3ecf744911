package fused

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/adam"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Tolerances of issue 3 (rlxsplat parity): image relative L2 ≤ 1e-5, every gradient group
// relative L2 ≤ 1e-4 with cosine ≥ 0.99999. The projection, the lists and the loss are meant to
// be bit-identical (the kernels keep the CPU's rounding); they get a float tolerance far below
// anything a different algorithm would produce.
const (
	tolImage  = 1e-5
	tolGrad   = 1e-4
	tolCosine = 0.99999
	tolExact  = 1e-6
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
	overflow    bool // start with tiny tile lists, so that the step must grow them and run again
}

var parityCases = []parityCase{
	{name: "ewa/gpu-conic/l1-ssim/sh3", model: prep.EWA, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 3},
	{name: "ewa/gpu-radius-aabb/mse/sh1/aa", model: prep.EWA, bin: engine.BinGPURadiusAABB, loss: loss.MSE, sh: 1, aa: true, bg: [3]float32{0.2, 0.5, 0.9}},
	{name: "ewa/cpu-conic/mse-ssim/sh2/cap", model: prep.EWA, bin: engine.BinCPUConic, loss: loss.MSESSIM, sh: 2, maxSteps: 7},
	{name: "ewa/gpu-conic/l1-ssim/sh0/sparse-adam/overflow", model: prep.EWA, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 0, visibleOnly: true, clip: 1e-3, overflow: true},
	{name: "ray/gpu-conic/l1-ssim/sh3", model: prep.Ray, bin: engine.BinGPUConic, loss: loss.L1SSIM, sh: 3, bg: [3]float32{1, 1, 1}},
	{name: "ray/gpu-radius-aabb/l1-ssim/sh0", model: prep.Ray, bin: engine.BinGPURadiusAABB, loss: loss.L1SSIM, sh: 0},
	{name: "ray/cpu-conic/mse/sh2", model: prep.Ray, bin: engine.BinCPUConic, loss: loss.MSE, sh: 2},
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
	for ci, c := range parityCases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seedScene, uint64(ci)))
			g := randomScene(rng, n, 0.05)
			cam := lookAt([3]float64{0.3 + 0.4*rng.Float64(), -0.9, -3.2}, w, h)
			set := engine.DefaultSettings()
			set.Render, set.BinMode, set.Loss, set.Antialiased = c.model, c.bin, c.loss, c.aa
			set.MaxSplatSteps = c.maxSteps
			set.Adam.VisibleOnly, set.Adam.GradClip = c.visibleOnly, c.clip
			set.Workers = 2
			o := engine.StepOptions{SHDegree: c.sh, LR: testLR(), Background: c.bg, AccumulateStats: true, WantImage: true}
			v := &engine.View{Index: ci, Camera: cam, Target: randomImage(rand.New(rand.NewPCG(seedTarget, uint64(ci))), w, h)}
			checkStep(t, dev, set, g, v, o, c.overflow)
		})
	}
}

// checkStep compares one step of both engines stage by stage.
func checkStep(t *testing.T, dev gpu.Device, set engine.Settings, g *splat.Gaussians, v *engine.View, o engine.StepOptions, overflow bool) {
	cam := &v.Camera
	n := g.Len()
	// The CPU reference: the pipeline's stages, then the engine's whole step.
	pipe := cpu.NewPipeline[float32](set)
	if err := pipe.Forward(cam, g, o.SHDegree, o.Background); err != nil {
		t.Fatal(err)
	}
	lres, err := pipe.Loss(v.Target)
	if err != nil {
		t.Fatal(err)
	}
	if err := pipe.Backward(g); err != nil {
		t.Fatal(err)
	}
	ce, err := cpu.New(set, g)
	if err != nil {
		t.Fatal(err)
	}
	cres, err := ce.Step(v, o)
	if err != nil {
		t.Fatal(err)
	}
	cAfter, _ := ce.Gaussians()
	cStats, _ := ce.Stats()

	fe, err := newOnDevice(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()

	// Render first: it must equal the CPU forward (and it exercises the forward-only path).
	img, err := fe.Render(cam, o.SHDegree, o.Background)
	if err != nil {
		t.Fatal(err)
	}
	if r := relL2(img, pipe.Fwd.Image); !(r <= tolImage) {
		t.Errorf("Render: image rel L2 %.3g > %g", r, tolImage)
	}
	// The warp-per-splat binning path: with every box of more than one tile queued for a warp,
	// the lists must be the same.
	if set.BinMode != engine.BinCPUConic {
		fe.bigArea = 1
		if _, err := fe.Render(cam, o.SHDegree, o.Background); err != nil {
			t.Fatal(err)
		}
		ro, err := fe.readout()
		if err != nil {
			t.Fatal(err)
		}
		if ro[roBig] == 0 {
			t.Errorf("bin: no splat took the warp-per-splat path (scene too small to check it)")
		}
		t.Logf("bin: %d splats binned a warp each", ro[roBig])
		checkLists(t, fe, &pipe.Lists, int(ro[roEntries]))
		fe.bigArea = defaultBigArea
	}

	if err := fe.growPixels(cam.Width, cam.Height); err != nil {
		t.Fatal(err)
	}
	fe.poison(t)
	if overflow {
		fe.listCap = 16 // the buffers stay; the count check sees room for 16 entries only
	}
	gres, err := fe.Step(v, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d splats, %d visible, %d entries, loss %.6f (cpu %.6f)", fe.Name(), n, gres.Visible, gres.Entries, gres.Loss, cres.Loss)

	checkProjection(t, fe, pipe.Proj, n)
	checkLists(t, fe, &pipe.Lists, gres.Entries)
	if gres.Visible != cres.Visible {
		t.Errorf("visible: %d, cpu %d", gres.Visible, cres.Visible)
	}

	// Image and the forward's per-pixel outputs.
	npx := cam.Width * cam.Height
	if r := relL2(gres.Image, pipe.Fwd.Image); !(r <= tolImage) {
		t.Errorf("image rel L2 %.3g > %g", r, tolImage)
	}
	if r := relL2(dl[float32](t, fe, fe.finalT, npx), pipe.Fwd.FinalT); !(r <= tolImage) {
		t.Errorf("final T rel L2 %.3g > %g", r, tolImage)
	}
	cnt := dl[uint32](t, fe, fe.count, npx)
	bad := 0
	for i, c := range cnt {
		if int32(c) != pipe.Fwd.Count[i] {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("last-contributor count differs at %d of %d pixels", bad, npx)
	}

	// Loss and its pixel gradient.
	for _, x := range []struct {
		name      string
		got, want float64
	}{{"loss", gres.Loss, lres.Loss}, {"l1", gres.L1, lres.L1}, {"mse", gres.MSE, lres.MSE}, {"ssim", gres.SSIM, lres.SSIM}} {
		if math.IsNaN(x.want) && math.IsNaN(x.got) {
			continue
		}
		if d := math.Abs(x.got - x.want); !(d <= 1e-6*max(1, math.Abs(x.want))) {
			t.Errorf("%s: %.9g, cpu %.9g", x.name, x.got, x.want)
		}
	}
	if r := relL2(dl[float32](t, fe, fe.dImage, npx*3), pipe.DImage); !(r <= tolImage) {
		t.Errorf("dL/dimage rel L2 %.3g > %g", r, tolImage)
	}

	// Gradients of the prepared data, then of every parameter group.
	pgFields := []struct {
		name  string
		off   int
		width int
		want  []float32
	}{{"d color", pgColor, 3, pipe.PG.Color}, {"d opacity", pgOpacity, 1, pipe.PG.Opacity}}
	if set.Render == prep.Ray {
		pgFields = append(pgFields, struct {
			name  string
			off   int
			width int
			want  []float32
		}{"d rayU", pgRayU, 3, pipe.PG.RayU}, struct {
			name  string
			off   int
			width int
			want  []float32
		}{"d rayA", pgRayA, 9, pipe.PG.RayA})
	} else {
		pgFields = append(pgFields, struct {
			name  string
			off   int
			width int
			want  []float32
		}{"d mean2d", pgMean2D, 2, pipe.PG.Mean2D}, struct {
			name  string
			off   int
			width int
			want  []float32
		}{"d conic", pgConic, 3, pipe.PG.Conic})
	}
	for _, f := range pgFields {
		checkGrad(t, f.name, dlAt(t, fe, fe.pg, f.off*fe.capN, n*f.width), f.want)
	}
	gg := unpack(dl[float32](t, fe, fe.grads, n*paramFloats), n)
	for _, grp := range groups(gg, pipe.Grads) {
		checkGrad(t, "grad "+grp.name, grp.got, grp.want)
	}
	checkGrad(t, "grad2d", dl[float32](t, fe, fe.grad2d, n), pipe.Grad2D)

	// Densification statistics.
	fst, err := fe.Stats()
	if err != nil {
		t.Fatal(err)
	}
	checkGrad(t, "stat grad accum", fst.GradAccum, cStats.GradAccum)
	if r := relL2(fst.MaxRadius, cStats.MaxRadius); !(r <= tolExact) {
		t.Errorf("stat max radius rel L2 %.3g", r)
	}
	for i := range fst.Count {
		if fst.Count[i] != cStats.Count[i] {
			t.Errorf("stat count of splat %d: %d, cpu %d", i, fst.Count[i], cStats.Count[i])
			break
		}
	}

	// Parameters after the whole step: the CPU optimizer applied to this step's device gradients
	// must give them exactly (the gradients themselves were compared above). Against the CPU
	// engine's parameters the difference is only reported: Adam's first step moves an element
	// by about ±lr whatever its gradient's size, so elements whose gradient is rounding noise
	// (an isotropic splat's rotation, say) may move either way.
	fAfter, err := fe.Gaussians()
	if err != nil {
		t.Fatal(err)
	}
	var mask []bool
	if set.Adam.VisibleOnly {
		mask = pipe.Proj.Valid
	}
	if d := countDiff(pack(fAfter), pack(hostAdam(t, set.Adam, o.LR, g, gg, mask))); d > 0 {
		t.Errorf("parameters after the step: %d of %d values differ from the CPU optimizer on the device's gradients", d, n*paramFloats)
	}
	t.Logf("parameters after the step vs the CPU engine: rel L2 %.3g", relL2(pack(fAfter), pack(cAfter)))
	if gres.NonFinite != cres.NonFinite {
		t.Errorf("non-finite count %d, cpu %d", gres.NonFinite, cres.NonFinite)
	}

	// Adam alone on the CPU's gradients from the same start must give the CPU's parameters.
	if err := fe.upload(g, nil, nil, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := gpu.UploadF32(dev, fe.grads, pack(pipe.Grads)); err != nil {
		t.Fatal(err)
	}
	if err := dev.Memset(fe.readoutBuf, 0, roWords*4, 0); err != nil {
		t.Fatal(err)
	}
	ap, err := adamBytes(set.Adam, o.LR, 1, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := fe.adam(ap); err != nil {
		t.Fatal(err)
	}
	aAfter, err := fe.Gaussians()
	if err != nil {
		t.Fatal(err)
	}
	if d := countDiff(pack(aAfter), pack(cAfter)); d > 0 {
		t.Errorf("Adam on identical gradients: %d of %d values differ from the CPU's", d, n*paramFloats)
	}
}

// checkProjection compares the device's projection with the CPU's for every splat.
func checkProjection(t *testing.T, fe *Engine, want *prep.Projected, n int) {
	t.Helper()
	valid := dl[uint32](t, fe, fe.valid, n)
	mism := 0
	for i := range valid {
		if (valid[i] == 1) != want.Valid[i] || valid[i] > 1 {
			if mism < 5 {
				t.Errorf("valid[%d] = %d, cpu %v", i, valid[i], want.Valid[i])
			}
			mism++
		}
	}
	if mism > 0 {
		t.Errorf("validity differs for %d of %d splats", mism, n)
		return
	}
	fields := []struct {
		name  string
		buf   gpu.Buffer
		width int
		want  []float32
	}{
		{"depth", fe.depth, 1, want.Depth}, {"opacity", fe.opacity, 1, want.Opacity}, {"color", fe.color, 3, want.Color},
		{"mean2d", fe.mean2d, 2, want.Mean2D}, {"bound center", fe.boundCenter, 2, want.BoundCenter},
		{"bound Q", fe.boundQ, 3, want.BoundQ}, {"radius", fe.radius, 1, want.Radius},
	}
	if want.Model == prep.Ray {
		fields = append(fields, struct {
			name  string
			buf   gpu.Buffer
			width int
			want  []float32
		}{"rayU", fe.rayU, 3, want.RayU}, struct {
			name  string
			buf   gpu.Buffer
			width int
			want  []float32
		}{"rayA", fe.rayA, 9, want.RayA})
	} else {
		fields = append(fields, struct {
			name  string
			buf   gpu.Buffer
			width int
			want  []float32
		}{"conic", fe.conic, 3, want.Conic})
	}
	for _, f := range fields {
		got := dl[float32](t, fe, f.buf, n*f.width)
		var a, b []float32
		for i := 0; i < n; i++ {
			if want.Valid[i] {
				a = append(a, got[i*f.width:(i+1)*f.width]...)
				b = append(b, f.want[i*f.width:(i+1)*f.width]...)
			}
		}
		if r := relL2(a, b); !(r <= tolExact) {
			t.Errorf("projection %s: rel L2 %.3g", f.name, r)
		} else if d := countDiff(a, b); d > 0 {
			t.Logf("projection %s: %d of %d values differ in the last bits", f.name, d, len(b))
		}
	}
	rect := dl[int32](t, fe, fe.rect, n*4)
	for i := 0; i < n; i++ {
		if !want.Valid[i] {
			continue
		}
		for k := 0; k < 4; k++ {
			if rect[i*4+k] != want.Rect[i*4+k] {
				t.Errorf("rect of splat %d: %v, cpu %v", i, rect[i*4:i*4+4], want.Rect[i*4:i*4+4])
				return
			}
		}
	}
}

// checkLists compares the sorted tile lists. They must be identical; the only differences
// issue 3 admits are entries within float rounding of a conic boundary, which the kernels avoid
// by keeping the CPU's rounding, so any difference is listed and counted against a tiny budget.
func checkLists(t *testing.T, fe *Engine, want *prep.TileLists, entries int) {
	t.Helper()
	if entries != len(want.IDs) {
		t.Errorf("tile lists: %d entries, cpu %d", entries, len(want.IDs))
		return
	}
	keys := dl[uint64](t, fe, fe.sortedKeys, entries)
	ids := dl[uint32](t, fe, fe.sortedIDs, entries)
	var diffs []string
	for i := range keys {
		if keys[i] != want.Keys[i] || int32(ids[i]) != want.IDs[i] {
			diffs = append(diffs, fmt.Sprintf("#%d: tile %d splat %d (cpu tile %d splat %d)", i, keys[i]>>32, ids[i], want.Keys[i]>>32, want.IDs[i]))
		}
	}
	if len(diffs) > 0 {
		t.Errorf("tile lists: %d of %d entries differ:\n%s", len(diffs), entries, strings.Join(diffs[:min(len(diffs), 20)], "\n"))
	}
	offs := dl[uint32](t, fe, fe.tileOffsets, len(want.Offsets))
	for i, o := range offs {
		if int32(o) != want.Offsets[i] {
			t.Errorf("tile offset %d: %d, cpu %d", i, o, want.Offsets[i])
			return
		}
	}
}

func checkGrad(t *testing.T, name string, got, want []float32) {
	t.Helper()
	r, c := relL2(got, want), cosine(got, want)
	if !(r <= tolGrad) || !(c >= tolCosine) {
		t.Errorf("%s: rel L2 %.3g (≤ %g), cosine %.8f (≥ %g)", name, r, tolGrad, c, tolCosine)
	}
}

func countDiff(a, b []float32) int {
	d := 0
	for i := range b {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			d++
		}
	}
	return d
}

type groupPair struct {
	name      string
	got, want []float32
}

// groups splits two parameter sets into Adam's groups (SH split into DC and rest).
func groups(a, b *splat.Gaussians) []groupPair {
	n := a.Len()
	dc := func(g *splat.Gaussians, rest bool) []float32 {
		var out []float32
		for i := 0; i < n; i++ {
			s := g.SH[i*48 : (i+1)*48]
			if rest {
				out = append(out, s[3:]...)
			} else {
				out = append(out, s[:3]...)
			}
		}
		return out
	}
	return []groupPair{
		{"means", a.Means, b.Means}, {"log_scales", a.LogScales, b.LogScales}, {"quats", a.Quats, b.Quats},
		{"opacity_logits", a.OpacityLogits, b.OpacityLogits},
		{"sh_dc", dc(a, false), dc(b, false)}, {"sh_rest", dc(a, true), dc(b, true)},
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

	var ed engine.Edit
	ed.Remove = make([]bool, n)
	for i := 0; i < n; i++ {
		switch rng.IntN(10) {
		case 0:
			ed.Remove[i] = true
		case 1:
			ed.Clone = append(ed.Clone, int32(i))
		case 2:
			ed.Split = append(ed.Split, int32(i))
		}
	}
	ed.SplitN, ed.SplitScaleDiv = 2, 1.6
	for range len(ed.Split) * ed.SplitN * 3 {
		ed.SplitSamples = append(ed.SplitSamples, float32(rng.NormFloat64()))
	}
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
	if a.AdamStep != b.AdamStep {
		t.Errorf("%s: Adam step %d, cpu %d", what, a.AdamStep, b.AdamStep)
	}
	for _, x := range []struct {
		name string
		a, b *splat.Gaussians
	}{{"params", a.Params, b.Params}, {"adam m", a.AdamM, b.AdamM}, {"adam v", a.AdamV, b.AdamV}} {
		if d := countDiff(pack(x.a), pack(x.b)); d > 0 {
			t.Errorf("%s: %s: %d values differ", what, x.name, d)
		}
	}
	if d := countDiff(a.Stats.GradAccum, b.Stats.GradAccum) + countDiff(a.Stats.MaxRadius, b.Stats.MaxRadius); d > 0 {
		t.Errorf("%s: statistics: %d values differ", what, d)
	}
}

// TestNew checks the constructor's errors: no GPU is ErrNoDevice (the auto fallback's
// trigger), and settings the device cannot run are refused before it is opened.
func TestNew(t *testing.T) {
	g := randomScene(rand.New(rand.NewPCG(seedScene, 99)), 10, 0.05)
	set := engine.DefaultSettings()
	e, err := New(set, g)
	if err != nil {
		if !errors.Is(err, gpu.ErrNoDevice) {
			t.Fatalf("New without a usable GPU: %v, want an error wrapping gpu.ErrNoDevice", err)
		}
	} else {
		if e.Len() != 10 || !strings.HasPrefix(e.Name(), "fused cuda") {
			t.Errorf("New: %d splats, name %q", e.Len(), e.Name())
		}
		if err := e.Close(); err != nil {
			t.Error(err)
		}
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
		if _, err := New(s, c.g); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New = %v, want an error mentioning %q", c.name, err, c.want)
		}
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

// hostAdam is internal/adam's step (as the CPU engine configures it) on copies of g and grads.
func hostAdam(t *testing.T, s engine.AdamSettings, lr engine.LR, g, grads *splat.Gaussians, mask []bool) *splat.Gaussians {
	t.Helper()
	c := adam.BaseConfig()
	c.Beta1, c.Beta2, c.Eps = float64(s.Beta1), float64(s.Beta2), float64(s.Eps)
	for k := range c.Groups {
		c.Groups[k].Clip = s.GradClip
	}
	opt, err := adam.New(c, g.Len())
	if err != nil {
		t.Fatal(err)
	}
	p := g.Clone()
	if _, err := opt.Step(p, grads, [adam.NumGroups]float32{lr.Means, lr.LogScales, lr.Quats, lr.Opacity, lr.SHDC, lr.SHRest}, mask); err != nil {
		t.Fatal(err)
	}
	return p
}
