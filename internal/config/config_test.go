package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/rlxsplat/rlxsplat/configs"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// repoRoot walks up from the package directory to the one holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := sharedtest.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// writeFile puts a config file in a fresh temporary directory.
func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// wantDefaults is the table of the brief, written out independently of
// default.yaml, so that a wrong number in the file fails here.
func wantDefaults() Config {
	return Config{
		Data: Data{Dir: "", Format: "", Images: "images", Downscale: 0, MaxWidth: 1600,
			TestEvery: 8, Background: []float64{0, 0, 0}, RandomBackground: false},
		Init:   Init{Mode: InitSfM, RandomCount: 100000, Opacity: 0.1, Scale: 1, RandomExtent: 0.3, PointsFrom: ""},
		Model:  Model{Render: RenderEWA, SHDegree: 3, SHDegreeInterval: 1000, Antialiased: false, RadiusScale: 1.0, Near: 0.01},
		Raster: Raster{BinMode: BinGPUConic, TileSize: 16, MaxSplatSteps: 0},
		Loss:   Loss{Kind: LossL1SSIM, SSIMLambda: 0.2},
		Optim: Optim{MeansLR: 1.6e-4, MeansLRFinal: 1.6e-6, MeansLRSteps: 30000, ScalesLR: 5e-3,
			QuatsLR: 1e-3, OpacityLR: 5e-2, SHDCLR: 2.5e-3, SHRestLR: 1.25e-4, Beta1: 0.9,
			Beta2: 0.999, Eps: 1e-15, GradClip: 0, VisibleOnly: false},
		Densify: Densify{Enabled: true, Strategy: StrategyADC, From: 500, Until: 15000, Every: 100, GradThreshold: 2e-4,
			PercentDense: 0.01, SplitCount: 2, PruneOpacity: 0.005, ResetEvery: 3000, OpacityReset: true,
			MaxScreenSize: 20, MaxWorldScale: 0.1, MaxGaussians: 0},
		MCMC: MCMC{CapMax: 1000000, NoiseLR: 5e5, From: 500, Until: 25000, Every: 100, MinOpacity: 0.005,
			OpacityReg: 0.01, ScaleReg: 0.01, Regularize: RegInView},
		Train: Train{Iterations: 30000, Seed: 42, Device: DeviceAuto, Threads: 0,
			EvalSteps: []int{7000, 30000}, LogEvery: 10, PreviewEvery: 1000, CheckpointEvery: 5000,
			KeepCheckpoints: 3, PreviewView: 0, SaveEvalRenders: false, CoarseScale: 1, CoarseUntil: 15000,
			BatchSize: 1, StepsScale: 1, GPUs: 1},
		Output: Output{Dir: "out", Formats: []string{"ply"}},
	}
}

// exported drops the source record so that two Configs compare by value.
func exported(c *Config) Config {
	out := *c
	out.sources = nil
	return out
}

func mustLoad(t *testing.T, in Input) *Config {
	t.Helper()
	c, err := Load(in)
	if err != nil {
		t.Fatalf("Load(%+v): %v", in, err)
	}
	return c
}

func TestDefaultsMatchTheBrief(t *testing.T) {
	c := mustLoad(t, Input{})
	if got, want := exported(c), wantDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults differ:\n got %+v\nwant %+v", got, want)
	}
	for key, s := range c.Sources() {
		if s.Layer != LayerDefault {
			t.Errorf("%s: source %v, want default", key, s)
		}
	}
	// The package must never touch viper's global instance.
	if keys := viper.GetViper().AllKeys(); len(keys) != 0 {
		t.Errorf("global viper has keys %v", keys)
	}
}

// key reads one resolved value in flag text form.
func key(t *testing.T, c *Config, k string) string {
	t.Helper()
	f, ok := fieldMap(schema())[k]
	if !ok {
		t.Fatalf("no key %s", k)
	}
	return formatText(c.value(f))
}

