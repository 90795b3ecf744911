package config

// Config is a resolved run configuration, one field per key. The documentation
// of each key's meaning, units and default lives in configs/default.yaml (the
// one source of defaults); the field comments here say what code reads.
//
// The yaml tags are the key names: section.key, for example
// "train.iterations". A Config made by Load or Parse also remembers where
// each value came from (Sources, Describe).
type Config struct {
	Data    Data    `yaml:"data"`
	Init    Init    `yaml:"init"`
	Model   Model   `yaml:"model"`
	Raster  Raster  `yaml:"raster"`
	Loss    Loss    `yaml:"loss"`
	Optim   Optim   `yaml:"optim"`
	Densify Densify `yaml:"densify"`
	MCMC    MCMC    `yaml:"mcmc"`
	Train   Train   `yaml:"train"`
	Output  Output  `yaml:"output"`

	// sources maps each key to the layer that set it; nil for a Config built
	// by hand. Unexported so that YAML output and callers never see it.
	sources map[string]Source
}

// Format is a dataset layout (data.format).
type Format string

// Dataset layouts.
const (
	FormatAuto       Format = "auto" // detect from the files; "" means the same
	FormatColmap     Format = "colmap"
	FormatTransforms Format = "transforms"
)

// Data is the "data" section: the scene and how its photos are prepared.
type Data struct {
	// Dir is the dataset directory ("" until the user gives one).
	Dir string `yaml:"dir"`
	// Format is the dataset layout; "" and FormatAuto both mean detect.
	Format Format `yaml:"format"`
	// Images is the folder of photos inside Dir for COLMAP captures.
	Images string `yaml:"images"`
	// Downscale divides the photo size (≥ 1); 0 means auto (see MaxWidth).
	Downscale int `yaml:"downscale"`
	// MaxWidth is the width in pixels above which Downscale 0 scales down.
	MaxWidth int `yaml:"max_width"`
	// TestEvery holds out every TestEvery-th photo by name; 0 = no test split.
	TestEvery int `yaml:"test_every"`
	// Background is the RGB background in [0,1], photo encoding. [3]
	Background []float64 `yaml:"background,flow"`
	// RandomBackground draws a new random background every step.
	RandomBackground bool `yaml:"random_background"`
}

// InitMode says where the initial Gaussians come from (init.mode).
type InitMode string

// Initialisation modes.
const (
	InitSfM    InitMode = "sfm"    // the dataset's points; random when it has none
	InitRandom InitMode = "random" // a random cube around the scene
	InitScene  InitMode = "scene"  // the splats of a scene file (init.scene)
)

// Init is the "init" section: the initial Gaussians.
type Init struct {
	// Mode is sfm, random or scene.
	Mode InitMode `yaml:"mode"`
	// RandomCount is the number of random points (random mode and fallback).
	RandomCount int `yaml:"random_count"`
	// Opacity is the initial opacity of every Gaussian, in (0,1).
	Opacity float64 `yaml:"opacity"`
	// Scale multiplies the initial scales of sfm and random init (> 0).
	Scale float64 `yaml:"scale"`
	// RandomExtent is the half-size of the random cube / scene extent.
	RandomExtent float64 `yaml:"random_extent"`
	// PointsFrom is a COLMAP sparse model folder whose points initialise the
	// scene, aligned to the dataset's cameras by matching image names; "" =
	// the dataset's own points.
	PointsFrom string `yaml:"points_from"`
	// Scene is the scene file (any format internal/io/scene reads) whose
	// splats start the training when Mode is scene.
	Scene string `yaml:"scene"`
}

// RenderModel selects the per-splat prepare and per-pixel alpha
// (design.md §4).
type RenderModel string

// Render models.
const (
	RenderEWA RenderModel = "ewa" // classic 3DGS splatting
	RenderRay RenderModel = "ray" // the seed's ray-based evaluation
)

