package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// Parity reads the configuration as train does: --config, --set, env and its own flags, and
// its own default downscale only where no layer sets one.
func TestParityConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(cfg, []byte("data:\n  dir: scene\n  downscale: 2\ntrain:\n  device: cpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		args      []string
		env       []string
		data      string
		downscale int
		device    config.Device
	}{
		{"defaults", nil, nil, "", parityDownscale, config.DeviceAuto},
		{"config file", []string{"--config", cfg}, nil, "scene", 2, config.DeviceCPU},
		{"set over the file", []string{"--config", cfg, "--set", "data.downscale=8"}, nil, "scene", 8, config.DeviceCPU},
		{"flags over set", []string{"--config", cfg, "--set", "data.downscale=8", "--downscale", "3", "--data", "other"}, nil, "other", 3, config.DeviceCPU},
		{"env", nil, []string{"RLXSPLAT_DATA_DOWNSCALE=6", "RLXSPLAT_TRAIN_DEVICE=cpu"}, "", 6, config.DeviceCPU},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got *parityOptions
			s, _, _ := testStreams()
			s.Env = c.env
			cmd := newParityCmd(s, func(o *parityOptions) error { got = o; return nil })
			cmd.SetArgs(c.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if got.c.Data.Dir != c.data || got.c.Data.Downscale != c.downscale || got.c.Train.Device != c.device {
				t.Errorf("data %q downscale %d device %s; want %q %d %s", got.c.Data.Dir, got.c.Data.Downscale, got.c.Train.Device, c.data, c.downscale, c.device)
			}
		})
	}
	s, out, _ := testStreams()
	if code := run([]string{"parity", "--set", "data.downscale=5", "--print-config"}, s); code != exitOK || !strings.Contains(out.String(), "data.downscale") {
		t.Errorf("--print-config: exit %d, %q", code, out.String())
	}
}

// The GPU comparison's flags are checked before any work, and --device cpu skips it in one line.
func TestParityGPUFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"parity", "--device", "tpu"}, "train.device"},
		{[]string{"parity", "--downscale", "0"}, "--downscale"},
		{[]string{"parity", "--max-splats", "0"}, "--max-splats"},
		{[]string{"parity", "--set", "train.iteratons=3"}, "did you mean train.iterations"},
		{[]string{"parity", "--set", "nokeyvalue"}, "want key=value"},
	} {
		s, _, errb := testStreams()
		if code := run(c.args, s); code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d mentioning %q", c.args, code, errb.String(), exitUsage, c.want)
		}
	}
	s, out, _ := testStreams()
	c, err := config.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	c.Train.Device = config.DeviceCPU
	if _, _, err := gpuParity(context.Background(), &parityOptions{c: c}, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "skipped (--device cpu)") {
		t.Errorf("--device cpu: %q", out.String())
	}
}

// The GPU table counts failures and marks what a row does not measure.
func TestParityCompareTable(t *testing.T) {
	var b bytes.Buffer
	rows := []fused.CompareRow{
		{Name: "image", MaxAbs: 1e-7, RelErr: 2e-7, Cosine: math.NaN(), Tol: fused.TolImage, Pass: true},
		{Name: "tile lists", MaxAbs: math.NaN(), RelErr: math.NaN(), Cosine: math.NaN(), Pass: false, Note: "1 of 9 entries differ"},
		{Name: "params vs cpu step", MaxAbs: 1e-4, RelErr: 1e-5, Cosine: math.NaN(), Tol: math.Inf(1), Pass: true},
	}
	if f := printCompareRows(&b, []string{"a", "a", "a"}, rows); f != 1 {
		t.Errorf("%d failures, want 1", f)
	}
	for _, want := range []string{"FAIL", "exact", "report", "1e-05", "1 of 9 entries differ"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// The dataset view of --data: a capped, anisotropic set of the duck's initial splats.
func TestParityDatasetScene(t *testing.T) {
	dir := sharedtest.Path(t, "data", "duck")
	c, err := config.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	c.Data.Dir, c.Data.Downscale = dir, 8
	sc, err := datasetScene(c, 500)
	if err != nil {
		t.Fatal(err)
	}
	if n := sc.g.Len(); n == 0 || n > 500 {
		t.Errorf("%d splats, want 1..500", n)
	}
	if err := sc.g.Validate(); err != nil {
		t.Error(err)
	}
	cam := sc.v.Camera
	if len(sc.v.Target) != cam.Width*cam.Height*3 {
		t.Errorf("target of %d floats for a %d×%d view", len(sc.v.Target), cam.Width, cam.Height)
	}
}
