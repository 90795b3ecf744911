package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/multi"
	"github.com/rlxsplat/rlxsplat/internal/parity"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

type parityOptions struct {
	cf         configFlags
	breakGroup string
	quick      bool
	maxSplats  int // cap on the dataset's initial Gaussians, so that the CPU side runs in seconds
	// c is the resolved configuration: train.device says where the stage-by-stage GPU
	// comparison runs, data.dir names a dataset whose first test view it also uses, and the
	// rest (data.downscale, init.*, train.seed) shapes that view as train would load it.
	c *config.Config
}

// parityDownscale divides a dataset view's size when no configuration layer sets
// data.downscale: the CPU side of the comparison runs in float64 and would take minutes at
// the photos' size.
const parityDownscale = 4

func newParityCmd(s *streams, runF func(*parityOptions) error) *cobra.Command {
	o := &parityOptions{}
	cmd := &cobra.Command{
		Use:   "parity [flags]",
		Short: "Check every gradient against finite differences (and GPU engines against the CPU)",
		Long: `Parity runs the CPU engine's whole step in float64 and compares every
parameter group's gradient with central finite differences of the forward, for
both render models, every loss and SH degrees 0–3. Where a GPU engine is
available (--device auto, or cuda or metal to require one; emu runs it on
the host emulator, and metal-emu through the Metal backend on a simulated
device, both slowly, to check the kernels without a GPU or a Mac), every stage
of it is compared with the CPU engine (projection, tile lists, image, loss, each
gradient group, parameters after Adam, a densification edit) for both render
models and the three bin modes, on a random scene and, with --data, on the
dataset's first test view. It prints tables and exits with status 3 on any
failure.`,
		Example: `  rlxsplat parity --quick --device cpu
  rlxsplat parity --data ../shared/data/duck --set data.downscale=8
  rlxsplat parity --config run/config.yaml --max-splats 5000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkFlags(); err != nil {
				return err
			}
			c, err := o.cf.load(cmd.Flags(), s)
			if err != nil {
				return err
			}
			if err := parityConfig(c); err != nil {
				return err
			}
			o.c = c
			if o.cf.printConfig {
				fmt.Fprint(s.Out, c.Describe())
				return nil
			}
			// A device named that cannot be used fails before minutes of CPU checks, not after.
			if err := app.CheckDevice(c); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			return runParity(cmd.Context(), o, s)
		},
	}
	fs := cmd.Flags()
	addConfigFlags(fs, &o.cf)
	fs.StringVar(&o.breakGroup, "break", "", "scale one group's analytic gradient by 1.01 to show the check fails (means, log_scales, quats, opacity_logits, sh)")
	fs.BoolVar(&o.quick, "quick", false, "SH degrees 0 and 3 only")
	o.cf.bindKey(fs, "device", "train.device", "GPU engine comparison: auto (when a GPU is present), cuda or metal (required), emu (the host emulator) or metal-emu (the Metal path on a simulated device; both slow, for checking) or cpu (skip it)")
	o.cf.bindKey(fs, "data", "data.dir", "dataset directory: also compare the GPU engine on its first test view")
	o.cf.keyOf["downscale"] = "data.downscale"
	fs.Int("downscale", 0, fmt.Sprintf("divide the dataset view's size by N ≥ 1 (config data.downscale; %d when no layer sets it)", parityDownscale))
	fs.IntVar(&o.maxSplats, "max-splats", 20000, "cap on the dataset's initial Gaussians (evenly resampled)")
	return cmd
}

// checkFlags rejects parity's own flags before any work.
func (o *parityOptions) checkFlags() error {
	switch o.breakGroup {
	case "", "means", "log_scales", "quats", "opacity_logits", "sh":
	default:
		return usageError{fmt.Errorf("--break %q is not one of means, log_scales, quats, opacity_logits, sh", o.breakGroup)}
	}
	if o.maxSplats < 1 {
		return usageError{fmt.Errorf("--max-splats %d: want at least 1", o.maxSplats)}
	}
	return nil
}

// parityConfig applies parity's own default downscale, and rejects the settings parity
// cannot honour: the GPU comparison is of the CUDA engine, and a dataset view needs a
// downscale factor, not the automatic one.
func parityConfig(c *config.Config) error {
	if c.Sources()["data.downscale"].Layer == config.LayerDefault {
		c.Data.Downscale = parityDownscale
	}
	if !slices.Contains(config.DeviceNames(), string(c.Train.Device)) {
		return usageError{fmt.Errorf("--device %q is not one of %s", c.Train.Device, strings.Join(config.DeviceNames(), ", "))}
	}
	if c.Data.Downscale < 1 {
		return usageError{fmt.Errorf("--downscale %d: want a factor ≥ 1", c.Data.Downscale)}
	}
	return nil
}

func runParity(ctx context.Context, o *parityOptions, s *streams) error {
	if o.c == nil {
		c, err := config.Defaults()
		if err != nil {
			return fmt.Errorf("parity: %w", err)
		}
		if err := parityConfig(c); err != nil {
			return err
		}
		o.c = c
	}
	var rows []parity.Row
	for _, c := range parity.GradCases() {
		if o.quick && c.SHDegree != 0 && c.SHDegree != 3 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c.Break = o.breakGroup
		r, err := parity.CheckGrad(c)
		if err != nil {
			return fmt.Errorf("parity: %s: %w", c, err)
		}
		rows = append(rows, r...)
	}
	rows = append(rows, parity.CheckMCMC(o.breakGroup)...)
	failed := printRows(s.Out, rows)
	total := len(rows)
	gf, gn, err := gpuParity(ctx, o, s)
	if err != nil {
		return err
	}
	failed, total = failed+gf, total+gn
	if failed > 0 {
		return checkError{fmt.Sprintf("parity: %d of %d checks failed", failed, total)}
	}
	fmt.Fprintf(s.Out, "%d passed, 0 failed\n", total)
	return nil
}

// parityLR are the reference 3DGS learning rates: the Adam rows compare one step at them.
var parityLR = engine.LR{Means: 1.6e-4, LogScales: 5e-3, Quats: 1e-3, Opacity: 5e-2, SHDC: 2.5e-3, SHRest: 1.25e-4}

// gpuParity compares every stage of the fused GPU engine with the CPU engine for both render
// models and the three bin modes, on the synthetic scene and, with --data, on a dataset view.
// It prints the table and returns the number of failed and of all rows; without a GPU it
// says why in one line (an error, exit status 4, when --device named one).
func gpuParity(ctx context.Context, o *parityOptions, s *streams) (failed, total int, err error) {
	device := o.c.Train.Device
	if device == config.DeviceCPU {
		fmt.Fprintln(s.Out, "GPU engine: comparison skipped (--device cpu).")
		return 0, 0, nil
	}
	dev, err := app.OpenDevice(device)
	if err != nil {
		if device != config.DeviceAuto {
			return 0, 0, fmt.Errorf("parity: --device %s: %w", device, err)
		}
		fmt.Fprintf(s.Out, "GPU engine: comparison skipped, no usable GPU (%s); CPU checks only.\n", firstLine(err))
		return 0, 0, nil
	}
	defer dev.Close()

	type scene struct {
		name string
		g    *splat.Gaussians
		v    *engine.View
		sh   int
	}
	g, v := fused.RandomScene(0, 4000, 160, 120)
	scenes := []scene{{"random", g, v, 3}}
	if data := o.c.Data.Dir; data != "" {
		sc, err := datasetScene(o.c, o.maxSplats)
		if err != nil {
			return 0, 0, err
		}
		// SfM colours are degree 0; higher bands would only compare zeros.
		scenes = append(scenes, scene{filepath.Base(filepath.Clean(data)), sc.g, sc.v, 0})
	}
	var rows []fused.CompareRow
	var checks []string
	for _, sc := range scenes {
		// Every model and bin mode, then EWA with AbsGS's statistic (densify.absgrad).
		sets := []engine.Settings{}
		for _, m := range []prep.Model{prep.EWA, prep.Ray} {
			for _, b := range []engine.BinMode{engine.BinGPUConic, engine.BinGPURadiusAABB, engine.BinCPUConic} {
				set := engine.DefaultSettings()
				set.Render, set.BinMode = m, b
				sets = append(sets, set)
			}
		}
		abs := engine.DefaultSettings()
		abs.AbsGrad = true
		sets = append(sets, abs)
		for _, set := range sets {
			so := engine.StepOptions{SHDegree: sc.sh, LR: parityLR, AccumulateStats: true, WantImage: true}
			check := fmt.Sprintf("gpu %s %s %s", sc.name, set.Render, set.BinMode)
			if set.AbsGrad {
				check += " absgrad"
			}
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			r, err := fused.Compare(dev, set, sc.g, sc.v, so)
			if err != nil {
				return 0, 0, fmt.Errorf("parity: %s: %w", check, err)
			}
			for range r {
				checks = append(checks, check)
			}
			rows = append(rows, r...)
		}
	}
	// A step over a batch of views (train.batch_size): its summed gradients against the views
	// alone and the CPU's, its statistics and its update.
	bg, bvs := fused.RandomBatch(0, 4000, 160, 120, 3)
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		set := engine.DefaultSettings()
		set.Render = m
		so := engine.StepOptions{SHDegree: 3, LR: parityLR, AccumulateStats: true}
		check := fmt.Sprintf("gpu random batch of %d %s", len(bvs), m)
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		r, err := fused.CompareBatch(dev, set, bg, bvs, so)
		if err != nil {
			return 0, 0, fmt.Errorf("parity: %s: %w", check, err)
		}
		for range r {
			checks = append(checks, check)
		}
		rows = append(rows, r...)
	}
	for _, several := range []func(context.Context, gpu.Device, *streams) ([]fused.CompareRow, string, error){dataParallelParity, shardedParity} {
		r, check, err := several(ctx, dev, s)
		if err != nil {
			return 0, 0, err
		}
		for range r {
			checks = append(checks, check)
		}
		rows = append(rows, r...)
	}
	in := dev.Info()
	fmt.Fprintf(s.Out, "\nGPU engine (%s %s) against the CPU engine, stage by stage:\n", in.Backend, in.Name)
	return printCompareRows(s.Out, checks, rows), len(rows), nil
}

// dataParallelParity checks data-parallel steps (train.gpus) against one device's batch: over
// every CUDA device of the host (at most 8; dev is the first) with NCCL, or on a host with one
// GPU through a one-rank communicator, or over two host emulators for --device emu. Other
// backends have no data-parallel path: no rows. It returns the rows and their check's name.
func dataParallelParity(ctx context.Context, dev gpu.Device, s *streams) ([]fused.CompareRow, string, error) {
	kind := dev.Info().Backend
	devs := []gpu.Device{dev}
	var extra []gpu.Device
	defer func() {
		for _, d := range extra {
			d.Close()
		}
	}()
	switch kind {
	case gpu.KindCUDA:
		o, err := gpu.OptionsFromEnv(os.Getenv)
		if err != nil {
			return nil, "", err
		}
		for k := 1; k < 8; k++ {
			o.Ordinal = k
			d, err := gpu.OpenWith(gpu.KindCUDA, o)
			if err != nil {
				break
			}
			extra = append(extra, d)
		}
	case gpu.KindEmu:
		d, err := gpu.Open(gpu.KindEmu)
		if err != nil {
			return nil, "", err
		}
		extra = append(extra, d)
	default:
		return nil, "", nil
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	devs = append(devs, extra...)
	red := app.NewReducer(kind, len(devs), func(m string) { fmt.Fprintln(s.Err, "rlxsplat:", m) })
	defer red.Close()
	g, vs := fused.RandomBatch(1, 4000, 160, 120, max(4, len(devs)))
	o := engine.StepOptions{SHDegree: 3, LR: parityLR, AccumulateStats: true}
	rows, err := multi.Compare(devs, red, engine.DefaultSettings(), g, vs, o)
	if err != nil {
		return nil, "", fmt.Errorf("parity: data-parallel: %w", err)
	}
	how := "host reduction"
	if _, ok := red.(*multi.NCCLReducer); ok {
		how = "NCCL"
	}
	return rows, fmt.Sprintf("gpu random %d ranks, %s", len(devs), how), nil
}

// shardedParity checks a scene sharded over two ranks (train.shard) against one engine, through
// steps, a render and an uneven edit: over two CUDA devices with NCCL's exchange when the host
// has them, else over two contexts of dev's GPU (or two emulators) with the host's.
func shardedParity(ctx context.Context, dev gpu.Device, s *streams) ([]fused.CompareRow, string, error) {
	kind := dev.Info().Backend
	if kind != gpu.KindCUDA && kind != gpu.KindEmu {
		return nil, "", nil
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	o, err := gpu.OptionsFromEnv(os.Getenv)
	if err != nil {
		return nil, "", err
	}
	second, how := gpu.Device(nil), "host exchange"
	if kind == gpu.KindCUDA {
		o.Ordinal = 1
		if second, err = gpu.OpenWith(kind, o); err != nil {
			o.Ordinal = 0 // one GPU: a second context of it
			second, err = gpu.OpenWith(kind, o)
			how = "host exchange, two contexts of one GPU"
		}
	} else {
		second, err = gpu.Open(kind)
	}
	if err != nil {
		return nil, "", fmt.Errorf("parity: sharded: a second rank: %w", err)
	}
	defer second.Close()
	var x multi.Exchanger = multi.NewHostExchanger(2)
	if o.Ordinal == 1 {
		x = app.NewExchanger(kind, 2, func(m string) { fmt.Fprintln(s.Err, "rlxsplat:", m) })
		if _, ok := x.(*multi.NCCLExchanger); ok {
			how = "NCCL"
		}
	}
	defer x.Close()
	g, vs := fused.RandomBatch(2, 4000, 160, 120, 4)
	so := engine.StepOptions{SHDegree: 3, LR: parityLR, AccumulateStats: true}
	rows, err := multi.CompareSharded([]gpu.Device{dev, second}, x, engine.DefaultSettings(), g, vs, so)
	if err != nil {
		return nil, "", fmt.Errorf("parity: sharded: %w", err)
	}
	return rows, "gpu random sharded over 2 ranks, " + how, nil
}

type parityScene struct {
	g *splat.Gaussians
	v *engine.View
}

// datasetScene loads c's dataset and returns its first test view (the first training view
// when it has no test split) with its initial Gaussians capped at maxSplats.
func datasetScene(c *config.Config, maxSplats int) (parityScene, error) {
	data := c.Data.Dir
	ds, err := app.LoadDataset(c)
	if err != nil {
		return parityScene{}, fmt.Errorf("parity: --data %s: %w", data, err)
	}
	if _, err := app.InitPoints(c, ds); err != nil {
		return parityScene{}, fmt.Errorf("parity: --data %s: %w", data, err)
	}
	views := ds.Test
	if len(views) == 0 {
		views = ds.Train
	}
	if len(views) == 0 {
		return parityScene{}, fmt.Errorf("parity: --data %s: no views", data)
	}
	g, _, err := train.Initial(app.TrainOptions(c, nil), ds)
	if err != nil {
		return parityScene{}, fmt.Errorf("parity: --data %s: initial Gaussians: %w", data, err)
	}
	g = capSplats(g, maxSplats, uint64(c.Train.Seed))
	vw := views[0]
	return parityScene{g, &engine.View{Index: 0, Camera: vw.Camera, Target: vw.Image.RGB}}, nil
}

// capSplats keeps at most limit splats, evenly spaced in g's order, and gives each a random
// anisotropy and rotation: the initial splats are isotropic, and an isotropic splat's rotation
// gradient is pure rounding noise that no two summation orders agree on, so the quats row
// would compare noise rather than the engines.
func capSplats(g *splat.Gaussians, limit int, seed uint64) *splat.Gaussians {
	n := g.Len()
	m := min(n, limit)
	out := splat.New(m)
	rng := rand.New(rand.NewPCG(seed, 0x9a7))
	for j := 0; j < m; j++ {
		i := j * n / m
		copy(out.Means[j*3:j*3+3], g.Means[i*3:i*3+3])
		copy(out.SH[j*splat.SHCoeffs*3:(j+1)*splat.SHCoeffs*3], g.SH[i*splat.SHCoeffs*3:(i+1)*splat.SHCoeffs*3])
		out.OpacityLogits[j] = g.OpacityLogits[i]
		for a := 0; a < 3; a++ {
			out.LogScales[j*3+a] = g.LogScales[i*3+a] + float32(math.Log(0.4+1.2*rng.Float64()))
		}
		for k := 0; k < 4; k++ {
			out.Quats[j*4+k] = float32(rng.NormFloat64())
		}
	}
	return out
}

// printCompareRows prints the GPU comparison in the style of printRows and returns the number
// of failures. A tolerance of 0 means the values must be identical; "-" marks what a row does
// not measure.
func printCompareRows(w io.Writer, checks []string, rows []fused.CompareRow) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTAGE\tREL ERR\tCOSINE\tMAX ABS\tTOL\tRESULT\tNOTE")
	num := func(f string, x float64) string {
		if math.IsNaN(x) {
			return "-"
		}
		return fmt.Sprintf(f, x)
	}
	failed := 0
	for i, r := range rows {
		res := verdict(r.Pass, &failed)
		tol := "exact"
		switch {
		case math.IsInf(r.Tol, 1):
			tol = "report"
		case r.Tol > 0:
			tol = fmt.Sprintf("%.0e", r.Tol)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", checks[i], r.Name, num("%.2e", r.RelErr), num("%.9f", r.Cosine),
			num("%.2e", r.MaxAbs), tol, res, r.Note)
	}
	tw.Flush()
	return failed
}

// printRows prints the table and returns the number of failures.
func printRows(w io.Writer, rows []parity.Row) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tGROUP\tREL ERR\tCOSINE\tMAX ABS\tTOL\tRESULT")
	failed := 0
	for _, r := range rows {
		res := verdict(r.Pass, &failed)
		fmt.Fprintf(tw, "%s\t%s\t%.2e\t%.9f\t%.2e\t%.0e\t%s\n", r.Check, r.Group, r.RelErr, r.Cosine, r.MaxAbs, r.Tol, res)
	}
	tw.Flush()
	return failed
}

// firstLine is the first line of err's message: the device layer lists every library it
// tried, which belongs in a --device cuda error but not in the one-line skip notice.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		return strings.TrimRight(msg[:i], ": ")
	}
	return msg
}

// verdict is a table row's RESULT column; a failure is counted in failed.
func verdict(pass bool, failed *int) string {
	if pass {
		return "ok"
	}
	*failed++
	return "FAIL"
}
