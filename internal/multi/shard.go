package multi

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Sharded trains one scene split over several ranks, Gaussian sharding (docs/sharding.md): rank
// r, a fused engine on its own device, owns the splats of global ids [lo_r, hi_r), contiguous
// ranges in rank order split as evenly as possible (Shares), with their parameters, moments and
// statistics. Each view of a training step is drawn by one rank, its renderer, from the records
// every owner packs of its visible splats, sent through an Exchanger; the renderer's gradients
// of the records go back to their owners the same way, and each owner sums its splats'
// gradients over the step's views and updates them once.
//
// The step runs in phases, every rank on its own goroutine in each (for each view: pack;
// records to the renderer; the renderer's forward and backward; gradients to the owners; then
// the owners' backwards and updates),
// and the host starts a phase only once every rank has finished the last one without error.
// In an exchange phase a rank does nothing but call Exchange with counts and buffers the host
// prepared before the phase began, so every rank reaches every exchange of a phase that
// starts, none reaches an exchange of a phase that does not, and a round that cannot run fails
// on every rank (the Exchanger's contract): no rank waits for one that will not come. (An
// NCCLExchanger whose calls fail after its counts' rendezvous is the exception its own
// documentation gives: abort its communicators.)
type Sharded struct {
	ranks []*shardRank
	x     Exchanger
	set   engine.Settings
	owned bool
	// next is the rank that renders the next step's first view: the engine's k-th view (from 0,
	// over its steps' batches, failed steps' included) renders on rank k mod Ranks.
	next int
}

// shardRank is one rank: its engine, its device, its range of global ids and its receive
// buffers, which grow to the largest step's words and stay.
type shardRank struct {
	eng    *fused.Engine
	dev    gpu.Device
	lo, hi int
	// recsIn holds the records a renderer receives; gradsIn[j] an owner's gradient records of
	// a step's view j, kept until the owner's backwards after the step's last view.
	recsIn  gpu.Buffer
	gradsIn []gpu.Buffer
	// none is what a rank sends in a round where it sends nothing (an Exchange names a buffer).
	none gpu.Buffer
	// shapes and stats receive the rank's share while ShapesInto and StatsInto gather them.
	shapes engine.Shapes
	stats  engine.Stats
}

// NewSharded splits g over the devices, rank r of devs owning the r-th of Shares(g.Len(),
// len(devs)), each rank a fused engine with settings set and opts, their steps exchanged through
// x, which must serve len(devs) ranks. With own the engine closes the devices and the exchanger
// when it is closed, or when NewSharded fails.
func NewSharded(devs []gpu.Device, x Exchanger, set engine.Settings, g *splat.Gaussians, own bool, opts ...fused.Option) (*Sharded, error) {
	s := &Sharded{x: x, set: set, owned: own}
	fail := func(err error) (*Sharded, error) {
		return nil, errors.Join(err, s.closeRanks(), s.closeOwned(devs))
	}
	switch {
	case len(devs) < 1 || x == nil:
		return fail(errors.New("multi: sharded: no devices or no exchanger"))
	case g.Len() < len(devs):
		return fail(fmt.Errorf("multi: sharded: %d Gaussians for %d ranks: every rank owns at least one", g.Len(), len(devs)))
	}
	for r, sh := range Shares(g.Len(), len(devs)) {
		rk := &shardRank{dev: devs[r], lo: sh[0], hi: sh[1]}
		s.ranks = append(s.ranks, rk)
		var err error
		if rk.eng, err = fused.New(rk.dev, set, g.Range(rk.lo, rk.hi), opts...); err != nil {
			return fail(fmt.Errorf("multi: sharded: rank %d (splats [%d, %d)): %w", r, rk.lo, rk.hi, err))
		}
		if rk.none, err = rk.dev.Alloc(16); err != nil {
			return fail(fmt.Errorf("multi: sharded: rank %d: %w", r, err))
		}
	}
	return s, nil
}

// Ranks is the number of ranks.
func (s *Sharded) Ranks() int { return len(s.ranks) }

// Len is the number of Gaussians over all ranks.
func (s *Sharded) Len() int { return s.ranks[len(s.ranks)-1].hi }

// Range is the global ids rank r owns: [lo, hi).
func (s *Sharded) Range(r int) (lo, hi int) { return s.ranks[r].lo, s.ranks[r].hi }

// Step trains one step of the view v, rendered by the next rank in turn: StepBatch of one view.
func (s *Sharded) Step(v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	return s.StepBatch([]*engine.View{v}, o)
}

