package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

type benchOptions struct {
	cf        configFlags
	steps     int
	warmup    int
	gaussians int
	sf        sceneFlags
	json      bool
	profile   string
	roofline  bool
	kernels   bool
}

func newBenchCmd(s *streams, runF func(*benchOptions, *config.Config) error) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Time the training step per stage",
		Long: `Bench initialises Gaussians from a dataset (the demo scene without --data),
runs warm-up steps, then times full training steps (no densification) over the
training views and reports the median milliseconds of every stage and the
steps per second, and on a GPU engine the peak device memory its buffers held.
With --scene FILE it starts from that scene instead (a trained point_cloud.ply,
whose splats overlap the way real ones do); with --gaussians N the scene is
resampled to N Gaussians.

With --roofline (GPU engines) it also measures the device's ceilings, the
bandwidth of a plain device-memory copy and the FP32 fused-multiply-add rate,
and places every stage under them: the fewest bytes the stage must move and
operations it must do (a lower-bound model of the step's size, see
internal/fused/roofline.go) over its median time, as a fraction of each
ceiling, and which of the two bounds it ("latency/other" when the stage
reaches less than a quarter of both).

--device metal (on a Mac), emu (the host emulator: slow, for checking the
kernels) or metal-emu (the Metal backend on a simulated device running the
exact MSL built for the host; its stage times are the simulation's, 1 ms per
dispatch, not measurements) runs the fused engine on that device. Where the device has no graph
capture or no timing events, the steps run launch by launch or untimed, and
the report's notes say what was skipped.`,
		Example: `  rlxsplat bench --data ../shared/data/bonsai --downscale 4 --steps 20
  rlxsplat bench --data ../shared/data/bonsai --device cuda --roofline --json
  rlxsplat bench --data ../shared/data/bonsai --device cuda --scene out/point_cloud.ply`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := o.sf.path("bench", false); err != nil {
				return err
			}
			c, err := o.cf.resolved(cmd, s)
			if err != nil || c == nil {
				return err
			}
			if o.steps < 1 || o.warmup < 0 || o.gaussians < 0 {
				return usageError{fmt.Errorf("bench: --steps must be ≥ 1, --warmup and --gaussians ≥ 0")}
			}
			if runF != nil {
				return runF(o, c)
			}
			return runBench(o, c, s)
		},
	}
	fs := cmd.Flags()
	addConfigFlags(fs, &o.cf)
	o.cf.bindKey(fs, "data", "data.dir", "dataset directory")
	o.cf.bindKey(fs, "downscale", "data.downscale", "divide the image size by N")
	o.cf.bindKey(fs, "device", "train.device", deviceHelp())
	o.cf.bindKey(fs, "render", "model.render", "render model: ewa or ray")
	o.cf.bindKey(fs, "threads", "train.threads", "CPU threads (0 = all cores)")
	fs.IntVar(&o.steps, "steps", 20, "timed steps")
	fs.IntVar(&o.warmup, "warmup", 3, "untimed steps first")
	fs.IntVar(&o.gaussians, "gaussians", 0, "resample the initial scene to N Gaussians (0 = as initialised)")
	o.sf.add(fs, "start from this scene (a trained point_cloud.ply, say) instead of the dataset's initialisation")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a Go CPU profile of the timed steps to this file")
	fs.BoolVar(&o.roofline, "roofline", false, "GPU engines: measure the device's copy bandwidth and FP32 rate and place each stage under them")
	fs.BoolVar(&o.kernels, "kernels", false, "GPU engines: time every kernel launch of the step too (as many steps again, an event pair around each launch)")
	return cmd
}

// benchResult is what bench reports (also as JSON).
type benchResult struct {
	Engine    string             `json:"engine"`
	Dataset   string             `json:"dataset"`
	Width     int                `json:"width"`
	Height    int                `json:"height"`
	Gaussians int                `json:"gaussians"`
	Steps     int                `json:"steps"`
	StageMs   map[string]float64 `json:"stage_ms_median"`
	StepMs    float64            `json:"step_ms_median"`
	// GPU engines with graphs: as many steps again, each replayed as one graph: their device
	// time (no host in it) and wall time.
	GraphDeviceMs float64 `json:"graph_device_ms_median,omitempty"`
	GraphWallMs   float64 `json:"graph_wall_ms_median,omitempty"`
	StepsPerSec   float64 `json:"steps_per_sec"`
	Entries       int     `json:"tile_entries_last"`
	// PeakDeviceBytes is the most device memory the GPU engine's buffers held at once (0 and
	// left out for the CPU engine).
	PeakDeviceBytes int64          `json:"peak_device_bytes,omitempty"`
	Roofline        *benchRoofline `json:"roofline,omitempty"`
	// --kernels: each launch of the step in order, its median device time.
	Launches []benchLaunch `json:"launches,omitempty"`
	// Notes: what the device lacks and the run skipped for it (graph capture, timing events).
	Notes []string `json:"notes,omitempty"`
}

