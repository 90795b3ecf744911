package scene_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/io/ckpt"
	"github.com/rlxsplat/rlxsplat/internal/io/dotsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/gltfsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/scene"
	"github.com/rlxsplat/rlxsplat/internal/io/spz"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

// writeCheckpoint writes g as a checkpoint with the sections the trainer
// writes (config at SH degree deg).
func writeCheckpoint(t *testing.T, path string, g *splat.Gaussians, deg int) {
	t.Helper()
	c, err := config.Load(config.Input{})
	if err != nil {
		t.Fatal(err)
	}
	c.Model.SHDegree = deg
	yaml, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	f := &ckpt.File{}
	f.PutGaussians("params", g)
	f.PutBytes("config/yaml", yaml)
	if err := ckpt.WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
}

// TestReadFileEveryFormat writes one scene in every format, under a name
// that hides the format (content, not the extension, must decide), and
// reads it back through ReadFile.
func TestReadFileEveryFormat(t *testing.T) {
	dir := t.TempDir()
	g := splattest.RandomScene(7, 64, 2, 1.5)
	for i := range g.LogScales {
		g.LogScales[i] = min(max(g.LogScales[i], -9), 5) // inside SPZ's scale byte
	}
	for i := range g.Means {
		g.Means[i] /= 10
	}
	tests := []struct {
		format scene.Format
		deg    int
		write  func(path string) error
	}{
		{scene.PLY, 2, func(p string) error { return ply.WriteFile(p, g, 2) }},
		{scene.SPZ, 2, func(p string) error { return spz.WriteFile(p, g, spz.Options{SHDegree: 2}) }},
		{scene.SPZ, 1, func(p string) error { return spz.WriteFile(p, g, spz.Options{SHDegree: 1, Version: 3}) }},
		{scene.GLB, 2, func(p string) error { return gltfsplat.WriteFile(p, g, gltfsplat.Options{SHDegree: 2}) }},
		{scene.Splat, 0, func(p string) error { return dotsplat.WriteFile(p, g) }},
		{scene.Checkpoint, 2, func(p string) error { writeCheckpoint(t, p, g, 2); return nil }},
	}
	for i, tc := range tests {
		t.Run(string(tc.format), func(t *testing.T) {
			path := filepath.Join(dir, "scene"+string(rune('a'+i))+".bin")
			if err := tc.write(path); err != nil {
				t.Fatal(err)
			}
			s, err := scene.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.Format != tc.format || s.SHDegree != tc.deg || s.Gaussians.Len() != g.Len() || len(s.Warnings) != 0 {
				t.Fatalf("format %s, degree %d, %d splats, warnings %q; want %s, %d, %d, none", s.Format, s.SHDegree, s.Gaussians.Len(), s.Warnings, tc.format, tc.deg, g.Len())
			}
		})
	}
}

// The checkpoint sections scene reads are the ones the trainer reads back.
func TestCheckpointSectionsMatchTrainer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.ckpt")
	g := splattest.RandomScene(3, 5, 3, 1)
	writeCheckpoint(t, path, g, 3)
	if _, err := train.CheckpointConfig(path); err != nil {
		t.Fatalf("the trainer does not find the config where scene reads it: %v", err)
	}
	f, err := ckpt.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names := f.Names()
	for _, fl := range g.Fields() {
		if !slices.Contains(names, "params/"+fl.Name) {
			t.Errorf("section params/%s missing", fl.Name)
		}
	}
	s, err := scene.ReadFile(path)
	if err != nil || !slices.Equal(s.Gaussians.Means, g.Means) || s.SHDegree != 3 {
		t.Fatalf("%v", err)
	}
}

// TestDetect covers each magic, the .splat fallback and the refusals.
func TestDetect(t *testing.T) {
	tests := []struct {
		head []byte
		size int64
		want scene.Format
		err  string
	}{
		{[]byte("ply\nformat ascii 1.0\nelement vertex 1\nend_header\n"), 100, scene.PLY, ""},
		{[]byte("ply\r\nformat binary_little_endian 1.0\r\nelement chunk 2\nelement vertex 300\nend_header\n"), 100, scene.CompressedPLY, ""},
		{[]byte("ply\nelement vertex 1\nend_header\nelement chunk 1"), 100, scene.PLY, ""},
		{[]byte{0x1f, 0x8b, 8, 0}, 100, scene.SPZ, ""},
		{[]byte("NGSP\x04\x00\x00\x00"), 100, scene.SPZ, ""},
		{[]byte("glTF\x02\x00\x00\x00"), 100, scene.GLB, ""},
		{[]byte("RLXCKPT\x00"), 100, scene.Checkpoint, ""},
		{make([]byte, 64), 64, scene.Splat, ""},
		{[]byte(" {\"asset\":{}}"), 13, "", "only binary glTF (.glb)"},
		{make([]byte, 33), 33, "", "33 bytes is not a whole number of 32-byte .splat records"},
		{nil, 0, "", "not a scene file"},
	}
	for _, tc := range tests {
		got, err := scene.Detect(tc.head, tc.size)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Detect(%q, %d) = %q, %v; want %q, %q", tc.head, tc.size, got, err, tc.want, tc.err)
		}
	}
}

// TestSharedFixtures reads the files other tools wrote.
func TestSharedFixtures(t *testing.T) {
	for _, tc := range []struct {
		rel    string
		format scene.Format
		deg    int
	}{
		{"fixtures/ply/train-1000.ply", scene.PLY, 3},
		{"fixtures/ply/biker.compressed.ply", scene.CompressedPLY, -1},
		{"fixtures/ply/guitar.compressed.ply", scene.CompressedPLY, -1},
		{"fixtures/spz/biker.spz", scene.SPZ, 0},
	} {
		t.Run(filepath.Base(tc.rel), func(t *testing.T) {
			path := sharedtest.Path(t, tc.rel)
			s, err := scene.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.Format != tc.format || (tc.deg >= 0 && s.SHDegree != tc.deg) || s.Gaussians.Len() == 0 {
				t.Errorf("format %s, degree %d, %d splats", s.Format, s.SHDegree, s.Gaussians.Len())
			}
		})
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.bin")
	if err := os.WriteFile(bad, []byte("hello, world"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := scene.ReadFile(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "not a scene file") {
		t.Errorf("%v", err)
	}
	if _, err := scene.ReadFile(filepath.Join(dir, "missing.ply")); err == nil || !strings.Contains(err.Error(), "missing.ply") {
		t.Errorf("%v", err)
	}
	cut := filepath.Join(dir, "cut.ply")
	if err := os.WriteFile(cut, []byte("ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty float x\nend_header\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := scene.ReadFile(cut); err == nil || !strings.Contains(err.Error(), "cut.ply") {
		t.Errorf("%v", err)
	}
}

// A .glb in linear colour reads with a warning that says its colours are
// taken as sRGB.
func TestLinearGLBWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lin.glb")
	if err := gltfsplat.WriteFile(path, splattest.RandomScene(2, 4, 0, 1), gltfsplat.Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Same length, so the GLB's chunk lengths stay right.
	b = bytes.Replace(b, []byte(`"srgb_rec709_display"`), []byte(`"lin_rec709_display" `), 1)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := scene.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "colorSpace lin_rec709_display") {
		t.Errorf("warnings %q", s.Warnings)
	}
}
