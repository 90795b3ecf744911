package splat

import (
	"math"
	"slices"
	"testing"
)

// TestGatherRows checks the run-at-a-time copy against a row-at-a-time one for orders with runs,
// breaks, repeats, reversals and −1 entries.
func TestGatherRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  []int32
	}{
		{"empty", nil},
		{"identity", []int32{0, 1, 2, 3, 4, 5}},
		{"kept with a gap", []int32{0, 1, 3, 4, 5}},
		{"then clones and children", []int32{0, 2, 3, 4, 1, 5, 5, 3, 3}},
		{"descending", []int32{5, 4, 3, 2, 1, 0}},
		{"holes", []int32{-1, 0, 1, -1, -1, 2, 3, -1}},
		{"run ending the source", []int32{4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range []int{1, 3, 48} {
				from := make([]float32, 6*w)
				for i := range from {
					from[i] = float32(i + 1)
				}
				got := make([]float32, len(tc.src)*w)
				want := make([]float32, len(tc.src)*w)
				for i := range got {
					got[i], want[i] = -7, -7
				}
				for j, s := range tc.src {
					if s >= 0 {
						copy(want[j*w:(j+1)*w], from[int(s)*w:])
					}
				}
				GatherRows(got, from, w, tc.src)
				if !slices.Equal(got, want) {
					t.Fatalf("width %d: got %v, want %v", w, got, want)
				}
			}
		})
	}
}

func TestGather(t *testing.T) {
	g := New(3)
	for i := range g.Means {
		g.Means[i] = float32(i)
	}
	g.SH[47] = 5 // last value of splat 0
	out := Gather(g, []int32{2, -1, 0, 2})
	if out.Len() != 4 {
		t.Fatalf("%d splats", out.Len())
	}
	if out.Means[0] != 6 || out.Means[9] != 6 || out.Means[6] != 0 {
		t.Fatalf("means %v", out.Means)
	}
	for _, f := range out.Fields() {
		for j := f.Width; j < 2*f.Width; j++ {
			if f.Data[j] != 0 {
				t.Fatalf("%s of the −1 entry is %v, want 0", f.Name, f.Data[j])
			}
		}
	}
	if out.SH[2*48+47] != 5 || out.Quats[2*4] != 1 {
		t.Fatal("splat 0 not copied whole")
	}
	if err := out.Validate(); err != nil {
		t.Fatal(err)
	}
	out.LogScales[5] = float32(math.NaN())
	if err := out.Validate(); err == nil {
		t.Fatal("NaN accepted")
	}
}

// The SH basis gradient agrees with finite differences of the basis.
func TestSHBasisGrad(t *testing.T) {
	x, y, z := 0.3, -0.5, 0.81
	var b, dx, dy, dz [SHCoeffs]float64
	SHBasisGrad(3, x, y, z, &b, &dx, &dy, &dz)
	const h = 1e-6
	for _, c := range []struct {
		name string
		d    *[SHCoeffs]float64
		dir  [3]float64
	}{{"x", &dx, [3]float64{h, 0, 0}}, {"y", &dy, [3]float64{0, h, 0}}, {"z", &dz, [3]float64{0, 0, h}}} {
		var p, m [SHCoeffs]float64
		SHBasis(3, x+c.dir[0], y+c.dir[1], z+c.dir[2], &p)
		SHBasis(3, x-c.dir[0], y-c.dir[1], z-c.dir[2], &m)
		for k := 0; k < SHCoeffs; k++ {
			if fd := (p[k] - m[k]) / (2 * h); math.Abs(fd-c.d[k]) > 1e-6 {
				t.Errorf("d basis %d / d%s = %v, finite difference %v", k, c.name, c.d[k], fd)
			}
		}
	}
}

// Range copies a share of the splats, every field's rows from lo to hi and nothing else.
func TestRange(t *testing.T) {
	g := New(5)
	for _, f := range g.Fields() {
		for i := range f.Data {
			f.Data[i] = float32(i/f.Width*100 + i%f.Width)
		}
	}
	for _, c := range []struct{ lo, hi int }{{0, 5}, {1, 3}, {4, 5}, {2, 2}} {
		r := g.Range(c.lo, c.hi)
		if r.Len() != c.hi-c.lo {
			t.Fatalf("Range(%d, %d): %d splats", c.lo, c.hi, r.Len())
		}
		for j, f := range r.Fields() {
			for i, v := range f.Data {
				if want := float32((c.lo+i/f.Width)*100 + i%f.Width); v != want {
					t.Fatalf("Range(%d, %d): %s[%d] = %v, want %v", c.lo, c.hi, g.Fields()[j].Name, i, v, want)
				}
			}
		}
	}
}

// TestConcat cuts a scene into shares with Range and joins them again: every value must come
// back in place, for cuts with empty shares too.
func TestConcat(t *testing.T) {
	g := New(7)
	for _, f := range g.Fields() {
		for i := range f.Data {
			f.Data[i] = float32(i/f.Width*100 + i%f.Width)
		}
	}
	for _, cuts := range [][]int{{0, 7}, {0, 3, 7}, {0, 0, 2, 2, 7}, {0, 1, 2, 3, 4, 5, 6, 7}} {
		var parts []*Gaussians
		for k := 1; k < len(cuts); k++ {
			parts = append(parts, g.Range(cuts[k-1], cuts[k]))
		}
		c := Concat(parts...)
		if c.Len() != g.Len() {
			t.Fatalf("cuts %v: %d splats, want %d", cuts, c.Len(), g.Len())
		}
		for j, f := range c.Fields() {
			for i, v := range f.Data {
				if want := g.Fields()[j].Data[i]; v != want {
					t.Fatalf("cuts %v: %s[%d] = %v, want %v", cuts, f.Name, i, v, want)
				}
			}
		}
	}
}

// CopyInto fills the destination's arrays (reused when large enough, so a smaller copy keeps
// the larger capacity) with exactly the source's values, whatever size the destination had.
func TestCopyInto(t *testing.T) {
	src := func(n int, base float32) *Gaussians {
		g := New(n)
		for _, f := range g.Fields() {
			for i := range f.Data {
				f.Data[i] = base + float32(i)
			}
		}
		return g
	}
	var dst *Gaussians
	for _, c := range []struct {
		n     int
		reuse bool // the destination's arrays must be kept
	}{{4, false}, {7, false}, {3, true}, {7, true}, {0, true}} {
		g := src(c.n, float32(100*c.n))
		before := dst
		var sh *float32
		if dst != nil && cap(dst.SH) > 0 {
			sh = &dst.SH[:1][0]
		}
		dst = g.CopyInto(dst)
		if c.reuse && (dst != before || (c.n > 0 && &dst.SH[0] != sh)) {
			t.Errorf("n = %d: the destination's arrays were not reused", c.n)
		}
		if dst.Len() != c.n {
			t.Fatalf("n = %d: the copy holds %d splats", c.n, dst.Len())
		}
		df := dst.Fields()
		for k, f := range g.Fields() {
			if len(df[k].Data) != len(f.Data) {
				t.Fatalf("n = %d: %s holds %d values, want %d", c.n, f.Name, len(df[k].Data), len(f.Data))
			}
			for i, v := range f.Data {
				if df[k].Data[i] != v {
					t.Fatalf("n = %d: %s[%d] = %v, want %v", c.n, f.Name, i, df[k].Data[i], v)
				}
			}
		}
	}
}
