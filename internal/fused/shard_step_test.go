package fused

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// shardStepCase is a training step over a scene split between two owners, drawn by a renderer
// from their records.
type shardStepCase struct {
	name    string
	model   prep.Model
	tile    int
	sh      int
	split   float64 // owner 0's share of the splats: ids [0, split·n)
	view    int     // RandomBatch's view; -1: a camera looking away from the scene
	absGrad bool
	// hide1 puts owner 1's splats behind the camera: an owner with no record to send and no
	// gradient to take.
	hide1 bool
	// ownerRenders draws the records on owner 0's engine, which must then pack again before
	// its backward: the render replaced the projection the gradients map back through.
	ownerRenders bool
	// mutate also runs the mutations, which must fail the comparison: owner 1's gradients
	// handed to owner 0, and each gradient field left out of the records.
	mutate bool
	seed   uint64
}

var shardStepCases = []shardStepCase{
	{name: "ewa/tile16/half", model: prep.EWA, tile: 16, sh: 3, split: 0.5, mutate: true, seed: 40},
	{name: "ewa/tile8/uneven/view1/absgrad", model: prep.EWA, tile: 8, sh: 1, split: 0.2, view: 1, absGrad: true, mutate: true, seed: 41},
	{name: "ewa/tile16/owner1-empty", model: prep.EWA, tile: 16, sh: 2, split: 0.6, hide1: true, seed: 42},
	{name: "ewa/tile16/uneven/owner-renders", model: prep.EWA, tile: 16, sh: 1, split: 0.7, ownerRenders: true, seed: 43},
	{name: "ewa/tile16/nothing-visible", model: prep.EWA, tile: 16, sh: 0, split: 0.5, view: -1, seed: 44},
	{name: "ray/tile16/half", model: prep.Ray, tile: 16, sh: 3, split: 0.5, mutate: true, seed: 45},
	{name: "ray/tile8/uneven/view1", model: prep.Ray, tile: 8, sh: 2, split: 0.3, view: 1, seed: 46},
	{name: "ray/tile8/owner1-empty/owner-renders", model: prep.Ray, tile: 8, sh: 1, split: 0.5, hide1: true, ownerRenders: true, seed: 47},
}

// shardSteps is how many steps each case trains: the second starts from the first's moments
// and statistics and has Adam's step count 2 (its bias corrections).
const shardSteps = 2

// shardParamTol bounds the relative L2 difference of the parameters after the steps (and of
// the statistics' gradient sums) between the sharded step and one engine. raster_bwd's atomics
// sum in no fixed order on a GPU, so the gradients differ in rounding (checked at TolGrad, as
// every gradient against the CPU is), and Adam's first steps move each element by about ±lr
// whatever its gradient's size, so an element whose gradient is rounding noise may move either
// way: the bound TestPipelinedStepsMatchSteps gives two GPU runs of the same steps.
const shardParamTol = 1e-3

// shardMatch is how closely a sharded step must match one engine's.
type shardMatch int

const (
	// matchBits: the emulator and the Metal host sum in a fixed order, and every gradient,
	// parameter and statistic is one engine's to the bit.
	matchBits shardMatch = iota
	// matchTol: the same parameters and view, the gradients summed in another order (a GPU's
	// atomics): the gradients, parameters and gradient sums at the tolerances; the counts
	// (visible splats, tile entries, the statistics' visibility counts) and largest radii,
	// which come from the projection and not the sums, exactly.
	matchTol
	// matchDrift: a step after one whose sums differed, on parameters that differ by rounding
	// and Adam's noise-level moves: a count may change where a splat sits on a boundary
	// (TestPipelinedStepsMatchSteps's slack of 0.1%), and the largest radii move by rounding
	// (TolExact relative).
	matchDrift
)

// lossSlack bounds the relative difference of a drifted step's loss from one engine's: its
// parameters differ by 1e-8 relative after a step (the test's log), and a loss moves by no
// more than its inputs do.
const lossSlack = 1e-6

// countSlack is matchDrift's share of counts that may differ.
const countSlack = 0.001

