package multi

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

func TestSpread10(t *testing.T) {
	for x := uint32(0); x < 1024; x++ {
		got := spread10(x)
		for k := range 10 {
			if (got>>(3*k))&1 != (x>>k)&1 {
				t.Fatalf("spread10(%#x) = %#x: bit %d not at bit %d", x, got, k, 3*k)
			}
		}
		if got&^0x09249249 != 0 {
			t.Fatalf("spread10(%#x) = %#x sets bits between the interleaved ones", x, got)
		}
	}
}

// TestMortonOrder: the order is a permutation; the eight octants of the bounding box come one
// after another (the curve's first splits); and ranges of the order are compact: cut into four
// shares, each share's bounding box is at most about two thirds of the scene's (the shares'
// cuts fall near, not on, the quarters' boundaries), where the scene's random order gives each
// nearly all of it.
func TestMortonOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 4000
	g := splat.New(n)
	for i := range g.Means {
		g.Means[i] = float32(rng.Float64()*10 - 5)
	}
	order := MortonOrder(g)
	seen := make([]bool, n)
	for _, i := range order {
		if seen[i] {
			t.Fatalf("splat %d twice in the order", i)
		}
		seen[i] = true
	}
	if len(order) != n {
		t.Fatalf("%d splats in the order, want %d", len(order), n)
	}
	lo, hi := [3]float32{99, 99, 99}, [3]float32{-99, -99, -99}
	for i := range n {
		for a := range 3 {
			lo[a], hi[a] = min(lo[a], g.Means[3*i+a]), max(hi[a], g.Means[3*i+a])
		}
	}
	octant := func(i int32) int {
		o := 0
		for a := range 3 {
			if g.Means[3*i+int32(a)] >= lo[a]+(hi[a]-lo[a])/2 {
				o |= 1 << a
			}
		}
		return o
	}
	var runs []int
	for k, i := range order {
		if k == 0 || octant(i) != octant(order[k-1]) {
			runs = append(runs, octant(i))
		}
	}
	if len(runs) != 8 || !slices.IsSorted(runs) {
		t.Errorf("octants along the order %v, want each of 0..7 once, in order", runs)
	}
	vol := func(idx []int32) float64 {
		lo, hi := [3]float32{99, 99, 99}, [3]float32{-99, -99, -99}
		for _, i := range idx {
			for a := range 3 {
				lo[a], hi[a] = min(lo[a], g.Means[3*i+int32(a)]), max(hi[a], g.Means[3*i+int32(a)])
			}
		}
		return float64(hi[0]-lo[0]) * float64(hi[1]-lo[1]) * float64(hi[2]-lo[2])
	}
	for _, sh := range Shares(n, 4) {
		if v := vol(order[sh[0]:sh[1]]); v > 0.65*vol(order) {
			t.Errorf("share %v spans %.0f of the scene's %.0f volume", sh, v, vol(order))
		}
		first := make([]int32, n)
		for i := range first {
			first[i] = int32(i)
		}
		if v := vol(first[sh[0]:sh[1]]); v < 0.9*vol(order) {
			t.Errorf("share %v of the scene's own random order spans only %.0f of %.0f: the bound above tells nothing", sh, v, vol(order))
		}
	}
	// A scene flat along an axis (all z equal) still orders by the other two.
	for i := range n {
		g.Means[3*i+2] = 1
	}
	if o := MortonOrder(g); len(o) != n {
		t.Fatalf("flat scene: %d in the order", len(o))
	}
}
