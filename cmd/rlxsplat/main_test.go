package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/spz"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// testStreams returns in-memory streams with an empty environment.
func testStreams() (*streams, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &streams{Out: &out, Err: &errb}, &out, &errb
}

// Argument parsing and configuration, without running the commands.
func TestTrainFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     []string
		check   func(*testing.T, *trainOptions, *config.Config)
		wantErr string
	}{
		{name: "no data: the demo preset", args: nil, check: func(t *testing.T, o *trainOptions, c *config.Config) {
			if !o.demo || c.Train.Iterations != 1000 || c.Data.Dir != "" || c.Model.Render != config.RenderEWA {
				t.Errorf("demo %v: %+v %+v", o.demo, c.Train, c.Data)
			}
		}},
		{name: "no data, flags over the demo preset", args: []string{"--iterations", "40"}, check: func(t *testing.T, o *trainOptions, c *config.Config) {
			if !o.demo || c.Train.Iterations != 40 || c.Densify.MaxGaussians != 6000 {
				t.Errorf("demo %v: %+v %+v", o.demo, c.Train, c.Densify)
			}
		}},
		{name: "data: the defaults", args: []string{"--data", "d"}, check: func(t *testing.T, o *trainOptions, c *config.Config) {
			if o.demo || c.Train.Iterations != 30000 || c.Densify.MaxGaussians != 0 {
				t.Errorf("demo %v: %+v", o.demo, c.Train)
			}
		}},
		{name: "no data, a config: no demo preset", args: []string{"--config", "default"}, check: func(t *testing.T, o *trainOptions, c *config.Config) {
			if o.demo || c.Train.Iterations != 30000 {
				t.Errorf("demo %v: %+v", o.demo, c.Train)
			}
		}},
		{name: "fast preset and flags", args: []string{"--config", "fast", "--data", "d", "--downscale", "2", "--render", "ray", "--out", "o"},
			check: func(t *testing.T, _ *trainOptions, c *config.Config) {
				if c.Train.Iterations != 7000 || !filepath.IsAbs(c.Data.Dir) || filepath.Base(c.Data.Dir) != "d" || c.Data.Downscale != 2 || c.Model.Render != config.RenderRay || c.Output.Dir != "o" {
					t.Errorf("got %+v %+v %+v", c.Train, c.Data, c.Model)
				}
			}},
		{name: "set any key", args: []string{"--set", "densify.grad_threshold=0.0003", "--iterations", "5"},
			check: func(t *testing.T, _ *trainOptions, c *config.Config) {
				if c.Densify.GradThreshold != 0.0003 || c.Train.Iterations != 5 {
					t.Errorf("got %v %v", c.Densify.GradThreshold, c.Train.Iterations)
				}
			}},
		{name: "flag beats env", args: []string{"--iterations", "9"}, env: []string{"RLXSPLAT_TRAIN_ITERATIONS=7"},
			check: func(t *testing.T, _ *trainOptions, c *config.Config) {
				if c.Train.Iterations != 9 {
					t.Errorf("iterations %d", c.Train.Iterations)
				}
			}},
		{name: "scanline env forces gpu-conic", env: []string{"RLX_FUSED_GPU_CONIC_SCANLINE=", "RLXSPLAT_RASTER_BIN_MODE=cpu-conic"},
			check: func(t *testing.T, _ *trainOptions, c *config.Config) {
				if c.Raster.BinMode != config.BinGPUConic {
					t.Errorf("bin mode %s", c.Raster.BinMode)
				}
			}},
		{name: "unknown key", args: []string{"--set", "train.iteratons=5"}, wantErr: "did you mean train.iterations"},
		{name: "bad value", args: []string{"--render", "raytrace"}, wantErr: "model.render"},
		{name: "bad set syntax", args: []string{"--set", "train.iterations"}, wantErr: "want key=value"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := testStreams()
			s.Env = tt.env
			var got *config.Config
			var gotOpt *trainOptions
			root := newRootCmd(s)
			root.RemoveCommand(root.Commands()...)
			root.AddCommand(newTrainCmd(s, func(o *trainOptions, c *config.Config) error { gotOpt, got = o, c; return nil }))
			root.SetArgs(append([]string{"train"}, tt.args...))
			err := root.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, gotOpt, got)
		})
	}
}

