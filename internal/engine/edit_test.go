package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// After an edit, ApplyEdit's (the CPU engine's edit, which the GPU engine's parity rows match)
// row j < Children holds row Src[j]'s log-scales and opacity logit, and the rows from Children
// on are ChildShapes', bit for bit: the prune after a growth judges the grown splats by these
// two facts, without the grown shapes. Edits of every kind.
func TestChildShapesMatchApplyEdit(t *testing.T) {
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
			if want.Len() == n {
				t.Fatal("the edit changed no count: the test checks little")
			}
			for j := 0; j < p.Children; j++ {
				i := int(p.Src[j])
				if !slices.Equal(want.LogScales[3*j:3*j+3], g.LogScales[3*i:3*i+3]) || want.OpacityLogits[j] != g.OpacityLogits[i] {
					t.Fatalf("row %d after the edit is not a copy of row %d", j, i)
				}
			}
			kids := ChildShapes(Shapes{LogScales: g.LogScales, OpacityLogits: g.OpacityLogits}, e)
			if kids.Len() != want.Len()-p.Children || !slices.Equal(kids.LogScales, want.LogScales[3*p.Children:]) ||
				!slices.Equal(kids.OpacityLogits, want.OpacityLogits[p.Children:]) {
				t.Fatalf("ChildShapes (%d splats) differs from ApplyEdit's %d children", kids.Len(), want.Len()-p.Children)
			}
		})
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
