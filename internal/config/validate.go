package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Validate checks every value against its allowed set or range and returns
// all problems at once (errors.Join of *Error), each naming the key, what is
// allowed, and where the value came from. Load and Parse call it; call it
// again after changing a Config by hand.
func (c *Config) Validate() error {
	if c == nil {
		return &Error{Msg: "nil Config"}
	}
	return errors.Join(c.problems()...)
}

// checker collects problems for one Config.
type checker struct {
	c    *Config
	errs []error
}

func (k *checker) add(key, format string, args ...any) {
	k.errs = append(k.errs, &Error{Key: key, Source: k.c.sources[key], Msg: fmt.Sprintf(format, args...)})
}

// oneOf checks an enumerated string.
func (k *checker) oneOf(key, got string, allowed ...string) {
	for _, a := range allowed {
		if got == a {
			return
		}
	}
	k.add(key, "%q is not one of %s", got, strings.Join(allowed, ", "))
}

func (k *checker) intOneOf(key string, got int, allowed ...int) {
	parts := make([]string, len(allowed))
	for i, a := range allowed {
		if got == a {
			return
		}
		parts[i] = strconv.Itoa(a)
	}
	k.add(key, "%d is not one of %s", got, strings.Join(parts, ", "))
}

// atLeast checks got >= lo; what says what 0 (or another value) means.
func (k *checker) atLeast(key string, got, lo int, what string) {
	if got < lo {
		k.add(key, "%d is out of range: want >= %d%s", got, lo, what)
	}
}

func (k *checker) intIn(key string, got, lo, hi int) {
	if got < lo || got > hi {
		k.add(key, "%d is out of range: want %d..%d", got, lo, hi)
	}
}

// The float checks are written so that NaN, which compares false with
// everything, always fails them.

func (k *checker) nonNegative(key string, got float64, what string) {
	if !(got >= 0) {
		k.add(key, "%s is out of range: want >= 0%s", fmtFloat(got), what)
	}
}

func (k *checker) positive(key string, got float64) {
	if !(got > 0) {
		k.add(key, "%s is out of range: want > 0", fmtFloat(got))
	}
}

// floatIn checks got against an interval; loOpen/hiOpen exclude the ends.
func (k *checker) floatIn(key string, got, lo, hi float64, loOpen, hiOpen bool) {
	okLo := got >= lo
	if loOpen {
		okLo = got > lo
	}
	okHi := got <= hi
	if hiOpen {
		okHi = got < hi
	}
	if !(okLo && okHi) {
		k.add(key, "%s is out of range: want a number in %s", fmtFloat(got), interval(lo, hi, loOpen, hiOpen))
	}
}

