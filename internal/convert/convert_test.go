package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
)

// testPhotos are the fake runs' photos: extensions in every case the
// converter accepts, JPEG and PNG.
var testPhotos = []string{"a.JPG", "b.jpeg", "c.png", "d.jpg", "e.PNG", "f.jpg"}

// argValue returns the value following flag in args ("" when absent).
func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// Stage order, COLMAP's arguments, the matcher choice, the model choice, the
// log, and a capture the dataset loader reads at full and reduced size.
func TestRunFake(t *testing.T) {
	tests := []struct {
		name    string
		models  []int // registered photos of each model the mapper writes
		opt     func(*Options)
		matcher string
		model   string // the model undistorted
		single  string
	}{
		{name: "defaults: exhaustive, OPENCV, CPU", models: []int{6}, matcher: "exhaustive_matcher", model: "0", single: "1"},
		{name: "more photos than exhaustive-max: sequential", models: []int{6}, opt: func(o *Options) { o.ExhaustiveMax = 5 },
			matcher: "sequential_matcher", model: "0", single: "1"},
		{name: "sequential asked for", models: []int{6}, opt: func(o *Options) { o.Matcher = MatcherSequential },
			matcher: "sequential_matcher", model: "0", single: "1"},
		{name: "exhaustive asked for above the limit", models: []int{6}, opt: func(o *Options) { o.Matcher = MatcherExhaustive; o.ExhaustiveMax = 2 },
			matcher: "exhaustive_matcher", model: "0", single: "1"},
		{name: "several models: the largest", models: []int{2, 5, 3}, matcher: "exhaustive_matcher", model: "1", single: "1"},
		{name: "GPU and another camera model", models: []int{6}, opt: func(o *Options) { o.GPU = true; o.CameraModel = "SIMPLE_RADIAL" },
			matcher: "exhaustive_matcher", model: "0", single: "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, testPhotos, tc.models...)
			photos := filepath.Join(t.TempDir(), "photos")
			writePhotos(t, photos, testPhotos, photoW, photoH)
			if err := os.WriteFile(filepath.Join(photos, "notes.txt"), []byte("not a photo"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "capture")
			o := DefaultOptions()
			o.Photos, o.Out, o.Colmap, o.Env = photos, out, f.exe, f.env
			if tc.opt != nil {
				tc.opt(&o)
			}
			res, c, err := runFake(t, context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.started(); !slices.Equal(got, Stages()) {
				t.Errorf("stages %v, want %v", got, Stages())
			}
			calls := f.calls(t)
			var subs []string
			for _, call := range calls {
				subs = append(subs, call[0])
			}
			want := []string{"help", "feature_extractor", tc.matcher, "mapper", "image_undistorter"}
			if !slices.Equal(subs, want) {
				t.Fatalf("COLMAP commands %v, want %v", subs, want)
			}
			gpu := "0"
			if o.GPU {
				gpu = "1"
			}
			input := filepath.Join(out, "input")
			db := filepath.Join(out, "distorted", "database.db")
			for _, chk := range []struct {
				call       int
				flag, want string
			}{
				{1, "--database_path", db},
				{1, "--image_path", input},
				{1, "--ImageReader.camera_model", o.CameraModel},
				{1, "--ImageReader.single_camera", tc.single},
				{1, "--SiftExtraction.use_gpu", gpu},
				{2, "--database_path", db},
				{2, "--SiftMatching.use_gpu", gpu},
				{3, "--image_path", input},
				{3, "--output_path", filepath.Join(out, "distorted", "sparse")},
				{3, "--Mapper.ba_global_function_tolerance", "0.000001"},
				{4, "--input_path", filepath.Join(out, "distorted", "sparse", tc.model)},
				{4, "--output_path", out},
				{4, "--output_type", "COLMAP"},
			} {
				if got := argValue(calls[chk.call], chk.flag); got != chk.want {
					t.Errorf("%s %s = %q, want %q", calls[chk.call][0], chk.flag, got, chk.want)
				}
			}
			reg := slices.Max(tc.models)
			if res.Photos != 6 || res.Registered != reg || res.Models != len(tc.models) || res.Points != 8 || res.Width != photoW || res.Height != photoH {
				t.Errorf("result %+v", res)
			}
			if d, n := c.lastProgress(StageFeatures); d != 6 || n != 6 {
				t.Errorf("features progress %d/%d, want 6/6", d, n)
			}
			if d, n := c.lastProgress(StageResize); d != 6 || n != 6 {
				t.Errorf("resize progress %d/%d, want 6/6", d, n)
			}
			if !slices.ContainsFunc(c.events, func(e Event) bool { n, ok := e.(Notice); return ok && strings.Contains(n.Text, "skipped 1 file") }) {
				t.Errorf("no notice of the skipped notes.txt in %v", c.events)
			}
			// The user's folder is left as it was.
			if entries, _ := os.ReadDir(photos); len(entries) != len(testPhotos)+1 {
				t.Errorf("photo folder holds %d entries, want %d", len(entries), len(testPhotos)+1)
			}
			// The log: every stage's command line and COLMAP's output.
			logb, err := os.ReadFile(filepath.Join(out, "colmap.log"))
			if err != nil {
				t.Fatal(err)
			}
			log := string(logb)
			for _, s := range []string{"=== features", "$ " + f.exe + " feature_extractor", "Processed file [6/6]",
				"=== matching", tc.matcher, "=== mapping", "Registering image #2 (2)", "=== undistort", "exit status 0"} {
				if !strings.Contains(log, s) {
					t.Errorf("colmap.log lacks %q:\n%s", s, log)
				}
			}
			// The capture loads, at full size and from images_2.
			for _, n := range []int{1, 2, 8} {
				dopt := dataset.DefaultOptions()
				dopt.Downscale = n
				ds, err := dataset.Load(out, dopt)
				if err != nil {
					t.Fatalf("downscale %d: %v", n, err)
				}
				if got := len(ds.Train) + len(ds.Test); got != reg {
					t.Errorf("downscale %d: %d views, want %d", n, got, reg)
				}
				v := ds.Train[0]
				if w, h := (photoW+n/2)/n, (photoH+n/2)/n; v.Camera.Width != w || v.Camera.Height != h || v.Image.W != w || v.Image.H != h {
					t.Errorf("downscale %d: camera %d×%d, image %d×%d, want %d×%d", n, v.Camera.Width, v.Camera.Height, v.Image.W, v.Image.H, w, h)
				}
				if len(ds.Points) != 8*3 {
					t.Errorf("%d point values, want 24", len(ds.Points))
				}
			}
			for _, n := range []string{"images_2", "images_4", "images_8"} {
				if _, err := os.Stat(filepath.Join(out, n, "c.png")); err != nil {
					t.Errorf("%s: %v", n, err)
				}
			}
		})
	}
}

// Failures: a COLMAP stage that fails, too few registered photos, bad
// options, an output holding an earlier conversion.
func TestRunFakeFailures(t *testing.T) {
	tests := []struct {
		name   string
		models []int
		env    []string
		opt    func(*Options)
		setup  func(t *testing.T, photos, out string)
		check  func(t *testing.T, err error, out string)
	}{
		{name: "mapper fails", models: []int{6}, env: []string{"FAKE_FAIL=mapper"}, check: func(t *testing.T, err error, out string) {
			var se *StageError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is no StageError", err)
			}
			if se.Stage != StageMapping || se.ExitCode != 3 || se.Log != filepath.Join(out, "colmap.log") {
				t.Errorf("stage %q, exit %d, log %q", se.Stage, se.ExitCode, se.Log)
			}
			msg := err.Error()
			for _, s := range []string{"mapping", "status 3", filepath.Join(out, "colmap.log"), "fake mapper: something broke"} {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q lacks %q", msg, s)
				}
			}
			// The partial output stays.
			if _, err := os.Stat(filepath.Join(out, "distorted", "database.db")); err != nil {
				t.Error(err)
			}
		}},
		{name: "feature extraction fails", models: []int{6}, env: []string{"FAKE_FAIL=feature_extractor"}, check: func(t *testing.T, err error, out string) {
			var se *StageError
			if !errors.As(err, &se) || se.Stage != StageFeatures {
				t.Fatalf("error %v", err)
			}
		}},
		{name: "too few registered", models: []int{2, 1}, check: func(t *testing.T, err error, out string) {
			if !errors.Is(err, ErrTooFewRegistered) {
				t.Fatalf("error %v", err)
			}
			for _, s := range []string{"only 2 of 6 photos", "overlap", "blur", out} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if _, err := os.Stat(filepath.Join(out, "distorted", "sparse", "0", "images.bin")); err != nil {
				t.Error(err)
			}
		}},
		{name: "no model at all", models: nil, check: func(t *testing.T, err error, out string) {
			if !errors.Is(err, ErrTooFewRegistered) || !strings.Contains(err.Error(), "no model") {
				t.Fatalf("error %v", err)
			}
		}},
		{name: "--min-registered above the count", models: []int{5}, opt: func(o *Options) { o.MinRegistered = 6 }, check: func(t *testing.T, err error, out string) {
			if !errors.Is(err, ErrTooFewRegistered) {
				t.Fatalf("error %v", err)
			}
		}},
		{name: "--min-registered below the default accepts", models: []int{2}, opt: func(o *Options) { o.MinRegistered = 2 }, check: func(t *testing.T, err error, out string) {
			if err != nil {
				t.Fatal(err)
			}
		}},
		{name: "bad camera model", models: []int{6}, opt: func(o *Options) { o.CameraModel = "opencv" }, check: wantUsage("OPENCV")},
		{name: "bad matcher", models: []int{6}, opt: func(o *Options) { o.Matcher = "vocab" }, check: wantUsage("sequential")},
		{name: "too few photos", models: []int{6}, setup: func(t *testing.T, photos, out string) {
			for _, n := range testPhotos[2:] {
				os.Remove(filepath.Join(photos, n))
			}
		}, check: wantUsage("at least 3")},
		{name: "not a photo", models: []int{6}, setup: func(t *testing.T, photos, out string) {
			os.WriteFile(filepath.Join(photos, "broken.jpg"), []byte("no jpeg"), 0o644)
		}, check: func(t *testing.T, err error, out string) {
			if err == nil || !strings.Contains(err.Error(), "broken.jpg") {
				t.Fatalf("error %v", err)
			}
		}},
		{name: "out is the photo folder", models: []int{6}, opt: func(o *Options) { o.Out = o.Photos }, check: wantUsage("photo folder itself")},
		{name: "out holds an earlier conversion", models: []int{6}, setup: func(t *testing.T, photos, out string) {
			os.MkdirAll(filepath.Join(out, "sparse", "0"), 0o755)
		}, check: wantUsage("--force")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, testPhotos, tc.models...)
			photos := filepath.Join(t.TempDir(), "photos")
			writePhotos(t, photos, testPhotos, photoW, photoH)
			out := filepath.Join(t.TempDir(), "capture")
			if tc.setup != nil {
				tc.setup(t, photos, out)
			}
			o := DefaultOptions()
			o.Photos, o.Out, o.Colmap, o.Env = photos, out, f.exe, append(f.env, tc.env...)
			if tc.opt != nil {
				tc.opt(&o)
			}
			_, _, err := runFake(t, context.Background(), o)
			tc.check(t, err, out)
		})
	}
}

