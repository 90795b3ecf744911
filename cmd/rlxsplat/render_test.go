package main

import (
	"image/gif"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/ply"
)

// render --orbit writes PNG frames, a looping GIF, or (with ffmpeg) an MP4; flags that cannot
// work fail before anything loads, ffmpeg's absence with a message saying what to do.
func TestRenderOrbitFormats(t *testing.T) {
	dir := t.TempDir()
	scene := filepath.Join(dir, "s.ply")
	if err := ply.WriteFile(scene, exportScene(), 2); err != nil {
		t.Fatal(err)
	}
	base := []string{"render", "--scene", scene, "--downscale", "4", "--threads", "1", "--device", "cpu"}
	for _, c := range []struct {
		name    string
		args    []string
		path    string // set to an empty directory: no ffmpeg
		code    int
		wantErr string
		check   func(t *testing.T, out string)
	}{
		{name: "png frames", args: []string{"--orbit", "3"}, check: func(t *testing.T, out string) {
			if m, _ := filepath.Glob(filepath.Join(out, "orbit_*.png")); len(m) != 3 {
				t.Errorf("%d PNG frames, want 3", len(m))
			}
		}},
		{name: "gif", args: []string{"--orbit", "3", "--format", "gif", "--fps", "20"}, check: func(t *testing.T, out string) {
			f, err := os.Open(filepath.Join(out, "orbit.gif"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			g, err := gif.DecodeAll(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Image) != 3 || g.Delay[0] != 5 {
				t.Errorf("%d frames, delay %d; want 3 at 5/100 s", len(g.Image), g.Delay[0])
			}
			if m, _ := filepath.Glob(filepath.Join(out, "*.png")); len(m) != 0 {
				t.Errorf("frames left beside the GIF: %v", m)
			}
		}},
		{name: "mp4 without ffmpeg", args: []string{"--orbit", "3", "--format", "mp4"}, path: "empty", code: exitError, wantErr: "no ffmpeg on PATH"},
		{name: "gif without orbit", args: []string{"--format", "gif"}, code: exitUsage, wantErr: "give --orbit N"},
		{name: "unknown format", args: []string{"--orbit", "2", "--format", "avi"}, code: exitUsage, wantErr: "not one of png, gif, mp4"},
		{name: "bad rate", args: []string{"--orbit", "2", "--format", "gif", "--fps", "0"}, code: exitUsage, wantErr: "--fps 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			if c.path != "" {
				t.Setenv("PATH", t.TempDir())
			}
			s, _, errb := testStreams()
			args := append(append(append([]string(nil), base...), c.args...), "--out", out)
			if code := run(args, s); code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, errb.String())
			}
			if c.wantErr != "" && !strings.Contains(errb.String(), c.wantErr) {
				t.Errorf("stderr %q lacks %q", errb.String(), c.wantErr)
			}
			if !strings.HasPrefix(errb.String(), "rlxsplat render: ") && c.code != exitOK {
				t.Errorf("error not prefixed by the command: %q", errb.String())
			}
			if c.check != nil {
				c.check(t, out)
			}
		})
	}
}
