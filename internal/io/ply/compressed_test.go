package ply

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

// The compressed PLY fixtures written by SuperSplat read with sane values:
// unit quaternions, positions inside their chunk's bounds, finite logits.
func TestReadCompressedFixtures(t *testing.T) {
	for _, f := range []string{"biker.compressed.ply", "guitar.compressed.ply"} {
		path := needShared(t, "fixtures/ply/"+f)
		g, info, err := ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Compressed || info.Count == 0 || g.Len() != info.Count {
			t.Fatalf("%s: info %+v, %d splats", f, info, g.Len())
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i := 0; i < g.Len(); i++ {
			q := g.Quats[4*i : 4*i+4]
			n := math.Sqrt(float64(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3]))
			if math.Abs(n-1) > 2e-3 {
				t.Fatalf("%s: splat %d: |q| = %g", f, i, n)
			}
		}
		t.Logf("%s: %d splats, SH degree %d", f, info.Count, info.SHDegree)
	}
}

// A compressed file cut to its first chunk reads as the first splats of
// the whole one.
func TestCompressedFirstChunk(t *testing.T) {
	data := readShared(t, "fixtures/ply/biker.compressed.ply")
	whole, _, err := Read(bytes.NewReader(data), "whole")
	if err != nil {
		t.Fatal(err)
	}
	cut := cutPLYBy(t, data, func(e string) int {
		if e == "chunk" {
			return 1
		}
		return compressedChunk
	})
	g, info, err := Read(bytes.NewReader(cut), "cut")
	if err != nil || info.Count != compressedChunk {
		t.Fatalf("%v %+v", err, info)
	}
	if !slices.Equal(g.Means, whole.Means[:3*compressedChunk]) || !slices.Equal(g.Quats, whole.Quats[:4*compressedChunk]) {
		t.Error("the first chunk decodes differently alone")
	}
}