// An --out that holds an earlier run is refused, and --force replaces that run.
func TestTrainOutHoldsRun(t *testing.T) {
	dir := t.TempDir()
	args := []string{"train", "--iterations", "2", "--threads", "1", "--device", "cpu", "--out", dir}
	s, _, errb := testStreams()
	if code := run(args, s); code != exitOK {
		t.Fatalf("first run: exit %d: %s", code, errb.String())
	}
	// Off a terminal (these streams are not one) there is no progress bar to redraw.
	if strings.Contains(errb.String(), "\r") || !strings.Contains(errb.String(), "step 2/2: loss") {
		t.Errorf("stderr off a terminal: %q, want plain progress lines", errb.String())
	}
	s, _, errb = testStreams()
	if code := run(args, s); code != exitUsage || !strings.Contains(errb.String(), "holds an earlier run") {
		t.Fatalf("second run into the same --out: exit %d, stderr %q", code, errb.String())
	}
	// A stale checkpoint of the earlier run must not survive --force.
	stale := filepath.Join(dir, "checkpoints", "step-99999.ckpt")
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _, errb = testStreams()
	if code := run(append(args, "--force"), s); code != exitOK {
		t.Fatalf("--force: exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("--force left the earlier run's %s (%v)", stale, err)
	}
	// The log's first line names the run, as config.yaml does; --resume goes on under it.
	id := runIDLine(t, errb.String())
	cfg, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil || !strings.HasPrefix(string(cfg), "# run "+id+"\n") {
		t.Errorf("config.yaml does not start with run %s (%v)", id, err)
	}
	s, _, errb = testStreams()
	resume := []string{"train", "--resume", filepath.Join(dir, "checkpoints", "step-00002.ckpt"), "--iterations", "3", "--threads", "1"}
	if code := run(resume, s); code != exitOK {
		t.Fatalf("--resume: exit %d: %s", code, errb.String())
	}
	if got := runIDLine(t, errb.String()); got != id {
		t.Errorf("--resume ran as %s, want the resumed run's %s", got, id)
	}
}

// runIDLine returns the run ID of a train command's log, which must be its first line.
func runIDLine(t *testing.T, log string) string {
	t.Helper()
	first, _, _ := strings.Cut(log, "\n")
	id, ok := strings.CutPrefix(first, "rlxsplat: run ")
	if !ok || id == "" {
		t.Fatalf("the log's first line is %q, want the run ID", first)
	}
	return id
}

// --version names the Go version and the GPU backends; completion offers the values of
// --device, --render and --config.
func TestVersionAndCompletion(t *testing.T) {
	s, out, _ := testStreams()
	if code := run([]string{"--version"}, s); code != exitOK || !strings.Contains(out.String(), "go1.") || !strings.Contains(out.String(), "GPU backends: cuda") {
		t.Fatalf("--version: exit %d, %q", code, out.String())
	}
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "train", "--device", ""}, []string{"auto", "cpu", "cuda"}},
		{[]string{"__complete", "render", "--render", ""}, []string{"ewa", "ray"}},
		{[]string{"__complete", "bench", "--config", ""}, []string{"default", "demo", "fast"}},
		{[]string{"__complete", "parity", "--device", ""}, config.DeviceNames()},
		{[]string{"__complete", "render", "--scene", ""}, append(sceneExts, ":8")}, // 8: filter by extension
		{[]string{"__complete", "train", "--resume", ""}, []string{"ckpt", ":8"}},
		{[]string{"__complete", "train", "--data", ""}, []string{":16"}}, // 16: directories
		{[]string{"__complete", "export", "--format", ""}, exportExts},
	} {
		s, out, errb := testStreams()
		if code := run(tt.args, s); code != exitOK {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errb.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w+"\n") {
				t.Errorf("%v: %q lacks %q", tt.args, out.String(), w)
			}
		}
	}
}

