package check

import (
	"math"
	"testing"
)

func TestBitsDiffer(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		name string
		a, b []float32
		want int
	}{
		{"equal", []float32{1, 2, 3}, []float32{1, 2, 3}, 0},
		{"one value", []float32{1, 2, 3}, []float32{1, 2.0000002, 3}, 1},
		{"zero signs", []float32{0}, []float32{float32(math.Copysign(0, -1))}, 1},
		{"the same NaN", []float32{nan}, []float32{nan}, 0},
		{"lengths", []float32{1, 2}, []float32{1, 2, 3, 4}, 2},
		{"empty", nil, nil, 0},
	} {
		if got := BitsDiffer(c.a, c.b); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
		if got := BitsDiffer(c.b, c.a); got != c.want {
			t.Errorf("%s, swapped: %d, want %d", c.name, got, c.want)
		}
	}
}
