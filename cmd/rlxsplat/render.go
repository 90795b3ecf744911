package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/io/anim"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

type renderOptions struct {
	cf     configFlags
	sf     sceneFlags
	scene  string // the scene file, from --scene (or --ply, --ckpt)
	split  string
	orbit  int
	format string  // orbit output: png (one file a frame), gif or mp4
	fps    float64 // frame rate of an orbit's gif or mp4
	outDir string
}

// orbitFormats are the values of render --format.
var orbitFormats = []string{"png", "gif", "mp4"}

func newRenderCmd(s *streams, runF func(*renderOptions, *config.Config) error) *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render --scene FILE [flags]",
		Short: "Render a splat scene (PLY, SPZ, .splat, .glb or checkpoint) for a dataset's views or an orbit",
		Long: `Render draws a scene for the views of a dataset (--data) and writes one PNG
per view; where the views have photos it prints PSNR and SSIM per view and their
mean. With --orbit N it renders N frames on a circle around the scene instead
(the dataset's cameras set the circle): PNG files, or with --format gif one
looping orbit.gif (standard library, one palette shared by all frames), or with
--format mp4 an orbit.mp4 encoded by ffmpeg (which must be on PATH). The scene may be any file rlxsplat
reads (INRIA or compressed PLY, SPZ 2-4, .splat, .glb, checkpoint), told apart
by its content; a checkpoint's stored config applies unless --config is given.`,
		Example: `  rlxsplat render --scene out/point_cloud.ply --data ../shared/data/duck --downscale 2
  rlxsplat render --scene out/checkpoints/step-07000.ckpt --orbit 60
  rlxsplat render --scene out/point_cloud.ply --orbit 90 --format gif --fps 30
  rlxsplat render --scene scene.spz --data ../shared/data/duck --downscale 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.scene, err = o.sf.path("render", true); err != nil {
				return err
			}
			if err := o.checkOrbit(); err != nil {
				return err
			}
			if err := o.cf.checkpointConfigDefault(o.scene); err != nil {
				return err
			}
			c, err := o.cf.resolved(cmd, s)
			if err != nil || c == nil {
				return err
			}
			if runF != nil {
				return runF(o, c)
			}
			return runRender(cmd, o, c, s)
		},
	}
	fs := cmd.Flags()
	addConfigFlags(fs, &o.cf)
	o.cf.bindKey(fs, "data", "data.dir", "dataset directory (cameras and photos)")
	o.cf.bindKey(fs, "downscale", "data.downscale", "divide the image size by N")
	o.cf.bindKey(fs, "render", "model.render", "render model: ewa or ray")
	o.cf.bindKey(fs, "device", "train.device", deviceHelp())
	o.cf.bindKey(fs, "threads", "train.threads", "CPU threads (0 = all cores)")
	o.sf.add(fs, "scene to render")
	fs.StringVar(&o.split, "split", "test", "views to render: test, train or all")
	fs.IntVar(&o.orbit, "orbit", 0, "render N frames on an orbit instead of the dataset's views")
	fs.StringVar(&o.format, "format", "png", "orbit output: png (a file a frame), gif (orbit.gif) or mp4 (orbit.mp4, needs ffmpeg)")
	fs.Float64Var(&o.fps, "fps", 30, "frames per second of an orbit's gif or mp4")
	fs.StringVar(&o.outDir, "out", "", "directory for the PNGs (default: render/ beside the scene file, or in the checkpoint's run directory)")
	return cmd
}

func runRender(cmd *cobra.Command, o *renderOptions, c *config.Config, s *streams) error {
	sc, err := readScene(o.scene, s.Err)
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	g, deg := sc.Gaussians, sc.SHDegree
	ds, err := app.LoadDataset(c)
	if err != nil {
		return err
	}
	eng, err := app.NewEngine(c, g, func(m string) { fmt.Fprintln(s.Err, "rlxsplat:", m) })
	if err != nil {
		return err
	}
	defer eng.Close()
	if o.outDir == "" {
		o.outDir = defaultRenderDir(o.scene)
	}
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	bg := app.Background(c)
	if o.orbit > 0 {
		return renderOrbit(cmd.Context(), o, ds, func(c *camera.Camera) ([]float32, error) { return eng.Render(c, deg, bg) }, s)
	}
	var views []dataset.View
	switch o.split {
	case "test":
		views = ds.Test
	case "train":
		views = ds.Train
	case "all":
		views = append(append(views, ds.Train...), ds.Test...)
	default:
		return usageError{fmt.Errorf("render: --split %q is not one of test, train, all", o.split)}
	}
	if len(views) == 0 {
		return fmt.Errorf("render: the dataset has no %s views", o.split)
	}
	tw := tabwriter.NewWriter(s.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VIEW\tPSNR\tSSIM")
	var sumP, sumS float64
	for _, v := range views {
		img, err := eng.Render(&v.Camera, deg, bg)
		if err != nil {
			return err
		}
		name := strings.NewReplacer("/", "_", "\\", "_").Replace(strings.TrimSuffix(v.Name, filepath.Ext(v.Name)))
		if err := imageio.SavePNG(filepath.Join(o.outDir, name+".png"), img, v.Camera.Width, v.Camera.Height); err != nil {
			return err
		}
		p, ss, err := metrics(img, v)
		if err != nil {
			return err
		}
		sumP += p
		sumS += ss
		fmt.Fprintf(tw, "%s\t%.3f\t%.4f\n", v.Name, p, ss)
	}
	n := float64(len(views))
	fmt.Fprintf(tw, "mean (%d views)\t%.3f\t%.4f\n", len(views), sumP/n, sumS/n)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "rlxsplat: wrote %d PNGs to %s\n", len(views), o.outDir)
	return nil
}

// checkOrbit rejects orbit flags that cannot work before anything loads, ffmpeg's absence
// included.
func (o *renderOptions) checkOrbit() error {
	if !slices.Contains(orbitFormats, o.format) {
		return usageError{fmt.Errorf("render: --format %q is not one of %s", o.format, strings.Join(orbitFormats, ", "))}
	}
	if o.orbit < 0 {
		return usageError{fmt.Errorf("render: --orbit %d: want a number of frames ≥ 1", o.orbit)}
	}
	if o.format != "png" && o.orbit == 0 {
		return usageError{fmt.Errorf("render: --format %s makes an animation of an orbit: give --orbit N", o.format)}
	}
	if !(o.fps > 0) || o.fps > 100 {
		return usageError{fmt.Errorf("render: --fps %g: want more than 0 and at most 100 (GIF delays are in 1/100 s)", o.fps)}
	}
	if o.format == "mp4" {
		if _, err := anim.FindFFmpeg(); err != nil {
			return err
		}
	}
	return nil
}

// renderOrbit renders the orbit's frames: into --out as PNGs, or into a temporary directory
// from which the GIF or MP4 is made and written into --out atomically.
func renderOrbit(ctx context.Context, o *renderOptions, ds *dataset.Dataset, render func(*camera.Camera) ([]float32, error), s *streams) error {
	cams := train.OrbitCameras(ds, o.orbit)
	frameDir := o.outDir
	if o.format != "png" {
		tmp, err := os.MkdirTemp("", "rlxsplat-orbit-")
		if err != nil {
			return fmt.Errorf("render: %w", err)
		}
		defer os.RemoveAll(tmp)
		frameDir = tmp
	}
	for i := range cams {
		if err := ctx.Err(); err != nil {
			return err
		}
		img, err := render(&cams[i])
		if err != nil {
			return err
		}
		name := anim.FrameName(i)
		if o.format == "png" {
			name = fmt.Sprintf("orbit_%04d.png", i)
		}
		if err := imageio.SavePNG(filepath.Join(frameDir, name), img, cams[i].Width, cams[i].Height); err != nil {
			return err
		}
	}
	switch o.format {
	case "gif":
		path := filepath.Join(o.outDir, "orbit.gif")
		if err := anim.WriteGIF(path, frameDir, len(cams), o.fps); err != nil {
			return err
		}
		fmt.Fprintf(s.Out, "wrote %s (%d frames at %g fps)\n", path, len(cams), o.fps)
	case "mp4":
		ffmpeg, err := anim.FindFFmpeg()
		if err != nil {
			return err
		}
		path := filepath.Join(o.outDir, "orbit.mp4")
		if err := anim.WriteMP4(ctx, ffmpeg, path, frameDir, o.fps); err != nil {
			return err
		}
		fmt.Fprintf(s.Out, "wrote %s (%d frames at %g fps)\n", path, len(cams), o.fps)
	default:
		fmt.Fprintf(s.Out, "wrote %d orbit frames to %s\n", len(cams), o.outDir)
	}
	return nil
}

// defaultRenderDir is where render writes without --out: beside its input rather than in
// whatever directory the command happens to run from. A checkpoint in a run's checkpoints/
// renders into that run's directory.
func defaultRenderDir(scene string) string {
	dir := filepath.Dir(scene)
	if filepath.Base(dir) == "checkpoints" {
		dir = filepath.Dir(dir)
	}
	return filepath.Join(dir, "render")
}

// metrics returns PSNR and SSIM (the standard metric, loss.MetricSSIM) of a render, clamped
// to [0,1] as training's evaluation scores it, against the view's photo.
func metrics(raw []float32, v dataset.View) (float64, float64, error) {
	img := loss.Clamp01(nil, raw)
	p, err := loss.PSNR(img, v.Image.RGB)
	if err != nil {
		return 0, 0, err
	}
	ev, err := loss.NewEvaluator(v.Camera.Width, v.Camera.Height, 1)
	if err != nil {
		return 0, 0, err
	}
	ss, err := ev.MetricSSIM(img, v.Image.RGB)
	return p, ss, err
}