// --config completes to the presets and to the YAML files and directories under what was
// typed, nothing else.
func TestCompleteConfig(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"run.yaml", "b.yml", "notes.txt", "sub/x.yaml"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sep := string(filepath.Separator)
	for _, c := range []struct {
		typed string
		want  []string
	}{
		{"fa", []string{"fast"}},
		{dir + sep, []string{filepath.Join(dir, "b.yml"), filepath.Join(dir, "run.yaml"), filepath.Join(dir, "sub") + sep}},
		{filepath.Join(dir, "r"), []string{filepath.Join(dir, "run.yaml")}},
	} {
		got, _ := completeConfig(nil, nil, c.typed)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%q: %q, want %q", c.typed, got, c.want)
		}
	}
}

// Exit codes and messages of whole invocations.
func TestExitCodes(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		wantErr string
		wantOut string
	}{
		{[]string{"train", "--set", "nope.key=1"}, exitUsage, "unknown", ""},
		{[]string{"train", "--print-config", "--iterations", "12"}, exitOK, "", "train.iterations"},
		{[]string{"render"}, exitUsage, "give the scene to read with --scene FILE", ""},
		{[]string{"parity", "--break", "colour"}, exitUsage, "--break", ""},
		{[]string{"train", "--data", "/nonexistent/scene", "--iterations", "1"}, exitError, "/nonexistent/scene", ""},
		{[]string{"bench", "--steps", "0"}, exitUsage, "--steps", ""},
		{[]string{"train", "extra"}, exitUsage, "rlxsplat train: unknown command", ""},
		{[]string{"train", "--iterations", "x"}, exitUsage, `invalid argument "x" for "--iterations"`, ""},
		{[]string{"train", "--device", "tpu"}, exitUsage, "not one of auto, cpu, cuda, metal, emu", ""},
		{[]string{"render", "--ckpt", "/nonexistent/a.ckpt"}, exitError, "rlxsplat render: scene: open /nonexistent/a.ckpt", ""},
		// Every command's errors start with the command the user ran, whichever package failed.
		{[]string{"export", "--scene", "/nonexistent/a.ply", "--out", "x.spz"}, exitError, "rlxsplat export: scene: open /nonexistent/a.ply", ""},
		{[]string{"bench", "--scene", "/nonexistent/a.ply"}, exitError, "rlxsplat bench: scene: open /nonexistent/a.ply", ""},
		{[]string{"train", "--resume", "/nonexistent/a.ckpt"}, exitError, "rlxsplat train: ckpt: open /nonexistent/a.ckpt", ""},
		{[]string{"parity", "--config", "/nonexistent/p.yaml"}, exitUsage, "rlxsplat parity: config: config file", ""},
		{[]string{"view", "--port", "x"}, exitUsage, "rlxsplat view: invalid argument", ""},
	}
	// --device metal where there is no Metal (every OS but macOS) fails before any data loads,
	// with the hint and the exit status of a device that cannot be used; so does parity's.
	if runtime.GOOS != "darwin" {
		for _, args := range [][]string{{"train", "--device", "metal", "--data", "/nonexistent/scene"}, {"parity", "--quick", "--device", "metal"}} {
			tests = append(tests, struct {
				args    []string
				code    int
				wantErr string
				wantOut string
			}{args, exitDevice, "only available on macOS", ""})
		}
	}
	// --device cuda without a GPU fails before any data loads (the dataset here does not
	// exist, and the error is about the device), with the hint and its own exit code.
	if app.CheckDevice(&config.Config{Train: config.Train{Device: config.DeviceCUDA}}) != nil {
		tests = append(tests, struct {
			args    []string
			code    int
			wantErr string
			wantOut string
		}{[]string{"train", "--device", "cuda", "--data", "/nonexistent/scene"}, exitDevice, "--device cpu", ""})
	}
	for _, tt := range tests {
		s, out, errb := testStreams()
		if code := run(tt.args, s); code != tt.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tt.args, code, tt.code, errb.String())
		}
		if tt.wantErr != "" && !strings.Contains(errb.String(), tt.wantErr) {
			t.Errorf("%v: stderr %q lacks %q", tt.args, errb.String(), tt.wantErr)
		}
		if tt.wantOut != "" && !strings.Contains(out.String(), tt.wantOut) {
			t.Errorf("%v: stdout lacks %q", tt.args, tt.wantOut)
		}
	}
}

