package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// EditShapes gives, bit for bit, the log-scales and opacity logits ApplyEdit leaves (the CPU
// engine's edit, which the GPU engine's parity rows match), for edits of every kind.
func TestEditShapesMatchApplyEdit(t *testing.T) {
	const n = 200
	for _, tc := range []struct {
		name                 string
		clone, split, remove int // one splat in this many, 0 = none
		splitN               int
		div                  float32
	}{
		{"clone", 5, 0, 0, 2, 1.6},
		{"split", 0, 4, 0, 2, 1.6},
		{"prune", 0, 0, 3, 2, 1.6},
		{"all, three children", 7, 5, 9, 3, 2.4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(17, uint64(tc.splitN)))
			g := randomSplats(rng, n)
			e := Edit{SplitN: tc.splitN, SplitScaleDiv: tc.div}
			if tc.remove > 0 {
				e.Remove = make([]bool, n)
			}
			for i := 0; i < n; i++ {
				switch {
				case tc.remove > 0 && i%tc.remove == 1:
					e.Remove[i] = true
				case tc.split > 0 && i%tc.split == 2:
					e.Split = append(e.Split, int32(i))
				case tc.clone > 0 && i%tc.clone == 3:
					e.Clone = append(e.Clone, int32(i))
				}
			}
			for range len(e.Split) * e.SplitN * 3 {
				e.SplitSamples = append(e.SplitSamples, float32(rng.NormFloat64()))
			}
			p, err := PlanEdit(e, n)
			if err != nil {
				t.Fatal(err)
			}
			want := ApplyEdit(g, e, p)
			// Into fresh arrays, into arrays too short, and into arrays long enough holding junk.
			short := Shapes{LogScales: make([]float32, 3), OpacityLogits: make([]float32, 1)}
			long := Shapes{LogScales: make([]float32, 3*want.Len()+9), OpacityLogits: make([]float32, want.Len()+3)}
			for i := range long.LogScales {
				long.LogScales[i] = float32(math.NaN())
			}
			for _, dst := range []Shapes{{}, short, long} {
				got, err := EditShapes(dst, Shapes{LogScales: g.LogScales, OpacityLogits: g.OpacityLogits}, e)
				if err != nil {
					t.Fatal(err)
				}
				if got.Len() != want.Len() || !slices.Equal(got.LogScales, want.LogScales) || !slices.Equal(got.OpacityLogits, want.OpacityLogits) {
					t.Fatalf("EditShapes (into %d splats) differs from ApplyEdit: %d splats, want %d", dst.Len(), got.Len(), want.Len())
				}
				if len(got.LogScales) > 0 && cap(dst.LogScales) >= len(got.LogScales) && &got.LogScales[0] != &dst.LogScales[0] {
					t.Fatal("EditShapes did not reuse arrays large enough")
				}
			}
			if want.Len() == n {
				t.Fatal("the edit changed no count: the test checks little")
			}
		})
	}
	if _, err := EditShapes(Shapes{}, Shapes{LogScales: make([]float32, 6), OpacityLogits: make([]float32, 2)}, Edit{Clone: []int32{5}}); err == nil {
		t.Error("an edit naming splat 5 of 2: no error")
	}
}
