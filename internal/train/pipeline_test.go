package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// pipelined puts a CPU engine behind engine.Pipeliner the way the fused engine behaves: at
// most two steps queued, results in order, and every other call refused while a step is
// queued, so that a trainer touching the engine between a Submit and its Collect fails.
type pipelined struct {
	engine.Engine
	queue     []queuedStep
	maxQueued int
}

type queuedStep struct {
	vs []*engine.View
	o  engine.StepOptions
}

var _ engine.Pipeliner = (*pipelined)(nil)

var errQueued = errors.New("test engine: steps queued")

func (p *pipelined) idle() error {
	if len(p.queue) > 0 {
		return fmt.Errorf("%w: %d", errQueued, len(p.queue))
	}
	return nil
}

func (p *pipelined) Submit(v *engine.View, o engine.StepOptions) error {
	return p.SubmitBatch([]*engine.View{v}, o)
}

func (p *pipelined) SubmitBatch(vs []*engine.View, o engine.StepOptions) error {
	if len(p.queue) == 2 {
		return errors.New("test engine: a third step submitted")
	}
	p.queue = append(p.queue, queuedStep{slices.Clone(vs), o})
	p.maxQueued = max(p.maxQueued, len(p.queue))
	return nil
}

// Collect runs the oldest step now: with nothing else allowed in between, the CPU engine
// reaches the same state as if it had run at Submit.
func (p *pipelined) Collect() (engine.StepResult, error) {
	if len(p.queue) == 0 {
		return engine.StepResult{}, errors.New("test engine: nothing submitted")
	}
	q := p.queue[0]
	p.queue = p.queue[1:]
	return p.Engine.StepBatch(q.vs, q.o)
}

func (p *pipelined) Step(v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	return p.StepBatch([]*engine.View{v}, o)
}

func (p *pipelined) StepBatch(vs []*engine.View, o engine.StepOptions) (engine.StepResult, error) {
	if err := p.idle(); err != nil {
		return engine.StepResult{}, err
	}
	return p.Engine.StepBatch(vs, o)
}

func (p *pipelined) Render(c *camera.Camera, sh int, bg [3]float32) ([]float32, error) {
	if err := p.idle(); err != nil {
		return nil, err
	}
	return p.Engine.Render(c, sh, bg)
}

func (p *pipelined) Gaussians() (*splat.Gaussians, error) {
	if err := p.idle(); err != nil {
		return nil, err
	}
	return p.Engine.Gaussians()
}

func (p *pipelined) Shapes() (engine.Shapes, error) {
	if err := p.idle(); err != nil {
		return engine.Shapes{}, err
	}
	return p.Engine.Shapes()
}

func (p *pipelined) Stats() (engine.Stats, error) {
	if err := p.idle(); err != nil {
		return engine.Stats{}, err
	}
	return p.Engine.Stats()
}

func (p *pipelined) ResetStats() error {
	if err := p.idle(); err != nil {
		return err
	}
	return p.Engine.ResetStats()
}

func (p *pipelined) Apply(e engine.Edit) error {
	if err := p.idle(); err != nil {
		return err
	}
	return p.Engine.Apply(e)
}

func (p *pipelined) Relocate(r engine.Relocation) error {
	if err := p.idle(); err != nil {
		return err
	}
	return p.Engine.Relocate(r)
}

func (p *pipelined) ResetOpacity(m float32) error {
	if err := p.idle(); err != nil {
		return err
	}
	return p.Engine.ResetOpacity(m)
}

func (p *pipelined) State() (*engine.State, error) {
	if err := p.idle(); err != nil {
		return nil, err
	}
	return p.Engine.State()
}

func (p *pipelined) SetState(s *engine.State) error {
	if err := p.idle(); err != nil {
		return err
	}
	return p.Engine.SetState(s)
}

// TestPipelinedTrainingIsTheSame trains with densification, resets, evaluation, previews and
// checkpoints, once step by step and once on a pipelining engine, and requires the very same
// Gaussians: the trainer must draw its views and backgrounds in the same order and leave the
// engine alone while a step is queued (the test engine refuses anything else then).
func TestPipelinedTrainingIsTheSame(t *testing.T) {
	ds := smallDemo(t)
	for _, c := range []struct {
		random bool
		batch  int
	}{{false, 1}, {true, 1}, {true, 3}} {
		t.Run(fmt.Sprintf("random-background=%v/batch=%d", c.random, c.batch), func(t *testing.T) {
			opt := testOptions(t.TempDir())
			opt.RandomBackground, opt.BatchSize = c.random, c.batch
			a := newTrainer(t, ds, opt)
			if err := a.Run(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			want, _ := a.eng.Gaussians()

			opt.OutDir = t.TempDir()
			b := newTrainer(t, ds, opt)
			p := &pipelined{Engine: b.eng}
			b.eng = p
			if err := b.Run(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if p.maxQueued != 2 {
				t.Fatalf("at most %d steps were queued at once: the run did not pipeline", p.maxQueued)
			}
			got, _ := p.Gaussians()
			equalGaussians(t, got, want)
		})
	}
}

// Cancelling a pipelined run finishes the step already queued and checkpoints after it.
func TestPipelinedCancel(t *testing.T) {
	ds := smallDemo(t)
	dir := t.TempDir()
	tr := newTrainer(t, ds, testOptions(dir))
	tr.eng = &pipelined{Engine: tr.eng}
	ctx, cancel := context.WithCancel(context.Background())
	err := tr.Run(ctx, func(e Event) {
		if p, ok := e.(Progress); ok && p.Step == 7 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	if s := tr.Step(); s != 7 && s != 8 {
		t.Fatalf("stopped at step %d after a cancel at 7", s)
	}
	name := fmt.Sprintf("step-%05d.ckpt", tr.Step())
	if _, err := os.Stat(filepath.Join(dir, "checkpoints", name)); err != nil {
		t.Fatalf("no checkpoint at the last step run: %v", err)
	}
}