// evals returns the PSNR of every evaluation line in metrics.jsonl.
func evals(t *testing.T, dir string) []float64 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var psnr []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("metrics.jsonl: %v", err)
		}
		if _, ok := m["eval"]; ok {
			psnr = append(psnr, m["psnr"].(float64))
		}
	}
	if len(psnr) == 0 {
		t.Fatal("no evaluation in metrics.jsonl")
	}
	return psnr
}

func lastEval(t *testing.T, dir string) float64 {
	p := evals(t, dir)
	return p[len(p)-1]
}

// The whole demo preset through the command, as a new user's first `train` runs it: the
// built-in demo scene must reach the 25 dB the README promises, and every output must be there.
func TestTrainDemoEndToEnd(t *testing.T) {
	dir := t.TempDir()
	s, _, errb := testStreams()
	code := run([]string{"train", "--out", dir, "--threads", "2"}, s)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"point_cloud.ply", "training_curve.png", "config.yaml", "previews/step-01000.png", "checkpoints/step-01000.ckpt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if !strings.Contains(errb.String(), "rlxsplat train --data DIR") {
		t.Errorf("the demo run does not say how to train a capture: %s", errb.String())
	}
	const floor = 25 // dB; measured 30.65
	p := lastEval(t, dir)
	t.Logf("demo test PSNR after the demo preset's 1000 steps: %.2f dB", p)
	if p < floor {
		t.Fatalf("demo test PSNR %.2f dB after the demo preset, floor %d dB", p, floor)
	}
	// The PLY renders back through the render command with the same figure.
	s2, out, errb2 := testStreams()
	if code := run([]string{"render", "--ply", filepath.Join(dir, "point_cloud.ply"), "--out", filepath.Join(dir, "render")}, s2); code != exitOK {
		t.Fatalf("render exit %d: %s", code, errb2.String())
	}
	if !strings.Contains(out.String(), "mean (4 views)") {
		t.Fatalf("render output: %s", out.String())
	}
	// The checkpoint exports with its config's SH degree, the splats the PLY holds.
	want, info, err := ply.ReadFile(filepath.Join(dir, "point_cloud.ply"))
	if err != nil {
		t.Fatal(err)
	}
	spzPath := filepath.Join(dir, "scene.spz")
	s3, _, errb3 := testStreams()
	if code := run([]string{"export", "--ckpt", filepath.Join(dir, "checkpoints", "step-01000.ckpt"), "--out", spzPath}, s3); code != exitOK {
		t.Fatalf("export exit %d: %s", code, errb3.String())
	}
	got, sinfo, err := spz.ReadFile(spzPath)
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != want.Len() || sinfo.SHDegree != info.SHDegree {
		t.Fatalf("exported %d splats of SH degree %d, the PLY has %d of degree %d", got.Len(), sinfo.SHDegree, want.Len(), info.SHDegree)
	}
}

