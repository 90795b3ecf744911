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

// planRef is PlanEdit's plan by its definition: the splats neither split nor removed, in order,
// then the clones, then each split's children.
func planRef(e Edit, n int) EditPlan {
	split := map[int32]bool{}
	for _, i := range e.Split {
		split[i] = true
	}
	var p EditPlan
	for i := range int32(n) {
		if !split[i] && (e.Remove == nil || !e.Remove[i]) {
			p.Src = append(p.Src, i)
		}
	}
	p.Fresh = len(p.Src)
	p.Src = append(p.Src, e.Clone...)
	p.Children = len(p.Src)
	for _, i := range e.Split {
		for range e.SplitN {
			p.Src = append(p.Src, i)
		}
	}
	return p
}

// TestPlanEdit checks plans for split lists in increasing order (merged into the walk) and in
// any other order (flagged first) against the definition, and the errors of both paths.
func TestPlanEdit(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 200
	for _, tc := range []struct {
		name   string
		order  func([]int32)
		remove bool
	}{
		{"increasing", slices.Sort[[]int32], false},
		{"increasing, with removals", slices.Sort[[]int32], true},
		{"shuffled", func(s []int32) { rng.Shuffle(len(s), func(a, b int) { s[a], s[b] = s[b], s[a] }) }, true},
		{"decreasing", func(s []int32) { slices.Reverse(s) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Edit{SplitN: 3, SplitScaleDiv: 2.4}
			if tc.remove {
				e.Remove = make([]bool, n)
			}
			for i := range int32(n) {
				switch {
				case i%7 == 2:
					e.Split = append(e.Split, i)
				case i%5 == 1:
					e.Clone = append(e.Clone, i)
				case tc.remove && i%4 == 0:
					e.Remove[i] = true
				}
			}
			e.Split = append(e.Split, n-1) // a split at the last index
			tc.order(e.Split)
			e.SplitSamples = make([]float32, len(e.Split)*e.SplitN*3)
			p, err := PlanEdit(e, n)
			if err != nil {
				t.Fatal(err)
			}
			want := planRef(e, n)
			if !slices.Equal(p.Src, want.Src) || p.Fresh != want.Fresh || p.Children != want.Children {
				t.Fatalf("plan (fresh %d, children %d, %d rows) differs from the definition's (fresh %d, children %d, %d rows)",
					p.Fresh, p.Children, len(p.Src), want.Fresh, want.Children, len(want.Src))
			}
			twice := slices.Clone(e.Split)
			twice = append(twice, twice[len(twice)/2])
			tc.order(twice)
			e.Split, e.SplitSamples = twice, make([]float32, len(twice)*e.SplitN*3)
			if _, err := PlanEdit(e, n); err == nil {
				t.Error("a splat split twice: no error")
			}
			e.Split = append(slices.Clone(twice[:1]), n)
			e.SplitSamples = make([]float32, len(e.Split)*e.SplitN*3)
			if _, err := PlanEdit(e, n); err == nil {
				t.Error("a split index past the end: no error")
			}
		})
	}
}
