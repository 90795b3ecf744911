package app

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/multi"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

func TestOpenDevice(t *testing.T) {
	tests := []struct {
		device config.Device
		noGPU  bool   // the error must wrap ErrNoGPU
		want   string // in the error; "" = no error
		skip   bool
	}{
		{config.DeviceCPU, false, "", false},
		{"tpu", false, `"tpu" is not one of auto, cpu, cuda, metal, emu`, false},
		// Metal exists on macOS only.
		{config.DeviceMetal, true, "only available on macOS", runtime.GOOS == "darwin"},
	}
	for _, tc := range tests {
		if tc.skip {
			continue
		}
		d, err := OpenDevice(tc.device)
		if tc.want == "" {
			if err != nil || d != nil {
				t.Errorf("%s: device %v, err %v; want neither", tc.device, d, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrNoGPU) != tc.noGPU {
			t.Errorf("%s: %v; want an error with %q (ErrNoGPU: %v)", tc.device, err, tc.want, tc.noGPU)
		}
		if d != nil {
			d.Close()
		}
	}
	c := &config.Config{Train: config.Train{Device: config.DeviceMetal}}
	if err := CheckDevice(c); runtime.GOOS != "darwin" && !errors.Is(err, ErrNoGPU) {
		t.Errorf("CheckDevice(metal) off macOS: %v", err)
	}
	for _, d := range []config.Device{config.DeviceCPU, config.DeviceAuto} {
		if err := CheckDevice(&config.Config{Train: config.Train{Device: d}}); err != nil {
			t.Errorf("CheckDevice(%s): %v; want nil (nothing required)", d, err)
		}
	}
}

// With device auto and no GPU backend that opens, the engine is the CPU's and one notice names
// each backend's reason.
func TestNewEngineAutoFallsBack(t *testing.T) {
	if d, err := OpenDevice(config.DeviceAuto); err == nil {
		d.Close()
		t.Skip("a GPU is present: auto does not fall back")
	}
	c, err := config.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	c.Train.Device = config.DeviceAuto
	c.Train.Threads = 1
	var notes []string
	g := splat.New(4)
	for i := range g.Quats {
		if i%4 == 0 {
			g.Quats[i] = 1
		}
	}
	eng, err := NewEngine(c, g, func(m string) { notes = append(notes, m) })
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if strings.Contains(eng.Name(), "fused") {
		t.Fatalf("engine %q, want the CPU's", eng.Name())
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "cuda: ") || !strings.Contains(notes[0], "metal: ") || !strings.Contains(notes[0], "running on the CPU") {
		t.Fatalf("notices %q: want one line with each backend's reason", notes)
	}
}

// train.shard builds the sharded engine over train.gpus devices (here host emulators), its
// splats in Morton order; one batch view is enough, as each view is drawn by one GPU.
func TestNewEngineSharded(t *testing.T) {
	if d, err := gpu.Open(string(config.DeviceEmu)); err != nil {
		t.Skipf("no host emulator to shard over (%v)", err)
	} else {
		d.Close()
	}
	c, err := config.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	c.Train.Device, c.Train.GPUs, c.Train.Shard = config.DeviceEmu, 2, true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	g := splat.New(50)
	for i := range g.Means {
		g.Means[i] = float32(rng.Float64()*4 - 2)
	}
	eng, err := NewEngine(c, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s, ok := eng.(*multi.Sharded)
	if !ok || s.Ranks() != 2 {
		t.Fatalf("engine %q (%T), want the sharded engine over 2 ranks", eng.Name(), eng)
	}
	got, err := eng.Gaussians()
	if err != nil {
		t.Fatal(err)
	}
	if want := splat.Gather(g, multi.MortonOrder(g)); !slices.Equal(got.Means, want.Means) {
		t.Fatal("the sharded scene is not the scene in Morton order")
	}
	lo, hi := s.Range(1)
	t.Logf("%s: rank 1 owns [%d, %d)", eng.Name(), lo, hi)
}
