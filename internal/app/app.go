// Package app wires the resolved configuration to the pieces that do the
// work: the dataset loader (or the built-in demo scene), the engine for the
// chosen device, and the trainer's options. The commands in cmd/rlxsplat
// stay thin by calling it; it prints nothing and reports fallbacks through
// a notice callback.
package app

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/demo"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/nccl"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/multi"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

// Workers is the CPU worker count a config asks for (0 = all cores).
func Workers(c *config.Config) int {
	if c.Train.Threads > 0 {
		return c.Train.Threads
	}
	return runtime.GOMAXPROCS(0)
}

// Background is the configured background colour.
func Background(c *config.Config) [3]float32 {
	var bg [3]float32
	for i := 0; i < 3 && i < len(c.Data.Background); i++ {
		bg[i] = float32(c.Data.Background[i])
	}
	return bg
}

// EngineSettings maps the config to the engine's settings.
func EngineSettings(c *config.Config) (engine.Settings, error) {
	s := engine.DefaultSettings()
	switch c.Model.Render {
	case config.RenderEWA:
		s.Render = prep.EWA
	case config.RenderRay:
		s.Render = prep.Ray
	default:
		return s, fmt.Errorf("app: model.render %q is not one of ewa, ray", c.Model.Render)
	}
	k, err := loss.ParseKind(string(c.Loss.Kind))
	if err != nil {
		return s, fmt.Errorf("app: loss.kind: %w", err)
	}
	s.Loss = k
	s.SSIMLambda = float32(c.Loss.SSIMLambda)
	s.RadiusScale = c.Model.RadiusScale
	s.Near = c.Model.Near
	s.Antialiased = c.Model.Antialiased
	s.AbsGrad = c.Densify.AbsGrad && c.Densify.Strategy != config.StrategyMCMC
	s.TileSize = c.Raster.TileSize
	s.BinMode = engine.BinMode(c.Raster.BinMode)
	s.MaxSplatSteps = c.Raster.MaxSplatSteps
	a := engine.AdamSettings{
		Beta1: float32(c.Optim.Beta1), Beta2: float32(c.Optim.Beta2), Eps: float32(c.Optim.Eps),
		GradClip: float32(c.Optim.GradClip), VisibleOnly: c.Optim.VisibleOnly,
		VisibleOnlySH: c.Optim.VisibleOnlySH,
	}
	var err2 error
	if s.Adam, err2 = a.ForBatch(c.Train.BatchSize); err2 != nil {
		return s, fmt.Errorf("app: train.batch_size: %w", err2)
	}
	s.Workers = Workers(c)
	return s, s.Validate()
}

