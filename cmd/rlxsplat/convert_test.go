package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/convert"
)

// Arguments and flags of `convert`, without running it.
func TestConvertFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(*testing.T, *convertOptions)
		wantErr string
	}{
		{name: "defaults", args: []string{"photos"}, check: func(t *testing.T, o *convertOptions) {
			want := convert.DefaultOptions()
			want.Photos, want.Out = "photos", "capture"
			if o.opt.Photos != want.Photos || o.opt.Out != want.Out || o.opt.CameraModel != "OPENCV" || o.opt.Matcher != convert.MatcherAuto ||
				o.opt.ExhaustiveMax != 100 || o.opt.MinRegistered != 0 || o.opt.GPU || o.opt.Force || o.colmap != "" {
				t.Errorf("options %+v, colmap %q", o.opt, o.colmap)
			}
		}},
		{name: "every flag", args: []string{"frames", "--out", "cap", "--colmap", "/opt/colmap", "--camera-model", "SIMPLE_RADIAL", "--gpu",
			"--matcher", "sequential", "--exhaustive-max", "50", "--min-registered", "7", "--force"},
			check: func(t *testing.T, o *convertOptions) {
				if o.opt.Photos != "frames" || o.opt.Out != "cap" || o.colmap != "/opt/colmap" || o.opt.CameraModel != "SIMPLE_RADIAL" || !o.opt.GPU ||
					o.opt.Matcher != "sequential" || o.opt.ExhaustiveMax != 50 || o.opt.MinRegistered != 7 || !o.opt.Force {
					t.Errorf("options %+v, colmap %q", o.opt, o.colmap)
				}
			}},
		{name: "no photo folder", args: nil, wantErr: "accepts 1 arg"},
		{name: "two photo folders", args: []string{"a", "b"}, wantErr: "accepts 1 arg"},
		{name: "typed flag", args: []string{"p", "--exhaustive-max", "many"}, wantErr: `invalid argument "many"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := testStreams()
			var got *convertOptions
			cmd := newConvertCmd(s, func(o *convertOptions) error { got = o; return nil })
			root := newRootCmd(s)
			for _, c := range root.Commands() {
				if c.Name() == "convert" {
					root.RemoveCommand(c)
				}
			}
			root.AddCommand(cmd)
			cmd.Args = usageArgs(cmd.Args)
			root.SetArgs(append([]string{"convert"}, tc.args...))
			err := root.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, got)
		})
	}
}

// Exit codes of whole `convert` invocations: a missing COLMAP is status 4 with
// how to install it; bad input is a usage error; a COLMAP failure is status 1.
func TestConvertExitCodes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in COLMAP is a POSIX shell script")
	}
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	if err := os.MkdirAll(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	// A COLMAP that starts and then fails at its first stage.
	failing := filepath.Join(dir, "bin", "colmap")
	os.MkdirAll(filepath.Dir(failing), 0o755)
	script := "#!/bin/sh\nif [ \"$1\" = help ]; then echo 'COLMAP 3.8 (stand-in)'; exit 0; fi\necho \"$1: cannot open the database\" >&2\nexit 2\n"
	if err := os.WriteFile(failing, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.png", "b.png", "c.png"} {
		if err := os.WriteFile(filepath.Join(photos, n), tinyPNG(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		args    []string
		env     []string
		code    int
		wantErr []string
	}{
		{name: "no colmap on PATH", args: []string{"convert", photos, "--out", filepath.Join(dir, "c1")}, env: []string{"PATH=" + filepath.Join(dir, "empty")},
			code: exitDevice, wantErr: []string{"rlxsplat convert: ", "apt install colmap", "brew install colmap"}},
		{name: "--colmap missing", args: []string{"convert", photos, "--out", filepath.Join(dir, "c2"), "--colmap", filepath.Join(dir, "nope", "colmap")},
			code: exitDevice, wantErr: []string{"--colmap", "apt install colmap"}},
		{name: "bad camera model, before a missing COLMAP", args: []string{"convert", photos, "--out", filepath.Join(dir, "c3"), "--camera-model", "fisheye"},
			env: []string{"PATH=" + filepath.Join(dir, "empty")}, code: exitUsage, wantErr: []string{"--camera-model", "OPENCV"}},
		{name: "no such folder", args: []string{"convert", filepath.Join(dir, "none"), "--out", filepath.Join(dir, "c4")},
			env: []string{"PATH=" + filepath.Dir(failing)}, code: exitUsage, wantErr: []string{"not a folder of photos"}},
		{name: "COLMAP fails", args: []string{"convert", photos, "--out", filepath.Join(dir, "c5")},
			env: []string{"PATH=" + filepath.Dir(failing)}, code: exitError,
			wantErr: []string{"[2/6] features", "rlxsplat convert: features: COLMAP exited with status 2", "colmap.log", "cannot open the database"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, errb := testStreams()
			s.Env = tc.env
			if code := run(tc.args, s); code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr %q lacks %q", errb.String(), w)
				}
			}
		})
	}
}

// tinyPNG returns a 2×2 PNG.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Stage lines on and off a terminal: a line per stage start and end either way; the
// progress bar only on a terminal, plain count lines (at most every plainEvery) off it.
func TestConvertProgress(t *testing.T) {
	events := []convert.Event{
		convert.Notice{Text: "COLMAP 3.8"},
		convert.StageStarted{Stage: convert.StageFeatures, Index: 2, Count: 6, Detail: "SIFT features of 3 photos"},
		convert.StageProgress{Stage: convert.StageFeatures, Done: 1, Total: 3},
		convert.StageProgress{Stage: convert.StageFeatures, Done: 3, Total: 3},
		convert.StageDone{Stage: convert.StageFeatures, Elapsed: 1500 * time.Millisecond},
		convert.StageStarted{Stage: convert.StageMapping, Index: 4, Count: 6, Detail: "incremental mapping"},
		convert.StageDone{Stage: convert.StageMapping, Elapsed: time.Second, Summary: "3 of 3 photos registered"},
	}
	for _, tty := range []bool{false, true} {
		s, _, errb := testStreams()
		s.TTY = tty
		p := newStageProgress(s)
		for _, e := range events {
			p.event(e)
		}
		p.finish()
		got := errb.String()
		for _, w := range []string{"rlxsplat: COLMAP 3.8\n", "rlxsplat: [2/6] features: SIFT features of 3 photos\n", "rlxsplat: features done in 1.5s\n",
			"rlxsplat: mapping done in 1.0s: 3 of 3 photos registered\n"} {
			if !strings.Contains(got, w) {
				t.Errorf("tty %v: output %q lacks %q", tty, got, w)
			}
		}
		// The progress came within plainEvery of the stage's start: no plain count line;
		// a bar (carriage returns) only on a terminal.
		if strings.Contains(got, "features: 1/3") {
			t.Errorf("tty %v: a plain count line within %v: %q", tty, plainEvery, got)
		}
		if bar := strings.Contains(got, "\r"); bar != tty {
			t.Errorf("tty %v: progress bar drawn %v: %q", tty, bar, got)
		}
	}
}