// Model is the "model" section: the render model and SH schedule.
type Model struct {
	// Render is the render model.
	Render RenderModel `yaml:"render"`
	// SHDegree is the highest SH degree, 0..3.
	SHDegree int `yaml:"sh_degree"`
	// SHDegreeInterval is the number of steps between SH degree increases.
	SHDegreeInterval int `yaml:"sh_degree_interval"`
	// Antialiased turns on the Mip-Splatting 2D filter (ewa model).
	Antialiased bool `yaml:"antialiased"`
	// RadiusScale multiplies every scale in the ray model, > 0.
	RadiusScale float64 `yaml:"radius_scale"`
	// Near is the near-plane depth in world units, > 0.
	Near float64 `yaml:"near"`
}

// BinMode is a tile-binning mode (design.md §5 step 2).
type BinMode string

// Binning modes.
const (
	BinGPUConic      BinMode = "gpu-conic"       // device, exact conic–tile test
	BinGPURadiusAABB BinMode = "gpu-radius-aabb" // device, every tile in the radius box
	BinCPUConic      BinMode = "cpu-conic"       // host bins and sorts, uploads lists
)

// Raster is the "raster" section: binning and rasterization.
type Raster struct {
	// BinMode is the tile-binning mode.
	BinMode BinMode `yaml:"bin_mode"`
	// TileSize is the tile edge in pixels: 8, 16 or 32.
	TileSize int `yaml:"tile_size"`
	// MaxSplatSteps caps splats blended per pixel; 0 = unlimited.
	MaxSplatSteps int `yaml:"max_splat_steps"`
}

// LossKind is a photometric loss (design.md §5 step 5).
type LossKind string

// Loss kinds.
const (
	LossL1SSIM  LossKind = "l1-ssim"  // (1−λ)·L1 + λ·(1−SSIM)
	LossMSE     LossKind = "mse"      // mean squared error
	LossMSESSIM LossKind = "mse-ssim" // (1−λ)·MSE + λ·(1−SSIM), the seed's blend
)

// Loss is the "loss" section.
type Loss struct {
	// Kind is the loss.
	Kind LossKind `yaml:"kind"`
	// SSIMLambda is λ, the SSIM weight, in [0,1].
	SSIMLambda float64 `yaml:"ssim_lambda"`
}

// Optim is the "optim" section: Adam and its per-group learning rates. A
// learning rate of 0 freezes its group.
type Optim struct {
	// MeansLR is the initial means learning rate, before the trainer
	// multiplies it by the scene extent.
	MeansLR float64 `yaml:"means_lr"`
	// MeansLRFinal is the final means learning rate (also × extent).
	MeansLRFinal float64 `yaml:"means_lr_final"`
	// MeansLRSteps is the length of the exponential decay; 0 = Train.Iterations.
	MeansLRSteps int `yaml:"means_lr_steps"`
	// ScalesLR is the log-scales learning rate.
	ScalesLR float64 `yaml:"scales_lr"`
	// QuatsLR is the quaternions learning rate.
	QuatsLR float64 `yaml:"quats_lr"`
	// OpacityLR is the opacity-logits learning rate.
	OpacityLR float64 `yaml:"opacity_lr"`
	// SHDCLR is the SH DC learning rate.
	SHDCLR float64 `yaml:"sh_dc_lr"`
	// SHRestLR is the learning rate of the SH coefficients above DC.
	SHRestLR float64 `yaml:"sh_rest_lr"`
	// Beta1 is Adam's β1, in [0,1).
	Beta1 float64 `yaml:"beta1"`
	// Beta2 is Adam's β2, in [0,1).
	Beta2 float64 `yaml:"beta2"`
	// Eps is Adam's ε, > 0.
	Eps float64 `yaml:"eps"`
	// GradClip clips gradient elements to ±GradClip; 0 = off.
	GradClip float64 `yaml:"grad_clip"`
	// VisibleOnly updates only the Gaussians visible in the step's view.
	VisibleOnly bool `yaml:"visible_only"`
	// VisibleOnlySH updates the SH rest coefficients (bands 1–3) only for the Gaussians in the
	// step's view; the other parameters stay dense.
	VisibleOnlySH bool `yaml:"visible_only_sh"`
}