func wantUsage(substr string) func(t *testing.T, err error, out string) {
	return func(t *testing.T, err error, out string) {
		t.Helper()
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), substr) {
			t.Fatalf("error %v, want a usage error containing %q", err, substr)
		}
	}
}

// --force replaces only an earlier conversion's files; photos already in
// CAPTURE/input (the 3DGS layout) are used in place and kept.
func TestRunFakeForceAndInPlace(t *testing.T) {
	f := newFake(t, testPhotos, 6)
	out := filepath.Join(t.TempDir(), "capture")
	input := filepath.Join(out, "input")
	writePhotos(t, input, testPhotos, photoW, photoH)
	for _, p := range []string{"images_8/stale.jpg", "keep.txt"} {
		os.MkdirAll(filepath.Dir(filepath.Join(out, p)), 0o755)
		if err := os.WriteFile(filepath.Join(out, p), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := DefaultOptions()
	o.Photos, o.Out, o.Colmap, o.Env = input, out, f.exe, f.env
	if _, _, err := runFake(t, context.Background(), o); !errors.Is(err, ErrUsage) {
		t.Fatalf("without --force: %v", err)
	}
	o.Force = true
	_, c, err := runFake(t, context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "images_8", "stale.jpg")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "keep.txt")); err != nil {
		t.Errorf("a file convert does not write was removed: %v", err)
	}
	if entries, _ := os.ReadDir(input); len(entries) != len(testPhotos) {
		t.Errorf("input holds %d photos, want %d", len(entries), len(testPhotos))
	}
	var detail string
	for _, e := range c.events {
		if s, ok := e.(StageStarted); ok && s.Stage == StageInput {
			detail = s.Detail
		}
	}
	if !strings.Contains(detail, "already in") {
		t.Errorf("input stage %q: photos not used in place", detail)
	}
}

