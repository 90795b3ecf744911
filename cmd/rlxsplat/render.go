package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
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
	outDir string
}

func newRenderCmd(s *streams, runF func(*renderOptions, *config.Config) error) *cobra.Command {
	o := &renderOptions{}
	cmd := &cobra.Command{
		Use:   "render --scene FILE [flags]",
		Short: "Render a splat scene (PLY, SPZ, .splat, .glb or checkpoint) for a dataset's views or an orbit",
		Long: `Render draws a scene for the views of a dataset (--data) and writes one PNG
per view; where the views have photos it prints PSNR and SSIM per view and their
mean. With --orbit N it renders N frames on a circle around the scene instead
(the dataset's cameras set the circle). The scene may be any file rlxsplat
reads (INRIA or compressed PLY, SPZ 2-4, .splat, .glb, checkpoint), told apart
by its content; a checkpoint's stored config applies unless --config is given.`,
		Example: `  rlxsplat render --scene out/point_cloud.ply --data ../shared/data/duck --downscale 2
  rlxsplat render --scene out/checkpoints/step-07000.ckpt --orbit 60
  rlxsplat render --scene scene.spz --data ../shared/data/duck --downscale 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.scene, err = o.sf.path("render", true); err != nil {
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
			return runRender(o, c, s)
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
	fs.StringVar(&o.outDir, "out", "", "directory for the PNGs (default: render/ beside the scene file, or in the checkpoint's run directory)")
	return cmd
}

func runRender(o *renderOptions, c *config.Config, s *streams) error {
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
		cams := train.OrbitCameras(ds, o.orbit)
		for i := range cams {
			img, err := eng.Render(&cams[i], deg, bg)
			if err != nil {
				return err
			}
			path := filepath.Join(o.outDir, fmt.Sprintf("orbit_%04d.png", i))
			if err := imageio.SavePNG(path, img, cams[i].Width, cams[i].Height); err != nil {
				return err
			}
		}
		fmt.Fprintf(s.Out, "wrote %d orbit frames to %s\n", len(cams), o.outDir)
		return nil
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
