package dotsplat

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
)

// sceneSeed seeds every random scene of these tests.
const sceneSeed = 20260511

// randomScene is splattest's random scene inside what the format represents: DC in ±1.5
// (colour 0.08..0.92), and SH above DC nonzero up to degree 1 (the format drops it).
func randomScene(seed uint64, n int) *splat.Gaussians {
	return splattest.RandomScene(seed, n, 1, 1.5)
}

func encodeBytes(t testing.TB, g *splat.Gaussians) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Round-trip bounds, from the encoder's steps (half a step of rounding)
// plus float32 slack.
const (
	boundLogScale = 1e-6           // log(float32(exp(s))) − s
	boundColour   = 0.5 / 255      // 0.5 + SHC0·dc, in [0,1]
	boundOpacity  = 0.5/255 + 1e-6 // sigmoid(logit)
	boundQuat     = 0.5/128 + 1e-6 // each unit-quaternion component ≤ 127.5/128
	boundQuatTop  = 1.0/128 + 1e-6 // one above 127.5/128: byte 255 is 127/128
)

// within fails when back (read from a file) differs from g[order[j]] by
// more than the format's bounds.
func within(t testing.TB, back, g *splat.Gaussians, order []int) {
	t.Helper()
	if back.Len() != len(order) {
		t.Fatalf("%d splats, want %d", back.Len(), len(order))
	}
	check := func(field string, j int, got, want, bound float64) {
		t.Helper()
		if d := math.Abs(got - want); !(d <= bound) {
			t.Fatalf("record %d %s: got %g, want %g (error %.3g > bound %.3g)", j, field, got, want, d, bound)
		}
	}
	for j, i := range order {
		for c := 0; c < 3; c++ {
			check("mean", j, float64(back.Means[3*j+c]), float64(g.Means[3*i+c]), 0)
			check("log scale", j, float64(back.LogScales[3*j+c]), float64(g.LogScales[3*i+c]), boundLogScale)
			rgb := func(h *splat.Gaussians, k int) float64 {
				return min(max(0.5+splat.SHC0*float64(h.SH[k*splat.SHCoeffs*3+c]), 0), 1)
			}
			check("colour", j, rgb(back, j), rgb(g, i), boundColour)
			for k := 1; k < splat.SHCoeffs; k++ {
				check("sh above dc", j, float64(back.SH[(j*splat.SHCoeffs+k)*3+c]), 0, 0)
			}
		}
		check("opacity", j, float64(splat.Sigmoid(back.OpacityLogits[j])), float64(splat.Sigmoid(g.OpacityLogits[i])), boundOpacity)
		n := quatNorm(g.Quats[4*i : 4*i+4])
		for c := 0; c < 4; c++ {
			want := float64(g.Quats[4*i+c]) / n
			b := boundQuat
			if want > 127.5/128 {
				b = boundQuatTop
			}
			check("quaternion", j, float64(back.Quats[4*j+c]), want, b)
		}
	}
}

// TestRoundTrip writes random scenes and reads them back in importance
// order, each field within its bound; the order is descending in
// exp(Σ log scale)·opacity.
func TestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 1000} {
		g := randomScene(sceneSeed+uint64(n), n)
		data := encodeBytes(t, g)
		if len(data) != n*RecordSize {
			t.Fatalf("%d splats: %d bytes, want %d", n, len(data), n*RecordSize)
		}
		back, err := Read(bytes.NewReader(data), "rt.splat")
		if err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil {
			t.Fatal(err)
		}
		order := ImportanceOrder(g)
		within(t, back, g, order)
		imp := func(i int) float64 {
			return math.Exp(float64(g.LogScales[3*i]+g.LogScales[3*i+1]+g.LogScales[3*i+2])) * float64(splat.Sigmoid(g.OpacityLogits[i]))
		}
		for j := 1; j < len(order); j++ {
			if a, b := imp(order[j-1]), imp(order[j]); a < b*(1-1e-9) {
				t.Fatalf("record %d importance %g < record %d's %g", j-1, a, j, b)
			}
		}
	}
}