// TrainOptions maps the config to the trainer's options. yaml is the
// resolved config as written to out/config.yaml and the checkpoints.
func TrainOptions(c *config.Config, yaml []byte) train.Options {
	o := train.Options{
		Iterations: c.Train.Iterations,
		Seed:       uint64(c.Train.Seed),
		BatchSize:  c.Train.BatchSize,
		SHDegree:   c.Model.SHDegree, SHInterval: c.Model.SHDegreeInterval,
		MeansLR: c.Optim.MeansLR, MeansLRFinal: c.Optim.MeansLRFinal, MeansLRSteps: c.Optim.MeansLRSteps,
		ScalesLR: c.Optim.ScalesLR, QuatsLR: c.Optim.QuatsLR, OpacityLR: c.Optim.OpacityLR,
		SHDCLR: c.Optim.SHDCLR, SHRestLR: c.Optim.SHRestLR,
		Background:       Background(c),
		RandomBackground: c.Data.RandomBackground,
		Densify: train.DensifyOptions{
			Enabled: c.Densify.Enabled, Strategy: c.Densify.Strategy, From: c.Densify.From, Until: c.Densify.Until, Every: c.Densify.Every,
			GradThreshold: c.Densify.GradThreshold, PercentDense: c.Densify.PercentDense, SplitN: c.Densify.SplitCount,
			PruneOpacity: c.Densify.PruneOpacity, ResetEvery: c.Densify.ResetEvery, OpacityReset: c.Densify.OpacityReset, MaxScreenSize: c.Densify.MaxScreenSize,
			MaxWorldScale: c.Densify.MaxWorldScale, MaxGaussians: c.Densify.MaxGaussians,
			MCMC: train.MCMCOptions{
				CapMax: c.MCMC.CapMax, NoiseLR: c.MCMC.NoiseLR, From: c.MCMC.From, Until: c.MCMC.Until,
				Every: c.MCMC.Every, MinOpacity: c.MCMC.MinOpacity, OpacityReg: c.MCMC.OpacityReg,
				ScaleReg: c.MCMC.ScaleReg, RegInView: c.MCMC.Regularize == config.RegInView,
			},
		},
		InitMode: string(c.Init.Mode), InitRandomCount: c.Init.RandomCount, InitScene: c.Init.Scene,
		InitOpacity: float32(c.Init.Opacity), InitScale: c.Init.Scale, InitRandomScale: c.Init.RandomExtent,
		EvalSteps: c.Train.EvalSteps, LogEvery: c.Train.LogEvery,
		PreviewEvery: c.Train.PreviewEvery, PreviewView: c.Train.PreviewView, SaveEvalRenders: c.Train.SaveEvalRenders,
		CheckpointEvery: c.Train.CheckpointEvery, KeepCheckpoints: c.Train.KeepCheckpoints,
		CoarseScale: c.Train.CoarseScale, CoarseUntil: c.Train.CoarseUntil,
		OutDir: c.Output.Dir, ConfigYAML: yaml, Workers: Workers(c),
	}
	o.ScaleSteps(c.Train.StepsScale)
	return o
}

// LoadDataset loads the configured dataset, or generates the built-in demo
// scene when no directory is given.
func LoadDataset(c *config.Config) (*dataset.Dataset, error) {
	if c.Data.Dir == "" {
		opt := demo.DefaultOptions()
		opt.Workers = Workers(c)
		return demo.Generate(opt)
	}
	opt := dataset.DefaultOptions()
	opt.Format = string(c.Data.Format)
	if opt.Format == string(config.FormatAuto) {
		opt.Format = ""
	}
	opt.Downscale = c.Data.Downscale
	opt.MaxWidth = c.Data.MaxWidth
	opt.ImagesDir = c.Data.Images
	opt.TestEvery = c.Data.TestEvery
	opt.Background = Background(c)
	opt.AllowDistortion = c.Model.Render == config.RenderRay
	opt.Workers = Workers(c)
	return dataset.Load(c.Data.Dir, opt)
}

// InitPoints replaces the dataset's initial points with those of the model
// named by init.points_from, aligned to the dataset (see
// dataset.PointsFrom), and says what it did; it does nothing when the key is
// empty.
func InitPoints(c *config.Config, ds *dataset.Dataset) (string, error) {
	if c.Init.PointsFrom == "" {
		return "", nil
	}
	xyz, rgb, note, err := dataset.PointsFrom(ds, c.Init.PointsFrom)
	if err != nil {
		return "", err
	}
	ds.Points, ds.PointColors = xyz, rgb
	return note, nil
}

// ErrNoGPU reports that a GPU was asked for and none could be used.
var ErrNoGPU = errors.New("app: no usable GPU")

