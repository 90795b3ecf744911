package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Options say how many steps to time and what to measure besides the stages.
type Options struct {
	Steps, Warmup int
	// Kernels times every launch of the step on its own (GPU engines with timing events).
	Kernels bool
	// Roofline measures the device's ceilings and places each stage under them (GPU engines
	// with timing events).
	Roofline bool
	// Profile, when set, is called as the first timed step starts and its stop function
	// after the last (a Go CPU profile of the timed steps, say).
	Profile func() (stop func(), err error)
	// Batch is the number of views each step takes (train.batch_size; 0 means 1). A batch's
	// step is timed whole: its stage table has the step alone, and the roofline is left out.
	Batch int
}

// Result is what a run measured (also as JSON).
type Result struct {
	Engine    string             `json:"engine"`
	Dataset   string             `json:"dataset"`
	Width     int                `json:"width"`
	Height    int                `json:"height"`
	Gaussians int                `json:"gaussians"`
	Steps     int                `json:"steps"`
	Batch     int                `json:"batch_views"`
	StageMs   map[string]float64 `json:"stage_ms_median"`
	StepMs    float64            `json:"step_ms_median"`
	// GPU engines with graphs: as many steps again, each replayed as one graph: their device
	// time (no host in it) and wall time.
	GraphDeviceMs float64 `json:"graph_device_ms_median,omitempty"`
	GraphWallMs   float64 `json:"graph_wall_ms_median,omitempty"`
	// GPU engines that pipeline: as many steps again, submitted as training submits them (the
	// next step queued behind the one running, untimed), launch by launch and as graphs: the
	// wall time per step of the whole run, what a training step costs without the trainer.
	PipelinedMs      float64 `json:"pipelined_ms_per_step,omitempty"`
	PipelinedGraphMs float64 `json:"pipelined_graph_ms_per_step,omitempty"`
	StepsPerSec      float64 `json:"steps_per_sec"`
	Entries          int     `json:"tile_entries_last"`
	// PeakDeviceBytes is the most device memory the GPU engine's buffers held at once (0 and
	// left out for the CPU engine).
	PeakDeviceBytes int64     `json:"peak_device_bytes,omitempty"`
	Roofline        *Roofline `json:"roofline,omitempty"`
	// --kernels: each launch of the step in order, its median device time.
	Launches []Launch `json:"launches,omitempty"`
	// Notes: what the device lacks and the run skipped for it (graph capture, timing events).
	Notes []string `json:"notes,omitempty"`
}

type Launch struct {
	Index  int     `json:"index"`
	Kernel string  `json:"kernel"`
	Ms     float64 `json:"ms_median"`
	Block  int     `json:"block_threads"`
	// What the backend's compiler reports (zero where it reports nothing).
	Registers   int `json:"registers"`
	LocalBytes  int `json:"local_bytes"`
	SharedBytes int `json:"shared_bytes"`
	BlocksPerSM int `json:"blocks_per_sm"`
}

// Roofline is --roofline's report: the measured ceilings, the step's size as the traffic
// model takes it, and every stage under the ceilings.
type Roofline struct {
	CopyGBs    float64 `json:"copy_gb_per_s"`
	FP32GFlops float64 `json:"fp32_gflop_per_s"`
	Visible    int     `json:"visible_median"`
	Entries    int     `json:"tile_entries_median"`
	// How far the rasterizer walked the lists (fused.Engine.RasterWalk): entries the tiles
	// read, (entry, pixel) pairs the pixels evaluated, distinct splats the entries name.
	WalkedEntries int64 `json:"walked_entries_median"`
	WalkedPairs   int64 `json:"walked_pairs_median"`
	WalkedSplats  int64 `json:"walked_splats_median"`
	// The longest tile's walk (the forward's serial path: one block walks a tile) and the
	// tiles' count, for the mean walk beside it.
	WalkedLongest int64           `json:"walked_longest_tile_median"`
	Tiles         int64           `json:"tiles"`
	Stages        []StageRoofline `json:"stages"`
}

