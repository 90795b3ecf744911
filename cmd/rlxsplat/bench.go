package main

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/bench"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/raster"
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
resampled to N Gaussians. With --set train.batch_size=B each step takes B
views (timed whole: the stage table has the step alone) and the report adds
the time a view.

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
			return runBench(cmd.Context(), o, c, s)
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

func runBench(ctx context.Context, o *benchOptions, c *config.Config, s *streams) error {
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
		g = bench.Resample(g, o.gaussians, uint64(c.Train.Seed))
	}
	set, err := app.EngineSettings(c)
	if err != nil {
		return err
	}
	eng, err := app.NewEngine(c, g, func(m string) { fmt.Fprintln(s.Err, "rlxsplat:", m) })
	if err != nil {
		return err
	}
	defer eng.Close()
	lr := engine.LR{Means: float32(opt.MeansLR * ds.Extent), LogScales: float32(opt.ScalesLR), Quats: float32(opt.QuatsLR),
		Opacity: float32(opt.OpacityLR), SHDC: float32(opt.SHDCLR), SHRest: float32(opt.SHRestLR)}
	so := engine.StepOptions{SHDegree: c.Model.SHDegree, LR: lr, Background: app.Background(c)}
	bo := bench.Options{Steps: o.steps, Warmup: o.warmup, Kernels: o.kernels, Roofline: o.roofline, Batch: c.Train.BatchSize}
	if o.profile != "" {
		bo.Profile = func() (func(), error) { return startProfile(o.profile) }
	}
	if _, onGPU := eng.(*fused.Engine); o.roofline && !onGPU {
		fmt.Fprintf(s.Err, "rlxsplat: --roofline is for GPU engines only (this run used %s): skipped\n", eng.Name())
		bo.Roofline = false
	}
	r, err := bench.Run(ctx, eng, ds.Train, so, set, bo)
	if err != nil {
		return err
	}
	r.Dataset = ds.Dir
	if o.json {
		enc := json.NewEncoder(s.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	batch := ""
	if r.Batch > 1 {
		batch = fmt.Sprintf(" of %d views each (train.batch_size)", r.Batch)
	}
	fmt.Fprintf(s.Out, "%s on %s: %d×%d px, %d Gaussians, %d tile entries, %d timed steps%s\n",
		r.Engine, r.Dataset, r.Width, r.Height, r.Gaussians, r.Entries, r.Steps, batch)
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
	if r.PipelinedMs > 0 {
		fmt.Fprintf(tw, "step pipelined as in training (wall)\t%.2f\t\n", r.PipelinedMs)
	}
	if r.PipelinedGraphMs > 0 {
		fmt.Fprintf(tw, "step pipelined as one graph (wall)\t%.2f\t\n", r.PipelinedGraphMs)
	}
	tw.Flush()
	fmt.Fprintf(s.Out, "%.2f steps/s\n", r.StepsPerSec)
	if r.Batch > 1 && r.PipelinedGraphMs > 0 {
		fmt.Fprintf(s.Out, "%.3f ms a view pipelined as one graph (%d views a step)\n", r.PipelinedGraphMs/float64(r.Batch), r.Batch)
	}
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

func printRoofline(s *streams, rl *bench.Roofline) {
	fmt.Fprintf(s.Out, "\nroofline: measured ceilings: copy %.0f GB/s, FP32 %.0f GFLOP/s\n", rl.CopyGBs, rl.FP32GFlops)
	fmt.Fprintf(s.Out, "step (medians): %d visible, %d tile entries; the rasterizer walked %d entries of %d splats, %d (entry, pixel) pairs\n",
		rl.Visible, rl.Entries, rl.WalkedEntries, rl.WalkedSplats, rl.WalkedPairs)
	if rl.Tiles > 0 {
		fmt.Fprintf(s.Out, "the longest tile walk: %d entries (the mean over %d tiles: %.0f); the forward walks a list in segments of %d entries, a block each\n",
			rl.WalkedLongest, rl.Tiles, float64(rl.WalkedEntries)/float64(rl.Tiles), raster.SegmentEntries)
	}
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

// printLaunches lists the step's launches in order, each with its median time and its share
// of their sum.
func printLaunches(s *streams, ls []bench.Launch) {
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
