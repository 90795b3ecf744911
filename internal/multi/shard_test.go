package multi

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/nccl"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// shardedCase is a scene split over ranks and trained a few steps of one view each.
type shardedCase struct {
	name    string
	ranks   int
	model   prep.Model
	tile    int
	sh      int
	absGrad bool
	// hide puts every splat of rank hide behind the cameras: an owner with no record to send
	// and no gradient to take, which still steps (-1: none).
	hide int
	seed uint64
	// batch is the views of a step (TestShardedStepBatchMatchesOneEngine).
	batch int
	// mcmc turns on MCMC's regularisers (to every splat, or with regInView to those in view)
	// and its noise.
	mcmc, regInView bool
}

var shardedCases = []shardedCase{
	{name: "1 rank/ewa", ranks: 1, model: prep.EWA, tile: 16, sh: 3, hide: -1, seed: 60},
	{name: "2 ranks/ewa", ranks: 2, model: prep.EWA, tile: 16, sh: 3, hide: -1, seed: 61},
	{name: "3 ranks/ewa/tile8/absgrad", ranks: 3, model: prep.EWA, tile: 8, sh: 1, absGrad: true, hide: -1, seed: 62},
	{name: "3 ranks/ewa/rank1-out-of-view", ranks: 3, model: prep.EWA, tile: 16, sh: 2, hide: 1, seed: 63},
	{name: "1 rank/ray", ranks: 1, model: prep.Ray, tile: 16, sh: 2, hide: -1, seed: 64},
	{name: "2 ranks/ray/rank0-out-of-view", ranks: 2, model: prep.Ray, tile: 8, sh: 3, hide: 0, seed: 65},
	{name: "3 ranks/ray", ranks: 3, model: prep.Ray, tile: 16, sh: 1, hide: -1, seed: 66},
	{name: "2 ranks/ewa/mcmc", ranks: 2, model: prep.EWA, tile: 16, sh: 2, hide: -1, seed: 67, mcmc: true},
	{name: "3 ranks/ray/mcmc-in-view/rank2-out-of-view", ranks: 3, model: prep.Ray, tile: 16, sh: 1, hide: 2, seed: 68, mcmc: true, regInView: true},
}

// shardedSteps is how many steps a case trains, each on the next of shardedViews views: the
// renderer turns over every rank of three, and the last steps run on moments, statistics and
// Adam's bias corrections of the earlier ones.
const (
	shardedSteps = 4
	shardedViews = 3
)

// shardedN, shardedW and shardedH are the scene and image size on the emulator.
const shardedN, shardedW, shardedH = 900, 64, 48

// shardedScene is a case's scene and views.
func shardedScene(c shardedCase, n, w, h int) (*splat.Gaussians, []*engine.View) {
	g, vs := fused.RandomBatch(c.seed, n, w, h, shardedViews)
	if c.hide >= 0 {
		sh := Shares(n, c.ranks)[c.hide]
		for i := sh[0]; i < sh[1]; i++ {
			g.Means[i*3+2] = -6 // behind every camera of the batch, which look along +z
		}
	}
	return g, vs
}

func (c shardedCase) settings() (engine.Settings, engine.StepOptions) {
	set := engine.DefaultSettings()
	set.Render, set.TileSize, set.AbsGrad = c.model, c.tile, c.absGrad
	o := engine.StepOptions{SHDegree: c.sh, LR: testLR(), Background: [3]float32{0.1, 0.4, 0.7}, AccumulateStats: true, WantImage: true}
	if c.mcmc {
		// The noise moves the splats of low opacity the most; at this scale a rank that keyed
		// it by its local ids, or took the means over its own share, changes the parameters.
		o.MCMC = engine.MCMCStep{OpacityReg: 0.05, ScaleReg: 0.05, NoiseScale: 50, NoiseSeed: c.seed, NoiseStep: 3, RegInView: c.regInView}
	}
	return set, o
}

// tapExchanger wraps an exchanger for the tests: it notes where each rank sent its records in
// the last step, and wrap, when set, runs around each rank's round (exchange runs the round)
// to corrupt it as a faulty driver would.
type tapExchanger struct {
	Exchanger
	// calls counts each rank's Exchange calls: a step makes two, the records' round first.
	calls []int
	// sent is each rank's send counts in its last records round.
	sent [][]int
	wrap func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error
}

