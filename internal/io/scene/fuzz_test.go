package scene_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/dotsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/gltfsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/scene"
	"github.com/rlxsplat/rlxsplat/internal/io/spz"
	"github.com/rlxsplat/rlxsplat/internal/npmtools"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
)

// FuzzReadFile feeds arbitrary bytes, as a file, to ReadFile, seeded with
// a small scene in every format, the same scene as splat-transform writes
// it (compressed PLY, SPZ, .glb) and the shared fixtures other
// tools wrote (the SPZ one, and train-1000's PLY). Detection and every reader
// behind it must not panic; errors must name the file; a scene that reads
// must be valid and agree with Detect.
func FuzzReadFile(f *testing.F) {
	dir := f.TempDir()
	g := splattest.RandomScene(5, 3, 1, 1)
	for i := range g.LogScales {
		g.LogScales[i] = min(max(g.LogScales[i], -9), 5)
	}
	writers := []func(string) error{
		func(p string) error { return ply.WriteFile(p, g, 1) },
		func(p string) error { return spz.WriteFile(p, g, spz.Options{SHDegree: 1}) },
		func(p string) error { return spz.WriteFile(p, g, spz.Options{SHDegree: 1, Version: 3}) },
		func(p string) error { return gltfsplat.WriteFile(p, g, gltfsplat.Options{SHDegree: 1}) },
		func(p string) error { return dotsplat.WriteFile(p, g) },
	}
	for i, w := range writers {
		p := filepath.Join(dir, "seed"+string(rune('a'+i)))
		if err := w(p); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// What another writer makes of the same scene, where splat-transform is installed (.ci/run
	// installs it): its compressed PLY, SPZ and .glb (it writes no .splat), whose layouts ours never produce.
	src := filepath.Join(dir, "seeda.ply")
	if err := os.Rename(filepath.Join(dir, "seeda"), src); err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"st.compressed.ply", "st.spz", "st.glb"} {
		out := filepath.Join(dir, name)
		if err := npmtools.SplatTransform(src, out); err != nil {
			if errors.Is(err, npmtools.ErrAbsent) {
				f.Logf("no splat-transform seeds: %v", err)
				break
			}
			f.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, rel := range []string{"fixtures/spz/biker.spz", "fixtures/ply/train-1000.ply"} {
		if p, ok := sharedtest.Find(rel); ok {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.bin")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		format, derr := scene.Detect(data[:min(len(data), 4096)], int64(len(data)))
		s, err := scene.ReadFile(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		if derr != nil || s.Format != format {
			t.Fatalf("read as %s, Detect says %s, %v", s.Format, format, derr)
		}
		if err := s.Gaussians.Validate(); err != nil {
			t.Fatalf("read gave invalid splats: %v", err)
		}
	})
}
