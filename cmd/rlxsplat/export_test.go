package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/dotsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/gltfsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/spz"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Argument parsing of export, without running it.
func TestExportFlags(t *testing.T) {
	tests := []struct {
		args    []string
		want    exportOptions
		wantErr string
	}{
		{args: []string{"--scene", "a.ply", "--out", "b.spz"}, want: exportOptions{scene: "a.ply", out: "b.spz", format: "spz", shDegree: -1, spzVersion: 4}},
		{args: []string{"--ply", "a.ply", "--out", "b.spz", "--spz-version", "2"}, want: exportOptions{scene: "a.ply", out: "b.spz", format: "spz", shDegree: -1, spzVersion: 2}},
		{args: []string{"--ckpt", "c.ckpt", "--out", "B.SPLAT"}, want: exportOptions{scene: "c.ckpt", out: "B.SPLAT", format: "splat", shDegree: -1, spzVersion: 4}},
		{args: []string{"--ply", "a.ply", "--out", "b.bin", "--format", "ply", "--sh-degree", "1", "--antialiased"},
			want: exportOptions{scene: "a.ply", out: "b.bin", format: "ply", shDegree: 1, antialiased: true, spzVersion: 4}},
		{args: []string{"--out", "b.spz"}, wantErr: "give the scene to read with --scene FILE"},
		{args: []string{"--ply", "a.ply", "--ckpt", "c.ckpt", "--out", "b.spz"}, wantErr: "give one scene"},
		{args: []string{"--scene", "a.ply", "--out", "b.spz", "--spz-version", "5"}, wantErr: "--spz-version 5"},
		{args: []string{"--ply", "a.ply"}, wantErr: "--out is required"},
		{args: []string{"--ply", "a.ply", "--out", "b.bin"}, wantErr: "cannot tell the format of b.bin"},
		{args: []string{"--ply", "a.ply", "--out", "b.GLB"}, want: exportOptions{scene: "a.ply", out: "b.GLB", format: "glb", shDegree: -1, spzVersion: 4}},
		{args: []string{"--ply", "a.ply", "--out", "b.spz", "--format", "gltf"}, wantErr: `--format "gltf"`},
		{args: []string{"--ply", "a.ply", "--out", "b.spz", "--sh-degree", "4"}, wantErr: "--sh-degree 4"},
	}
	for _, tt := range tests {
		s, _, _ := testStreams()
		var got *exportOptions
		cmd := newExportCmd(s, func(o *exportOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		cmd.SetOut(s.Out)
		cmd.SetErr(s.Err)
		err := cmd.Execute()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		got.sf = sceneFlags{}
		if *got != tt.want {
			t.Errorf("%v: options %+v, want %+v", tt.args, *got, tt.want)
		}
	}
}

// exportScene is a small degree-2 scene with values every format holds.
func exportScene() *splat.Gaussians {
	g := splat.New(3)
	for i := 0; i < 3; i++ {
		g.Means[3*i] = float32(i)
		g.LogScales[3*i+1] = -float32(i)
		g.OpacityLogits[i] = float32(i) - 1
		g.SH[i*splat.SHCoeffs*3] = 0.5
		g.SH[(i*splat.SHCoeffs+5)*3+1] = 0.25 // degree 2
	}
	return g
}

// End to end through run(): a PLY exported to each format reads back with
// the splat count and degree it should, and errors name the file and exit
// with the right code.
func TestExportRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.ply")
	if err := ply.WriteFile(in, exportScene(), 2); err != nil {
		t.Fatal(err)
	}
	readBack := map[string]func(t *testing.T, path string) (int, int){
		"spz": func(t *testing.T, path string) (int, int) {
			g, info, err := spz.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return g.Len(), info.SHDegree
		},
		"splat": func(t *testing.T, path string) (int, int) {
			g, err := dotsplat.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return g.Len(), 0
		},
		"glb": func(t *testing.T, path string) (int, int) {
			g, info, err := gltfsplat.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return g.Len(), info.SHDegree
		},
		"ply": func(t *testing.T, path string) (int, int) {
			g, info, err := ply.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return g.Len(), info.SHDegree
		},
	}
	tests := []struct {
		args    []string
		format  string
		out     string
		wantDeg int
	}{
		{[]string{"--out", "a.spz"}, "spz", "a.spz", 2},
		{[]string{"--out", "a.splat"}, "splat", "a.splat", 0},
		{[]string{"--out", "a.ply", "--sh-degree", "1"}, "ply", "a.ply", 1},
		{[]string{"--out", "a.bin", "--format", "spz", "--sh-degree", "0"}, "spz", "a.bin", 0},
		{[]string{"--out", "a.glb"}, "glb", "a.glb", 2},
		{[]string{"--out", "b.bin", "--format", "glb", "--sh-degree", "3"}, "glb", "b.bin", 3},
	}
	for _, tt := range tests {
		out := filepath.Join(dir, tt.out)
		args := append([]string{"export", "--ply", in}, tt.args...)
		args[len(args)-len(tt.args)+1] = out
		s, stdout, errb := testStreams()
		if code := run(args, s); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		if !strings.Contains(stdout.String(), "wrote 3 splats") || !strings.Contains(stdout.String(), out) {
			t.Errorf("%v: stdout %q", args, stdout.String())
		}
		n, deg := readBack[tt.format](t, out)
		if n != 3 || deg != tt.wantDeg {
			t.Errorf("%v: read back %d splats of degree %d, want 3 of degree %d", args, n, deg, tt.wantDeg)
		}
	}

	// glTF cannot carry the antialiasing flag: the export says so, and only then.
	for _, tc := range []struct {
		out      string
		aa, want bool
	}{{"aa.glb", true, true}, {"plain.glb", false, false}, {"aa.spz", true, false}} {
		args := []string{"export", "--ply", in, "--out", filepath.Join(dir, tc.out)}
		if tc.aa {
			args = append(args, "--antialiased")
		}
		s, _, errb := testStreams()
		if code := run(args, s); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		if got := strings.Contains(errb.String(), "no field for the Mip-Splatting 2D filter"); got != tc.want {
			t.Errorf("%v: notice shown %v, want %v (stderr %q)", args, got, tc.want, errb.String())
		}
	}

	// A failed export names the file and leaves an existing output alone.
	kept := filepath.Join(dir, "kept.spz")
	if err := os.WriteFile(kept, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args    []string
		code    int
		wantErr string
	}{
		{[]string{"export", "--ply", filepath.Join(dir, "missing.ply"), "--out", kept}, exitError, "missing.ply"},
		{[]string{"export", "--ckpt", filepath.Join(dir, "missing.ckpt"), "--out", kept}, exitError, "missing.ckpt"},
		{[]string{"export", "--ply", kept, "--out", kept}, exitError, "kept.spz"},
		{[]string{"export", "--ply", in, "--out", filepath.Join(dir, "no", "such", "dir.spz")}, exitError, "dir.spz"},
		{[]string{"export", "--ply", in, "--out", "x.obj"}, exitUsage, "--format spz|splat|ply|glb"},
	} {
		s, _, errb := testStreams()
		if code := run(tc.args, s); code != tc.code || !strings.Contains(errb.String(), tc.wantErr) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.wantErr)
		}
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "keep me" {
		t.Errorf("kept.spz changed: %q, %v", b, err)
	}
}