// trainRise trains the capture at data for the given steps through the command (evaluating
// after the first step and at the end, extra flags after) and checks that the final test
// PSNR reaches floor dB, having risen by at least rise dB since the first step.
func trainRise(t *testing.T, data string, steps int, floor, rise float64, extra ...string) {
	t.Helper()
	dir := t.TempDir()
	s, _, errb := testStreams()
	args := append([]string{"train", "--data", data, "--iterations", strconv.Itoa(steps), "--out", dir,
		"--set", "train.preview_every=0", "--set", "train.eval_steps=1", "--threads", "2"}, extra...)
	if code := run(args, s); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	p := evals(t, dir)
	t.Logf("%s: test PSNR after the first step and after step %d: %.2f, %.2f dB", data, steps, p[0], p[len(p)-1])
	if len(p) != 2 || p[1] < floor || p[1]-p[0] < rise {
		t.Fatalf("test PSNR %v dB (first step, step %d): want ≥ %.1f dB and a rise of %.1f dB", p, steps, floor, rise)
	}
}

// A short training run on the repository's own capture, testdata/demo (a COLMAP binary model
// and PNGs written from the demo scene by internal/demo): the loaders' path end to end on
// every machine, ../shared or not. Measured: 13.9 dB after the first step, 24.1 dB after 300.
func TestTrainTestdataCapture(t *testing.T) {
	trainRise(t, filepath.Join("..", "..", "testdata", "demo"), 300, 21.0, 6.0)
}

// A short real training run on the duck capture (COLMAP, downscale 4). Measured: 10.8 dB
// after the first step, 19.6 dB after 600, the same before and after the helper (the HDRI
// background, which no SfM point covers, keeps early figures low).
func TestTrainDuckShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the duck training run")
	}
	trainRise(t, sharedDir(t, "data/duck"), 600, 14.5, 3.0, "--downscale", "4", "--set", "densify.from=200")
}

// sharedDir finds ../shared/rel beside the module root, or skips.
func sharedDir(t *testing.T, rel string) string { return sharedtest.Path(t, rel) }

// bench --roofline on the CPU engine says it is for GPU engines and still reports the stages;
// the JSON has no device fields.
func TestBenchRooflineCPU(t *testing.T) {
	s, out, errb := testStreams()
	code := run([]string{"bench", "--device", "cpu", "--steps", "1", "--warmup", "0", "--threads", "1", "--roofline", "--json"}, s)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "--roofline is for GPU engines only") {
		t.Errorf("stderr %q lacks the GPU-only notice", errb.String())
	}
	var r map[string]any
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.String())
	}
	if _, ok := r["stage_ms_median"]; !ok {
		t.Errorf("no stage times in %s", out.String())
	}
	for _, k := range []string{"roofline", "peak_device_bytes"} {
		if _, ok := r[k]; ok {
			t.Errorf("CPU engine's JSON has %q", k)
		}
	}
}

