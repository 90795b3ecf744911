package viewer_test

import (
	"math"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
	"github.com/rlxsplat/rlxsplat/internal/viewer"
)

// TestEncodeRoundTrip: every quantity comes back within its quantisation step.
func TestEncodeRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n, deg int
	}{{"empty", 0, 3}, {"one", 1, 0}, {"deg1", 200, 1}, {"deg3", 500, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			g := splattest.RandomScene(3, tc.n, tc.deg, 1.5)
			b, err := viewer.Encode(g, tc.deg)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != 64+tc.n*viewer.BytesPerSplat(tc.deg) {
				t.Fatalf("%d bytes", len(b))
			}
			h, deg, err := viewer.Decode(b)
			if err != nil || deg != tc.deg || h.Len() != tc.n {
				t.Fatalf("decode: %v, degree %d, %d splats", err, deg, h.Len())
			}
			for i := 0; i < tc.n; i++ {
				for a := 0; a < 3; a++ {
					if d := math.Abs(float64(h.Means[3*i+a] - g.Means[3*i+a])); d > 200.0/(1<<24)*2 {
						t.Fatalf("splat %d mean %d off by %g", i, a, d)
					}
					if d := math.Abs(float64(h.LogScales[3*i+a] - g.LogScales[3*i+a])); d > 12.0/65535 {
						t.Fatalf("splat %d log scale off by %g", i, d)
					}
				}
				if d := math.Abs(float64(splat.Sigmoid(h.OpacityLogits[i]) - splat.Sigmoid(g.OpacityLogits[i]))); d > 0.6/255 {
					t.Fatalf("splat %d opacity off by %g", i, d)
				}
				q, p := g.Quats[4*i:4*i+4], h.Quats[4*i:4*i+4]
				n := math.Sqrt(float64(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3]))
				m := math.Sqrt(float64(p[0]*p[0] + p[1]*p[1] + p[2]*p[2] + p[3]*p[3]))
				dotq := float64(q[0]*p[0]+q[1]*p[1]+q[2]*p[2]+q[3]*p[3]) / (n * m)
				if math.Abs(dotq) < 0.9995 { // int8 components: a few thousandths of a radian
					t.Fatalf("splat %d rotation off: |q·q'| = %g", i, dotq)
				}
			}
		})
	}
	if _, err := viewer.Encode(splat.New(1), 4); err == nil {
		t.Fatal("SH degree 4 accepted")
	}
}

func TestDecodeRejects(t *testing.T) {
	b, _ := viewer.Encode(splattest.RandomScene(1, 10, 2, 1), 2)
	for name, bad := range map[string][]byte{
		"empty": nil, "short header": b[:20], "bad magic": append([]byte("XXXX"), b[4:]...),
		"truncated": b[:len(b)-1], "long": append(append([]byte(nil), b...), 0),
	} {
		if _, _, err := viewer.Decode(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, deg := range []int{0, 3} {
		b, _ := viewer.Encode(splattest.RandomScene(2, 20, deg, 1), deg)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, deg, err := viewer.Decode(b)
		if err != nil {
			return
		}
		if _, err := viewer.Encode(g, deg); err != nil {
			t.Fatalf("a decoded scene does not encode: %v", err)
		}
	})
}