// Photos of different sizes get a camera each rather than one shared.
func TestRunFakeMixedSizes(t *testing.T) {
	f := newFake(t, testPhotos, 6)
	photos := filepath.Join(t.TempDir(), "photos")
	writePhotos(t, photos, testPhotos[:5], photoW, photoH)
	writePhotos(t, photos, testPhotos[5:], photoH, photoW)
	o := DefaultOptions()
	o.Photos, o.Out, o.Colmap, o.Env = photos, filepath.Join(t.TempDir(), "capture"), f.exe, f.env
	if _, _, err := runFake(t, context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if got := argValue(f.calls(t)[1], "--ImageReader.single_camera"); got != "0" {
		t.Errorf("single_camera %q, want 0", got)
	}
}

// Cancelling the context stops COLMAP and returns context.Canceled.
func TestRunFakeCancel(t *testing.T) {
	f := newFake(t, testPhotos, 6)
	photos := filepath.Join(t.TempDir(), "photos")
	writePhotos(t, photos, testPhotos, photoW, photoH)
	o := DefaultOptions()
	o.Photos, o.Out, o.Colmap, o.Env = photos, filepath.Join(t.TempDir(), "capture"), f.exe, append(f.env, "FAKE_SLEEP=mapper")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, o, func(e Event) {
		if s, ok := e.(StageStarted); ok && s.Stage == StageMapping {
			time.AfterFunc(200*time.Millisecond, cancel)
		}
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "mapping") {
		t.Fatalf("error %v, want mapping: context canceled", err)
	}
	// The fake sleeps 60 s: stopping it is what ends Run (the kill comes 5 s after
	// an interrupt that was not obeyed).
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Run returned %v after the cancel", d)
	}
}