// TestShardedStep trains a scene split between two owner engines for shardSteps steps of one
// view, as Gaussian sharding does (docs/sharding.md): each owner packs its visible splats
// (PackVisible), the records are concatenated in rank order (what the exchange delivers), a
// renderer runs the forward, loss and raster_bwd over them and packs the gradients back in
// record order (RenderRecordsBackward), and each owner takes its records' share, owner 0's
// first, and runs project_bwd and Adam (StepFromGradients) with the single engine's step
// options. Against one engine holding the whole scene and taking Step: the loss, the visible
// and entry counts, and, for each owner's range of splats, the parameter gradients (TolGrad and
// TolCosine), the parameters after the steps (shardParamTol), the densification statistics
// (counts and largest radii exactly, gradient sums to TolGrad) and Adam's step count
// (shardMatch says how each device and step may differ: on the emulator, to the bit). The
// mutations must fail the same comparison, at the tolerances (matchTol):
// owner 1's gradients given to owner 0, and every gradient field in turn left out of the
// records.
func TestShardedStep(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 4000, 160, 120
	if emu {
		n, w, h = 1500, 80, 64
	}
	for _, c := range shardStepCases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			checkShardedStep(t, dev, emu, c, n, w, h)
			t.Logf("%.1f s", time.Since(start).Seconds())
		})
	}
}

// shardRig is a case's engines: one holding the whole scene, the two owners, the renderer.
type shardRig struct {
	t        *testing.T
	dev      gpu.Device
	c        shardStepCase
	set      engine.Settings
	o        engine.StepOptions
	g        *splat.Gaussians // the scene before the steps
	view     *engine.View
	ranges   [2][2]int
	whole    *Engine
	owners   [2]*Engine
	renderer *Engine
}

func checkShardedStep(t *testing.T, dev gpu.Device, exact bool, c shardStepCase, n, w, h int) {
	g, vs := RandomBatch(c.seed, n, w, h, 2)
	split := int(c.split * float64(n))
	if c.hide1 {
		for i := split; i < n; i++ {
			g.Means[i*3+2] = -6 // behind every camera of the batch, which look along +z
		}
	}
	v := *vs[max(c.view, 0)]
	if c.view < 0 {
		R, T := camera.LookAt([3]float64{0, 0, -20}, [3]float64{0, 0, -40}, [3]float64{0, 1, 0})
		v.Camera.R, v.Camera.T = R, T
	}
	set := engine.DefaultSettings()
	set.Render, set.TileSize, set.AbsGrad = c.model, c.tile, c.absGrad
	r := &shardRig{t: t, dev: dev, c: c, set: set, g: g, view: &v, ranges: [2][2]int{{0, split}, {split, n}},
		o: engine.StepOptions{SHDegree: c.sh, LR: testLR(), Background: [3]float32{0.1, 0.4, 0.7}, AccumulateStats: true}}
	r.whole = newEngine(t, dev, set, g)
	r.owners = r.newOwners()
	r.renderer = r.owners[0]
	if !c.ownerRenders {
		r.renderer = newEngine(t, dev, set, splat.New(1))
	}

	var first struct {
		want  shardState
		grads [2][]float32
	}
	for step := 1; step <= shardSteps; step++ {
		wres, err := r.whole.Step(r.view, r.o)
		if err != nil {
			t.Fatal(err)
		}
		counts, grads, rres := r.renderStep()
		if c.view < 0 && counts != [2]int{} {
			t.Fatalf("%v records looking away from the scene", counts)
		}
		if c.hide1 && counts[1] != 0 {
			t.Fatalf("owner 1 sent %d records with every splat behind the camera", counts[1])
		}
		t.Logf("step %d: owners' records %v, %d tile entries, loss %.6g", step, counts, rres.Entries, rres.Loss)
		ores := r.ownersStep(r.owners, counts, grads)
		var problems []string
		match := matchBits
		switch {
		case !exact && step == 1:
			match = matchTol
		case !exact:
			match = matchDrift
		}
		// From the same parameters the image is one engine's to the bit (TestShardedRender), and
		// the loss sums it in a fixed order; after a step whose sums differed (a GPU's atomics) the
		// parameters differ by rounding, and so does the loss, by about as much.
		if match == matchDrift {
			if d := math.Abs(rres.Loss-wres.Loss) / math.Abs(wres.Loss); !(d <= lossSlack) {
				problems = append(problems, fmt.Sprintf("loss %.9g, one engine %.9g: relative difference %.3g above %g", rres.Loss, wres.Loss, d, lossSlack))
			}
		} else if math.Float64bits(rres.Loss) != math.Float64bits(wres.Loss) {
			problems = append(problems, fmt.Sprintf("loss %.9g, one engine %.9g", rres.Loss, wres.Loss))
		}
		if rres.Visible != counts[0]+counts[1] || ores[0].Visible+ores[1].Visible != rres.Visible ||
			!match.sameCount(rres.Visible, wres.Visible) || !match.sameCount(rres.Entries, wres.Entries) {
			problems = append(problems, fmt.Sprintf("the renderer drew %d records with %d entries, the owners took %d and %d; one engine: %d visible, %d entries",
				rres.Visible, rres.Entries, ores[0].Visible, ores[1].Visible, wres.Visible, wres.Entries))
		}
		if nf := ores[0].NonFinite + ores[1].NonFinite; nf != wres.NonFinite {
			problems = append(problems, fmt.Sprintf("Adam dropped %d elements, one engine %d", nf, wres.NonFinite))
		}
		want := snapshotShard(t, r.whole)
		got := [2]shardState{snapshotShard(t, r.owners[0]), snapshotShard(t, r.owners[1])}
		problems = append(problems, compareShards(want, got, r.ranges, match)...)
		logShards(t, step, want, got, r.ranges)
		for _, p := range problems {
			t.Errorf("step %d: %s", step, p)
		}
		if step == 1 {
			first.want, first.grads = want, grads
		}
	}
	if !c.mutate {
		return
	}
	r.mutations(first.want, first.grads)
}