func interval(lo, hi float64, loOpen, hiOpen bool) string {
	l, r := "[", "]"
	if loOpen {
		l = "("
	}
	if hiOpen {
		r = ")"
	}
	return l + fmtFloat(lo) + "," + fmtFloat(hi) + r
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// problems lists every invalid value of c, in key order.
func (c *Config) problems() []error {
	k := &checker{c: c}

	d := c.Data
	switch d.Format {
	case "", FormatAuto, FormatColmap, FormatTransforms:
	default:
		k.add("data.format", "%q is not one of %s, %s, %s (or \"\" for auto)",
			d.Format, FormatAuto, FormatColmap, FormatTransforms)
	}
	k.atLeast("data.downscale", d.Downscale, 0, " (0 = auto)")
	k.atLeast("data.max_width", d.MaxWidth, 1, "")
	k.atLeast("data.test_every", d.TestEvery, 0, " (0 = no test split)")
	if len(d.Background) != 3 {
		k.add("data.background", "has %d values: want 3 numbers (R, G, B) in [0,1]", len(d.Background))
	} else {
		for i, v := range d.Background {
			if !(v >= 0 && v <= 1) {
				k.add("data.background", "%s (entry %d) is out of range: want a number in [0,1]", fmtFloat(v), i+1)
			}
		}
	}

	in := c.Init
	k.oneOf("init.mode", string(in.Mode), string(InitSfM), string(InitRandom), string(InitScene))
	if in.Mode == InitScene && in.Scene == "" {
		k.add("init.scene", "is empty: init.mode scene starts from the splats of a scene file; name it here")
	}
	k.atLeast("init.random_count", in.RandomCount, 1, "")
	k.floatIn("init.opacity", in.Opacity, 0, 1, true, true)
	k.positive("init.scale", in.Scale)
	k.positive("init.random_extent", in.RandomExtent)

	m := c.Model
	k.oneOf("model.render", string(m.Render), string(RenderEWA), string(RenderRay))
	k.intIn("model.sh_degree", m.SHDegree, 0, 3)
	k.atLeast("model.sh_degree_interval", m.SHDegreeInterval, 1, "")
	k.positive("model.radius_scale", m.RadiusScale)
	k.positive("model.near", m.Near)

	r := c.Raster
	k.oneOf("raster.bin_mode", string(r.BinMode),
		string(BinGPUConic), string(BinGPURadiusAABB), string(BinCPUConic))
	k.intOneOf("raster.tile_size", r.TileSize, 8, 16, 32)
	k.atLeast("raster.max_splat_steps", r.MaxSplatSteps, 0, " (0 = unlimited)")

	k.oneOf("loss.kind", string(c.Loss.Kind), string(LossL1SSIM), string(LossMSE), string(LossMSESSIM))
	k.floatIn("loss.ssim_lambda", c.Loss.SSIMLambda, 0, 1, false, false)

	o := c.Optim
	const freeze = " (0 freezes the group)"
	k.nonNegative("optim.means_lr", o.MeansLR, freeze)
	// The means decay is log-linear, so a positive start needs a positive end.
	if o.MeansLR > 0 && !(o.MeansLRFinal > 0) {
		k.add("optim.means_lr_final", "%s is out of range: want > 0 when optim.means_lr > 0 (the decay is exponential)", fmtFloat(o.MeansLRFinal))
	} else {
		k.nonNegative("optim.means_lr_final", o.MeansLRFinal, "")
	}
	k.atLeast("optim.means_lr_steps", o.MeansLRSteps, 0, " (0 = train.iterations)")
	k.nonNegative("optim.scales_lr", o.ScalesLR, freeze)
	k.nonNegative("optim.quats_lr", o.QuatsLR, freeze)
	k.nonNegative("optim.opacity_lr", o.OpacityLR, freeze)
	k.nonNegative("optim.sh_dc_lr", o.SHDCLR, freeze)
	k.nonNegative("optim.sh_rest_lr", o.SHRestLR, freeze)
	k.floatIn("optim.beta1", o.Beta1, 0, 1, false, true)
	k.floatIn("optim.beta2", o.Beta2, 0, 1, false, true)
	k.positive("optim.eps", o.Eps)
	k.nonNegative("optim.grad_clip", o.GradClip, " (0 = off)")

	ds := c.Densify
	k.oneOf("densify.strategy", ds.Strategy, StrategyADC, StrategyMCMC)
	k.atLeast("densify.from", ds.From, 0, "")
	// An inverted window only matters when densification runs.
	if ds.Enabled && ds.Until < ds.From {
		k.add("densify.until", "%d is out of range: want >= densify.from (%d)", ds.Until, ds.From)
	}
	k.atLeast("densify.every", ds.Every, 1, "")
	k.positive("densify.grad_threshold", ds.GradThreshold)
	if ds.AbsGrad && c.Model.Render == RenderRay {
		k.add("densify.absgrad", "true needs model.render ewa: the ray model has no 2D means")
	}
	k.positive("densify.percent_dense", ds.PercentDense)
	k.atLeast("densify.split_count", ds.SplitCount, 2, "")
	k.floatIn("densify.prune_opacity", ds.PruneOpacity, 0, 1, false, true)
	k.atLeast("densify.reset_every", ds.ResetEvery, 0, " (0 = never)")
	k.nonNegative("densify.max_screen_size", ds.MaxScreenSize, " (0 = off)")
	k.nonNegative("densify.max_world_scale", ds.MaxWorldScale, " (0 = off)")
	k.atLeast("densify.max_gaussians", ds.MaxGaussians, 0, " (0 = unlimited)")

	mc := c.MCMC
	k.atLeast("mcmc.cap_max", mc.CapMax, 1, "")
	k.nonNegative("mcmc.noise_lr", mc.NoiseLR, " (0 = no noise)")
	k.atLeast("mcmc.from", mc.From, 0, "")
	if ds.Enabled && ds.Strategy == StrategyMCMC && mc.Until < mc.From {
		k.add("mcmc.until", "%d is out of range: want >= mcmc.from (%d)", mc.Until, mc.From)
	}
	k.atLeast("mcmc.every", mc.Every, 1, "")
	k.floatIn("mcmc.min_opacity", mc.MinOpacity, 0, 1, false, true)
	k.nonNegative("mcmc.opacity_reg", mc.OpacityReg, " (0 = off)")
	k.nonNegative("mcmc.scale_reg", mc.ScaleReg, " (0 = off)")
	k.oneOf("mcmc.regularize", mc.Regularize, RegInView, RegAll)

	t := c.Train
	k.atLeast("train.iterations", t.Iterations, 1, "")
	k.oneOf("train.device", string(t.Device), DeviceNames()...)
	k.atLeast("train.threads", t.Threads, 0, " (0 = all cores)")
	for i, s := range t.EvalSteps {
		if s < 1 {
			k.add("train.eval_steps", "%d (entry %d) is out of range: want steps >= 1", s, i+1)
		}
	}
	k.atLeast("train.log_every", t.LogEvery, 1, "")
	k.atLeast("train.preview_every", t.PreviewEvery, 0, " (0 = off)")
	k.atLeast("train.checkpoint_every", t.CheckpointEvery, 0, " (0 = only at the end)")
	k.atLeast("train.keep_checkpoints", t.KeepCheckpoints, 0, " (0 = keep all)")
	k.atLeast("train.preview_view", t.PreviewView, 0, "")
	k.atLeast("train.coarse_scale", t.CoarseScale, 1, " (1 = off)")
	k.atLeast("train.coarse_until", t.CoarseUntil, 0, "")
	k.atLeast("train.batch_size", t.BatchSize, 1, "")
	if t.BatchSize > maxBatch(c.Optim.Beta1, c.Optim.Beta2) {
		k.add("train.batch_size", "%d is out of range: Adam's β1 for a batch, 1 − %d·(1 − optim.beta1 %g), must not fall below 0 (at most %d views)",
			t.BatchSize, t.BatchSize, c.Optim.Beta1, maxBatch(c.Optim.Beta1, c.Optim.Beta2))
	}
	k.floatIn("train.steps_scale", t.StepsScale, 0, 1000, true, false)
	k.atLeast("train.gpus", t.GPUs, 1, "")
	if t.GPUs > 1 && t.BatchSize < t.GPUs && !t.Shard { // sharded, each view is drawn by one GPU in turn
		k.add("train.gpus", "%d is out of range: each GPU takes at least one view of a step's batch (train.batch_size %d)", t.GPUs, t.BatchSize)
	}
	if t.GPUs > 1 && (t.Device == DeviceCPU || t.Device == DeviceMetal || t.Device == DeviceMetalEmu) {
		k.add("train.gpus", "%d GPUs need train.device cuda (or auto, or emu for checking), not %s", t.GPUs, t.Device)
	}
	if t.Shard && (t.Device == DeviceCPU || t.Device == DeviceMetal || t.Device == DeviceMetalEmu) {
		k.add("train.shard", "needs train.device cuda (or auto, or emu for checking), not %s", t.Device)
	}

	if strings.TrimSpace(c.Output.Dir) == "" {
		k.add("output.dir", "is empty: want a directory")
	}
	seen := map[string]bool{}
	for _, f := range c.Output.Formats {
		k.oneOf("output.formats", f, ExportPLY)
		if seen[f] {
			k.add("output.formats", "%q is listed twice", f)
		}
		seen[f] = true
	}
	return k.errs
}

// maxBatch is the largest batch for which 1 − B(1 − β) is not below 0 for both betas (with a
// margin for the rounding of 1 − β: β1 = 0.9 allows 10 views, Adam then without momentum).
func maxBatch(b1, b2 float64) int {
	const slack = 1e-9
	m := 1
	for float64(m+1)*(1-b1) <= 1+slack && float64(m+1)*(1-b2) <= 1+slack && m < 1<<20 {
		m++
	}
	return m
}