// StepBatch trains one step over the batch of views vs, as one fused engine's StepBatch does:
// the views are rendered round robin, continuing from the last step's (the engine's views
// from its first step on, failed steps' included, counted one after the other: view j of a
// step whose first is the engine's k-th view renders on rank (k+j) mod Ranks), and every owner
// sums its splats' gradients over the views before one update. See stepViews.
func (s *Sharded) StepBatch(vs []*engine.View, o engine.StepOptions) (engine.StepResult, error) {
	renderers := make([]int, len(vs))
	for j := range renderers {
		renderers[j] = (s.next + j) % len(s.ranks)
	}
	s.next = (s.next + len(vs)) % len(s.ranks)
	return s.stepViews(vs, o, renderers)
}

// StepOn trains one step of the view v, rendered by rank renderer. See stepViews.
func (s *Sharded) StepOn(v *engine.View, o engine.StepOptions, renderer int) (engine.StepResult, error) {
	return s.stepViews([]*engine.View{v}, o, []int{renderer})
}

// stepViews trains one step over the views vs, view j rendered by rank renderers[j]. For each
// view in turn, every owner packs its visible splats (PackVisible, with its first global id as
// the base) and sends the records to the view's renderer, which receives them in rank order (so
// in global-id order, as one engine draws them), runs the forward, the loss and the backward
// over them (RenderRecordsBackward) and sends each owner its records' gradients, in the order
// it sent them; each owner keeps every view's gradients. Once every view has been drawn, every
// owner takes the views' backwards in view order (BackwardFromGradients, the first replacing
// its gradients and the later ones adding to them, as one engine's StepBatch sums them) and
// then one update (UpdateFromGradients), one with nothing in view as well, as one engine's
// step moves every splat. An owner's backward maps view j's gradients through its projection
// of view j, which its packs of the later views and its own renders replaced, so it packs
// view j again first (project is deterministic: the same records; a step of one view on a rank
// that did not render it still has its pack). The backwards wait for every view's gradients
// so that a failed render or exchange leaves every rank's statistics, as well as its
// parameters and moments, as they were.
//
// The result is one engine's StepBatch's: the loss and its terms the means over the views
// (each the view's renderer's), the visible splats (summed over the owners) and the tile
// entries the rounded means, the elements Adam dropped summed over the owners, and the last
// view's image when o.WantImage; no stage is timed.
//
// A failure before the owners' backwards leaves every rank as it was. A failure in them or in
// an update leaves the ranks that did update one step ahead of those that did not, and the
// others' statistics with some views' sums; the error names the ranks.
func (s *Sharded) stepViews(vs []*engine.View, o engine.StepOptions, renderers []int) (engine.StepResult, error) {
	n := len(s.ranks)
	if len(vs) == 0 {
		return engine.StepResult{}, errors.New("multi: sharded step: a step needs at least one view")
	}
	for j, r := range renderers {
		if r < 0 || r >= n {
			return engine.StepResult{}, fmt.Errorf("multi: sharded step: view %d: renderer %d of %d ranks", j, r, n)
		}
	}
	counts := make([][]int, len(vs))
	views := make([]engine.StepResult, len(vs))
	for j, v := range vs {
		var err error
		tag := "step: "
		if len(vs) > 1 {
			tag = fmt.Sprintf("step, view %d of %d: ", j, len(vs))
		}
		if counts[j], views[j], err = s.drawView(j, tag, v, o, renderers[j], j == len(vs)-1); err != nil {
			return engine.StepResult{}, err
		}
	}

	owned := make([]engine.StepResult, n)
	scene := s.Len()
	if err := s.parallel("step: owners' backward and update", func(r int, rk *shardRank) error {
		o := o
		// MCMC's regularisers are means over the whole scene, and its noise is keyed by the
		// splat's id in it.
		o.MCMC.Scene, o.MCMC.Base = scene, uint32(rk.lo)
		for j, v := range vs {
			cam := &v.Camera
			if len(vs) > 1 || r == renderers[j] {
				if _, c, err := rk.eng.PackVisible(cam, o.SHDegree, uint32(rk.lo)); err != nil {
					return fmt.Errorf("view %d: packing again for the backward: %w", j, err)
				} else if c != counts[j][r] {
					return fmt.Errorf("view %d: packing again for the backward: %d records, %d before", j, c, counts[j][r])
				}
			}
			if err := rk.eng.BackwardFromGradients(cam, rk.gradsIn[j], counts[j][r], o, j > 0); err != nil {
				return fmt.Errorf("view %d: %w", j, err)
			}
		}
		var err error
		owned[r], err = rk.eng.UpdateFromGradients(o)
		return err
	}); err != nil {
		return engine.StepResult{}, err
	}

	// One engine's StepBatch reports the means over its views (fused's complete).
	var res engine.StepResult
	visible, entries := 0, 0
	for j, vr := range views {
		res.Loss += vr.Loss
		res.L1 += vr.L1
		res.MSE += vr.MSE
		res.SSIM += vr.SSIM
		entries += vr.Entries
		for _, c := range counts[j] {
			visible += c
		}
	}
	nv := len(vs)
	res.MeanOver(nv, visible, entries)
	res.Image = views[nv-1].Image
	for _, or := range owned {
		res.NonFinite += or.NonFinite
	}
	return res, nil
}