// newOwners opens the two owners of the scene before the steps.
func (r *shardRig) newOwners() [2]*Engine {
	var owners [2]*Engine
	for o, rg := range r.ranges {
		owners[o] = newEngine(r.t, r.dev, r.set, r.g.Range(rg[0], rg[1]))
	}
	return owners
}

// renderStep packs both owners' visible splats, draws the records on the renderer with its
// backward, and returns the owners' record counts, each owner's share of the gradient records
// (owner 0's the first counts[0], owner 1's the rest) and the renderer's result.
func (r *shardRig) renderStep() ([2]int, [2][]float32, engine.StepResult) {
	t := r.t
	var counts [2]int
	var parts [2][]uint32
	words := RecordWords(r.set.Render)
	for o, e := range r.owners {
		buf, count, err := e.PackVisible(&r.view.Camera, r.o.SHDegree, uint32(r.ranges[o][0]))
		if err != nil {
			t.Fatal(err)
		}
		counts[o], parts[o] = count, dl[uint32](t, e, buf, count*words)
	}
	recs := upload(t, r.dev, slices.Concat(parts[0], parts[1]))
	defer r.dev.Free(recs)
	gbuf, res, err := r.renderer.RenderRecordsBackward(r.view, recs, counts[0]+counts[1], r.o)
	if err != nil {
		t.Fatal(err)
	}
	gw := r.renderer.gradWords()
	all := dl[float32](t, r.renderer, gbuf, (counts[0]+counts[1])*gw)
	return counts, [2][]float32{all[:counts[0]*gw], all[counts[0]*gw:]}, res
}