// TestImportanceOrderOverflow: log scales whose exp product overflows
// float64 still order correctly, and ties keep index order.
func TestImportanceOrderOverflow(t *testing.T) {
	g := splat.New(4)
	copy(g.LogScales, []float32{300, 300, 300, 1, 1, 1, 310, 300, 300, 1, 1, 1})
	got := ImportanceOrder(g)
	if want := []int{2, 0, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// TestGolden checks one record against bytes worked out by hand: position
// (1, −2, 0.5) as float32 bits; scales e^0 = 1, e^ln2 = 2, e^−ln4 = 0.25;
// DC 0 → 127.5 → 128, DC 1/SHC0 → 1.5 → clamped 255, DC −0.5/SHC0 → 0;
// opacity logit 0 → 127.5 → 128; quaternion (2, 0, 0, −2)/√8 =
// (0.7071, 0, 0, −0.7071) → round(90.51 + 128) = 219, 128, 128, 37.
func TestGolden(t *testing.T) {
	g := splat.New(1)
	copy(g.Means, []float32{1, -2, 0.5})
	copy(g.LogScales, []float32{0, float32(math.Ln2), float32(-2 * math.Ln2)})
	copy(g.SH[0:3], []float32{0, float32(1 / splat.SHC0), float32(-0.5 / splat.SHC0)})
	copy(g.Quats, []float32{2, 0, 0, -2})
	want := make([]byte, 0, RecordSize)
	for _, f := range []float32{1, -2, 0.5, 1, 2, 0.25} {
		want = binary.LittleEndian.AppendUint32(want, math.Float32bits(f))
	}
	want = append(want, 128, 255, 0, 128, 219, 128, 128, 37)
	if got := encodeBytes(t, g); !bytes.Equal(got, want) {
		t.Fatalf("record\n got % x\nwant % x", got, want)
	}
}

// TestWriteErrors: what the format cannot hold is refused, naming the
// splat, and no file is left in its place.
func TestWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(g *splat.Gaussians)
		want string
	}{
		{"nan", func(g *splat.Gaussians) { g.OpacityLogits[1] = float32(math.Inf(1)) }, "opacity_logits of splat 1"},
		{"zero quaternion", func(g *splat.Gaussians) { copy(g.Quats[8:12], []float32{0, 0, 0, 0}) }, "splat 2: zero quaternion"},
		{"scale overflow", func(g *splat.Gaussians) { g.LogScales[4] = 100 }, "splat 1: log scale 100 overflows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := randomScene(sceneSeed, 3)
			tc.edit(g)
			path := filepath.Join(t.TempDir(), "bad.splat")
			err := WriteFile(path, g)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "dotsplat: write "+path+": ") {
				t.Fatalf("error %v, want one naming %s and %q", err, path, tc.want)
			}
			if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 0 {
				t.Fatalf("files left behind: %v", entries)
			}
		})
	}
}

// TestWriteFile writes through atomicfile and reads the file back.
func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scene.splat")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := randomScene(sceneSeed, 5)
	if err := WriteFile(path, g); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	within(t, back, g, ImportanceOrder(g))
}

// TestReadErrors corrupts the second record of a good file in each way
// the reader checks.
func TestReadErrors(t *testing.T) {
	good := encodeBytes(t, randomScene(sceneSeed, 2))
	f32 := func(off int, v float32) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(b[off:], math.Float32bits(v))
		return b
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", good[:40], "byte offset 32: splat 1: the file ends 8 bytes into a 32-byte record"},
		{"nan position", f32(32+4, float32(math.NaN())), "byte offset 32: splat 1: position y is NaN"},
		{"inf position", f32(32+8, float32(math.Inf(-1))), "position z is -Inf"},
		{"zero scale", f32(32+12, 0), "byte offset 32: splat 1: scale 0 is 0"},
		{"negative scale", f32(32+16, -1), "scale 1 is -1"},
		{"inf scale", f32(32+20, float32(math.Inf(1))), "scale 2 is +Inf"},
		{"zero quaternion", append(append([]byte(nil), good[:60]...), 128, 128, 128, 128), "splat 1: rotation is the zero quaternion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.data), "bad.splat")
			if err == nil || !strings.HasPrefix(err.Error(), "dotsplat: bad.splat: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// FuzzRead feeds arbitrary bytes to Read, seeded with files Write made.
// It must not panic; errors name the package and file; a file that reads
// holds valid splats, one per 32 bytes, that survive a write and a second
// read within the round-trip bounds.
func FuzzRead(f *testing.F) {
	for _, n := range []int{0, 1, 3} {
		f.Add(encodeBytes(f, randomScene(sceneSeed, n)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Read(bytes.NewReader(data), "fuzz.splat")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "dotsplat: fuzz.splat: ") {
				t.Fatalf("error without package and file: %v", err)
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("read gave invalid splats: %v", err)
		}
		if g.Len()*RecordSize != len(data) {
			t.Fatalf("%d splats from %d bytes", g.Len(), len(data))
		}
		var buf bytes.Buffer
		if err := Write(&buf, g); err != nil {
			// Only a scale past float32's range after the log round trip
			// may be refused; a read file cannot hold anything else bad.
			if !strings.Contains(err.Error(), "overflows a float32 scale") {
				t.Fatalf("rewrite: %v", err)
			}
			return
		}
		back, err := Read(&buf, "back.splat")
		if err != nil {
			t.Fatalf("reading the rewrite: %v", err)
		}
		within(t, back, g, ImportanceOrder(g))
	})
}
