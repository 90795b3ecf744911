package config

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want string // substring of the single problem; "" = valid
	}{
		// Enumerations: every allowed value passes, a near miss names the set.
		{"format empty", func(c *Config) { c.Data.Format = "" }, ""},
		{"format auto", func(c *Config) { c.Data.Format = FormatAuto }, ""},
		{"format colmap", func(c *Config) { c.Data.Format = FormatColmap }, ""},
		{"format transforms", func(c *Config) { c.Data.Format = FormatTransforms }, ""},
		{"format bad", func(c *Config) { c.Data.Format = "nerf" }, `data.format: "nerf" is not one of auto, colmap, transforms (or "" for auto)`},
		{"init sfm", func(c *Config) { c.Init.Mode = InitSfM }, ""},
		{"init random", func(c *Config) { c.Init.Mode = InitRandom }, ""},
		{"init bad", func(c *Config) { c.Init.Mode = "SFM" }, `init.mode: "SFM" is not one of sfm, random, scene`},
		{"init scene empty", func(c *Config) { c.Init.Mode = InitScene }, `init.scene: is empty: init.mode scene starts from the splats of a scene file`},
		{"render ewa", func(c *Config) { c.Model.Render = RenderEWA }, ""},
		{"render ray", func(c *Config) { c.Model.Render = RenderRay }, ""},
		{"render bad", func(c *Config) { c.Model.Render = "" }, `model.render: "" is not one of ewa, ray`},
		{"bin gpu-conic", func(c *Config) { c.Raster.BinMode = BinGPUConic }, ""},
		{"bin gpu-radius-aabb", func(c *Config) { c.Raster.BinMode = BinGPURadiusAABB }, ""},
		{"bin cpu-conic", func(c *Config) { c.Raster.BinMode = BinCPUConic }, ""},
		{"bin bad", func(c *Config) { c.Raster.BinMode = "gpu-conik" }, `raster.bin_mode: "gpu-conik" is not one of gpu-conic, gpu-radius-aabb, cpu-conic`},
		{"tile 8", func(c *Config) { c.Raster.TileSize = 8 }, ""},
		{"tile 32", func(c *Config) { c.Raster.TileSize = 32 }, ""},
		{"tile bad", func(c *Config) { c.Raster.TileSize = 64 }, "raster.tile_size: 64 is not one of 8, 16, 32"},
		{"loss mse", func(c *Config) { c.Loss.Kind = LossMSE }, ""},
		{"loss mse-ssim", func(c *Config) { c.Loss.Kind = LossMSESSIM }, ""},
		{"loss bad", func(c *Config) { c.Loss.Kind = "l2" }, `loss.kind: "l2" is not one of l1-ssim, mse, mse-ssim`},
		{"device cpu", func(c *Config) { c.Train.Device = DeviceCPU }, ""},
		{"device cuda", func(c *Config) { c.Train.Device = DeviceCUDA }, ""},
		{"device metal", func(c *Config) { c.Train.Device = DeviceMetal }, ""},
		{"device emu", func(c *Config) { c.Train.Device = DeviceEmu }, ""},
		{"device bad", func(c *Config) { c.Train.Device = "gpu" }, `train.device: "gpu" is not one of auto, cpu, cuda, metal, emu`},
		{"formats empty", func(c *Config) { c.Output.Formats = nil }, ""},
		{"formats bad", func(c *Config) { c.Output.Formats = []string{"ply", "spz"} }, `output.formats: "spz" is not one of ply`},
		{"formats twice", func(c *Config) { c.Output.Formats = []string{"ply", "ply"} }, `output.formats: "ply" is listed twice`},

		// Integer ranges: the edge passes, one beyond fails.
		{"downscale 0", func(c *Config) { c.Data.Downscale = 0 }, ""},
		{"downscale -1", func(c *Config) { c.Data.Downscale = -1 }, "data.downscale: -1 is out of range: want >= 0 (0 = auto)"},
		{"max_width 1", func(c *Config) { c.Data.MaxWidth = 1 }, ""},
		{"max_width 0", func(c *Config) { c.Data.MaxWidth = 0 }, "data.max_width: 0 is out of range: want >= 1"},
		{"test_every 0", func(c *Config) { c.Data.TestEvery = 0 }, ""},
		{"test_every -1", func(c *Config) { c.Data.TestEvery = -1 }, "data.test_every: -1 is out of range: want >= 0"},
		{"random_count 0", func(c *Config) { c.Init.RandomCount = 0 }, "init.random_count: 0 is out of range: want >= 1"},
		{"sh 0", func(c *Config) { c.Model.SHDegree = 0 }, ""},
		{"sh -1", func(c *Config) { c.Model.SHDegree = -1 }, "model.sh_degree: -1 is out of range: want 0..3"},
		{"sh 4", func(c *Config) { c.Model.SHDegree = 4 }, "model.sh_degree: 4 is out of range: want 0..3"},
		{"sh interval 0", func(c *Config) { c.Model.SHDegreeInterval = 0 }, "model.sh_degree_interval: 0 is out of range: want >= 1"},
		{"max_splat_steps -1", func(c *Config) { c.Raster.MaxSplatSteps = -1 }, "raster.max_splat_steps: -1 is out of range: want >= 0 (0 = unlimited)"},
		{"means_lr_steps -1", func(c *Config) { c.Optim.MeansLRSteps = -1 }, "optim.means_lr_steps: -1 is out of range"},
		{"densify from -1", func(c *Config) { c.Densify.From = -1 }, "densify.from: -1 is out of range: want >= 0"},
		{"densify until < from", func(c *Config) { c.Densify.Until = 400 }, "densify.until: 400 is out of range: want >= densify.from (500)"},
		{"densify until < from, disabled", func(c *Config) { c.Densify.Until = 400; c.Densify.Enabled = false }, ""},
		{"densify every 0", func(c *Config) { c.Densify.Every = 0 }, "densify.every: 0 is out of range: want >= 1"},
		{"split_count 1", func(c *Config) { c.Densify.SplitCount = 1 }, "densify.split_count: 1 is out of range: want >= 2"},
		{"reset_every -1", func(c *Config) { c.Densify.ResetEvery = -1 }, "densify.reset_every: -1 is out of range: want >= 0 (0 = never)"},
		{"max_gaussians -1", func(c *Config) { c.Densify.MaxGaussians = -1 }, "densify.max_gaussians: -1 is out of range"},
		{"init scale 0", func(c *Config) { c.Init.Scale = 0 }, "init.scale: 0 is out of range: want > 0"},
		{"strategy mcmc", func(c *Config) { c.Densify.Strategy = StrategyMCMC }, ""},
		{"strategy other", func(c *Config) { c.Densify.Strategy = "taming" }, `densify.strategy: "taming" is not one of adc, mcmc`},
		{"mcmc cap_max 0", func(c *Config) { c.MCMC.CapMax = 0 }, "mcmc.cap_max: 0 is out of range: want >= 1"},
		{"mcmc noise_lr -1", func(c *Config) { c.MCMC.NoiseLR = -1 }, "mcmc.noise_lr: -1 is out of range: want >= 0 (0 = no noise)"},
		{"mcmc from -1", func(c *Config) { c.MCMC.From = -1 }, "mcmc.from: -1 is out of range: want >= 0"},
		{"mcmc until < from", func(c *Config) { c.Densify.Strategy = StrategyMCMC; c.MCMC.Until = 400 }, "mcmc.until: 400 is out of range: want >= mcmc.from (500)"},
		{"mcmc until < from, adc", func(c *Config) { c.MCMC.Until = 400 }, ""},
		{"mcmc every 0", func(c *Config) { c.MCMC.Every = 0 }, "mcmc.every: 0 is out of range: want >= 1"},
		{"mcmc min_opacity 1", func(c *Config) { c.MCMC.MinOpacity = 1 }, "mcmc.min_opacity: 1 is out of range: want a number in [0,1)"},
		{"mcmc opacity_reg -1", func(c *Config) { c.MCMC.OpacityReg = -1 }, "mcmc.opacity_reg: -1 is out of range: want >= 0 (0 = off)"},
		{"mcmc scale_reg NaN", func(c *Config) { c.MCMC.ScaleReg = math.NaN() }, "mcmc.scale_reg: NaN is out of range"},
		{"iterations 1", func(c *Config) { c.Train.Iterations = 1 }, ""},
		{"iterations 0", func(c *Config) { c.Train.Iterations = 0 }, "train.iterations: 0 is out of range: want >= 1"},
		{"threads -1", func(c *Config) { c.Train.Threads = -1 }, "train.threads: -1 is out of range: want >= 0 (0 = all cores)"},
		{"eval beyond iterations", func(c *Config) { c.Train.EvalSteps = []int{1, 1 << 40} }, ""},
		{"eval 0", func(c *Config) { c.Train.EvalSteps = []int{7000, 0} }, "train.eval_steps: 0 (entry 2) is out of range: want steps >= 1"},
		{"log_every 0", func(c *Config) { c.Train.LogEvery = 0 }, "train.log_every: 0 is out of range: want >= 1"},
		{"preview_every -1", func(c *Config) { c.Train.PreviewEvery = -1 }, "train.preview_every: -1 is out of range: want >= 0 (0 = off)"},
		{"checkpoint_every -1", func(c *Config) { c.Train.CheckpointEvery = -1 }, "train.checkpoint_every: -1 is out of range"},
		{"keep_checkpoints -1", func(c *Config) { c.Train.KeepCheckpoints = -1 }, "train.keep_checkpoints: -1 is out of range"},
		{"preview_view -1", func(c *Config) { c.Train.PreviewView = -1 }, "train.preview_view: -1 is out of range"},
		{"output dir empty", func(c *Config) { c.Output.Dir = " " }, "output.dir: is empty"},

		// Float ranges, NaN included.
		{"background 2 values", func(c *Config) { c.Data.Background = []float64{0, 0} }, "data.background: has 2 values: want 3 numbers (R, G, B) in [0,1]"},
		{"background 1.5", func(c *Config) { c.Data.Background = []float64{0, 1.5, 0} }, "data.background: 1.5 (entry 2) is out of range: want a number in [0,1]"},
		{"background NaN", func(c *Config) { c.Data.Background = []float64{math.NaN(), 0, 0} }, "data.background: NaN (entry 1)"},
		{"background white", func(c *Config) { c.Data.Background = []float64{1, 1, 1} }, ""},
		{"init opacity 0", func(c *Config) { c.Init.Opacity = 0 }, "init.opacity: 0 is out of range: want a number in (0,1)"},
		{"init opacity 1", func(c *Config) { c.Init.Opacity = 1 }, "init.opacity: 1 is out of range: want a number in (0,1)"},
		{"random_extent 0", func(c *Config) { c.Init.RandomExtent = 0 }, "init.random_extent: 0 is out of range: want > 0"},
		{"radius_scale -1", func(c *Config) { c.Model.RadiusScale = -1 }, "model.radius_scale: -1 is out of range: want > 0"},
		{"near 0", func(c *Config) { c.Model.Near = 0 }, "model.near: 0 is out of range: want > 0"},
		{"near NaN", func(c *Config) { c.Model.Near = math.NaN() }, "model.near: NaN is out of range: want > 0"},
		{"ssim 0", func(c *Config) { c.Loss.SSIMLambda = 0 }, ""},
		{"ssim 1", func(c *Config) { c.Loss.SSIMLambda = 1 }, ""},
		{"ssim 1.1", func(c *Config) { c.Loss.SSIMLambda = 1.1 }, "loss.ssim_lambda: 1.1 is out of range: want a number in [0,1]"},
		{"lr 0 freezes", func(c *Config) { c.Optim.QuatsLR = 0; c.Optim.MeansLR = 0; c.Optim.MeansLRFinal = 0 }, ""},
		{"scales lr < 0", func(c *Config) { c.Optim.ScalesLR = -1e-3 }, "optim.scales_lr: -0.001 is out of range: want >= 0 (0 freezes the group)"},
		{"quats lr < 0", func(c *Config) { c.Optim.QuatsLR = -1 }, "optim.quats_lr: -1 is out of range"},
		{"opacity lr < 0", func(c *Config) { c.Optim.OpacityLR = -1 }, "optim.opacity_lr: -1 is out of range"},
		{"sh dc lr < 0", func(c *Config) { c.Optim.SHDCLR = -1 }, "optim.sh_dc_lr: -1 is out of range"},
		{"sh rest lr < 0", func(c *Config) { c.Optim.SHRestLR = -1 }, "optim.sh_rest_lr: -1 is out of range"},
		{"means lr < 0", func(c *Config) { c.Optim.MeansLR = -1 }, "optim.means_lr: -1 is out of range"},
		{"means final 0", func(c *Config) { c.Optim.MeansLRFinal = 0 }, "optim.means_lr_final: 0 is out of range: want > 0 when optim.means_lr > 0"},
		{"means final < 0, frozen", func(c *Config) { c.Optim.MeansLR = 0; c.Optim.MeansLRFinal = -1 }, "optim.means_lr_final: -1 is out of range: want >= 0"},
		{"beta1 1", func(c *Config) { c.Optim.Beta1 = 1 }, "optim.beta1: 1 is out of range: want a number in [0,1)"},
		{"beta1 0", func(c *Config) { c.Optim.Beta1 = 0 }, ""},
		{"beta2 -0.1", func(c *Config) { c.Optim.Beta2 = -0.1 }, "optim.beta2: -0.1 is out of range: want a number in [0,1)"},
		{"eps 0", func(c *Config) { c.Optim.Eps = 0 }, "optim.eps: 0 is out of range: want > 0"},
		{"grad_clip -1", func(c *Config) { c.Optim.GradClip = -1 }, "optim.grad_clip: -1 is out of range: want >= 0 (0 = off)"},
		{"grad_threshold 0", func(c *Config) { c.Densify.GradThreshold = 0 }, "densify.grad_threshold: 0 is out of range: want > 0"},
		{"absgrad ewa", func(c *Config) { c.Densify.AbsGrad = true }, ""},
		{"absgrad ray", func(c *Config) { c.Densify.AbsGrad, c.Model.Render = true, RenderRay }, "densify.absgrad: true needs model.render ewa"},
		{"percent_dense 0", func(c *Config) { c.Densify.PercentDense = 0 }, "densify.percent_dense: 0 is out of range: want > 0"},
		{"prune_opacity 1", func(c *Config) { c.Densify.PruneOpacity = 1 }, "densify.prune_opacity: 1 is out of range: want a number in [0,1)"},
		{"max_screen_size -1", func(c *Config) { c.Densify.MaxScreenSize = -1 }, "densify.max_screen_size: -1 is out of range: want >= 0 (0 = off)"},
		{"max_world_scale -1", func(c *Config) { c.Densify.MaxWorldScale = -1 }, "densify.max_world_scale: -1 is out of range"},
		{"coarse_scale 0", func(c *Config) { c.Train.CoarseScale = 0 }, "train.coarse_scale: 0 is out of range: want >= 1 (1 = off)"},
		{"coarse_scale 4", func(c *Config) { c.Train.CoarseScale = 4 }, ""},
		{"coarse_until -1", func(c *Config) { c.Train.CoarseUntil = -1 }, "train.coarse_until: -1 is out of range: want >= 0"},
		{"batch_size 0", func(c *Config) { c.Train.BatchSize = 0 }, "train.batch_size: 0 is out of range: want >= 1"},
		{"batch_size 8", func(c *Config) { c.Train.BatchSize = 8 }, ""},
		{"batch_size 10", func(c *Config) { c.Train.BatchSize = 10 }, ""},
		{"batch_size 11", func(c *Config) { c.Train.BatchSize = 11 }, "train.batch_size: 11 is out of range: Adam's β1 for a batch, 1 − 11·(1 − optim.beta1 0.9), must not fall below 0 (at most 10 views)"},
		{"steps_scale 0", func(c *Config) { c.Train.StepsScale = 0 }, "train.steps_scale: 0 is out of range: want a number in (0,1000]"},
		{"steps_scale 0.25", func(c *Config) { c.Train.StepsScale = 0.25 }, ""},
		{"gpus 0", func(c *Config) { c.Train.GPUs = 0 }, "train.gpus: 0 is out of range: want >= 1"},
		{"gpus 2 batch 1", func(c *Config) { c.Train.GPUs = 2 }, "train.gpus: 2 is out of range: each GPU takes at least one view of a step's batch (train.batch_size 1)"},
		{"gpus 2 batch 4", func(c *Config) { c.Train.GPUs, c.Train.BatchSize = 2, 4 }, ""},
		{"gpus 2 cpu", func(c *Config) { c.Train.GPUs, c.Train.BatchSize, c.Train.Device = 2, 2, DeviceCPU }, "train.gpus: 2 GPUs need train.device cuda (or auto, or emu for checking), not cpu"},
		{"shard on one gpu", func(c *Config) { c.Train.Shard = true }, ""},
		{"shard on 2 gpus batch 1", func(c *Config) { c.Train.Shard, c.Train.GPUs = true, 2 }, ""},
		{"shard cpu", func(c *Config) { c.Train.Shard, c.Train.Device = true, DeviceCPU }, "train.shard: needs train.device cuda (or auto, or emu for checking), not cpu"},
		{"shard mcmc", func(c *Config) { c.Train.Shard, c.Densify.Strategy = true, StrategyMCMC }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := wantDefaults()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected: %v", err)
				}
				return
			}
			parts := joined(err)
			if len(parts) != 1 {
				t.Fatalf("got %d problems, want 1: %v", len(parts), err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "config: ") {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) || !strings.HasPrefix(tc.want, ce.Key+":") {
				t.Errorf("not an *Error for the key: %#v", err)
			}
		})
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	c := wantDefaults()
	c.Train.Iterations = 0
	c.Raster.BinMode = "x"
	c.Loss.SSIMLambda = 2
	c.Data.Background = nil
	c.Optim.Eps = -1
	err := c.Validate()
	if n := len(joined(err)); n != 5 {
		t.Errorf("got %d problems, want 5: %v", n, err)
	}
	var nilCfg *Config
	if err := nilCfg.Validate(); err == nil {
		t.Error("nil Config validated")
	}
}

func TestValidateNamesTheSource(t *testing.T) {
	// A Config from Load says where a bad value came from; here the value is
	// fine for the loader but out of range.
	_, err := Load(Input{Env: []string{"RLXSPLAT_TRAIN_ITERATIONS=0"}, Flags: map[string]string{"loss.kind": "l2"}})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"config: train.iterations: 0 is out of range: want >= 1 (from env RLXSPLAT_TRAIN_ITERATIONS)",
		`config: loss.kind: "l2" is not one of l1-ssim, mse, mse-ssim (from flag)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