// ownersStep hands each owner its gradient records (StepFromGradients). An owner that also
// rendered must be refused first, and packs again.
func (r *shardRig) ownersStep(owners [2]*Engine, counts [2]int, grads [2][]float32) [2]engine.StepResult {
	t := r.t
	var res [2]engine.StepResult
	for o, e := range owners {
		buf := upload(t, r.dev, grads[o])
		if e == r.renderer {
			if _, err := e.StepFromGradients(&r.view.Camera, buf, counts[o], r.o); err == nil {
				t.Fatal("owner 0 stepped from gradients after rendering records: the render replaced its projection")
			}
			if _, count, err := e.PackVisible(&r.view.Camera, r.o.SHDegree, uint32(r.ranges[o][0])); err != nil || count != counts[o] {
				t.Fatalf("owner 0 packed again: %d records (%v), %d before", count, err, counts[o])
			}
		}
		var err error
		if res[o], err = e.StepFromGradients(&r.view.Camera, buf, counts[o], r.o); err != nil {
			t.Fatal(err)
		}
		r.dev.Free(buf)
	}
	return res
}

// mutations runs step 1's owners again, from the scene before it, on gradient records the
// exchange must not deliver, and requires the comparison with one engine's step to fail.
func (r *shardRig) mutations(want shardState, grads [2][]float32) {
	t := r.t
	gw := r.renderer.gradWords()
	counts := [2]int{len(grads[0]) / gw, len(grads[1]) / gw}
	type mutation struct {
		name   string
		grads  [2][]float32
		counts [2]int
	}
	var ms []mutation
	if counts[0] > 0 && counts[1] > 0 {
		// Owner 1's gradient records, as many as owner 0 packed (repeated if it packed fewer).
		swapped := make([]float32, len(grads[0]))
		for k := range swapped {
			swapped[k] = grads[1][k%len(grads[1])]
		}
		ms = append(ms, mutation{"owner 1's gradients to owner 0", [2][]float32{swapped, grads[1]}, counts})
	}
	for _, f := range gradFields(r.set.Render, r.set.AbsGrad) {
		var left [2][]float32
		for o := range left {
			left[o] = slices.Clone(grads[o])
			for k := range counts[o] {
				clear(left[o][k*gw+f.off : k*gw+f.off+f.width])
			}
		}
		ms = append(ms, mutation{f.name + " left out of the gradient records", left, counts})
	}
	if len(ms) == 0 {
		t.Fatal("no mutation applies to the case")
	}
	for _, m := range ms {
		owners := r.newOwners()
		for o, e := range owners {
			if _, count, err := e.PackVisible(&r.view.Camera, r.o.SHDegree, uint32(r.ranges[o][0])); err != nil || count != m.counts[o] {
				t.Fatalf("%s: owner %d packed %d records (%v), %d before", m.name, o, count, err, m.counts[o])
			}
		}
		r.ownersStep(owners, m.counts, m.grads)
		got := [2]shardState{snapshotShard(t, owners[0]), snapshotShard(t, owners[1])}
		for _, e := range owners {
			e.Close()
		}
		problems := compareShards(want, got, r.ranges, matchTol)
		if len(problems) == 0 {
			t.Errorf("mutation %q passes the comparison with one engine", m.name)
			continue
		}
		t.Logf("mutation %q fails as it must: %d problems, the first: %s", m.name, len(problems), problems[0])
	}
}

// gradField is one field of a gradient record: words [off, off+width).
type gradField struct {
	name       string
	off, width int
}

// gradFields lists the gradient record's fields (abi's GradRec*).
func gradFields(m prep.Model, absGrad bool) []gradField {
	f := []gradField{{"colour", abi.GradRecColor, 3}, {"opacity", abi.GradRecOpacity, 1}}
	if m == prep.Ray {
		return append(f, gradField{"u", abi.GradRecRayU, 3}, gradField{"A", abi.GradRecRayA, 9})
	}
	f = append(f, gradField{"mean2d", abi.GradRecMean2D, 2}, gradField{"conic", abi.GradRecConic, 3})
	if absGrad {
		f = append(f, gradField{"mean2d's absolute sums", abi.GradRecMean2DAbs, 2})
	}
	return f
}

// shardState is what a step leaves in an engine: the parameters, the last step's parameter
// gradients (an out-of-view splat's zero: project_bwd leaves them as they were), the
// densification statistics and Adam's step count.
type shardState struct {
	params, grads *splat.Gaussians
	stats         engine.Stats
	adamStep      int64
}

