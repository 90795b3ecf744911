package train

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/io/ckpt"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Checkpoint sections. A checkpoint holds everything that resumes a run bit
// for bit (design.md §7): parameters, Adam moments and step, densification
// statistics, the trainer's step, RNG state and view order, the curve so
// far, and the resolved config.
const (
	secStep     = "trainer/step"
	secRNG      = "trainer/rng"
	secOrder    = "trainer/order"
	secCurve    = "trainer/curve"
	secConfig   = "config/yaml"
	secAdamStep = "adam/step"
	secStatsG   = "stats/grad_accum"
	secStatsC   = "stats/count"
	secStatsR   = "stats/max_radius"
)

// checkpoint reads the state back and queues the writing of checkpoints/step-NNNNN.ckpt
// (atomically) and the removal of the oldest beyond the number to keep.
func (t *Trainer) checkpoint() error {
	st, err := t.readState()
	if err != nil {
		return fmt.Errorf("train: reading the state back: %w", err)
	}
	f := &ckpt.File{}
	putGaussians(f, "params", st.Params)
	putGaussians(f, "adam_m", st.AdamM)
	putGaussians(f, "adam_v", st.AdamV)
	f.PutUint64(secAdamStep, []uint64{uint64(st.AdamStep)})
	f.PutFloat32(secStatsG, st.Stats.GradAccum)
	f.PutFloat32(secStatsR, st.Stats.MaxRadius)
	counts := make([]uint64, len(st.Stats.Count))
	for i, c := range st.Stats.Count {
		counts[i] = uint64(c)
	}
	f.PutUint64(secStatsC, counts)
	f.PutUint64(secStep, []uint64{uint64(t.step)})
	rng, err := t.pcg.MarshalBinary()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	f.PutBytes(secRNG, rng)
	order := make([]uint64, 0, len(t.order)+1)
	order = append(order, uint64(t.orderPos))
	for _, v := range t.order {
		order = append(order, uint64(v))
	}
	f.PutUint64(secOrder, order)
	f.PutBytes(secCurve, encodeCurve(t.curve))
	f.PutBytes(secConfig, t.opt.ConfigYAML)
	f.PutBytes(secRunID, []byte(t.runID))
	dir := filepath.Join(t.opt.OutDir, "checkpoints")
	path := filepath.Join(dir, fmt.Sprintf("step-%05d.ckpt", t.step))
	keep := t.opt.KeepCheckpoints
	spare, slow := t.spare, t.slowWrite
	return t.writes.queue(func() (Saved, error) {
		if slow != nil {
			slow()
		}
		if err := ckpt.WriteFile(path, f); err != nil {
			return Saved{}, fmt.Errorf("train: %w", err)
		}
		if spare != nil {
			// Written: its arrays are free for a later checkpoint. The channel holds as
			// many states as the writer has jobs, so this never waits.
			select {
			case spare <- st:
			default:
			}
		}
		if keep > 0 {
			old, _ := filepath.Glob(filepath.Join(dir, "step-*.ckpt"))
			sort.Strings(old)
			for len(old) > keep {
				os.Remove(old[0])
				old = old[1:]
			}
		}
		return Saved{Kind: "checkpoint", Path: path}, nil
	}, t.emit)
}

// readState reads the engine's state for a checkpoint: into the arrays of an earlier
// checkpoint's state whose file is written, when the engine can (engine.StateReader), so
// that each checkpoint after the first fills memory already mapped instead of 640 MB of fresh
// pages at a million splats.
func (t *Trainer) readState() (*engine.State, error) {
	r, ok := t.eng.(engine.StateReader)
	if !ok {
		return t.eng.State()
	}
	if t.spare == nil {
		t.spare = make(chan *engine.State, 2) // the writer holds at most two jobs
	}
	st := &engine.State{}
	select {
	case st = <-t.spare:
		t.reused++
	default:
	}
	if err := r.StateInto(st); err != nil {
		return nil, err
	}
	return st, nil
}

