package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

// trainOptions are the parsed flags of `train`.
type trainOptions struct {
	cf      configFlags
	resume  string
	profile string
	// demo is set when the demo preset was chosen because no data and no config were given.
	demo bool
	// force replaces an earlier run in the output directory.
	force bool
	view  viewFlags
}

func newTrainCmd(s *streams, runF func(*trainOptions, *config.Config) error) *cobra.Command {
	o := &trainOptions{}
	cmd := &cobra.Command{
		Use:   "train [flags]",
		Short: "Train a scene (the built-in demo scene when no --data is given)",
		Long: `Train fits Gaussians to a capture: a COLMAP folder (images/ + sparse/0)
or a transforms.json set. It writes out/config.yaml, metrics.jsonl, previews/,
checkpoints/, point_cloud.ply and training_curve.png.

With neither --data nor --config it trains the built-in demo scene with the
"demo" preset (configs/demo.yaml: 1000 steps, under a minute on two CPU cores).`,
		Example: `  rlxsplat train                                   # the built-in demo scene
  rlxsplat train --data ../shared/data/duck --config fast --downscale 2
  rlxsplat train --data scene --resume out/checkpoints/step-05000.ckpt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := loadTrainConfig(cmd, o, s)
			if err != nil || c == nil {
				return err
			}
			if runF != nil {
				return runF(o, c)
			}
			return runTrain(cmd, o, c, s)
		},
	}
	fs := cmd.Flags()
	addConfigFlags(fs, &o.cf)
	o.cf.bindKey(fs, "data", "data.dir", "dataset directory")
	o.cf.bindKey(fs, "out", "output.dir", "output directory")
	o.cf.bindKey(fs, "device", "train.device", deviceHelp())
	o.cf.bindKey(fs, "downscale", "data.downscale", "divide the image size by N (0 = auto above data.max_width)")
	o.cf.bindKey(fs, "iterations", "train.iterations", "number of steps")
	o.cf.bindKey(fs, "render", "model.render", "render model: ewa or ray")
	o.cf.bindKey(fs, "threads", "train.threads", "CPU threads (0 = all cores)")
	o.cf.bindKey(fs, "batch", "train.batch_size", "views a step renders and back-propagates (one Adam update of their mean gradient)")
	o.cf.bindKey(fs, "gpus", "train.gpus", "GPUs of the host sharing each step's batch (data-parallel; needs --batch >= --gpus)")
	o.cf.bindKey(fs, "shard", "train.shard", "give each of the --gpus GPUs a share of the Gaussians instead of the whole scene (for scenes larger than one GPU holds)")
	o.cf.bindKey(fs, "bin-mode", "raster.bin_mode", "tile binning: gpu-conic, gpu-radius-aabb or cpu-conic")
	fs.StringVar(&o.resume, "resume", "", "resume from a checkpoint (its config is the base; flags still override)")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a Go CPU profile of the training loop to this file")
	fs.BoolVar(&o.force, "force", false, "replace the earlier run an --out directory holds (its checkpoints, previews and outputs)")
	fs.BoolVar(&o.view.on, "view", false, "serve the live viewer while training (see --view-port, --view-host)")
	addViewFlags(fs, &o.view, "view-", 8080)
	return cmd
}

// loadTrainConfig resolves the config; when resuming without --config, the
// checkpoint's own config is the file layer, so the run continues as it
// was configured.
func loadTrainConfig(cmd *cobra.Command, o *trainOptions, s *streams) (*config.Config, error) {
	if o.resume != "" && o.cf.file == "" {
		yaml, err := train.CheckpointConfig(o.resume)
		if err != nil {
			return nil, err
		}
		o.cf.fileData = yaml
		o.cf.fileName = o.resume + " (config)"
	}
	c, err := o.cf.load(cmd.Flags(), s)
	if err != nil {
		return nil, err
	}
	// No data and no config: the demo scene with its own short preset, so that the first
	// command a new user runs finishes in under a minute on a laptop's CPU.
	if c.Data.Dir == "" && o.cf.file == "" && o.cf.fileData == nil {
		o.cf.file = demoPreset
		o.demo = true
	}
	c, err = o.cf.resolved(cmd, s)
	if err != nil || c == nil {
		return c, err
	}
	// Paths are stored absolute in config.yaml and the checkpoints, so that `render --ckpt`
	// and `--resume` work from any directory.
	for _, p := range []*string{&c.Data.Dir, &c.Init.PointsFrom} {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return nil, fmt.Errorf("train: %s: %w", *p, err)
			}
			*p = abs
		}
	}
	return c, nil
}

// demoPreset is the embedded preset `train` uses with neither --data nor --config.
const demoPreset = "demo"

func runTrain(cmd *cobra.Command, o *trainOptions, c *config.Config, s *streams) error {
	notice := func(msg string) { fmt.Fprintln(s.Err, "rlxsplat:", msg) }
	// The run's identity comes first in the log, as in every file the run writes; a resumed
	// run goes on under the ID of the run it continues.
	runID := ""
	if o.resume != "" {
		id, err := train.CheckpointRunID(o.resume)
		if err != nil {
			return err
		}
		runID = id
	}
	if runID == "" {
		runID = train.NewRunID(time.Now())
	}
	notice("run " + runID)
	if o.resume == "" {
		if err := claimOutDir(c.Output.Dir, o.force, notice); err != nil {
			return err
		}
	}
	if o.demo {
		notice(fmt.Sprintf("no --data: training the built-in demo scene with the %q preset (%d steps)", demoPreset, c.Train.Iterations))
	}
	yaml, err := c.YAML()
	if err != nil {
		return err
	}
	start := time.Now()
	ds, err := app.LoadDataset(c)
	if err != nil {
		return err
	}
	loaded := time.Since(start)
	src := ds.Dir
	fmt.Fprintf(s.Err, "rlxsplat: %s: %d training and %d test views of %d×%d px, extent %.3g (loaded in %.1fs)\n",
		src, len(ds.Train), len(ds.Test), ds.Train[0].Camera.Width, ds.Train[0].Camera.Height, ds.Extent, time.Since(start).Seconds())
	if msg, err := app.InitPoints(c, ds); err != nil {
		return err
	} else if msg != "" {
		notice(msg)
	}
	opt := app.TrainOptions(c, yaml)
	opt.RunID = runID
	stopView, err := startTrainView(cmd.Context(), &o.view, &opt, ds, src, s)
	if err != nil {
		return err
	}
	defer stopView()
	g, msg, err := train.Initial(opt, ds)
	if err != nil {
		return err
	}
	if msg != "" {
		notice(msg)
	}
	eng, err := app.NewEngine(c, g, notice)
	if err != nil {
		return err
	}
	defer eng.Close()
	tr, err := train.New(opt, ds, eng)
	if err != nil {
		return err
	}
	if o.resume != "" {
		if err := tr.Resume(o.resume); err != nil {
			return err
		}
		notice(fmt.Sprintf("resumed from %s at step %d", o.resume, tr.Step()))
	}
	steps := fmt.Sprintf("%d steps", opt.Iterations)
	if opt.BatchSize > 1 {
		steps = fmt.Sprintf("%d steps of %d views", opt.Iterations, opt.BatchSize)
	}
	fmt.Fprintf(s.Err, "rlxsplat: training %d Gaussians on %s for %s (%s model) into %s\n",
		eng.Len(), eng.Name(), steps, c.Model.Render, opt.OutDir)
	if o.profile != "" {
		stop, err := startProfile(o.profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	// Setup: the initial Gaussians (their neighbour search), the engine (on a GPU its context
	// and kernels, compiled on a first run) and the training targets it holds.
	setup := time.Since(start) - loaded
	bar := newStepBar(s, opt.Iterations, tr.Step())
	err = tr.Run(cmd.Context(), func(ev train.Event) { bar.event(ev) })
	bar.finish()
	if err != nil {
		return err
	}
	ph := tr.Phases()
	sec := func(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
	fmt.Fprintf(s.Err, "rlxsplat: done in %s (loading %s, setup %s, steps %s, densification %s, evaluation %s, previews %s, checkpoints %s, export %s): %s\n",
		time.Since(start).Round(time.Second), sec(loaded), sec(setup), sec(ph.Steps), sec(ph.Densify), sec(ph.Eval), sec(ph.Preview),
		sec(ph.Checkpoint), sec(ph.Export), opt.OutDir)
	if m, ok := eng.(interface{ RankDeviceBytes() [][2]int64 }); ok {
		var peaks []string
		for _, b := range m.RankDeviceBytes() {
			peaks = append(peaks, fmt.Sprintf("%.0f", float64(b[1])/(1<<20)))
		}
		fmt.Fprintf(s.Err, "rlxsplat: peak device memory per GPU %s MiB (each rank's engine buffers; the driver's context comes on top)\n", strings.Join(peaks, ", "))
	} else if m, ok := eng.(interface{ DeviceBytes() (current, peak int64) }); ok {
		if _, peak := m.DeviceBytes(); peak > 0 {
			fmt.Fprintf(s.Err, "rlxsplat: peak device memory %.0f MiB (the engine's buffers; the driver's context comes on top)\n", float64(peak)/(1<<20))
		}
	}
	if c.Data.Dir == "" {
		fmt.Fprintf(s.Err, "rlxsplat: that was the built-in demo scene. Train a capture with\n"+
			"  rlxsplat train --data DIR     (a COLMAP folder: images/ + sparse/0, or a transforms.json set)\n"+
			"(make one from your own photos with `rlxsplat convert PHOTOS_DIR --out DIR`, which runs\n"+
			"COLMAP; or download the Mip-NeRF 360 or NeRF-synthetic scenes).\n")
	}
	return nil
}

// runFiles are what a run writes into its output directory (point_cloud.* covers every
// configured format); an earlier run is recognised by them and --force removes only them.
var runFiles = []string{"config.yaml", "metrics.jsonl", "checkpoints", "previews", "point_cloud.*", "training_curve.png"}

// claimOutDir refuses an output directory that holds an earlier run, so that its
// checkpoints are never mixed with the new run's (a later --resume of "the latest" would
// pick the wrong one), unless force says to remove that run's files first.
func claimOutDir(dir string, force bool, notice func(string)) error {
	var found []string
	for _, pat := range runFiles {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return fmt.Errorf("train: %s: %w", dir, err)
		}
		found = append(found, m...)
	}
	if len(found) == 0 {
		return nil
	}
	if !force {
		return usageError{fmt.Errorf("train: --out %s holds an earlier run (%s): give another --out, --resume one of its checkpoints to continue it, or --force to replace it",
			dir, filepath.Base(found[0]))}
	}
	for _, f := range found {
		if err := os.RemoveAll(f); err != nil {
			return fmt.Errorf("train: --force: %w", err)
		}
	}
	notice(fmt.Sprintf("--force: removed the earlier run in %s", dir))
	return nil
}

// stepBar turns trainer events into a progress bar and one-line reports.
// Off a terminal (logs, CI) it writes no bar, which would fill the log with carriage
// returns: a plain progress line at most every plainEvery instead, and the reports.
type stepBar struct {
	s    *streams
	bar  *progressbar.ProgressBar // nil off a terminal
	last time.Time                // when the last plain line was written
}

// plainEvery spaces the plain progress lines written off a terminal.
const plainEvery = 10 * time.Second

func newStepBar(s *streams, total, done int) *stepBar {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(s.Err),
		progressbar.OptionSetDescription("train"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(250 * time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(s.Err) }),
	}
	if !s.TTY {
		return &stepBar{s: s, last: time.Now()}
	}
	b := progressbar.NewOptions(total, opts...)
	if done > 0 {
		b.Set(done)
	}
	return &stepBar{s: s, bar: b}
}

func (b *stepBar) event(ev train.Event) {
	switch e := ev.(type) {
	case train.Progress:
		if b.bar == nil {
			if time.Since(b.last) >= plainEvery || e.Step == e.Total {
				b.last = time.Now()
				fmt.Fprintf(b.s.Err, "rlxsplat: step %d/%d: loss %.4f, PSNR %.2f, %d Gaussians, %.1f steps/s\n",
					e.Step, e.Total, e.Loss, e.PSNR, e.Gaussians, e.StepsPerSec)
			}
			return
		}
		b.bar.Describe(fmt.Sprintf("loss %.4f  PSNR %5.2f  %7d Gaussians  %5.1f steps/s", e.Loss, e.PSNR, e.Gaussians, e.StepsPerSec))
		b.bar.Set(e.Step)
	case train.Evaluated:
		b.println(fmt.Sprintf("step %d: %s PSNR %.2f dB, SSIM %.4f over %d views, %d Gaussians", e.Step, e.Split, e.PSNR, e.SSIM, e.Views, e.Gaussians))
		if e.RendersDir != "" {
			b.println(fmt.Sprintf("writing the evaluated renders to %s", e.RendersDir))
		}
	case train.Notice:
		b.println(e.Text)
	case train.Saved:
		if e.Kind != "preview" && e.Kind != "eval-render" { // one line per run, not per image
			b.println(fmt.Sprintf("wrote %s %s", e.Kind, e.Path))
		}
	}
}

func (b *stepBar) println(msg string) {
	if b.bar != nil {
		b.bar.Clear()
	}
	fmt.Fprintln(b.s.Err, "rlxsplat:", msg)
}

func (b *stepBar) finish() {
	if b.bar != nil {
		b.bar.Exit()
	}
}