// drawView runs view j (v) of a step on rank renderer in three phases: every owner packs it,
// the records go to the renderer, which draws them and back-propagates, and the gradients go
// back to their owners, into each owner's gradsIn[j]. It returns each owner's record count and
// the renderer's result (its image only when last and o.WantImage). tag names the view in
// errors.
func (s *Sharded) drawView(j int, tag string, v *engine.View, o engine.StepOptions, renderer int, last bool) ([]int, engine.StepResult, error) {
	n := len(s.ranks)
	cam := &v.Camera
	gw := fused.GradRecordWords(s.set.Render, s.set.AbsGrad)
	counts, total, err := s.sendRecords(tag, cam, o.SHDegree, renderer)
	if err != nil {
		return nil, engine.StepResult{}, err
	}

	// The gradients' receive buffers, grown before their round so that no rank can fail in it.
	var errs []error
	for r, rk := range s.ranks {
		for len(rk.gradsIn) <= j {
			rk.gradsIn = append(rk.gradsIn, nil)
		}
		if err := grow(rk, &rk.gradsIn[j], counts[r]*gw); err != nil {
			errs = append(errs, fmt.Errorf("multi: sharded: %srank %d: gradients of %d records: %w", tag, r, counts[r], err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, engine.StepResult{}, err
	}

	rk := s.ranks[renderer]
	ro := o
	ro.WantImage = o.WantImage && last
	grads, res, err := rk.eng.RenderRecordsBackward(v, rk.recsIn, total, ro)
	if err != nil {
		return nil, engine.StepResult{}, fmt.Errorf("multi: sharded: %srank %d (renderer): %w", tag, renderer, err)
	}

	if err := s.parallel(tag+"gradients to the owners", func(r int, rk *shardRank) error {
		x := &Exchange{Send: rk.none, SendCounts: make([]int, n), Recv: rk.gradsIn[j], RecvCap: counts[r] * gw}
		if r == renderer {
			// The renderer's gradient records are in record order, so owner d's run is the
			// counts[d] records after the earlier owners': the Exchange's layout as it is.
			x.Send = orNone(grads, rk)
			for d, c := range counts {
				x.SendCounts[d] = c * gw
			}
		}
		if err := s.x.Exchange(r, rk.dev, x); err != nil {
			return err
		}
		want := make([]int, n)
		want[renderer] = counts[r]
		return checkRecvCounts(x.RecvCounts, want, gw, true, "gradient records")
	}); err != nil {
		return nil, engine.StepResult{}, err
	}
	return counts, res, nil
}

// sendRecords runs the first two phases of drawing a view on rank renderer: every owner packs
// the splats of its share in view of cam (PackVisible, with its first global id as the base),
// then sends the records to the renderer, which receives them into its recsIn in rank order, so
// in global-id order. It returns each owner's record count and their total. tag names the view
// in errors.
func (s *Sharded) sendRecords(tag string, cam *camera.Camera, shDegree, renderer int) ([]int, int, error) {
	n := len(s.ranks)
	rw := fused.RecordWords(s.set.Render)
	recs, counts := make([]gpu.Buffer, n), make([]int, n)
	if err := s.parallel(tag+"pack visible", func(r int, rk *shardRank) error {
		var err error
		recs[r], counts[r], err = rk.eng.PackVisible(cam, shDegree, uint32(rk.lo))
		return err
	}); err != nil {
		return nil, 0, err
	}
	total := 0
	for _, c := range counts {
		total += c
	}
	// Grown here, before the round, so that no rank can fail before its Exchange.
	if err := grow(s.ranks[renderer], &s.ranks[renderer].recsIn, total*rw); err != nil {
		return nil, 0, fmt.Errorf("multi: sharded: %srank %d (renderer): records of %d splats: %w", tag, renderer, total, err)
	}
	if err := s.parallel(tag+"records to the renderer", func(r int, rk *shardRank) error {
		x := &Exchange{Send: orNone(recs[r], rk), SendCounts: make([]int, n), Recv: orNone(rk.recsIn, rk)}
		x.SendCounts[renderer] = counts[r] * rw
		if r == renderer {
			x.RecvCap = total * rw
		}
		if err := s.x.Exchange(r, rk.dev, x); err != nil {
			return err
		}
		return checkRecvCounts(x.RecvCounts, counts, rw, r == renderer, "records")
	}); err != nil {
		return nil, 0, err
	}
	return counts, total, nil
}

// checkRecvCounts checks a round's receive counts (words from each rank) against the records
// each rank sent (counts, words each): all of them where the rank is their destination (dest),
// none where it is not.
func checkRecvCounts(got, counts []int, words int, dest bool, what string) error {
	if len(got) != len(counts) {
		return fmt.Errorf("receive counts of %s from %d ranks, want %d", what, len(got), len(counts))
	}
	for s, c := range counts {
		want := 0
		if dest {
			want = c * words
		}
		if got[s] != want {
			return fmt.Errorf("received %d words of %s from rank %d, want %d", got[s], what, s, want)
		}
	}
	return nil
}

// parallel runs f for every rank, each on its own goroutine, and waits for all of them: a
// phase of the step. Its error names the phase and the ranks that failed; ranks that failed
// alike (an exchange round fails on every rank with one message) are named together.
func (s *Sharded) parallel(phase string, f func(r int, rk *shardRank) error) error {
	errs := make([]error, len(s.ranks))
	var wg sync.WaitGroup
	for r, rk := range s.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, rk)
		}()
	}
	wg.Wait()
	var msgs []string
	ranks := map[string][]string{}
	causes := map[string]error{}
	for r, err := range errs {
		if err == nil {
			continue
		}
		m := err.Error()
		if _, ok := ranks[m]; !ok {
			msgs = append(msgs, m)
			causes[m] = err
		}
		ranks[m] = append(ranks[m], fmt.Sprint(r))
	}
	var out []error
	for _, m := range msgs {
		which := "rank " + ranks[m][0]
		if len(ranks[m]) > 1 {
			which = "ranks " + strings.Join(ranks[m], ", ")
		}
		out = append(out, fmt.Errorf("multi: sharded: %s: %s: %w", phase, which, causes[m]))
	}
	return errors.Join(out...)
}