func TestPrecedence(t *testing.T) {
	const force = EnvForceGPUConic
	tests := []struct {
		name   string
		file   string // body of a temporary config file; "" = none
		preset string // Input.File given as is (preset names)
		env    []string
		flags  map[string]string
		want   map[string]string // key → value (text form)
		src    map[string]string // key → Source.String(); "FILE" stands for the temp path
	}{
		{
			name: "defaults",
			want: map[string]string{"train.iterations": "30000", "raster.bin_mode": "gpu-conic"},
			src:  map[string]string{"train.iterations": "default"},
		},
		{
			name: "file over default, partial",
			file: "train:\n  iterations: 100\n",
			want: map[string]string{"train.iterations": "100", "train.seed": "42", "loss.kind": "l1-ssim"},
			src:  map[string]string{"train.iterations": "file FILE:2", "train.seed": "default"},
		},
		{
			name: "env over file",
			file: "train:\n  iterations: 100\n",
			env:  []string{"RLXSPLAT_TRAIN_ITERATIONS=200"},
			want: map[string]string{"train.iterations": "200"},
			src:  map[string]string{"train.iterations": "env RLXSPLAT_TRAIN_ITERATIONS"},
		},
		{
			name:  "flag over env and file",
			file:  "train:\n  iterations: 100\n",
			env:   []string{"RLXSPLAT_TRAIN_ITERATIONS=200"},
			flags: map[string]string{"train.iterations": "300"},
			want:  map[string]string{"train.iterations": "300"},
			src:   map[string]string{"train.iterations": "flag"},
		},
		{
			name: "env bin mode",
			env:  []string{"RLXSPLAT_RASTER_BIN_MODE=cpu-conic"},
			want: map[string]string{"raster.bin_mode": "cpu-conic"},
			src:  map[string]string{"raster.bin_mode": "env RLXSPLAT_RASTER_BIN_MODE"},
		},
		{
			name: "scanline switch, empty value, beats the file",
			file: "raster:\n  bin_mode: cpu-conic\n",
			env:  []string{force + "="},
			want: map[string]string{"raster.bin_mode": "gpu-conic"},
			src:  map[string]string{"raster.bin_mode": "env " + force},
		},
		{
			name: "scanline switch beats RLXSPLAT env, given after it",
			env:  []string{"RLXSPLAT_RASTER_BIN_MODE=gpu-radius-aabb", force + "=1"},
			want: map[string]string{"raster.bin_mode": "gpu-conic"},
			src:  map[string]string{"raster.bin_mode": "env " + force},
		},
		{
			name: "scanline switch beats RLXSPLAT env, given before it",
			env:  []string{force + "=0", "RLXSPLAT_RASTER_BIN_MODE=cpu-conic"},
			want: map[string]string{"raster.bin_mode": "gpu-conic"},
		},
		{
			name: "scanline switch even beats an invalid env value",
			env:  []string{"RLXSPLAT_RASTER_BIN_MODE=gpu-conik", force + "="},
			want: map[string]string{"raster.bin_mode": "gpu-conic"},
		},
		{
			name:  "explicit flag beats the scanline switch",
			env:   []string{force + "="},
			flags: map[string]string{"raster.bin_mode": "cpu-conic"},
			want:  map[string]string{"raster.bin_mode": "cpu-conic"},
			src:   map[string]string{"raster.bin_mode": "flag"},
		},
		{
			name: "scanline switch leaves other keys alone",
			env:  []string{force + "="},
			want: map[string]string{"raster.tile_size": "16", "train.iterations": "30000"},
		},
		{
			name: "lists from env, comma-separated, brackets and spaces allowed",
			env: []string{"RLXSPLAT_TRAIN_EVAL_STEPS=100, 200", "RLXSPLAT_DATA_BACKGROUND=[1,0.5,0]",
				"RLXSPLAT_OUTPUT_FORMATS=ply"},
			want: map[string]string{"train.eval_steps": "100,200", "data.background": "1,0.5,0", "output.formats": "ply"},
		},
		{
			name: "empty env list is an empty list",
			env:  []string{"RLXSPLAT_TRAIN_EVAL_STEPS="},
			want: map[string]string{"train.eval_steps": ""},
		},
		{
			name: "empty env string sets empty",
			file: "data:\n  dir: /somewhere\n",
			env:  []string{"RLXSPLAT_DATA_DIR="},
			want: map[string]string{"data.dir": ""},
		},
		{
			name:  "lists and bools from flags",
			flags: map[string]string{"data.background": "1,1,1", "densify.enabled": "false", "model.antialiased": "true"},
			want:  map[string]string{"data.background": "1,1,1", "densify.enabled": "false", "model.antialiased": "true"},
		},
		{
			name: "later duplicate env entry wins",
			env:  []string{"RLXSPLAT_TRAIN_SEED=1", "RLXSPLAT_TRAIN_SEED=2"},
			want: map[string]string{"train.seed": "2"},
		},
		{
			name: "unrelated and reserved variables are ignored",
			env: []string{"PATH=/bin", "=C:=C:\\", "NOEQUALS", "RLX_OTHER=1",
				gpu.EnvDebug + "=1", gpu.EnvNoNVRTC + "=1", gpu.EnvKernelCache + "=off", gpu.EnvShaderDir + "=/tmp/k", "RLXSPLAT_FUSED_EMU=1"},
			want: map[string]string{"train.iterations": "30000", "raster.bin_mode": "gpu-conic"},
		},
		{
			name: "YAML integer for a float key, float notation for an integer key",
			file: "optim:\n  means_lr: 1\ninit:\n  random_count: 1e5\n",
			want: map[string]string{"optim.means_lr": "1", "init.random_count": "100000"},
		},
		{
			name: "lone scalar is a one-entry list; null section and null string",
			file: "train:\n  eval_steps: 50\nmodel:\ndata:\n  format: ~\n",
			want: map[string]string{"train.eval_steps": "50", "data.format": ""},
		},
		{
			name: "numbers are text for string keys",
			file: "data:\n  dir: 2024\n",
			want: map[string]string{"data.dir": "2024"},
		},
		{
			name: "empty and comment-only file sets nothing",
			file: "# nothing\n",
			want: map[string]string{"train.iterations": "30000"},
		},
		{
			name:   "embedded preset by name",
			preset: "fast",
			want:   map[string]string{"train.iterations": "7000", "train.eval_steps": "7000", "densify.until": "15000"},
			src:    map[string]string{"train.iterations": "file fast.yaml (embedded preset):12"},
		},
		{
			name: "YAML anchors and aliases",
			file: "train:\n  iterations: &n 1234\n  checkpoint_every: *n\n",
			want: map[string]string{"train.checkpoint_every": "1234"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Env: tc.env, Flags: tc.flags, File: tc.preset}
			if tc.file != "" {
				in.File = writeFile(t, tc.file)
			}
			c := mustLoad(t, in)
			for k, v := range tc.want {
				if got := key(t, c, k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			src := c.Sources()
			for k, v := range tc.src {
				v = strings.ReplaceAll(v, "FILE", in.File)
				if got := src[k].String(); got != v {
					t.Errorf("%s from %q, want %q", k, got, v)
				}
			}
		})
	}
}

// joined splits an error made by errors.Join back into its parts.
func joined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		path  string // Input.File as is
		env   []string
		flags map[string]string
		want  [][]string // per expected problem, substrings of one error message
	}{
		{
			name: "unknown key in file",
			file: "train:\n  iterations: 5\n  iteratons: 7\n",
			want: [][]string{{"train.iteratons: unknown key; did you mean train.iterations?", "from file FILE:3"}},
		},
		{
			name: "key in the wrong section",
			file: "optim:\n  iterations: 7\n",
			want: [][]string{{"optim.iterations: unknown key; did you mean train.iterations?"}},
		},
		{
			name: "unknown section in file",
			file: "trian:\n  iterations: 7\n",
			want: [][]string{{"trian: unknown section; did you mean train?", "FILE:1"}},
		},
		{
			name: "flat key in file",
			file: "train.iterations: 7\n",
			want: [][]string{{"train.iterations: unknown section; keys nest under their section: train: {iterations: …}"}},
		},
		{
			name: "unknown env variable",
			env:  []string{"RLXSPLAT_TRAIN_ITERATINS=5"},
			want: [][]string{{"train.iteratins: unknown key; did you mean train.iterations?", "from env RLXSPLAT_TRAIN_ITERATINS"}},
		},
		{
			name: "unknown env section",
			env:  []string{"RLXSPLAT_RASTERBIN_MODE=cpu-conic"},
			want: [][]string{{"did you mean raster.bin_mode?", "env RLXSPLAT_RASTERBIN_MODE"}},
		},
		{
			name:  "unknown flags",
			flags: map[string]string{"train.iteratons": "5", "iterations": "5", "bin-mode": "cpu-conic"},
			want: [][]string{
				{"bin-mode: unknown key; did you mean raster.bin_mode?", "(from flag)"},
				{"iterations: unknown key; did you mean train.iterations?"},
				{"train.iteratons: unknown key; did you mean train.iterations?"},
			},
		},
		{
			name: "wrong types in the file",
			file: "train:\n  iterations: abc\n  seed: 1.5\n  eval_steps: [1, x]\nmodel:\n  antialiased: yes\ndata:\n  background: {r: 1}\n",
			want: [][]string{
				{`train.iterations: want an integer, got "abc"`, "FILE:2"},
				{`train.seed: want an integer, got "1.5"`},
				{`train.eval_steps: entry 2: want an integer, got "x"`},
				{`model.antialiased: want true or false, got "yes"`},
				{"data.background: want a list of numbers, got a mapping"},
			},
		},
		{
			name: "infinite float",
			file: "optim:\n  eps: .inf\n",
			want: [][]string{{"optim.eps: want a finite number"}},
		},
		{
			name: "section that is not a mapping",
			file: "train: 5\n",
			want: [][]string{{"train: want a mapping of keys, got \"5\""}},
		},
		{
			name: "top level that is not a mapping",
			file: "- a\n- b\n",
			want: [][]string{{"want a mapping of sections"}},
		},
		{
			name: "duplicate key and section",
			file: "train:\n  seed: 1\n  seed: 2\ntrain:\n  iterations: 3\n",
			want: [][]string{
				{"train.seed: key given twice (first at line 2)", "FILE:3"},
				{"train: section given twice (first at line 1)", "FILE:4"},
			},
		},
		{
			name: "YAML syntax error",
			file: "train: [\n",
			want: [][]string{{"YAML syntax", "FILE"}},
		},
		{
			name: "two documents",
			file: "train:\n  seed: 1\n---\ntrain:\n  seed: 2\n",
			want: [][]string{{"more than one YAML document"}},
		},
		{
			name: "missing file",
			path: "/nonexistent/rlxsplat.yaml",
			want: [][]string{{`config file "/nonexistent/rlxsplat.yaml"`, "no such file", "embedded presets: default, demo, fast"}},
		},
		{
			name: "bad env values",
			env:  []string{"RLXSPLAT_OPTIM_EPS=x", "RLXSPLAT_TRAIN_ITERATIONS=", "RLXSPLAT_DENSIFY_ENABLED=maybe", "RLXSPLAT_OUTPUT_FORMATS=ply,,ply"},
			want: [][]string{
				{`optim.eps: want a number, got "x"`, "env RLXSPLAT_OPTIM_EPS"},
				{`train.iterations: want an integer, got ""`},
				{`densify.enabled: want true or false, got "maybe"`},
				{"output.formats: entry 2: empty entry"},
			},
		},
		{
			name:  "every layer's problems at once, validation included",
			file:  "train:\n  iteratons: 7\n",
			env:   []string{"RLXSPLAT_RASTER_BIN_MODE=gpu-conik"},
			flags: map[string]string{"model.sh_degree": "4", "loss.ssim_lambda": "x"},
			want: [][]string{
				{"train.iteratons: unknown key; did you mean train.iterations?"},
				{`loss.ssim_lambda: want a number, got "x"`, "(from flag)"},
				{"model.sh_degree: 4 is out of range: want 0..3", "(from flag)"},
				{`raster.bin_mode: "gpu-conik" is not one of gpu-conic, gpu-radius-aabb, cpu-conic`, "(from env RLXSPLAT_RASTER_BIN_MODE)"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Env: tc.env, Flags: tc.flags, File: tc.path}
			if tc.file != "" {
				in.File = writeFile(t, tc.file)
			}
			c, err := Load(in)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", exported(c))
			}
			if c != nil {
				t.Errorf("Load returned a Config with an error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid: %v", err)
			}
			parts := joined(err)
			if len(parts) != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%v", len(parts), len(tc.want), err)
			}
			for _, subs := range tc.want {
				found := false
				for _, p := range parts {
					msg := p.Error()
					ok := true
					for _, s := range subs {
						if !strings.Contains(msg, strings.ReplaceAll(s, "FILE", in.File)) {
							ok = false
						}
					}
					found = found || ok
				}
				if !found {
					t.Errorf("no problem contains all of %q in:\n%v", subs, err)
				}
			}
		})
	}
}