type StageRoofline struct {
	Stage           string  `json:"stage"`
	Ms              float64 `json:"ms_median"`
	MinBytes        int64   `json:"min_bytes"`
	MinFlops        int64   `json:"min_flops"`
	GBs             float64 `json:"achieved_gb_per_s"`
	GFlops          float64 `json:"achieved_gflop_per_s"`
	MemoryFraction  float64 `json:"copy_fraction"`
	ComputeFraction float64 `json:"fp32_fraction"`
	Bound           string  `json:"bound"`
}

// Run times eng's step with so over views (their first min(len, Steps) cycled, each warmed up
// once on a GPU engine so that no timed step uploads a target) and returns the medians. set is
// the engine's settings, which the roofline's traffic model reads. It stops between steps
// once ctx is done.
func Run(ctx context.Context, eng engine.Engine, views []dataset.View, so engine.StepOptions, set engine.Settings, o Options) (*Result, error) {
	so.WantTimings = true
	stages := map[string][]float64{}
	var stopProfile func()
	var total, visible, entries []float64
	var walks []fused.Walk
	var last engine.StepResult
	fe, onGPU := eng.(*fused.Engine)
	nv := min(len(views), o.Steps)
	warmup := o.Warmup
	if onGPU {
		fe.SetGraphs(false) // launch by launch first, with an event between stages
		warmup = max(warmup, nv)
	}
	batch := max(o.Batch, 1)
	views = views[:nv]
	step := func(j int) (engine.StepResult, error) {
		if err := ctx.Err(); err != nil {
			return engine.StepResult{}, err // interrupted: stop between steps
		}
		return eng.StepBatch(batchOf(views, j, batch), so)
	}
	for i := 0; i < warmup+o.Steps; i++ {
		t0 := time.Now()
		res, err := step(i)
		if err != nil {
			return nil, err
		}
		el := time.Since(t0)
		if i < warmup {
			continue
		}
		if i == warmup && o.Profile != nil {
			if stopProfile, err = o.Profile(); err != nil {
				return nil, err
			}
		}
		total = append(total, float64(el.Microseconds())/1000)
		for k, d := range res.Timings {
			stages[k] = append(stages[k], float64(d.Microseconds())/1000)
		}
		visible = append(visible, float64(res.Visible))
		entries = append(entries, float64(res.Entries))
		if o.Roofline && onGPU {
			// Outside the timed interval: the counts' download is not part of the step.
			wk, err := fe.RasterWalk()
			if err != nil {
				return nil, err
			}
			walks = append(walks, wk)
		}
		last = res
	}
	if stopProfile != nil {
		stopProfile()
	}
	r := &Result{Engine: eng.Name(), Width: views[0].Camera.Width, Height: views[0].Camera.Height,
		Gaussians: eng.Len(), Steps: o.Steps, Batch: batch, StageMs: map[string]float64{}, StepMs: median(total), Entries: last.Entries}
	for k, v := range stages {
		r.StageMs[k] = median(v)
	}
	r.StepsPerSec = 1000 / r.StepMs
	if !onGPU {
		return r, nil
	}
	// The same number of steps replayed as one graph each: their device time is the step's
	// without the host in it, their wall time what graphs would cost a step.
	fe.SetGraphs(true)
	var dev, wall []float64
	for i := 0; i < 2+o.Steps; i++ {
		t0 := time.Now()
		res, err := step(i)
		if err != nil {
			return nil, err
		}
		if d, ok := res.Timings[engine.StageStep]; ok && i >= 2 {
			wall = append(wall, float64(time.Since(t0).Microseconds())/1000)
			dev = append(dev, float64(d.Microseconds())/1000)
		}
	}
	r.GraphDeviceMs, r.GraphWallMs = median(dev), median(wall) // 0 without graphs
	for _, graphs := range []bool{false, true} {
		fe.SetGraphs(graphs)
		ms, err := pipelined(ctx, fe, views, batch, so, o.Steps)
		if err != nil {
			return nil, err
		}
		if graphs {
			r.PipelinedGraphMs = ms
		} else {
			r.PipelinedMs = ms
		}
	}
	_, r.PeakDeviceBytes = fe.DeviceBytes()
	r.Notes = fe.Notes()
	if !fe.HasEvents() {
		if o.Kernels || o.Roofline {
			r.Notes = append(r.Notes, "--kernels and --roofline need timing events: skipped")
		}
		return r, nil
	}
	var err error
	if o.Kernels {
		if r.Launches, err = timeLaunches(fe, o.Steps, step); err != nil {
			return nil, err
		}
	}
	if o.Roofline && batch > 1 {
		r.Notes = append(r.Notes, "--roofline models one view a step: skipped for a batch")
	} else if o.Roofline {
		w := fused.Workload{Gaussians: r.Gaussians, Visible: int(median(visible)), Entries: int(median(entries)),
			Width: r.Width, Height: r.Height, SHDegree: so.SHDegree, AccumulateStats: so.AccumulateStats,
			Walk: medianWalk(walks)}
		if r.Roofline, err = measureRoofline(fe, set, w, r.StageMs); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// measureRoofline measures fe's device ceilings (after the timed steps, so that the copy's
// buffers do not share the device with them) and places every stage's median time stageMs
// under them, for a step of w's size; w's render, binning, loss and Adam settings are filled
// in from set.
func measureRoofline(fe *fused.Engine, set engine.Settings, w fused.Workload, stageMs map[string]float64) (*Roofline, error) {
	w.TileSize = set.TileSize
	w.Ray = set.Render == prep.Ray
	w.ConicBin = set.BinMode == engine.BinGPUConic
	w.SSIM = set.Loss.UsesSSIM()
	w.AdamVisibleOnly = set.Adam.VisibleOnly
	w.AdamVisibleSH = set.Adam.VisibleOnlySH
	costs, err := fused.MinimalCosts(w)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	ceil, err := fe.Ceilings(fused.CeilingOptions{})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	out := &Roofline{CopyGBs: ceil.CopyGBs, FP32GFlops: ceil.FP32GFlops, Visible: w.Visible, Entries: w.Entries,
		WalkedEntries: w.Walk.Entries, WalkedPairs: w.Walk.Pairs, WalkedSplats: w.Walk.Splats,
		WalkedLongest: w.Walk.Longest, Tiles: w.Walk.Tiles}
	for _, cost := range costs {
		ms, ok := stageMs[cost.Stage]
		if !ok {
			continue
		}
		st := StageRoofline{Stage: cost.Stage, Ms: ms, MinBytes: cost.Bytes, MinFlops: cost.Flops}
		// cpu-conic projects, bins and sorts on the host: those times are not the device's.
		if set.BinMode == engine.BinCPUConic && (cost.Stage == engine.StageProject || cost.Stage == engine.StageBin || cost.Stage == engine.StageSort) {
			st.Bound = "host"
		} else {
			p := fused.Roofline(cost, ms, ceil)
			st.GBs, st.GFlops, st.MemoryFraction, st.ComputeFraction, st.Bound = p.GBs, p.GFlops, p.MemoryFraction, p.ComputeFraction, p.Bound
		}
		out.Stages = append(out.Stages, st)
	}
	return out, nil
}

// pipelined runs steps steps over views (cycled) as the trainer does, each submitted behind
// the one before and collected after, without timings, and returns the wall time per step
// from the first submission to the last result.
func pipelined(ctx context.Context, fe *fused.Engine, views []dataset.View, batch int, so engine.StepOptions, steps int) (float64, error) {
	so.WantTimings = false
	submit := func(j int) error { return fe.SubmitBatch(batchOf(views, j, batch), so) }
	t0 := time.Now()
	if err := submit(0); err != nil {
		return 0, err
	}
	for i := 0; i < steps; i++ {
		if i+1 < steps && ctx.Err() == nil {
			if err := submit(i + 1); err != nil {
				return 0, err
			}
		}
		if _, err := fe.Collect(); err != nil {
			return 0, err
		}
		if err := ctx.Err(); err != nil && i+1 < steps {
			return 0, err
		}
	}
	return float64(time.Since(t0).Microseconds()) / 1000 / float64(steps), nil
}

// batchOf is step j's views: batch of them, taken in turn from views (cycled), each with its
// index among them.
func batchOf(views []dataset.View, j, batch int) []*engine.View {
	vs := make([]*engine.View, batch)
	for k := range vs {
		i := (j*batch + k) % len(views)
		v := &views[i]
		vs[k] = &engine.View{Index: i, Camera: v.Camera, Target: v.Image.RGB}
	}
	return vs
}

// timeLaunches runs steps more steps launch by launch with every launch timed and returns the
// median time of each launch. A step whose launches differ from the first's in number or
// kernels (a rerun after a list overflow) is left out.
func timeLaunches(fe *fused.Engine, steps int, step func(int) (engine.StepResult, error)) ([]Launch, error) {
	fe.SetGraphs(false)
	if err := fe.TimeLaunches(true); err != nil {
		return nil, err
	}
	defer fe.TimeLaunches(false)
	var first []fused.LaunchTime
	var ms [][]float64
	for i := 0; i < steps; i++ {
		if _, err := step(i); err != nil {
			return nil, err
		}
		lt, err := fe.LaunchTimes()
		if err != nil {
			return nil, err
		}
		if first == nil {
			first, ms = lt, make([][]float64, len(lt))
		}
		if !slices.EqualFunc(lt, first, func(a, b fused.LaunchTime) bool { return a.Kernel == b.Kernel }) {
			continue
		}
		for j := range lt {
			ms[j] = append(ms[j], float64(lt[j].Ms))
		}
	}
	out := make([]Launch, len(first))
	for j, l := range first {
		r := l.Resources
		out[j] = Launch{Index: l.Index, Kernel: l.Kernel, Ms: median(ms[j]), Block: l.Block, Registers: r.Registers,
			LocalBytes: r.LocalBytes, SharedBytes: r.SharedBytes, BlocksPerSM: r.BlocksPerSM}
	}
	return out, nil
}

// medianWalk is the median of each of the walks' fields (each no larger than the median
// step's entries and visible count, since every walk's are no larger than its step's).
func medianWalk(walks []fused.Walk) fused.Walk {
	var e, p, s, b, sp, l []float64
	var tiles int64
	for _, w := range walks {
		e, p, s = append(e, float64(w.Entries)), append(p, float64(w.Pairs)), append(s, float64(w.Splats))
		b, sp, l = append(b, float64(w.Boundaries)), append(sp, float64(w.Spanning)), append(l, float64(w.Longest))
		tiles = w.Tiles
	}
	return fused.Walk{Entries: int64(median(e)), Pairs: int64(median(p)), Splats: int64(median(s)),
		Boundaries: int64(median(b)), Spanning: int64(median(sp)), Longest: int64(median(l)), Tiles: tiles}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	w := append([]float64(nil), v...)
	sort.Float64s(w)
	return w[len(w)/2]
}

// Resample draws n Gaussians from g (with repetition when n exceeds it),
// jittering repeats by their own scale so they are distinct splats.
func Resample(g *splat.Gaussians, n int, seed uint64) *splat.Gaussians {
	rng := rand.New(rand.NewPCG(seed, 0xbe4c))
	src := make([]int32, n)
	for i := range src {
		if i < g.Len() && n <= g.Len() {
			src[i] = int32(rng.IntN(g.Len()))
		} else {
			src[i] = int32(i % g.Len())
		}
	}
	out := splat.Gather(g, src)
	if n > g.Len() {
		for i := g.Len(); i < n; i++ {
			for a := 0; a < 3; a++ {
				out.Means[i*3+a] += float32(rng.NormFloat64() * math.Exp(float64(out.LogScales[i*3+a])))
			}
		}
	}
	return out
}