// Resume restores a checkpoint written by a run with the same dataset.
func (t *Trainer) Resume(path string) error {
	f, err := ckpt.ReadFile(path)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	st, step, err := readState(f)
	if err != nil {
		return fmt.Errorf("train: %s: %w", path, err)
	}
	rng, err := f.Bytes(secRNG)
	if err != nil {
		return fmt.Errorf("train: %s: %w", path, err)
	}
	if err := t.pcg.UnmarshalBinary(rng); err != nil {
		return fmt.Errorf("train: %s: RNG state: %w", path, err)
	}
	order, err := f.Uint64(secOrder)
	if err != nil || len(order) == 0 {
		return fmt.Errorf("train: %s: view order: %v", path, err)
	}
	t.orderPos = int(order[0])
	t.order = t.order[:0]
	for _, v := range order[1:] {
		if int(v) >= len(t.ds.Train) {
			return fmt.Errorf("train: %s: view %d in the saved order, but the dataset has %d training views (a different dataset?)", path, v, len(t.ds.Train))
		}
		t.order = append(t.order, int(v))
	}
	// The run goes on under its own name; a checkpoint from before runs had one keeps the
	// name this trainer was given.
	if id, err := runIDOf(f); err != nil {
		return fmt.Errorf("train: %s: %w", path, err)
	} else if id != "" {
		t.runID = id
	}
	if curve, err := f.Bytes(secCurve); err == nil {
		t.curve = decodeCurve(curve)
	}
	if err := t.eng.SetState(st); err != nil {
		return fmt.Errorf("train: %s: %w", path, err)
	}
	t.step = step
	return nil
}

// CheckpointConfig returns the resolved config stored in a checkpoint.
func CheckpointConfig(path string) ([]byte, error) {
	f, err := ckpt.ReadFile(path)
	if err != nil {
		return nil, err // it names the file; a "train:" before it misleads other commands' users
	}
	b, err := f.Bytes(secConfig)
	if err != nil {
		return nil, fmt.Errorf("train: %s: %w", path, err)
	}
	return b, nil
}

// LoadCheckpoint reads the engine state and step of a checkpoint (for
// rendering a checkpoint without training).
func LoadCheckpoint(path string) (*engine.State, int, error) {
	f, err := ckpt.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("train: %w", err)
	}
	st, step, err := readState(f)
	if err != nil {
		return nil, 0, fmt.Errorf("train: %s: %w", path, err)
	}
	return st, step, nil
}

func readState(f *ckpt.File) (*engine.State, int, error) {
	var st engine.State
	var err error
	if st.Params, err = getGaussians(f, "params"); err != nil {
		return nil, 0, err
	}
	if st.AdamM, err = getGaussians(f, "adam_m"); err != nil {
		return nil, 0, err
	}
	if st.AdamV, err = getGaussians(f, "adam_v"); err != nil {
		return nil, 0, err
	}
	as, err := f.Uint64(secAdamStep)
	if err != nil || len(as) != 1 {
		return nil, 0, fmt.Errorf("section %s: %v", secAdamStep, err)
	}
	st.AdamStep = int64(as[0])
	if st.Stats.GradAccum, err = f.Float32(secStatsG); err != nil {
		return nil, 0, err
	}
	if st.Stats.MaxRadius, err = f.Float32(secStatsR); err != nil {
		return nil, 0, err
	}
	counts, err := f.Uint64(secStatsC)
	if err != nil {
		return nil, 0, err
	}
	st.Stats.Count = make([]int32, len(counts))
	for i, c := range counts {
		st.Stats.Count[i] = int32(c)
	}
	step, err := f.Uint64(secStep)
	if err != nil || len(step) != 1 {
		return nil, 0, fmt.Errorf("section %s: %v", secStep, err)
	}
	n := st.Params.Len()
	if st.AdamM.Len() != n || st.AdamV.Len() != n || len(st.Stats.GradAccum) != n || len(st.Stats.MaxRadius) != n || len(st.Stats.Count) != n {
		return nil, 0, fmt.Errorf("sections disagree on the number of Gaussians (%d parameters)", n)
	}
	return &st, int(step[0]), nil
}

func putGaussians(f *ckpt.File, prefix string, g *splat.Gaussians) { f.PutGaussians(prefix, g) }

func getGaussians(f *ckpt.File, prefix string) (*splat.Gaussians, error) { return f.Gaussians(prefix) }

// encodeCurve packs the curve as little-endian (step, loss, psnr, test) rows.
func encodeCurve(c []curvePoint) []byte {
	b := make([]byte, 0, len(c)*32)
	for _, p := range c {
		for _, v := range []float64{float64(p.Step), p.Loss, p.PSNR, p.TestPSNR} {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return b
}

func decodeCurve(b []byte) []curvePoint {
	var c []curvePoint
	for len(b) >= 32 {
		v := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[i*8:])) }
		c = append(c, curvePoint{Step: int(v(0)), Loss: v(1), PSNR: v(2), TestPSNR: v(3)})
		b = b[32:]
	}
	return c
}