type benchLaunch struct {
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

// benchRoofline is --roofline's report: the measured ceilings, the step's size as the traffic
// model takes it, and every stage under the ceilings.
type benchRoofline struct {
	CopyGBs    float64 `json:"copy_gb_per_s"`
	FP32GFlops float64 `json:"fp32_gflop_per_s"`
	Visible    int     `json:"visible_median"`
	Entries    int     `json:"tile_entries_median"`
	// How far the rasterizer walked the lists (fused.Engine.RasterWalk): entries the tiles
	// read, (entry, pixel) pairs the pixels evaluated, distinct splats the entries name.
	WalkedEntries int64                `json:"walked_entries_median"`
	WalkedPairs   int64                `json:"walked_pairs_median"`
	WalkedSplats  int64                `json:"walked_splats_median"`
	Stages        []benchStageRoofline `json:"stages"`
}

type benchStageRoofline struct {
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

func runBench(o *benchOptions, c *config.Config, s *streams) error {
	ds, err := app.LoadDataset(c)
	if err != nil {
		return err
	}
	opt := app.TrainOptions(c, nil)
	var g *splat.Gaussians
	if path, _ := o.sf.path("bench", false); path != "" {
		sc, err := readScene(path, s.Err)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		g = sc.Gaussians
	} else if g, _, err = train.Initial(opt, ds); err != nil {
		return err
	}
	if o.gaussians > 0 {
		g = resample(g, o.gaussians, uint64(c.Train.Seed))
	}
	eng, err := app.NewEngine(c, g, func(m string) { fmt.Fprintln(s.Err, "rlxsplat:", m) })
	if err != nil {
		return err
	}
	defer eng.Close()
	lr := engine.LR{Means: float32(opt.MeansLR * ds.Extent), LogScales: float32(opt.ScalesLR), Quats: float32(opt.QuatsLR),
		Opacity: float32(opt.OpacityLR), SHDC: float32(opt.SHDCLR), SHRest: float32(opt.SHRestLR)}
	so := engine.StepOptions{SHDegree: c.Model.SHDegree, LR: lr, Background: app.Background(c), WantTimings: true}
	stages := map[string][]float64{}
	var stopProfile func()
	var total, visible, entries []float64
	var walks []fused.Walk
	var last engine.StepResult
	fe, onGPU := eng.(*fused.Engine)
	// The timed steps cycle through the first nv training views. A GPU engine uploads a view's
	// target the first time it sees it, once in a training run; the warm-up steps every view
	// once, so that no timed step pays for an upload.
	nv := min(len(ds.Train), o.steps)
	warmup := o.warmup
	if onGPU {
		fe.SetGraphs(false) // launch by launch first, with an event between stages
		warmup = max(warmup, nv)
	}
	step := func(j int) (engine.StepResult, error) {
		v := ds.Train[j%nv]
		return eng.Step(&engine.View{Index: j % nv, Camera: v.Camera, Target: v.Image.RGB}, so)
	}
	for i := 0; i < warmup+o.steps; i++ {
		t0 := time.Now()
		res, err := step(i)
		if err != nil {
			return err
		}
		el := time.Since(t0)
		if i < warmup {
			continue
		}
		if i == warmup && o.profile != "" {
			if stopProfile, err = startProfile(o.profile); err != nil {
				return err
			}
		}
		total = append(total, float64(el.Microseconds())/1000)
		for k, d := range res.Timings {
			stages[k] = append(stages[k], float64(d.Microseconds())/1000)
		}
		visible = append(visible, float64(res.Visible))
		entries = append(entries, float64(res.Entries))
		if o.roofline && onGPU {
			// Outside the timed interval: the counts' download is not part of the step.
			wk, err := fe.RasterWalk()
			if err != nil {
				return err
			}
			walks = append(walks, wk)
		}
		last = res
	}
	if stopProfile != nil {
		stopProfile()
	}
	r := benchResult{Engine: eng.Name(), Dataset: ds.Dir, Width: ds.Train[0].Camera.Width, Height: ds.Train[0].Camera.Height,
		Gaussians: eng.Len(), Steps: o.steps, StageMs: map[string]float64{}, StepMs: median(total), Entries: last.Entries}
	if onGPU {
		// The same number of steps replayed as one graph each: their device time is the
		// step's without the host in it, their wall time what graphs would cost a step.
		fe.SetGraphs(true)
		var dev, wall []float64
		for i := 0; i < 2+o.steps; i++ {
			t0 := time.Now()
			res, err := step(i)
			if err != nil {
				return err
			}
			if d, ok := res.Timings[engine.StageStep]; ok && i >= 2 {
				wall = append(wall, float64(time.Since(t0).Microseconds())/1000)
				dev = append(dev, float64(d.Microseconds())/1000)
			}
		}
		r.GraphDeviceMs, r.GraphWallMs = median(dev), median(wall) // 0 without graphs
	}
	if o.kernels && onGPU && fe.HasEvents() {
		if r.Launches, err = timeLaunches(fe, o.steps, step); err != nil {
			return err
		}
	}
	for k, v := range stages {
		r.StageMs[k] = median(v)
	}
	r.StepsPerSec = 1000 / r.StepMs
	if onGPU {
		_, r.PeakDeviceBytes = fe.DeviceBytes()
	}
	if onGPU {
		r.Notes = fe.Notes()
		if !fe.HasEvents() && (o.kernels || o.roofline) {
			r.Notes = append(r.Notes, "--kernels and --roofline need timing events: skipped")
		}
	}
	if o.roofline {
		if !onGPU {
			fmt.Fprintf(s.Err, "rlxsplat: --roofline is for GPU engines only (this run used %s): skipped\n", r.Engine)
		} else if fe.HasEvents() {
			w := fused.Workload{Gaussians: r.Gaussians, Visible: int(median(visible)), Entries: int(median(entries)),
				Width: r.Width, Height: r.Height, SHDegree: so.SHDegree, AccumulateStats: so.AccumulateStats,
				Walk: medianWalk(walks)}
			if r.Roofline, err = measureRoofline(fe, c, w, r.StageMs); err != nil {
				return err
			}
		}
	}
	if o.json {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(s.Out, "%s on %s: %d×%d px, %d Gaussians, %d tile entries, %d timed steps\n",
		r.Engine, r.Dataset, r.Width, r.Height, r.Gaussians, r.Entries, r.Steps)
	tw := tabwriter.NewWriter(s.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "STAGE\tMEDIAN MS\t")
	for _, st := range engine.Stages {
		if v, ok := r.StageMs[st]; ok {
			fmt.Fprintf(tw, "%s\t%.2f\t\n", st, v)
		}
	}
	fmt.Fprintf(tw, "step\t%.2f\t\n", r.StepMs)
	if r.GraphWallMs > 0 {
		fmt.Fprintf(tw, "step as one graph (device)\t%.2f\t\n", r.GraphDeviceMs)
		fmt.Fprintf(tw, "step as one graph (wall)\t%.2f\t\n", r.GraphWallMs)
	}
	tw.Flush()
	fmt.Fprintf(s.Out, "%.2f steps/s\n", r.StepsPerSec)
	if r.PeakDeviceBytes > 0 {
		fmt.Fprintf(s.Out, "peak device memory: %.1f MiB (the engine's buffers)\n", float64(r.PeakDeviceBytes)/(1<<20))
	}
	if r.Roofline != nil {
		printRoofline(s, r.Roofline)
	}
	if len(r.Launches) > 0 {
		printLaunches(s, r.Launches)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(s.Out, "note: %s\n", n)
	}
	return nil
}

// measureRoofline measures fe's device ceilings (after the timed steps, so that the copy's
// buffers do not share the device with them) and places every stage's median time stageMs
// under them, for a step of w's size; w's render, binning, loss and Adam settings are filled
// in from c.
func measureRoofline(fe *fused.Engine, c *config.Config, w fused.Workload, stageMs map[string]float64) (*benchRoofline, error) {
	set, err := app.EngineSettings(c)
	if err != nil {
		return nil, err
	}
	w.TileSize = set.TileSize
	w.Ray = set.Render == prep.Ray
	w.ConicBin = set.BinMode == engine.BinGPUConic
	w.SSIM = set.Loss.UsesSSIM()
	w.AdamVisibleOnly = set.Adam.VisibleOnly
	costs, err := fused.MinimalCosts(w)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	ceil, err := fe.Ceilings(fused.CeilingOptions{})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	out := &benchRoofline{CopyGBs: ceil.CopyGBs, FP32GFlops: ceil.FP32GFlops, Visible: w.Visible, Entries: w.Entries,
		WalkedEntries: w.Walk.Entries, WalkedPairs: w.Walk.Pairs, WalkedSplats: w.Walk.Splats}
	for _, cost := range costs {
		ms, ok := stageMs[cost.Stage]
		if !ok {
			continue
		}
		st := benchStageRoofline{Stage: cost.Stage, Ms: ms, MinBytes: cost.Bytes, MinFlops: cost.Flops}
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

func printRoofline(s *streams, rl *benchRoofline) {
	fmt.Fprintf(s.Out, "\nroofline: measured ceilings: copy %.0f GB/s, FP32 %.0f GFLOP/s\n", rl.CopyGBs, rl.FP32GFlops)
	fmt.Fprintf(s.Out, "step (medians): %d visible, %d tile entries; the rasterizer walked %d entries of %d splats, %d (entry, pixel) pairs\n",
		rl.Visible, rl.Entries, rl.WalkedEntries, rl.WalkedSplats, rl.WalkedPairs)
	tw := tabwriter.NewWriter(s.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "STAGE\tMS\tMIN MB\tMIN GFLOP\tGB/S\tGFLOP/S\t%%COPY\t%%FP32\tBOUND\t\n")
	for _, st := range rl.Stages {
		if st.Bound == "host" {
			fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t%.3f\t-\t-\t-\t-\t%s\t\n", st.Stage, st.Ms, float64(st.MinBytes)/1e6, float64(st.MinFlops)/1e9, st.Bound)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t%.3f\t%.0f\t%.0f\t%.0f%%\t%.0f%%\t%s\t\n", st.Stage, st.Ms, float64(st.MinBytes)/1e6,
			float64(st.MinFlops)/1e9, st.GBs, st.GFlops, 100*st.MemoryFraction, 100*st.ComputeFraction, st.Bound)
	}
	tw.Flush()
	fmt.Fprintln(s.Out, "MIN MB and MIN GFLOP are lower bounds (internal/fused/roofline.go); GB/s and GFLOP/s are those over the stage's time.")
}

// timeLaunches runs steps more steps launch by launch with every launch timed and returns the
// median time of each launch. A step whose launches differ from the first's in number or
// kernels (a rerun after a list overflow) is left out.
func timeLaunches(fe *fused.Engine, steps int, step func(int) (engine.StepResult, error)) ([]benchLaunch, error) {
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
	out := make([]benchLaunch, len(first))
	for j, l := range first {
		r := l.Resources
		out[j] = benchLaunch{Index: l.Index, Kernel: l.Kernel, Ms: median(ms[j]), Block: l.Block, Registers: r.Registers,
			LocalBytes: r.LocalBytes, SharedBytes: r.SharedBytes, BlocksPerSM: r.BlocksPerSM}
	}
	return out, nil
}

// printLaunches lists the step's launches in order, each with its median time and its share
// of their sum.
func printLaunches(s *streams, ls []benchLaunch) {
	var sum float64
	for _, l := range ls {
		sum += l.Ms
	}
	fmt.Fprintf(s.Out, "\nkernel launches (each timed alone, an event pair around it; sum %.2f ms):\n", sum)
	tw := tabwriter.NewWriter(s.Out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "#\tKERNEL\tMS\tSHARE\tBLOCK\tREGS\tLOCAL B\tSHARED B\tBLOCKS/SM\t")
	for _, l := range ls {
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%.1f%%\t%d\t%d\t%d\t%d\t%d\t\n", l.Index, l.Kernel, l.Ms, 100*l.Ms/sum,
			l.Block, l.Registers, l.LocalBytes, l.SharedBytes, l.BlocksPerSM)
	}
	tw.Flush()
	fmt.Fprintln(s.Out, "REGS, LOCAL B (bytes a thread) and SHARED B (static, a block) as the compiler reports them; BLOCKS/SM: resident at once (0: not reported).")
}

// medianWalk is the median of each of the walks' fields (each no larger than the median
// step's entries and visible count, since every walk's are no larger than its step's).
func medianWalk(walks []fused.Walk) fused.Walk {
	var e, p, s, b, sp []float64
	for _, w := range walks {
		e, p, s = append(e, float64(w.Entries)), append(p, float64(w.Pairs)), append(s, float64(w.Splats))
		b, sp = append(b, float64(w.Boundaries)), append(sp, float64(w.Spanning))
	}
	return fused.Walk{Entries: int64(median(e)), Pairs: int64(median(p)), Splats: int64(median(s)),
		Boundaries: int64(median(b)), Spanning: int64(median(sp))}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	w := append([]float64(nil), v...)
	sort.Float64s(w)
	return w[len(w)/2]
}

// resample draws n Gaussians from g (with repetition when n exceeds it),
// jittering repeats by their own scale so they are distinct splats.
func resample(g *splat.Gaussians, n int, seed uint64) *splat.Gaussians {
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

// startProfile starts a CPU profile into path and returns its stop function.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