func snapshotShard(t *testing.T, e *Engine) shardState {
	t.Helper()
	p, err := e.Gaussians()
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Stats()
	if err != nil {
		t.Fatal(err)
	}
	gp := dl[float32](t, e, e.grads, e.n*paramFloats)
	zeroInvalid(gp, dl[uint32](t, e, e.valid, e.n))
	return shardState{params: p, grads: unpack(gp, e.n), stats: st, adamStep: e.adamStep}
}

// sameCount says whether a count matches one engine's count want.
func (m shardMatch) sameCount(got, want int) bool {
	if m != matchDrift {
		return got == want
	}
	return math.Abs(float64(got-want)) <= countSlack*float64(max(got, want))
}

// compareShards compares each owner's state with one engine's rows of its range and returns
// what differs, as closely as m asks.
func compareShards(want shardState, got [2]shardState, ranges [2][2]int, m shardMatch) []string {
	var problems []string
	for o, rg := range ranges {
		lo, hi := rg[0], rg[1]
		g, w := got[o], want
		say := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("owner %d (splats [%d, %d)): ", o, lo, hi)+fmt.Sprintf(format, args...))
		}
		if g.adamStep != w.adamStep {
			say("Adam step %d, one engine %d", g.adamStep, w.adamStep)
		}
		for _, grp := range groups(g.grads, w.grads.Range(lo, hi)) {
			if rel, cos := check.RelErr(grp.got, grp.want), check.Cosine(grp.got, grp.want); !(rel <= TolGrad && cos >= TolCosine) {
				say("d %s: relative L2 %.3g, cosine %.8f from one engine's", grp.name, rel, cos)
			}
		}
		if rel := check.RelErr(pack(g.params), pack(w.params.Range(lo, hi))); !(rel <= shardParamTol) {
			say("parameters: relative L2 %.3g from one engine's", rel)
		}
		count := 0
		for i := range hi - lo {
			if g.stats.Count[i] != w.stats.Count[lo+i] {
				count++
			}
		}
		if !m.sameCount(count+hi-lo, hi-lo) {
			say("statistics: %d of %d visibility counts differ from one engine's", count, hi-lo)
		}
		if m == matchDrift {
			if rel := check.RelErr(g.stats.MaxRadius, w.stats.MaxRadius[lo:hi]); !(rel <= TolExact) {
				say("statistics' largest radii: relative L2 %.3g from one engine's", rel)
			}
		} else if d := check.BitsDiffer(g.stats.MaxRadius, w.stats.MaxRadius[lo:hi]); d > 0 {
			say("statistics: %d of %d largest radii differ from one engine's", d, hi-lo)
		}
		if rel := check.RelErr(g.stats.GradAccum, w.stats.GradAccum[lo:hi]); !(rel <= TolGrad) {
			say("statistics' gradient sums: relative L2 %.3g from one engine's", rel)
		}
		if m != matchBits {
			continue
		}
		for _, x := range []struct {
			name      string
			got, want []float32
		}{
			{"parameter gradients", pack(g.grads), pack(w.grads.Range(lo, hi))},
			{"parameters", pack(g.params), pack(w.params.Range(lo, hi))},
			{"statistics' gradient sums", g.stats.GradAccum, w.stats.GradAccum[lo:hi]},
		} {
			if d := check.BitsDiffer(x.got, x.want); d > 0 {
				say("%d of %d %s differ in bits from one engine's, which sums in the same order here", d, len(x.want), x.name)
			}
		}
	}
	return problems
}