// NewEngine builds the engine for the configured device: the CPU engine, or the fused engine
// on the device that train.device names (cuda, metal, emu). With device auto it tries the GPU
// backends in gpu.AutoOrder (Metal first on macOS, then CUDA) and falls back to the CPU
// engine when none starts, saying through notice, on one line, why each was passed over. The
// fused engine's own notes (what the device lacks and the engine skips) go to notice too.
func NewEngine(c *config.Config, g *splat.Gaussians, notice func(string)) (engine.Engine, error) {
	set, err := EngineSettings(c)
	if err != nil {
		return nil, err
	}
	if c.Train.GPUs > 1 || c.Train.Shard {
		kind := string(c.Train.Device)
		if c.Train.Device == config.DeviceAuto {
			kind = gpu.KindCUDA
		}
		eng, err := newMultiEngine(kind, c.Train.GPUs, c.Train.Shard, set, g, notice)
		if err != nil {
			if c.Train.Shard {
				return nil, fmt.Errorf("app: train.shard over %d GPUs: %w", c.Train.GPUs, err)
			}
			return nil, fmt.Errorf("app: train.gpus %d: %w", c.Train.GPUs, err)
		}
		return eng, nil
	}
	switch c.Train.Device {
	case config.DeviceCPU:
		return cpu.New(set, g)
	case config.DeviceAuto:
		var reasons []string
		for _, kind := range gpu.AutoOrder(runtime.GOOS) {
			eng, gerr := newGPUEngine(kind, set, g, notice)
			if gerr == nil {
				return eng, nil
			}
			reasons = append(reasons, backendReason(kind, strings.TrimPrefix(firstLine(gerr), ErrNoGPU.Error()+": ")))
		}
		if notice != nil {
			notice(fmt.Sprintf("no GPU engine (%s): running on the CPU with %d threads", strings.Join(reasons, "; "), set.Workers))
		}
		return cpu.New(set, g)
	default:
		if !c.Train.Device.GPU() {
			return nil, fmt.Errorf("app: train.device %q is not one of %s", c.Train.Device, strings.Join(config.DeviceNames(), ", "))
		}
		eng, err := newGPUEngine(string(c.Train.Device), set, g, notice)
		if err != nil {
			return nil, fmt.Errorf("app: train.device %s: %w", c.Train.Device, err)
		}
		return eng, nil
	}
}