func newTap(inner Exchanger, ranks int) *tapExchanger {
	return &tapExchanger{Exchanger: inner, calls: make([]int, ranks), sent: make([][]int, ranks)}
}

// Exchange is the Exchanger's. Each rank touches only its own entries, from its own goroutine.
func (x *tapExchanger) Exchange(rank int, dev gpu.Device, ex *Exchange) error {
	records := x.calls[rank]%2 == 0
	x.calls[rank]++
	if records {
		x.sent[rank] = slices.Clone(ex.SendCounts)
	}
	exchange := func() error { return x.Exchanger.Exchange(rank, dev, ex) }
	if x.wrap == nil {
		return exchange()
	}
	return x.wrap(rank, records, dev, ex, exchange)
}

// shardedRun is what a run's steps left: each step's result, parameters and statistics.
type shardedRun struct {
	res    []engine.StepResult
	params []*splat.Gaussians
	stats  []engine.Stats
}

// trainWhole takes the steps on one engine holding the whole scene.
func trainWhole(t *testing.T, dev gpu.Device, set engine.Settings, o engine.StepOptions, g *splat.Gaussians, vs []*engine.View) shardedRun {
	t.Helper()
	e, err := fused.New(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var run shardedRun
	for k := range shardedSteps {
		res, err := e.Step(vs[k%len(vs)], o)
		if err != nil {
			t.Fatalf("one engine, step %d: %v", k, err)
		}
		p, err1 := e.Gaussians()
		st, err2 := e.Stats()
		if err1 != nil || err2 != nil {
			t.Fatalf("one engine, step %d: %v %v", k, err1, err2)
		}
		run.res, run.params, run.stats = append(run.res, res), append(run.params, p), append(run.stats, st)
	}
	return run
}

// trainSharded takes the steps on s (the renderer turning round), checking after each that the
// renderer was the step's and, where a rank is hidden, that it sent no record.
func trainSharded(t *testing.T, s *Sharded, tap *tapExchanger, c shardedCase, o engine.StepOptions, vs []*engine.View) shardedRun {
	t.Helper()
	var run shardedRun
	for k := range shardedSteps {
		res, err := stepWithin(s, vs[k%len(vs)], o)
		if err != nil {
			t.Fatalf("%d ranks, step %d: %v", s.Ranks(), k, err)
		}
		for r, sent := range tap.sent {
			for d, words := range sent {
				if words > 0 && d != k%s.Ranks() {
					t.Errorf("step %d: rank %d sent %d record words to rank %d, the step's renderer is rank %d", k, r, words, d, k%s.Ranks())
				}
				if words > 0 && r == c.hide {
					t.Errorf("step %d: rank %d sent %d record words with every splat it owns behind the camera", k, r, words)
				}
			}
		}
		p, err1 := s.Gaussians()
		st, err2 := s.Stats()
		if err1 != nil || err2 != nil {
			t.Fatalf("%d ranks, step %d: %v %v", s.Ranks(), k, err1, err2)
		}
		run.res, run.params, run.stats = append(run.res, res), append(run.params, p), append(run.stats, st)
	}
	return run
}

// stepWithin takes s's next step, or fails if it does not return within a minute: a rank left
// waiting for another would otherwise hang the test until its deadline.
func stepWithin(s *Sharded, v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	return stepBatchWithin(s, []*engine.View{v}, o) // Step is StepBatch of one view
}

// compareBits compares a sharded run with one engine's, step by step, to the bit: the
// renderer's loss, terms, counts and image, the elements Adam dropped, and each rank's range
// of parameters and statistics. It returns what differs.
func compareBits(want, got shardedRun, ranges [][2]int) []string {
	var problems []string
	for k := range want.res {
		say := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("step %d: ", k)+fmt.Sprintf(format, args...))
		}
		w, g := want.res[k], got.res[k]
		for _, x := range []struct {
			name string
			a, b float64
		}{{"loss", g.Loss, w.Loss}, {"L1", g.L1, w.L1}, {"MSE", g.MSE, w.MSE}, {"SSIM", g.SSIM, w.SSIM}} {
			if math.Float64bits(x.a) != math.Float64bits(x.b) {
				say("%s %.9g, one engine %.9g", x.name, x.a, x.b)
			}
		}
		if g.Visible != w.Visible || g.Entries != w.Entries || g.NonFinite != w.NonFinite {
			say("%d visible, %d entries, %d dropped; one engine %d, %d, %d", g.Visible, g.Entries, g.NonFinite, w.Visible, w.Entries, w.NonFinite)
		}
		if d := check.BitsDiffer(g.Image, w.Image); d > 0 {
			say("%d of %d image values differ", d, len(w.Image))
		}
		for r, rg := range ranges {
			lo, hi := rg[0], rg[1]
			gp, wp := packed(got.params[k].Range(lo, hi)), packed(want.params[k].Range(lo, hi))
			if d := check.BitsDiffer(gp, wp); d > 0 {
				say("rank %d (splats [%d, %d)): %d of %d parameters differ, relative L2 %.3g", r, lo, hi, d, len(wp), check.RelErr(gp, wp))
			}
			gs, ws := got.stats[k], want.stats[k]
			counts := 0
			for i := lo; i < hi; i++ {
				if gs.Count[i] != ws.Count[i] {
					counts++
				}
			}
			if d := counts + check.BitsDiffer(gs.GradAccum[lo:hi], ws.GradAccum[lo:hi]) + check.BitsDiffer(gs.MaxRadius[lo:hi], ws.MaxRadius[lo:hi]); d > 0 {
				say("rank %d (splats [%d, %d)): %d statistics differ", r, lo, hi, d)
			}
		}
	}
	return problems
}