// Densification strategies (densify.strategy).
const (
	StrategyADC  = "adc"  // the original 3DGS adaptive density control
	StrategyMCMC = "mcmc" // 3DGS as Markov Chain Monte Carlo (the mcmc section)
)

// Densify is the "densify" section: adaptive density control.
type Densify struct {
	// Enabled turns densification on.
	Enabled bool `yaml:"enabled"`
	// Strategy picks the densifier: StrategyADC (the keys below) or StrategyMCMC (the mcmc
	// section).
	Strategy string `yaml:"strategy"`
	// From is the first densifying step.
	From int `yaml:"from"`
	// Until is the last densifying step.
	Until int `yaml:"until"`
	// Every is the number of steps between densifications.
	Every int `yaml:"every"`
	// GradThreshold is the mean 2D position-gradient norm that triggers
	// clone/split.
	GradThreshold float64 `yaml:"grad_threshold"`
	// AbsGrad makes that statistic AbsGS's: the pixels' contributions to the
	// 2D mean's gradient summed by magnitude (gsplat's absgrad; ewa only).
	AbsGrad bool `yaml:"absgrad"`
	// PercentDense splits clone from split: max scale ≤ PercentDense·extent
	// clones.
	PercentDense float64 `yaml:"percent_dense"`
	// SplitCount is the number of children of a split.
	SplitCount int `yaml:"split_count"`
	// PruneOpacity prunes Gaussians below this opacity.
	PruneOpacity float64 `yaml:"prune_opacity"`
	// ResetEvery is the number of steps between opacity resets; 0 = never.
	ResetEvery int `yaml:"reset_every"`
	// OpacityReset says whether those steps reset the opacities; off, ResetEvery still
	// starts the large-splat pruning (gsplat 1.5.3's DefaultStrategy).
	OpacityReset bool `yaml:"opacity_reset"`
	// MaxScreenSize prunes screen radii above it (pixels); 0 = off.
	MaxScreenSize float64 `yaml:"max_screen_size"`
	// MaxWorldScale prunes scales above it × extent; 0 = off.
	MaxWorldScale float64 `yaml:"max_world_scale"`
	// MaxGaussians caps the count; 0 = unlimited.
	MaxGaussians int `yaml:"max_gaussians"`
}

// MCMC is the "mcmc" section: the densifier of densify.strategy mcmc.
type MCMC struct {
	// CapMax is the Gaussian budget the growth stops at.
	CapMax int `yaml:"cap_max"`
	// NoiseLR multiplies the means learning rate into the position noise's scale.
	NoiseLR float64 `yaml:"noise_lr"`
	// From, Until and Every are the refinement window: steps s with From < s < Until and
	// s % Every == 0 relocate dead Gaussians and grow the set.
	From  int `yaml:"from"`
	Until int `yaml:"until"`
	Every int `yaml:"every"`
	// MinOpacity is the opacity at or below which a Gaussian is dead.
	MinOpacity float64 `yaml:"min_opacity"`
	// OpacityReg and ScaleReg weigh the mean-opacity and mean-scale regularisers.
	OpacityReg float64 `yaml:"opacity_reg"`
	ScaleReg   float64 `yaml:"scale_reg"`
	// Regularize says which Gaussians the regularisers' gradients reach: RegInView (those in
	// the step's view, where the loss gradient is) or RegAll (every one, as gsplat does).
	Regularize string `yaml:"regularize"`
}

// The values of mcmc.regularize.
const (
	RegInView = "in_view"
	RegAll    = "all"
)

// Device selects where the training step runs (train.device).
type Device string