// newGPUEngine opens the device of kind and starts the fused GPU engine (internal/fused) on
// it; the engine owns the device. Every failure wraps ErrNoGPU with the reason (no device, no
// driver, a kernel that does not build, settings the device cannot run), which is what device
// auto falls back on.
func newGPUEngine(kind string, set engine.Settings, g *splat.Gaussians, notice func(string)) (engine.Engine, error) {
	dev, err := gpu.Open(kind)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	opts := []fused.Option{fused.OwnDevice()}
	if notice != nil {
		opts = append(opts, fused.WithNotice(notice))
	}
	e, err := fused.New(dev, set, g, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	return e, nil
}

// newMultiEngine opens n devices of kind and starts an engine over them: the data-parallel one
// (internal/multi), its gradients reduced as NewReducer says, or with shard the sharded one
// (multi.Sharded), its splats first put in Morton order so that each GPU's share is a compact
// region, the records travelling as NewExchanger says.
func newMultiEngine(kind string, n int, shard bool, set engine.Settings, g *splat.Gaussians, notice func(string)) (engine.Engine, error) {
	devs, err := OpenDevices(kind, n)
	if err != nil {
		return nil, err
	}
	var opts []fused.Option
	if notice != nil {
		opts = append(opts, fused.WithNotice(notice))
	}
	var e engine.Engine
	if shard {
		e, err = multi.NewSharded(devs, NewExchanger(kind, n, notice), set, splat.Gather(g, multi.MortonOrder(g)), true, opts...)
	} else {
		e, err = multi.New(devs, NewReducer(kind, n, notice), set, g, true, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoGPU, err)
	}
	return e, nil
}

// OpenDevices opens n devices of kind: CUDA ordinals 0..n-1, or n host emulators. The error
// wraps ErrNoGPU and names the device that did not open; none stays open then.
func OpenDevices(kind string, n int) ([]gpu.Device, error) {
	o, err := gpu.OptionsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	var devs []gpu.Device
	for k := 0; k < n; k++ {
		o.Ordinal = k
		d, err := gpu.OpenWith(kind, o)
		if err != nil {
			for _, d := range devs {
				d.Close()
			}
			return nil, fmt.Errorf("%w: %s device %d of %d: %w", ErrNoGPU, kind, k, n, err)
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// NewReducer returns the reduction for n ranks on devices of kind: NCCL's all-reduce when the
// devices are CUDA ones and libnccl.so.2 loads and makes the communicators, else the host's
// (said through notice, with why).
func NewReducer(kind string, n int, notice func(string)) multi.Reducer {
	return ncclOrHost(kind, n, notice, "sum their gradients",
		func(lib *nccl.Lib, devs []int) (multi.Reducer, error) { return multi.NewNCCLReducer(lib, devs) },
		func() multi.Reducer { return multi.NewHostReducer(n) })
}

// NewExchanger returns the exchange of a sharded scene's records for n ranks on devices of
// kind: NCCL's point-to-point calls when the devices are CUDA ones and libnccl.so.2 loads and
// makes the communicators, else the host's (said through notice, with why).
func NewExchanger(kind string, n int, notice func(string)) multi.Exchanger {
	return ncclOrHost(kind, n, notice, "exchange their splats",
		func(lib *nccl.Lib, devs []int) (multi.Exchanger, error) { return multi.NewNCCLExchanger(lib, devs) },
		func() multi.Exchanger { return multi.NewHostExchanger(n) })
}

// ncclOrHost makes, with mk, NCCL's form of a transport over CUDA devices 0..n-1 when the
// devices are of kind CUDA and libnccl.so.2 loads, or else the host's, saying through notice
// why and that the GPUs do what through the host.
func ncclOrHost[T any](kind string, n int, notice func(string), what string, mk func(*nccl.Lib, []int) (T, error), host func() T) T {
	if kind == gpu.KindCUDA {
		lib, err := nccl.Open(os.Getenv)
		if err == nil {
			ords := make([]int, n)
			for k := range ords {
				ords[k] = k
			}
			var x T
			if x, err = mk(lib, ords); err == nil {
				return x
			}
		}
		if notice != nil {
			notice(fmt.Sprintf("no NCCL (%s): the %d GPUs %s through the host, which is slow", firstLine(err), n, what))
		}
	}
	return host()
}

// firstLine is the first line of an error's message: the device layer joins
// every library name it tried, which belongs in a --device cuda error but not
// in the one-line notice of a fallback.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		return strings.TrimRight(msg[:i], ": ")
	}
	return msg
}

// backendReason is why backend kind was passed over, starting with its name once.
func backendReason(kind, why string) string {
	if strings.HasPrefix(why, kind+":") {
		return why
	}
	return kind + ": " + why
}

// OpenDevice opens the GPU device for a device value, for commands that run the fused engine
// on it themselves (parity): the named backend, or with auto the first of gpu.AutoOrder that
// opens. cpu opens nothing (nil, nil). The error wraps ErrNoGPU with the one-line reason (each
// backend's, for auto).
func OpenDevice(d config.Device) (gpu.Device, error) {
	switch {
	case d == config.DeviceCPU:
		return nil, nil
	case d == config.DeviceAuto:
		var reasons []string
		for _, kind := range gpu.AutoOrder(runtime.GOOS) {
			dev, err := gpu.Open(kind)
			if err == nil {
				return dev, nil
			}
			reasons = append(reasons, backendReason(kind, firstLine(err)))
		}
		return nil, fmt.Errorf("%w (%s)", ErrNoGPU, strings.Join(reasons, "; "))
	case d.GPU():
		dev, err := gpu.Open(string(d))
		if err != nil {
			return nil, fmt.Errorf("%w (device %s): %s", ErrNoGPU, d, firstLine(err))
		}
		return dev, nil
	}
	return nil, fmt.Errorf("app: device %q is not one of %s", d, strings.Join(config.DeviceNames(), ", "))
}

// CheckDevice fails fast, before any data is loaded, when the configuration requires a GPU
// (train.device cuda, metal or emu) and it cannot be opened. It opens the device alone,
// without building an engine, so the check costs milliseconds; the error wraps ErrNoGPU with
// the one-line reason.
func CheckDevice(c *config.Config) error {
	if !c.Train.Device.GPU() {
		return nil
	}
	d, err := OpenDevice(c.Train.Device)
	if err != nil {
		return err
	}
	return d.Close()
}