// emuDevices opens n host emulators for a test whose comparisons are to the bit, or skips it.
func emuDevices(t *testing.T, n int) []gpu.Device {
	t.Helper()
	devs, onEmu := devices(t, n)
	if !onEmu {
		t.Skip("the sharded step is compared to the bit, which needs the emulator's fixed summation order; RLXSPLAT_FUSED_EMU=1 runs it on host emulators (TestShardedOneRankNCCL is the GPU's)")
	}
	return devs
}

// TestShardedStepMatchesOneEngine trains each case's scene split over one, two or three ranks
// (host emulators, the host exchanger) for shardedSteps steps of one view each, the renderer
// turning over the ranks, and one engine holding the whole scene on the same views with the
// same options: the loss and its terms, the counts, the image, and each rank's parameters and
// statistics must be the one engine's rows to the bit after every step.
func TestShardedStepMatchesOneEngine(t *testing.T) {
	devs := emuDevices(t, 3)
	for _, c := range shardedCases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			g, vs := shardedScene(c, shardedN, shardedW, shardedH)
			set, o := c.settings()
			want := trainWhole(t, devs[0], set, o, g, vs)
			tap := newTap(NewHostExchanger(c.ranks), c.ranks)
			s, err := NewSharded(devs[:c.ranks], tap, set, g, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got := trainSharded(t, s, tap, c, o, vs)
			for _, p := range compareBits(want, got, s.Ranges()) {
				t.Error(p)
			}
			vis := make([]int, len(got.res))
			for k, r := range got.res {
				vis[k] = r.Visible
			}
			t.Logf("ranks %v, visible per step %v, final loss %.6g; %.1f s", s.Ranges(), vis, got.res[len(got.res)-1].Loss, time.Since(start).Seconds())
		})
	}
}

// TestShardedMutationsFail corrupts the exchange as a faulty driver would, and the comparison
// with one engine must fail: owner r given owner r+1's gradient records (as many as it packed,
// repeated if it packed fewer), and the records delivered to the renderer in reverse rank
// order (which the depth sort's ties and the gradients' return both read as global-id order).
func TestShardedMutationsFail(t *testing.T) {
	devs := emuDevices(t, 3)
	mutations := []struct {
		name string
		wrap func(applied *bool) func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error
	}{
		{"owner r+1's gradients to owner r", nextOwnersGradients},
		{"records in reverse rank order", recordsReversed},
	}
	for _, ranks := range []int{2, 3} {
		for _, m := range mutations {
			t.Run(fmt.Sprintf("%d ranks/%s", ranks, m.name), func(t *testing.T) {
				c := shardedCase{ranks: ranks, model: prep.EWA, tile: 16, sh: 2, hide: -1, seed: 70 + uint64(ranks)}
				g, vs := shardedScene(c, shardedN, shardedW, shardedH)
				set, o := c.settings()
				want := trainWhole(t, devs[0], set, o, g, vs)
				tap := newTap(NewHostExchanger(ranks), ranks)
				applied := false
				tap.wrap = m.wrap(&applied)
				s, err := NewSharded(devs[:ranks], tap, set, g, false)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				got := trainSharded(t, s, tap, c, o, vs)
				if !applied {
					t.Fatal("the mutation found nothing to corrupt")
				}
				problems := compareBits(want, got, s.Ranges())
				if len(problems) == 0 {
					t.Fatalf("mutation %q passes the comparison with one engine", m.name)
				}
				last := len(got.params) - 1
				t.Logf("fails as it must: %d problems, the first: %s; parameters after %d steps: relative L2 %.3g from one engine's",
					len(problems), problems[0], shardedSteps, check.RelErr(packed(got.params[last]), packed(want.params[last])))
			})
		}
	}
}