func TestFastPreset(t *testing.T) {
	path := filepath.Join(repoRoot(t), "configs", "fast.yaml")
	c := mustLoad(t, Input{File: path})
	want := wantDefaults()
	want.Train.Iterations = 7000
	want.Train.EvalSteps = []int{7000}
	want.Optim.MeansLRSteps = 7000
	want.Train.CheckpointEvery = 7000
	want.Train.PreviewEvery = 500
	if got := exported(c); !reflect.DeepEqual(got, want) {
		t.Errorf("fast.yaml over default.yaml:\n got %+v\nwant %+v", got, want)
	}
	src := c.Sources()
	for _, k := range []string{"train.iterations", "train.eval_steps", "optim.means_lr_steps", "train.checkpoint_every", "train.preview_every"} {
		if src[k].Layer != LayerFile || src[k].Name != path || src[k].Line == 0 {
			t.Errorf("%s from %v, want %s with a line", k, src[k], path)
		}
	}
	// fast.yaml overrides only what differs: every key it sets is one of
	// the five above and differs from the default.
	def := mustLoad(t, Input{})
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	byKey := fieldMap(schema())
	for sec, kv := range doc {
		for name := range kv {
			n++
			f := byKey[sec+"."+name]
			if reflect.DeepEqual(c.value(f), def.value(f)) {
				t.Errorf("fast.yaml sets %s to its default", f.key)
			}
		}
	}
	if n != 5 {
		t.Errorf("fast.yaml sets %d keys, want 5", n)
	}
	// The embedded copy is the file on disk.
	emb, err := configs.Read("fast")
	if err != nil || string(emb) != string(raw) {
		t.Errorf("embedded fast.yaml differs from configs/fast.yaml (err %v)", err)
	}
}