// logShards says how far the owners' gradients and parameters are from one engine's: the
// worst relative L2 errors, and how many values differ at all.
func logShards(t *testing.T, step int, want shardState, got [2]shardState, ranges [2][2]int) {
	worstGrad, worstParam := 0.0, 0.0
	gradBits, paramBits, values := 0, 0, 0
	for o, rg := range ranges {
		wg, wp := want.grads.Range(rg[0], rg[1]), want.params.Range(rg[0], rg[1])
		for _, grp := range groups(got[o].grads, wg) {
			worstGrad = max(worstGrad, check.RelErr(grp.got, grp.want))
		}
		worstParam = max(worstParam, check.RelErr(pack(got[o].params), pack(wp)))
		gradBits += check.BitsDiffer(pack(got[o].grads), pack(wg))
		paramBits += check.BitsDiffer(pack(got[o].params), pack(wp))
		values += (rg[1] - rg[0]) * paramFloats
	}
	t.Logf("step %d: worst gradient group relative L2 %.3g (tolerance %g), parameters %.3g (%g); %d gradient and %d parameter values of %d differ in any bit",
		step, worstGrad, TolGrad, worstParam, shardParamTol, gradBits, paramBits, values)
}

// upload copies words (u32 or f32) into a new buffer on dev, which the caller frees.
func upload[T gpu.Elem](t *testing.T, dev gpu.Device, words []T) gpu.Buffer {
	t.Helper()
	buf, err := dev.Alloc(max(len(words)*4, 16))
	if err != nil {
		t.Fatal(err)
	}
	if err := gpu.UploadSlice(dev, buf, 0, words); err != nil {
		t.Fatal(err)
	}
	return buf
}

// TestStepFromGradientsOrder: an owner's backward maps the gradients back through the
// projection of its last PackVisible, so it must refuse gradients when that projection is gone
// or is another view's, or the count is not the records packed; and take them right after.
func TestStepFromGradientsOrder(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 600, 64, 48
	if emu {
		n, w, h = 300, 48, 40
	}
	g, vs := RandomBatch(50, n, w, h, 2)
	o := engine.StepOptions{SHDegree: 2, LR: testLR(), AccumulateStats: true}
	other := o
	other.SHDegree = 1
	cam := &vs[0].Camera
	pack := func(e *Engine) error {
		_, _, err := e.PackVisible(cam, o.SHDegree, 0)
		return err
	}
	for _, c := range []struct {
		name   string
		before func(e *Engine) error // what runs between the pack and the backward
		pack   bool                  // PackVisible first
		cam    *camera.Camera
		o      engine.StepOptions
		extra  int // records more than packed
		ok     bool
	}{
		{name: "packed", pack: true, cam: cam, o: o, ok: true},
		{name: "not packed", cam: cam, o: o},
		{name: "another camera", pack: true, cam: &vs[1].Camera, o: o},
		{name: "another SH degree", pack: true, cam: cam, o: other},
		{name: "another count", pack: true, cam: cam, o: o, extra: 1},
		{name: "render between", pack: true, cam: cam, o: o, before: func(e *Engine) error {
			_, err := e.Render(cam, o.SHDegree, [3]float32{})
			return err
		}},
		{name: "opacity reset between", pack: true, cam: cam, o: o, before: func(e *Engine) error { return e.ResetOpacity(0.01) }},
		{name: "a step from gradients between", pack: true, cam: cam, o: o, before: func(e *Engine) error {
			buf := upload(t, dev, make([]float32, e.packed.count*e.gradWords()))
			defer dev.Free(buf)
			_, err := e.StepFromGradients(cam, buf, e.packed.count, o)
			return err
		}},
		{name: "packed again after a render", pack: true, cam: cam, o: o, ok: true, before: func(e *Engine) error {
			if _, err := e.Render(cam, o.SHDegree, [3]float32{}); err != nil {
				return err
			}
			return pack(e)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, dev, engine.DefaultSettings(), g)
			count := 0
			if c.pack {
				if err := pack(e); err != nil {
					t.Fatal(err)
				}
				count = e.packed.count
			}
			if c.before != nil {
				if err := c.before(e); err != nil {
					t.Fatal(err)
				}
			}
			step := e.adamStep
			buf := upload(t, dev, make([]float32, (count+c.extra)*e.gradWords()))
			defer dev.Free(buf)
			_, err := e.StepFromGradients(c.cam, buf, count+c.extra, c.o)
			checkTakenOrRefused(t, e, step, c.ok, err, "backward")
		})
	}
}