// nextOwnersGradients rewrites the renderer's gradient records so that the first owner r with
// records, whose next owner has records too, receives owner r+1's instead of its own.
func nextOwnersGradients(applied *bool) func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error {
	return func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error {
		total := 0
		for _, c := range x.SendCounts {
			total += c
		}
		if records || total == 0 {
			return exchange()
		}
		words := make([]uint32, total)
		if err := gpu.DownloadSlice(dev, words, x.Send, 0); err != nil {
			return err
		}
		for r := 0; r+1 < len(x.SendCounts); r++ {
			if x.SendCounts[r] == 0 || x.SendCounts[r+1] == 0 {
				continue
			}
			at := before(x.SendCounts, r)
			next := words[at+x.SendCounts[r] : at+x.SendCounts[r]+x.SendCounts[r+1]]
			for i := range x.SendCounts[r] {
				words[at+i] = next[i%len(next)]
			}
			*applied = true
			break
		}
		buf, err := gpu.AllocSlice[uint32](dev, total)
		if err != nil {
			return err
		}
		defer dev.Free(buf)
		if err := gpu.UploadSlice(dev, buf, 0, words); err != nil {
			return err
		}
		x.Send = buf
		return exchange()
	}
}

// recordsReversed reorders the records the renderer received so that the last rank's come
// first.
func recordsReversed(applied *bool) func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error {
	return func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error {
		if err := exchange(); err != nil || !records {
			return err
		}
		total, senders := 0, 0
		for _, c := range x.RecvCounts {
			total += c
			if c > 0 {
				senders++
			}
		}
		if senders < 2 {
			return nil
		}
		words := make([]uint32, total)
		if err := gpu.DownloadSlice(dev, words, x.Recv, 0); err != nil {
			return err
		}
		var out []uint32
		for s := len(x.RecvCounts) - 1; s >= 0; s-- {
			at := before(x.RecvCounts, s)
			out = append(out, words[at:at+x.RecvCounts[s]]...)
		}
		*applied = true
		return gpu.UploadSlice(dev, x.Recv, 0, out)
	}
}