func TestDefaultYAMLDocumentsEveryKey(t *testing.T) {
	for _, k := range Keys() {
		if h := Help(k); len(h) < 10 {
			t.Errorf("%s: no comment in default.yaml (got %q)", k, h)
		}
	}
	if got := Help("train.iterations"); !strings.Contains(got, "3DGS original: 30000") {
		t.Errorf("Help(train.iterations) = %q", got)
	}
	if Help("train.nope") != "" || Help("nope") != "" {
		t.Error("Help of an unknown key is not empty")
	}
}

func TestKeysDefaultType(t *testing.T) {
	keys := Keys()
	// data 8, init 7, model 6, raster 3, loss 2, optim 14, densify 15,
	// mcmc 9, train 17, output 2.
	if len(keys) != 83 {
		t.Errorf("%d keys, want 83", len(keys))
	}
	if keys[0] != "data.dir" || keys[len(keys)-1] != "output.formats" {
		t.Errorf("key order: first %s, last %s", keys[0], keys[len(keys)-1])
	}
	for _, tc := range []struct{ key, def, typ string }{
		{"train.iterations", "30000", "int"},
		{"train.eval_steps", "7000,30000", "[]int"},
		{"data.background", "0,0,0", "[]float"},
		{"output.formats", "ply", "[]string"},
		{"optim.means_lr", "0.00016", "float"},
		{"optim.eps", "1e-15", "float"},
		{"densify.enabled", "true", "bool"},
		{"data.format", "", "string"},
		{"raster.bin_mode", "gpu-conic", "string"},
		{"train.seed", "42", "int"},
		{"no.such", "", ""},
	} {
		if got := Default(tc.key); got != tc.def {
			t.Errorf("Default(%s) = %q, want %q", tc.key, got, tc.def)
		}
		if got := Type(tc.key); got != tc.typ {
			t.Errorf("Type(%s) = %q, want %q", tc.key, got, tc.typ)
		}
	}
	// One source of defaults: feeding every Default back as a flag must
	// reproduce the defaults exactly (flag help shows what a flag would do).
	flags := map[string]string{}
	for _, k := range keys {
		flags[k] = Default(k)
	}
	c := mustLoad(t, Input{Flags: flags})
	if got, want := exported(c), wantDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults through flags:\n got %+v\nwant %+v", got, want)
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	odd := wantDefaults()
	odd.Data.Dir = "dir: with colon # and hash"
	odd.Data.Images = "yes"
	odd.Data.Format = FormatTransforms
	odd.Data.Background = []float64{0.1 + 0.2, 1, 1.0 / 3}
	odd.Optim.MeansLR = 30000
	odd.Optim.Eps = 1e-300
	odd.Train.EvalSteps = []int{}
	odd.Train.Seed = -9007199254740993
	odd.Output.Formats = []string{}
	for _, tc := range []struct {
		name string
		in   Input
		cfg  *Config
	}{
		{name: "defaults", in: Input{}},
		{name: "fast", in: Input{File: "fast"}},
		{name: "odd values", cfg: &odd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			if c == nil {
				c = mustLoad(t, tc.in)
			}
			b, err := c.YAML()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, b)
			}
			if got, want := exported(back), exported(c); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip:\n got %+v\nwant %+v\n%s", got, want, b)
			}
			for k, s := range back.Sources() {
				if s.Layer != LayerFile {
					t.Errorf("%s: parsed value from %v, want file (every key is written)", k, s)
				}
			}
		})
	}
}

