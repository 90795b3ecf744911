package ply

import (
	"math"
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