// A missing COLMAP is ErrNoColmap with how to install it; a given path is
// looked up as given.
func TestFindColmap(t *testing.T) {
	none := func(string) (string, error) { return "", errors.New("not found") }
	found := func(p string) (string, error) { return "/opt/bin/" + filepath.Base(p), nil }
	tests := []struct {
		name, path string
		look       func(string) (string, error)
		want       string
		wantErr    []string
	}{
		{name: "on PATH", look: found, want: "/opt/bin/colmap"},
		{name: "given", path: "/x/colmap-3.9", look: found, want: "/opt/bin/colmap-3.9"},
		{name: "missing", look: none, wantErr: []string{"not installed", "apt install colmap", "brew install colmap", "--colmap"}},
		{name: "given, missing", path: "/x/colmap", look: none, wantErr: []string{"--colmap /x/colmap", "apt install colmap"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FindColmap(tc.path, tc.look)
			if tc.wantErr == nil {
				if err != nil || got != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrNoColmap) {
				t.Fatalf("error %v is not ErrNoColmap", err)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

// A COLMAP that does not run is ErrNoColmap too, found before any stage.
func TestRunColmapDoesNotRun(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "colmap")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho 'error while loading shared libraries: libfoo.so' >&2\nexit 127\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	photos := filepath.Join(dir, "photos")
	writePhotos(t, photos, testPhotos, photoW, photoH)
	o := DefaultOptions()
	o.Photos, o.Out, o.Colmap = photos, filepath.Join(dir, "capture"), exe
	_, c, err := runFake(t, context.Background(), o)
	if !errors.Is(err, ErrNoColmap) || !strings.Contains(err.Error(), "libfoo.so") {
		t.Fatalf("error %v", err)
	}
	if len(c.started()) != 0 {
		t.Errorf("stages started: %v", c.started())
	}
}

// COLMAP 3.8's progress lines.
func TestParseProgress(t *testing.T) {
	tests := []struct {
		line        string
		parse       func(string) (int, int, bool)
		done, total int
		ok          bool
	}{
		{"Processed file [3/16]", parseCount, 3, 16, true},
		{"Undistorting image [16/16]", parseCount, 16, 16, true},
		{"Matching image [2/40]", parseCount, 2, 40, true},
		{"  Name:            DSCF5565.JPG", parseCount, 0, 0, false},
		{"Matching block [1/1, 1/1] in 140.7s", parseBlock, 1, 1, true},
		{"Matching block [2/3, 1/3]", parseBlock, 4, 9, true},
		{"Registering image #7 (3)", parseRegister(16), 3, 16, true},
		{"Registering image #7 (30)", parseRegister(16), 16, 16, true},
		{"Initializing with image pair #3 and #5", parseRegister(16), 0, 0, false},
	}
	for _, tc := range tests {
		d, n, ok := tc.parse(tc.line)
		if d != tc.done || n != tc.total || ok != tc.ok {
			t.Errorf("%q: %d/%d %v, want %d/%d %v", tc.line, d, n, ok, tc.done, tc.total, tc.ok)
		}
	}
}
