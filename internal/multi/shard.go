package multi

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Sharded trains one scene split over several ranks, Gaussian sharding (docs/sharding.md): rank
// r, a fused engine on its own device, owns the splats of global ids [lo_r, hi_r), contiguous
// ranges in rank order split as evenly as possible (Shares), with their parameters, moments and
// statistics. A training step of one view is drawn by one rank, its renderer, from the records
// every owner packs of its visible splats, sent through an Exchanger; the renderer's gradients
// of the records go back to their owners the same way, and each owner updates its own splats.
//
// The step runs in phases, every rank on its own goroutine in each (pack; records to the
// renderer; the renderer's forward and backward; gradients to the owners; the owners' updates),
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
	// next is the rank that renders the next Step's view: Step k of the engine (from 0, failed
	// ones included) renders on rank k mod Ranks.
	next int
}

// shardRank is one rank: its engine, its device, its range of global ids and its receive
// buffers, which grow to the largest step's words and stay.
type shardRank struct {
	eng    *fused.Engine
	dev    gpu.Device
	lo, hi int
	// recsIn holds the records a renderer receives; gradsIn an owner's gradient records.
	recsIn, gradsIn gpu.Buffer
	// none is what a rank sends in a round where it sends nothing (an Exchange names a buffer).
	none gpu.Buffer
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

// Step trains one step of the view v, rendered by the next rank in turn (round robin: the
// engine's k-th Step, from 0, renders on rank k mod Ranks). See StepOn.
func (s *Sharded) Step(v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	r := s.next
	s.next = (s.next + 1) % len(s.ranks)
	return s.StepOn(v, o, r)
}

// StepOn trains one step of the view v, rendered by rank renderer: every owner packs its
// visible splats (PackVisible, with its first global id as the base) and sends the records to
// the renderer, which receives them in rank order (so in global-id order, as one engine draws
// them), runs the forward, the loss and the backward over them (RenderRecordsBackward) and
// sends each owner its records' gradients, in the order it sent them; every owner then takes
// its update (StepFromGradients), one with nothing in view as well, as one engine's Step moves
// every splat. The renderer packs its own splats again before its update: drawing the records
// replaced the projection its gradients map back through. The result is the renderer's (loss
// and its terms, tile entries, the image when o.WantImage) with the visible splats and the
// elements Adam dropped summed over the owners; no stage is timed.
//
// A failure before the owners' updates leaves every rank's splats as they were. A failure of an
// update leaves the ranks that did update one step ahead of those that did not; the error names
// them.
func (s *Sharded) StepOn(v *engine.View, o engine.StepOptions, renderer int) (engine.StepResult, error) {
	n := len(s.ranks)
	switch {
	case renderer < 0 || renderer >= n:
		return engine.StepResult{}, fmt.Errorf("multi: sharded step: renderer %d of %d ranks", renderer, n)
	case o.MCMC != engine.MCMCStep{}:
		// Refused here rather than by every owner after the render: its regularisers are means
		// over the whole scene and its noise is keyed by global id.
		return engine.StepResult{}, errors.New("multi: sharded step: MCMC's regularisers and noise need the whole scene's splat count and global ids")
	}
	cam := &v.Camera
	rw, gw := fused.RecordWords(s.set.Render), fused.GradRecordWords(s.set.Render, s.set.AbsGrad)

	recs, counts := make([]gpu.Buffer, n), make([]int, n)
	if err := s.parallel("pack visible", func(r int, rk *shardRank) error {
		var err error
		recs[r], counts[r], err = rk.eng.PackVisible(cam, o.SHDegree, uint32(rk.lo))
		return err
	}); err != nil {
		return engine.StepResult{}, err
	}
	total := 0
	for _, c := range counts {
		total += c
	}

	// Every buffer the exchanges need, grown here so that no rank can fail before its Exchange.
	var errs []error
	if err := grow(s.ranks[renderer], &s.ranks[renderer].recsIn, total*rw); err != nil {
		errs = append(errs, fmt.Errorf("multi: sharded step: rank %d (renderer): records of %d splats: %w", renderer, total, err))
	}
	for r, rk := range s.ranks {
		if err := grow(rk, &rk.gradsIn, counts[r]*gw); err != nil {
			errs = append(errs, fmt.Errorf("multi: sharded step: rank %d: gradients of %d records: %w", r, counts[r], err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return engine.StepResult{}, err
	}

	if err := s.parallel("records to the renderer", func(r int, rk *shardRank) error {
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
		return engine.StepResult{}, err
	}

	rk := s.ranks[renderer]
	grads, res, err := rk.eng.RenderRecordsBackward(v, rk.recsIn, total, o)
	if err != nil {
		return engine.StepResult{}, fmt.Errorf("multi: sharded step: rank %d (renderer): %w", renderer, err)
	}

	if err := s.parallel("gradients to the owners", func(r int, rk *shardRank) error {
		x := &Exchange{Send: rk.none, SendCounts: make([]int, n), Recv: rk.gradsIn, RecvCap: counts[r] * gw}
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
		return engine.StepResult{}, err
	}

	owned := make([]engine.StepResult, n)
	if err := s.parallel("step from gradients", func(r int, rk *shardRank) error {
		if r == renderer {
			if _, c, err := rk.eng.PackVisible(cam, o.SHDegree, uint32(rk.lo)); err != nil {
				return fmt.Errorf("packing again after the render: %w", err)
			} else if c != counts[r] {
				return fmt.Errorf("packing again after the render: %d records, %d before", c, counts[r])
			}
		}
		var err error
		owned[r], err = rk.eng.StepFromGradients(cam, rk.gradsIn, counts[r], o)
		return err
	}); err != nil {
		return engine.StepResult{}, err
	}
	res.Visible, res.NonFinite = 0, 0
	for _, or := range owned {
		res.Visible += or.Visible
		res.NonFinite += or.NonFinite
	}
	return res, nil
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
		out = append(out, fmt.Errorf("multi: sharded step: %s: %s: %w", phase, which, causes[m]))
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
	out := &splat.Gaussians{}
	for _, p := range parts {
		out.Means = append(out.Means, p.Means...)
		out.LogScales = append(out.LogScales, p.LogScales...)
		out.Quats = append(out.Quats, p.Quats...)
		out.OpacityLogits = append(out.OpacityLogits, p.OpacityLogits...)
		out.SH = append(out.SH, p.SH...)
	}
	return out, nil
}

// Stats gathers the ranks' densification statistics in rank order, as Gaussians does: each
// splat's statistics live on its owner alone.
func (s *Sharded) Stats() (engine.Stats, error) {
	var out engine.Stats
	for r, rk := range s.ranks {
		st, err := rk.eng.Stats()
		if err != nil {
			return engine.Stats{}, fmt.Errorf("multi: sharded: rank %d: %w", r, err)
		}
		out.GradAccum = append(out.GradAccum, st.GradAccum...)
		out.Count = append(out.Count, st.Count...)
		out.MaxRadius = append(out.MaxRadius, st.MaxRadius...)
	}
	return out, nil
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
		for _, b := range []gpu.Buffer{rk.recsIn, rk.gradsIn, rk.none} {
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
