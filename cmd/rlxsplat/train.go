package main

import (
	"fmt"
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
	view    viewFlags
}

func newTrainCmd(s *streams, runF func(*trainOptions, *config.Config) error) *cobra.Command {
	o := &trainOptions{}
	cmd := &cobra.Command{
		Use:   "train [flags]",
		Short: "Train a scene (the built-in demo scene when no --data is given)",
		Long: `Train fits Gaussians to a capture: a COLMAP folder (images/ + sparse/0)
or a transforms.json set. It writes out/config.yaml, metrics.jsonl, previews/,
checkpoints/, point_cloud.ply and training_curve.png.`,
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
	o.cf.bindKey(fs, "device", "train.device", "device: cpu, cuda or auto")
	o.cf.bindKey(fs, "downscale", "data.downscale", "divide the image size by N (0 = auto above data.max_width)")
	o.cf.bindKey(fs, "iterations", "train.iterations", "number of steps")
	o.cf.bindKey(fs, "render", "model.render", "render model: ewa or ray")
	o.cf.bindKey(fs, "threads", "train.threads", "CPU threads (0 = all cores)")
	o.cf.bindKey(fs, "bin-mode", "raster.bin_mode", "tile binning: gpu-conic, gpu-radius-aabb or cpu-conic")
	fs.StringVar(&o.resume, "resume", "", "resume from a checkpoint (its config is the base; flags still override)")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a Go CPU profile of the training loop to this file")
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
	return o.cf.resolved(cmd, s)
}

func runTrain(cmd *cobra.Command, o *trainOptions, c *config.Config, s *streams) error {
	notice := func(msg string) { fmt.Fprintln(s.Err, "rlxsplat:", msg) }
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
	fmt.Fprintf(s.Err, "rlxsplat: training %d Gaussians on %s for %d steps (%s model) into %s\n",
		eng.Len(), eng.Name(), opt.Iterations, c.Model.Render, opt.OutDir)
	if o.profile != "" {
		stop, err := startProfile(o.profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	bar := newStepBar(s, opt.Iterations, tr.Step())
	err = tr.Run(cmd.Context(), func(ev train.Event) { bar.event(ev) })
	bar.finish()
	if err != nil {
		return err
	}
	ph := tr.Phases()
	sec := func(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
	fmt.Fprintf(s.Err, "rlxsplat: done in %s (loading %s, steps %s, densification %s, evaluation %s, previews %s, checkpoints %s): %s\n",
		time.Since(start).Round(time.Second), sec(loaded), sec(ph.Steps), sec(ph.Densify), sec(ph.Eval), sec(ph.Preview),
		sec(ph.Checkpoint), opt.OutDir)
	return nil
}

// stepBar turns trainer events into a progress bar and one-line reports.
type stepBar struct {
	s   *streams
	bar *progressbar.ProgressBar
}

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
		// Not a terminal (CI logs): redraw rarely so the log stays readable.
		opts = append(opts, progressbar.OptionThrottle(20*time.Second))
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
		b.bar.Describe(fmt.Sprintf("loss %.4f  PSNR %5.2f  %7d Gaussians  %5.1f steps/s", e.Loss, e.PSNR, e.Gaussians, e.StepsPerSec))
		b.bar.Set(e.Step)
	case train.Evaluated:
		b.println(fmt.Sprintf("step %d: %s PSNR %.2f dB, SSIM %.4f over %d views, %d Gaussians", e.Step, e.Split, e.PSNR, e.SSIM, e.Views, e.Gaussians))
	case train.Notice:
		b.println(e.Text)
	case train.Saved:
		if e.Kind != "preview" {
			b.println(fmt.Sprintf("wrote %s %s", e.Kind, e.Path))
		}
	}
}

func (b *stepBar) println(msg string) {
	b.bar.Clear()
	fmt.Fprintln(b.s.Err, "rlxsplat:", msg)
}

func (b *stepBar) finish() { b.bar.Exit() }
