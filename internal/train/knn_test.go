package train

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestKNNMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, m := range []int{1, 2, 4, 5, 300} {
		pts := make([]float32, m*3)
		for i := range pts {
			pts[i] = float32(rng.NormFloat64())
		}
		if m > 3 {
			copy(pts[3:6], pts[0:3]) // a duplicate point: distance 0
		}
		tree := newKDTree(pts)
		for q := 0; q < m; q++ {
			var d []float64
			for i := 0; i < m; i++ {
				if i == q {
					continue
				}
				var s float64
				for a := 0; a < 3; a++ {
					x := float64(pts[i*3+a]) - float64(pts[q*3+a])
					s += x * x
				}
				d = append(d, s)
			}
			sort.Float64s(d)
			k := min(3, len(d))
			want := 0.0
			for _, v := range d[:k] {
				want += v
			}
			if k > 0 {
				want /= float64(k)
			}
			if got := tree.knnMeanSq(q, 3); math.Abs(got-want) > 1e-9*(1+want) {
				t.Fatalf("m=%d q=%d: got %v want %v", m, q, got, want)
			}
		}
	}
}