// Devices. auto tries the GPU engines in the order gpu.AutoOrder gives (Metal first on
// macOS, then CUDA) and falls back to the CPU engine; metal and cuda require that backend; emu
// runs the fused engine on the host emulator, a slow checking device that needs a C++
// compiler (never picked by auto).
const (
	DeviceAuto  Device = "auto" // a working GPU, else the CPU
	DeviceCPU   Device = "cpu"
	DeviceCUDA  Device = "cuda"
	DeviceMetal Device = "metal"
	DeviceEmu   Device = "emu"
	// DeviceMetalEmu: the Metal backend on a simulated device running the exact MSL built for
	// the host; slow, for checking the Metal path without a Mac.
	DeviceMetalEmu Device = "metal-emu"
)

// DeviceNames lists the values train.device accepts, in the order help and errors show them:
// flag help, completion and the validation error all read this one list.
func DeviceNames() []string {
	return []string{string(DeviceAuto), string(DeviceCPU), string(DeviceCUDA), string(DeviceMetal), string(DeviceEmu), string(DeviceMetalEmu)}
}

// GPU reports whether d names one fused-engine backend (cuda, metal, emu, metal-emu): a device the run
// requires rather than one it may fall back from.
func (d Device) GPU() bool {
	return d == DeviceCUDA || d == DeviceMetal || d == DeviceEmu || d == DeviceMetalEmu
}

// Train is the "train" section: the run itself.
type Train struct {
	// Iterations is the number of steps, ≥ 1.
	Iterations int `yaml:"iterations"`
	// Seed seeds every random choice of the run.
	Seed int64 `yaml:"seed"`
	// Device is where the step runs.
	Device Device `yaml:"device"`
	// Threads is the number of CPU workers; 0 = all cores.
	Threads int `yaml:"threads"`
	// EvalSteps are the steps at which test views are evaluated; those
	// beyond Iterations are ignored, and the final step is always evaluated.
	EvalSteps []int `yaml:"eval_steps,flow"`
	// LogEvery is the metrics.jsonl cadence in steps.
	LogEvery int `yaml:"log_every"`
	// PreviewEvery is the preview cadence in steps; 0 = off.
	PreviewEvery int `yaml:"preview_every"`
	// CheckpointEvery is the checkpoint cadence; 0 = only at the end.
	CheckpointEvery int `yaml:"checkpoint_every"`
	// KeepCheckpoints is how many checkpoints stay on disk; 0 = all.
	KeepCheckpoints int `yaml:"keep_checkpoints"`
	// PreviewView indexes the test views (train views without a test split).
	PreviewView int `yaml:"preview_view"`
	// SaveEvalRenders writes every evaluated view's render (clamped to [0,1]) as a PNG at each
	// evaluation, and the photos once, so that others can score them with their own metrics.
	SaveEvalRenders bool `yaml:"save_eval_renders"`
	// CoarseScale is the integer factor by which the first step scales the photos down;
	// 1 = every step at full size.
	CoarseScale int `yaml:"coarse_scale"`
	// CoarseUntil is the step from which every step renders at full size.
	CoarseUntil int `yaml:"coarse_until"`
	// BatchSize is the number of views each step renders and back-propagates, the step's loss
	// the mean of theirs (learning rates ×√B, Adam's β 1 − B(1 − β), ε/√B).
	BatchSize int `yaml:"batch_size"`
	// StepsScale multiplies every step count of the schedule (iterations, evaluations,
	// previews, checkpoints, SH interval, learning-rate decay, densification).
	StepsScale float64 `yaml:"steps_scale"`
	// GPUs is the number of GPUs of the host that share each step's batch (data-parallel,
	// gradients summed with NCCL); 1 = one GPU.
	GPUs int `yaml:"gpus"`
	// Shard gives each GPU a share of the Gaussians (Gaussian sharding, docs/sharding.md) in
	// place of the whole scene: memory per GPU falls with the GPUs, for scenes past one GPU's.
	Shard bool `yaml:"shard"`
}

// Export formats (output.formats).
const (
	ExportPLY = "ply" // INRIA layout
)

// Output is the "output" section.
type Output struct {
	// Dir is the output directory.
	Dir string `yaml:"dir"`
	// Formats are the export formats written at the end.
	Formats []string `yaml:"formats,flow"`
}
