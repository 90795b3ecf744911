package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

type benchOptions struct {
	cf        configFlags
	steps     int
	warmup    int
	gaussians int
	json      bool
	profile   string
}

func newBenchCmd(s *streams, runF func(*benchOptions, *config.Config) error) *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench [flags]",
		Short: "Time the training step per stage",
		Long: `Bench initialises Gaussians from a dataset (the demo scene without --data),
runs warm-up steps, then times full training steps (no densification) over the
training views and reports the median milliseconds of every stage and the
steps per second. With --gaussians N the scene is resampled to N Gaussians.`,
		Example: `  rlxsplat bench --data ../shared/data/bonsai --downscale 4 --steps 20`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	o.cf.bindKey(fs, "device", "train.device", "device: cpu, cuda or auto")
	o.cf.bindKey(fs, "render", "model.render", "render model: ewa or ray")
	o.cf.bindKey(fs, "threads", "train.threads", "CPU threads (0 = all cores)")
	fs.IntVar(&o.steps, "steps", 20, "timed steps")
	fs.IntVar(&o.warmup, "warmup", 3, "untimed steps first")
	fs.IntVar(&o.gaussians, "gaussians", 0, "resample the initial scene to N Gaussians (0 = as initialised)")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a Go CPU profile of the timed steps to this file")
	return cmd
}

// benchResult is what bench reports (also as JSON).
type benchResult struct {
	Engine      string             `json:"engine"`
	Dataset     string             `json:"dataset"`
	Width       int                `json:"width"`
	Height      int                `json:"height"`
	Gaussians   int                `json:"gaussians"`
	Steps       int                `json:"steps"`
	StageMs     map[string]float64 `json:"stage_ms_median"`
	StepMs      float64            `json:"step_ms_median"`
	StepsPerSec float64            `json:"steps_per_sec"`
	Entries     int                `json:"tile_entries_last"`
}

func runBench(o *benchOptions, c *config.Config, s *streams) error {
	ds, err := app.LoadDataset(c)
	if err != nil {
		return err
	}
	opt := app.TrainOptions(c, nil)
	g, _, err := train.Initial(opt, ds)
	if err != nil {
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
	so := engine.StepOptions{SHDegree: c.Model.SHDegree, LR: lr, Background: app.Background(c)}
	stages := map[string][]float64{}
	var stopProfile func()
	var total []float64
	var last engine.StepResult
	for i := 0; i < o.warmup+o.steps; i++ {
		v := ds.Train[i%len(ds.Train)]
		t0 := time.Now()
		res, err := eng.Step(&engine.View{Index: i % len(ds.Train), Camera: v.Camera, Target: v.Image.RGB}, so)
		if err != nil {
			return err
		}
		el := time.Since(t0)
		if i < o.warmup {
			continue
		}
		if i == o.warmup && o.profile != "" {
			if stopProfile, err = startProfile(o.profile); err != nil {
				return err
			}
		}
		total = append(total, float64(el.Microseconds())/1000)
		for k, d := range res.Timings {
			stages[k] = append(stages[k], float64(d.Microseconds())/1000)
		}
		last = res
	}
	if stopProfile != nil {
		stopProfile()
	}
	r := benchResult{Engine: eng.Name(), Dataset: ds.Dir, Width: ds.Train[0].Camera.Width, Height: ds.Train[0].Camera.Height,
		Gaussians: eng.Len(), Steps: o.steps, StageMs: map[string]float64{}, StepMs: median(total), Entries: last.Entries}
	for k, v := range stages {
		r.StageMs[k] = median(v)
	}
	r.StepsPerSec = 1000 / r.StepMs
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
	tw.Flush()
	fmt.Fprintf(s.Out, "%.2f steps/s\n", r.StepsPerSec)
	return nil
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