func TestParse(t *testing.T) {
	// A checkpoint written before a key existed still loads, with the
	// default for the missing key.
	c, err := Parse([]byte("train:\n  iterations: 12\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.Iterations != 12 || c.Train.Seed != 42 {
		t.Errorf("Parse partial: iterations %d seed %d", c.Train.Iterations, c.Train.Seed)
	}
	_, err = Parse([]byte("train:\n  iterationz: 12\n"))
	if err == nil || !strings.Contains(err.Error(), "did you mean train.iterations?") || !strings.Contains(err.Error(), "parsed YAML:2") {
		t.Errorf("Parse unknown key: %v", err)
	}
	if _, err := Parse([]byte("raster:\n  tile_size: 12\n")); err == nil || !strings.Contains(err.Error(), "raster.tile_size: 12 is not one of 8, 16, 32") {
		t.Errorf("Parse invalid value: %v", err)
	}
}

func TestDescribe(t *testing.T) {
	path := writeFile(t, "train:\n  iterations: 100\n")
	c := mustLoad(t, Input{
		File:  path,
		Env:   []string{"RLXSPLAT_TRAIN_SEED=7", EnvForceGPUConic + "="},
		Flags: map[string]string{"loss.kind": "mse"},
	})
	out := c.Describe()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(Keys())+1 {
		t.Fatalf("%d lines, want a header and one per key:\n%s", len(lines), out)
	}
	want := map[string][]string{
		"train.iterations": {"100", "file " + path + ":2"},
		"train.seed":       {"7", "env RLXSPLAT_TRAIN_SEED"},
		"raster.bin_mode":  {`"gpu-conic"`, "env " + EnvForceGPUConic},
		"loss.kind":        {`"mse"`, "flag"},
		"train.eval_steps": {"[7000, 30000]", "default"},
		"output.formats":   {`["ply"]`, "default"},
		"data.dir":         {`""`, "default"},
	}
	for _, line := range lines[1:] {
		fields := strings.Fields(line)
		if w, ok := want[fields[0]]; ok {
			for _, s := range w {
				if !strings.Contains(line, s) {
					t.Errorf("line %q lacks %q", line, s)
				}
			}
			delete(want, fields[0])
		}
	}
	for k := range want {
		t.Errorf("no line for %s", k)
	}
}

func TestSuggest(t *testing.T) {
	keys := Keys()
	for _, tc := range []struct{ in, want string }{
		{"train.iteratons", "train.iterations"},
		{"iterations", "train.iterations"},
		{"optim.iterations", "train.iterations"},
		{"bin-mode", "raster.bin_mode"},
		{"raster.binmode", "raster.bin_mode"},
		{"RASTER.BIN_MODE", "raster.bin_mode"},
		{"outptu.dir", "output.dir"},
		{"densify.grad_thresh", "densify.grad_threshold"},
		{"optim.sh_rest", "optim.sh_rest_lr"},
	} {
		if got := suggest(tc.in, keys); got != tc.want {
			t.Errorf("suggest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFileData(t *testing.T) {
	// A checkpoint's stored config as the file layer: env and flags still
	// apply over it, and messages name it.
	ckpt := []byte("train:\n  iterations: 777\n  seed: 5\n")
	c := mustLoad(t, Input{
		FileData: ckpt, FileName: "run.ckpt (config)",
		File:  "/ignored/when/FileData/is/set.yaml",
		Env:   []string{"RLXSPLAT_TRAIN_SEED=6"},
		Flags: map[string]string{"train.iterations": "800"},
	})
	if c.Train.Iterations != 800 || c.Train.Seed != 6 {
		t.Errorf("iterations %d seed %d, want 800 and 6", c.Train.Iterations, c.Train.Seed)
	}
	c = mustLoad(t, Input{FileData: ckpt, FileName: "run.ckpt (config)"})
	if got := c.Sources()["train.iterations"].String(); got != "file run.ckpt (config):2" {
		t.Errorf("source %q", got)
	}
	_, err := Load(Input{FileData: []byte("train:\n  sede: 1\n")})
	if err == nil || !strings.Contains(err.Error(), "train.sede: unknown key; did you mean train.seed? (from file config data:2)") {
		t.Errorf("FileData without a name: %v", err)
	}
}

func TestLoadsAreIndependent(t *testing.T) {
	// Each Load has its own viper: a value set in one never leaks into the
	// next, even concurrently.
	for i, env := range [][]string{{"RLXSPLAT_TRAIN_ITERATIONS=5"}, nil, {"RLXSPLAT_TRAIN_ITERATIONS=6"}, nil} {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			c := mustLoad(t, Input{Env: env})
			want := 30000
			switch i {
			case 0:
				want = 5
			case 2:
				want = 6
			}
			if c.Train.Iterations != want {
				t.Errorf("iterations %d, want %d", c.Train.Iterations, want)
			}
		})
	}
}