// TestBenchFromPLY checks that --ply replaces the initialisation: the bench runs on the
// scene a short training run wrote, with its Gaussian count, and a broken file is an error
// that names it.
func TestBenchFromPLY(t *testing.T) {
	dir := t.TempDir()
	s, _, errb := testStreams()
	if code := run([]string{"train", "--iterations", "2", "--threads", "1", "--device", "cpu", "--out", dir}, s); code != exitOK {
		t.Fatalf("train: exit %d: %s", code, errb.String())
	}
	path := filepath.Join(dir, "point_cloud.ply")
	g, _, err := ply.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, out, errb := testStreams()
	if code := run([]string{"bench", "--ply", path, "--device", "cpu", "--steps", "1", "--warmup", "0", "--threads", "1", "--json"}, s); code != exitOK {
		t.Fatalf("bench: exit %d: %s", code, errb.String())
	}
	var r struct {
		Gaussians int `json:"gaussians"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.String())
	}
	if r.Gaussians != g.Len() {
		t.Errorf("bench ran %d Gaussians, the PLY holds %d", r.Gaussians, g.Len())
	}
	bad := filepath.Join(dir, "bad.ply")
	if err := os.WriteFile(bad, []byte("ply\nformat binary_little_endian 1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _, errb = testStreams()
	if code := run([]string{"bench", "--ply", bad, "--device", "cpu", "--steps", "1"}, s); code == exitOK || !strings.Contains(errb.String(), "bad.ply") {
		t.Errorf("broken PLY: exit %d, stderr %q", code, errb.String())
	}
}

// Kernels built from another source tree must be announced, and only then.
func TestShaderDirNotice(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want bool
	}{
		{nil, false},
		{[]string{"RLXSPLAT_SHADER_DIR= "}, false},
		{[]string{"RLXSPLAT_SHADER_DIR=/tmp/alt-shaders"}, true},
		{[]string{"RLXSPLAT_SHADER_DIR=/tmp/alt-shaders", "RLXSPLAT_SHADER_DIR="}, false},
	} {
		s, _, errb := testStreams()
		s.Env = tt.env
		if code := run([]string{"train", "--print-config"}, s); code != exitOK {
			t.Fatalf("env %q: exit %d (stderr %q)", tt.env, code, errb.String())
		}
		if got := strings.Contains(errb.String(), "/tmp/alt-shaders: GPU kernels are compiled from that directory"); got != tt.want {
			t.Errorf("env %q: notice shown %v, want %v (stderr %q)", tt.env, got, tt.want, errb.String())
		}
	}
}

// A run sharded over two emulated GPUs (--shard) trains the repository's capture through
// densification and reports each GPU's memory; its checkpoint resumes on one engine, and one
// engine's checkpoint resumes sharded: checkpoints hold one engine's layout.
func TestTrainShardedAcrossLayouts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the sharded training runs")
	}
	if d, err := gpu.Open(gpu.KindEmu); err != nil {
		t.Skipf("no host emulator to shard over: %v", err)
	} else {
		d.Close()
	}
	data := filepath.Join("..", "..", "testdata", "demo")
	train := func(what, dir string, extra ...string) string {
		t.Helper()
		s, _, errb := testStreams()
		args := append([]string{"train", "--data", data, "--device", "emu", "--out", dir, "--set", "train.preview_every=0",
			"--set", "train.eval_steps=1", "--set", "densify.from=20", "--set", "densify.every=20", "--set", "train.checkpoint_every=40"}, extra...)
		if code := run(args, s); code != exitOK {
			t.Fatalf("%s: exit %d: %s", what, code, errb.String())
		}
		return errb.String()
	}
	sharded, one := t.TempDir(), t.TempDir()
	log := train("sharded", sharded, "--gpus", "2", "--shard", "--iterations", "60")
	for _, want := range []string{"× 2, Gaussians sharded", "peak device memory per GPU"} {
		if !strings.Contains(log, want) {
			t.Errorf("the sharded run's log does not say %q:\n%s", want, log)
		}
	}
	p := evals(t, sharded)
	t.Logf("sharded over 2 ranks: test PSNR %.2f dB after the first step, %.2f after 60", p[0], p[len(p)-1])
	if len(p) != 2 || p[1]-p[0] < 2 {
		t.Errorf("sharded test PSNR %v dB: want a rise of 2 dB over 60 steps", p)
	}
	train("one engine", one, "--iterations", "40")
	for _, c := range []struct {
		what, ckpt string
		extra      []string
	}{
		{"the sharded checkpoint on one engine", filepath.Join(sharded, "checkpoints", "step-00040.ckpt"), []string{"--gpus", "1", "--shard=false"}},
		{"one engine's checkpoint sharded", filepath.Join(one, "checkpoints", "step-00040.ckpt"), []string{"--gpus", "2", "--shard"}},
	} {
		s, _, errb := testStreams()
		if code := run(append([]string{"train", "--resume", c.ckpt, "--iterations", "60", "--device", "emu"}, c.extra...), s); code != exitOK {
			t.Fatalf("%s: exit %d: %s", c.what, code, errb.String())
		}
		t.Logf("%s: %s", c.what, lastLine(errb.String(), "test PSNR"))
	}
}

// lastLine is the last line of log that contains s.
func lastLine(log, s string) string {
	out := ""
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = l
		}
	}
	return out
}