// grow makes *b, a buffer on rk's device, hold at least words 32-bit words, with a quarter
// more room when it must grow, so that views of about the same size reuse it.
func grow(rk *shardRank, b *gpu.Buffer, words int) error {
	if *b != nil && (*b).Size() >= words*4 {
		return nil
	}
	if *b != nil {
		if err := rk.dev.Free(*b); err != nil {
			return err
		}
		*b = nil
	}
	nb, err := rk.dev.Alloc(max((words+words/4)*4, 16))
	if err != nil {
		return err
	}
	*b = nb
	return nil
}

// orNone is b, or rk's empty buffer where b is nil: an Exchange names a buffer even for a
// run of no words.
func orNone(b gpu.Buffer, rk *shardRank) gpu.Buffer {
	if b == nil {
		return rk.none
	}
	return b
}

// Gaussians gathers the ranks' parameters in rank order: global id order, the layout of one
// engine holding the whole scene.
func (s *Sharded) Gaussians() (*splat.Gaussians, error) {
	parts := make([]*splat.Gaussians, len(s.ranks))
	for r, rk := range s.ranks {
		var err error
		if parts[r], err = rk.eng.Gaussians(); err != nil {
			return nil, fmt.Errorf("multi: sharded: rank %d: %w", r, err)
		}
	}
	return splat.Concat(parts...), nil
}

// Close closes every rank and frees its buffers and, when owned, the devices and the
// exchanger.
func (s *Sharded) Close() error {
	devs := make([]gpu.Device, len(s.ranks))
	for r, rk := range s.ranks {
		devs[r] = rk.dev
	}
	return errors.Join(s.closeRanks(), s.closeOwned(devs))
}

func (s *Sharded) closeRanks() error {
	var errs []error
	for r, rk := range s.ranks {
		if rk.eng != nil {
			if err := rk.eng.Close(); err != nil {
				errs = append(errs, fmt.Errorf("multi: sharded: rank %d: %w", r, err))
			}
		}
		for _, b := range append([]gpu.Buffer{rk.recsIn, rk.none}, rk.gradsIn...) {
			if b != nil {
				if err := rk.dev.Free(b); err != nil {
					errs = append(errs, fmt.Errorf("multi: sharded: rank %d: %w", r, err))
				}
			}
		}
	}
	s.ranks = nil
	return errors.Join(errs...)
}

func (s *Sharded) closeOwned(devs []gpu.Device) error {
	if !s.owned {
		return nil
	}
	var errs []error
	if s.x != nil {
		errs = append(errs, s.x.Close())
	}
	for _, d := range devs {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	s.x, s.owned = nil, false
	return errors.Join(errs...)
}