// TestUpdateFromGradientsOrder: an owner's update takes the gradients its backwards summed
// since the last update, so it must refuse when there are none (none taken, or a step in
// between overwrote them) or their SH degree is not the update's, and a later view's backward
// must refuse when there is no earlier view's sum to add to; and take them in order.
func TestUpdateFromGradientsOrder(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 600, 64, 48
	if emu {
		n, w, h = 300, 48, 40
	}
	g, vs := RandomBatch(51, n, w, h, 2)
	o := engine.StepOptions{SHDegree: 2, LR: testLR(), AccumulateStats: true}
	other := o
	other.SHDegree = 1
	// backward packs view v for opts and takes zero gradients for it.
	backward := func(e *Engine, v int, opts engine.StepOptions, later bool) error {
		cam := &vs[v].Camera
		if _, _, err := e.PackVisible(cam, opts.SHDegree, 0); err != nil {
			t.Fatal(err)
		}
		buf := upload(t, dev, make([]float32, max(e.packed.count, 1)*e.gradWords()))
		defer dev.Free(buf)
		return e.BackwardFromGradients(cam, buf, e.packed.count, opts, later)
	}
	for _, c := range []struct {
		name string
		// run takes the backwards (and whatever else) before the update; an error there is
		// the refusal wanted when refuseBackward.
		run            func(e *Engine) error
		refuseBackward bool
		o              engine.StepOptions
		ok             bool
	}{
		{name: "one view", run: func(e *Engine) error { return backward(e, 0, o, false) }, o: o, ok: true},
		{name: "two views", run: func(e *Engine) error {
			return errors.Join(backward(e, 0, o, false), backward(e, 1, o, true))
		}, o: o, ok: true},
		{name: "nothing summed", run: func(e *Engine) error { return nil }, o: o},
		{name: "a later view first", run: func(e *Engine) error { return backward(e, 0, o, true) }, refuseBackward: true},
		{name: "a later view of another SH degree", run: func(e *Engine) error {
			if err := backward(e, 0, o, false); err != nil {
				t.Fatal(err)
			}
			return backward(e, 1, other, true)
		}, refuseBackward: true},
		{name: "another SH degree", run: func(e *Engine) error { return backward(e, 0, o, false) }, o: other},
		{name: "a step between", run: func(e *Engine) error {
			if err := backward(e, 0, o, false); err != nil {
				t.Fatal(err)
			}
			_, err := e.Step(vs[1], o)
			if err != nil {
				t.Fatal(err)
			}
			return nil
		}, o: o},
		{name: "updated already", run: func(e *Engine) error {
			if err := backward(e, 0, o, false); err != nil {
				t.Fatal(err)
			}
			_, err := e.UpdateFromGradients(o)
			if err != nil {
				t.Fatal(err)
			}
			return nil
		}, o: o},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, dev, engine.DefaultSettings(), g)
			err := c.run(e)
			if c.refuseBackward {
				if err == nil {
					t.Fatal("the later view's gradients taken")
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			step := e.adamStep
			_, err = e.UpdateFromGradients(c.o)
			checkTakenOrRefused(t, e, step, c.ok, err, "update")
		})
	}
}

// checkTakenOrRefused checks an owner's update from gradients (what: "backward", "update"): taken
// when ok, Adam's step count moved on by one from step; refused otherwise, with an error and
// the step count where it was.
func checkTakenOrRefused(t *testing.T, e *Engine, step int64, ok bool, err error, what string) {
	t.Helper()
	switch {
	case ok && err != nil:
		t.Fatal(err)
	case !ok && err == nil:
		t.Fatalf("%s taken", what)
	case !ok:
		t.Logf("refused: %v", err)
		if e.adamStep != step {
			t.Errorf("Adam's step count moved from %d to %d on a refused %s", step, e.adamStep, what)
		}
	case e.adamStep != step+1:
		t.Errorf("Adam's step count %d after a %s from %d", e.adamStep, what, step)
	}
}