// TestShardedStepFailures makes a step fail at each phase: the step must return (no rank left
// waiting for another) with an error naming the rank and the cause, leave every rank's splats
// as they were, and the steps after it must still match one engine's to the bit.
func TestShardedStepFailures(t *testing.T) {
	const ranks = 3
	devs := emuDevices(t, ranks)
	c := shardedCase{ranks: ranks, model: prep.EWA, tile: 16, sh: 1, hide: -1, seed: 80}
	g, vs := shardedScene(c, shardedN, shardedW, shardedH)
	set, o := c.settings()
	want := trainWhole(t, devs[0], set, o, g, vs)
	for _, f := range []struct {
		name string
		// view and options of the failing step (nil view: the first view)
		view func() *engine.View
		o    func() engine.StepOptions
		// wrap corrupts the failing step's exchange
		wrap func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error
		want string
	}{
		{name: "a camera no rank can pack", view: func() *engine.View {
			v := *vs[0]
			v.Camera.Width = 0
			return &v
		}, want: "pack visible: ranks 0, 1, 2"},
		{name: "a target the renderer cannot use", view: func() *engine.View {
			v := *vs[0]
			v.Target = v.Target[:9]
			return &v
		}, want: "rank 0 (renderer)"},
		{name: "rank 2's records round malformed", wrap: func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error {
			if rank == 2 && records {
				x.SendCounts = x.SendCounts[:1]
			}
			return exchange()
		}, want: "records to the renderer: ranks 0, 1, 2: multi: exchange: rank 2 gave 1 send counts for 3 ranks"},
		{name: "rank 1's gradient round without room", wrap: func(rank int, records bool, dev gpu.Device, x *Exchange, exchange func() error) error {
			if rank == 1 && !records {
				x.RecvCap--
			}
			return exchange()
		}, want: "gradients to the owners: ranks 0, 1, 2: multi: exchange: rank 1 receives"},
	} {
		t.Run(f.name, func(t *testing.T) {
			tap := newTap(NewHostExchanger(ranks), ranks)
			s, err := NewSharded(devs, tap, set, g, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			v, fo := vs[0], o
			if f.view != nil {
				v = f.view()
			}
			if f.o != nil {
				fo = f.o()
			}
			tap.wrap = f.wrap
			before, _ := s.Gaussians()
			_, err = stepWithin(s, v, fo)
			if err == nil || !strings.Contains(err.Error(), f.want) {
				t.Fatalf("failing step: %v, want an error saying %q", err, f.want)
			}
			t.Logf("refused: %v", err)
			tap.wrap = nil
			after, _ := s.Gaussians()
			if d := differ(before, after); d > 0 {
				t.Fatalf("the failed step changed %d parameters", d)
			}
			// Restart the renderer's turn and the tap's count of rounds: the failed step may have
			// stopped before its exchanges.
			s.next = 0
			tap.calls = make([]int, ranks)
			got := trainSharded(t, s, tap, c, o, vs)
			for _, p := range compareBits(want, got, s.Ranges()) {
				t.Error("after the failed step: " + p)
			}
		})
	}
}

// shardedGPUParamTol bounds the relative L2 difference of the parameters after the steps from
// one engine's on a GPU, whose rasterizer atomics sum in no fixed order: internal/fused's
// shardParamTol, the bound two GPU runs of the same steps get.
const shardedGPUParamTol = 1e-3

// shardedGPULossSlack and shardedGPUCountSlack bound a drifted step's loss (relative) and its
// counts (the share that may differ) after a first step whose sums differed by rounding:
// internal/fused's lossSlack and countSlack.
const (
	shardedGPULossSlack  = 1e-6
	shardedGPUCountSlack = 0.001
)

// TestShardedOneRankNCCL runs the sharded step on one GPU with a one-rank NCCL exchanger (the
// records and gradients go through ncclSend and ncclRecv to the GPU itself) against one engine:
// the first step's loss and counts exactly, later steps' within the drift a GPU's atomics
// allow, and the parameters and statistics after the steps within internal/fused's GPU bounds.
func TestShardedOneRankNCCL(t *testing.T) {
	devs, onEmu := devices(t, 1)
	if onEmu {
		t.Skip("NCCL needs a CUDA device")
	}
	lib, err := nccl.Open(os.Getenv)
	if err != nil {
		t.Skipf("no NCCL: %v", err)
	}
	x, err := NewNCCLExchanger(lib, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for _, model := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(model.String(), func(t *testing.T) {
			c := shardedCase{ranks: 1, model: model, tile: 16, sh: 3, hide: -1, seed: 90}
			g, vs := shardedScene(c, 4000, 160, 120)
			set, o := c.settings()
			want := trainWhole(t, devs[0], set, o, g, vs)
			tap := newTap(x, 1)
			s, err := NewSharded(devs, tap, set, g, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got := trainSharded(t, s, tap, c, o, vs)
			slack := func(a, b int) bool {
				return math.Abs(float64(a-b)) <= shardedGPUCountSlack*float64(max(a, b))
			}
			for k := range got.res {
				w, r := want.res[k], got.res[k]
				d := math.Abs(r.Loss-w.Loss) / math.Abs(w.Loss)
				if k == 0 && (math.Float64bits(r.Loss) != math.Float64bits(w.Loss) || r.Visible != w.Visible || r.Entries != w.Entries) {
					t.Errorf("step 0: loss %.9g, %d visible, %d entries; one engine %.9g, %d, %d", r.Loss, r.Visible, r.Entries, w.Loss, w.Visible, w.Entries)
				}
				if !(d <= shardedGPULossSlack) || !slack(r.Visible, w.Visible) || !slack(r.Entries, w.Entries) {
					t.Errorf("step %d: loss %.9g (relative difference %.3g), %d visible, %d entries; one engine %.9g, %d, %d", k, r.Loss, d, r.Visible, r.Entries, w.Loss, w.Visible, w.Entries)
				}
			}
			last := len(got.res) - 1
			rel := check.RelErr(packed(got.params[last]), packed(want.params[last]))
			gs, ws := got.stats[last], want.stats[last]
			counts := 0
			for i := range ws.Count {
				if gs.Count[i] != ws.Count[i] {
					counts++
				}
			}
			t.Logf("after %d steps: parameters relative L2 %.3g, statistics' gradient sums %.3g, %d of %d counts differ",
				shardedSteps, rel, check.RelErr(gs.GradAccum, ws.GradAccum), counts, len(ws.Count))
			if !(rel <= shardedGPUParamTol) {
				t.Errorf("parameters: relative L2 %.3g from one engine's", rel)
			}
			if rel := check.RelErr(gs.GradAccum, ws.GradAccum); !(rel <= fused.TolGrad) {
				t.Errorf("statistics' gradient sums: relative L2 %.3g from one engine's", rel)
			}
			if float64(counts) > shardedGPUCountSlack*float64(len(ws.Count)) {
				t.Errorf("statistics: %d of %d visibility counts differ", counts, len(ws.Count))
			}
		})
	}
}

// shardedBatchSteps and shardedBatchViews are the steps a batch case trains and the views it
// draws them from: step k takes views kB … kB+B−1 (mod shardedBatchViews), so the batches
// mix views, and the later steps run on the earlier ones' moments and statistics.
const (
	shardedBatchSteps = 3
	shardedBatchViews = 4
)

// batchViews is step k's batch of b views of vs.
func batchViews(vs []*engine.View, k, b int) []*engine.View {
	out := make([]*engine.View, b)
	for j := range out {
		out[j] = vs[(k*b+j)%len(vs)]
	}
	return out
}

// trainBatch takes shardedBatchSteps steps of batches of b views of vs with step (one engine's
// StepBatch, or a sharded one) and notes each step's result, parameters and statistics.
func trainBatch(t *testing.T, name string, b int, vs []*engine.View, step func(k int, batch []*engine.View) (engine.StepResult, error),
	state func() (*splat.Gaussians, engine.Stats, error)) shardedRun {
	t.Helper()
	var run shardedRun
	for k := range shardedBatchSteps {
		res, err := step(k, batchViews(vs, k, b))
		if err != nil {
			t.Fatalf("%s, step %d: %v", name, k, err)
		}
		p, st, err := state()
		if err != nil {
			t.Fatalf("%s, step %d: %v", name, k, err)
		}
		run.res, run.params, run.stats = append(run.res, res), append(run.params, p), append(run.stats, st)
	}
	return run
}

// stepBatchWithin takes s's next step over vs, or fails if it does not return within a
// minute.
func stepBatchWithin(s *Sharded, vs []*engine.View, o engine.StepOptions) (engine.StepResult, error) {
	type out struct {
		res engine.StepResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := s.StepBatch(vs, o)
		done <- out{res, err}
	}()
	select {
	case d := <-done:
		return d.res, d.err
	case <-time.After(time.Minute):
		return engine.StepResult{}, fmt.Errorf("the step did not return within a minute: a rank waits for another")
	}
}

// shardedStepMode is how a sharded run takes a step of a batch: StepBatch, or, as a mutation,
// one Step per view (an update after every view rather than once for the batch).
type shardedStepMode int

const (
	modeBatch shardedStepMode = iota
	modeUpdateEachView
)

// trainShardedBatch takes the steps on a scene split over ranks ranks, checking after each that
// the last view's records went to its renderer in turn ((kB+B−1) mod ranks).
func trainShardedBatch(t *testing.T, devs []gpu.Device, ranks, b int, set engine.Settings, o engine.StepOptions, g *splat.Gaussians, vs []*engine.View, mode shardedStepMode) (shardedRun, [][2]int) {
	t.Helper()
	tap := newTap(NewHostExchanger(ranks), ranks)
	s, err := NewSharded(devs[:ranks], tap, set, g, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	step := func(k int, batch []*engine.View) (engine.StepResult, error) {
		if mode == modeUpdateEachView {
			var res engine.StepResult
			for _, v := range batch {
				var err error
				if res, err = stepWithin(s, v, o); err != nil {
					return res, err
				}
			}
			return res, nil
		}
		res, err := stepBatchWithin(s, batch, o)
		if err != nil {
			return res, err
		}
		last := (k*b + b - 1) % ranks
		for r, sent := range tap.sent {
			for d, words := range sent {
				if words > 0 && d != last {
					t.Errorf("step %d: rank %d sent %d record words of the last view to rank %d, its renderer is rank %d", k, r, words, d, last)
				}
			}
		}
		return res, nil
	}
	state := func() (*splat.Gaussians, engine.Stats, error) {
		p, err1 := s.Gaussians()
		st, err2 := s.Stats()
		return p, st, errors.Join(err1, err2)
	}
	return trainBatch(t, fmt.Sprintf("%d ranks", ranks), b, vs, step, state), s.Ranges()
}

// trainWholeBatch takes the steps with one engine's StepBatch over the whole scene.
func trainWholeBatch(t *testing.T, dev gpu.Device, b int, set engine.Settings, o engine.StepOptions, g *splat.Gaussians, vs []*engine.View) shardedRun {
	t.Helper()
	e, err := fused.New(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	step := func(_ int, batch []*engine.View) (engine.StepResult, error) { return e.StepBatch(batch, o) }
	state := func() (*splat.Gaussians, engine.Stats, error) {
		p, err1 := e.Gaussians()
		st, err2 := e.Stats()
		return p, st, errors.Join(err1, err2)
	}
	return trainBatch(t, "one engine", b, vs, step, state)
}

// shardedBatchCases is one, two and three ranks with batches of two and three views and of as
// many views as ranks, for both render models.
func shardedBatchCases() []shardedCase {
	var out []shardedCase
	seed := uint64(100)
	for _, model := range []prep.Model{prep.EWA, prep.Ray} {
		for ranks := 1; ranks <= 3; ranks++ {
			bs := []int{2, 3, ranks}
			slices.Sort(bs)
			for _, b := range slices.Compact(bs) {
				c := shardedCase{name: fmt.Sprintf("%s/%d ranks/batch %d", model, ranks, b), ranks: ranks, model: model,
					tile: 16, sh: 1 + b%3, absGrad: model == prep.EWA && ranks == 3, hide: -1, seed: seed, batch: b}
				out = append(out, c)
				seed++
			}
		}
	}
	return out
}

// TestShardedStepBatchMatchesOneEngine trains scenes split over one, two and three ranks (host
// emulators, the host exchanger) for shardedBatchSteps steps of batches of views, each view
// drawn by the ranks in turn and each owner summing its gradients over the batch before one
// update, against one engine's StepBatch on the same batches with the same options: the loss and
// its terms (means over the views), the counts, the last view's image, and each rank's
// parameters and statistics must be the one engine's to the bit after every step. Taking an
// update after every view instead (one Step a view) must fail the comparison (checked where a
// step has several views and there are several ranks).
func TestShardedStepBatchMatchesOneEngine(t *testing.T) {
	devs := emuDevices(t, 3)
	for _, c := range shardedBatchCases() {
		b := c.batch
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			g, vs := fused.RandomBatch(c.seed, shardedN, shardedW, shardedH, shardedBatchViews)
			set, o := c.settings()
			want := trainWholeBatch(t, devs[0], b, set, o, g, vs)
			got, ranges := trainShardedBatch(t, devs, c.ranks, b, set, o, g, vs, modeBatch)
			for _, p := range compareBits(want, got, ranges) {
				t.Error(p)
			}
			last := len(got.res) - 1
			mutation := "not run (one view a step, or one rank)"
			if b > 1 && c.ranks > 1 {
				mut, _ := trainShardedBatch(t, devs, c.ranks, b, set, o, g, vs, modeUpdateEachView)
				// The mutation's result is its last view's, not the batch's: compare what it
				// trained.
				copy(mut.res, want.res)
				problems := compareBits(want, mut, ranges)
				if len(problems) == 0 {
					t.Error("an update after every view passes the comparison with one engine's batches")
				}
				mutation = fmt.Sprintf("fails as it must (%d problems, parameters relative L2 %.3g)", len(problems),
					check.RelErr(packed(mut.params[last]), packed(want.params[last])))
			}
			t.Logf("ranks %v, loss per step %.6g … %.6g; an update a view: %s; %.1f s",
				ranges, got.res[0].Loss, got.res[last].Loss, mutation, time.Since(start).Seconds())
		})
	}
}
