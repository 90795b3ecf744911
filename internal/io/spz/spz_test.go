package spz

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
)

// TestRoundTrip writes random scenes of every version, SH degree and flag
// and reads them back: every field must come back within the bound its
// encoding states (boundsFor), coefficients above the degree as zero, and
// the header as written.
func TestRoundTrip(t *testing.T) {
	for _, version := range []int{2, 3, 4} {
		for deg := 0; deg <= splat.MaxSHDegree; deg++ {
			for _, aa := range []bool{false, true} {
				o := Options{SHDegree: deg, Antialiased: aa, Version: version}
				t.Run(toString(o), func(t *testing.T) {
					g := randomScene(sceneSeed+uint64(deg), 500, 3)
					back, info, err := Read(bytes.NewReader(encodeBytes(t, g, o)), "rt.spz")
					if err != nil {
						t.Fatal(err)
					}
					want := Info{Version: version, Count: 500, SHDegree: deg, FractionalBits: 12, Antialiased: aa}
					if info != want {
						t.Fatalf("info %+v, want %+v", info, want)
					}
					if err := back.Validate(); err != nil {
						t.Fatal(err)
					}
					within(t, back, g, deg, boundsFor(version, 12))
				})
			}
		}
	}
}

// TestRoundTripLarge reads back files whose largest stream passes the decoder's 8 MB floor:
// at SH degree 3 the harmonics of 200k splats are 9 MB, five times the positions, and a cap
// sized from the positions refused them.
func TestRoundTripLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 200k-splat scene")
	}
	g := randomScene(sceneSeed, 200_000, 3)
	for _, version := range []int{3, 4} {
		o := Options{SHDegree: 3, Version: version}
		back, info, err := Read(bytes.NewReader(encodeBytes(t, g, o)), "large.spz")
		if err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
		if info.Count != g.Len() {
			t.Fatalf("version %d: %d splats back of %d", version, info.Count, g.Len())
		}
		within(t, back, g, 3, boundsFor(version, 12))
	}
}

func toString(o Options) string {
	return fmt.Sprintf("v%d_deg%d_aa=%t", o.Version, o.SHDegree, o.Antialiased)
}

// TestPayloadGolden checks the decompressed bytes of hand-made splats
// against values worked out by hand from the spec, field by field.
func TestPayloadGolden(t *testing.T) {
	g := splat.New(2)
	// Splat 0: RDF (1, 2, −3) is RUB (1, −2, 3): 4096, −8192, 12288 at 12
	// fractional bits. Opacity logit 0 → 0.5·255 = 127.5 → 128; DC 0 →
	// 127.5 → 128; log scale 0 → (0+10)·16 = 160; identity rotation:
	// xyzw (0,0,0,1), largest index 3, others 0 → word 3<<30.
	copy(g.Means[0:3], []float32{1, 2, -3})
	// Splat 1: quaternion (w,x,y,z) = (0.8, 0, 0.6, 0) is RUB (0.8, 0,
	// −0.6, 0), xyzw (0, −0.6, 0, 0.8): largest index 3; then x: 0, y:
	// sign 1, magnitude round(0.6/√½·511) = 434, z: 0, giving
	// 3<<30 | (512|434)<<10 = 0xC00EC800. Log scales −10, 5.9375, 7
	// → 0, 255, 255 (clamped). DC 1 → 0.15·255 + 127.5 = 165.75 → 166.
	// SH degree 1: coefficient 1 (y, negated) red 0.5 → −0.5 → −64+128 =
	// 64 (a multiple of 8); coefficient 3 (x, kept) blue 0.25 → 160.
	copy(g.Quats[4:8], []float32{0.8, 0, 0.6, 0})
	copy(g.LogScales[3:6], []float32{-10, 5.9375, 7})
	g.OpacityLogits[1] = 20
	sh1 := g.SH[splat.SHCoeffs*3:]
	sh1[0], sh1[1], sh1[2] = 1, 1, 1
	sh1[1*3+0] = 0.5
	sh1[3*3+2] = 0.25

	payload := gunzip(t, encodeBytes(t, g, Options{SHDegree: 1, Antialiased: true, Version: 3}))
	want := []byte{
		'N', 'G', 'S', 'P', 3, 0, 0, 0, 2, 0, 0, 0, 1, 12, FlagAntialiased, 0, // header
		0x00, 0x10, 0x00, 0x00, 0xE0, 0xFF, 0x00, 0x30, 0x00, // positions, splat 0
		0, 0, 0, 0, 0, 0, 0, 0, 0, // splat 1 at the origin
		128, 255, // alphas: sigmoid(20)·255 = 254.99… → 255
		128, 128, 128, 166, 166, 166, // colours
		160, 160, 160, 0, 255, 255, // scales
		0x00, 0x00, 0x00, 0xC0, 0x00, 0xC8, 0x0E, 0xC0, // rotations
		128, 128, 128, 128, 128, 128, 128, 128, 128, // SH, splat 0
		64, 128, 128, 128, 128, 128, 128, 128, 160, // SH, splat 1
	}
	if !bytes.Equal(payload, want) {
		t.Fatalf("payload\n got % x\nwant % x", payload, want)
	}
}

// TestHeaderGolden checks the header of an empty scene, byte for byte, for
// both versions: magic "NGSP" little-endian, version, count 0, degree,
// 12 fractional bits, flags, reserved 0; and that nothing follows it.
func TestHeaderGolden(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want []byte
	}{
		{Options{Version: 3}, []byte{0x4e, 0x47, 0x53, 0x50, 3, 0, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0}},
		{Options{Version: 2, SHDegree: 3, Antialiased: true}, []byte{0x4e, 0x47, 0x53, 0x50, 2, 0, 0, 0, 0, 0, 0, 0, 3, 12, 1, 0}},
	} {
		got := gunzip(t, encodeBytes(t, splat.New(0), tc.o))
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%+v: header % x, want % x", tc.o, got, tc.want)
		}
	}
}

// TestDegrees checks, for SH degree 0..3, the payload length (16 + N·(9 +
// 1 + 3 + 3 + 4 + 3·K) with K = 0, 3, 8, 15 rest coefficients) and that
// writing degree d of a degree-3 scene reads back degree d with the
// higher coefficients zero and the lower ones kept.
func TestDegrees(t *testing.T) {
	const n = 7
	g := randomScene(sceneSeed, n, 3)
	for deg, k := range []int{0, 3, 8, 15} {
		data := encodeBytes(t, g, Options{SHDegree: deg, Version: 3})
		if got, want := len(gunzip(t, data)), HeaderSize+n*(20+3*k); got != want {
			t.Errorf("degree %d: payload %d bytes, want %d", deg, got, want)
		}
		back, info, err := Read(bytes.NewReader(data), "deg.spz")
		if err != nil {
			t.Fatal(err)
		}
		if info.SHDegree != deg {
			t.Errorf("degree %d: read degree %d", deg, info.SHDegree)
		}
		within(t, back, g, deg, boundsFor(3, 12))
	}
}

// TestFractionalBits: a scene beyond ±2048 units is written with fewer
// fractional bits (and a coarser step), not wrapped; one beyond ±2²³ is
// refused.
func TestFractionalBits(t *testing.T) {
	for _, tc := range []struct {
		far    float32
		wantFB int
	}{
		{2047, 12}, {2048.5, 11}, {3000, 11}, {-1e6, 3}, {8388607, 0},
	} {
		g := randomScene(sceneSeed, 3, 0)
		g.Means[4] = tc.far
		back, info, err := Read(bytes.NewReader(encodeBytes(t, g, Options{})), "far.spz")
		if err != nil {
			t.Fatal(err)
		}
		if info.FractionalBits != tc.wantFB {
			t.Errorf("coordinate %g: %d fractional bits, want %d", tc.far, info.FractionalBits, tc.wantFB)
		}
		within(t, back, g, 0, boundsFor(3, tc.wantFB))
	}
}

// TestConvertColour checks the RDF→RUB map on its own (splattest.CheckAxisFlip): colours
// move with the directions, and rotations R become F·R·F, F = diag(1,−1,−1).
func TestConvertColour(t *testing.T) {
	splattest.CheckAxisFlip(t, sceneSeed, splattest.AxisFlip{Pos: posSign, SHSign: shSign,
		Quat: func(w, x, y, z float32) ([4]float64, bool) {
			r, ok := toRUB(w, x, y, z)
			return [4]float64{r[3], r[0], r[1], r[2]}, ok // x,y,z,w → w,x,y,z
		}})
}

// TestWriterAxes reads a written file with the tests' own decoder, which
// applies no axis map, and checks the stored RUB values: positions (x, −y,
// −z), quaternion (w, x, −y, −z) in x,y,z,w order, and each SH
// coefficient times its sign (values chosen to be exact at the bit depth).
func TestWriterAxes(t *testing.T) {
	g := splat.New(1)
	copy(g.Means, []float32{0.5, 0.25, -0.125})
	copy(g.Quats, []float32{0.5, 0.5, 0.5, 0.5}) // ties: largest is the first, x
	for k := 1; k < splat.SHCoeffs; k++ {
		for c := 0; c < 3; c++ {
			g.SH[k*3+c] = float32(c+1) / 8 // 16, 32, 48 /128: multiples of 16
		}
	}
	p := gunzip(t, encodeBytes(t, g, Options{SHDegree: 3, Version: 3}))
	fixed := func(b []byte) float64 {
		return float64(int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24)>>8) / 4096
	}
	pos := p[HeaderSize:]
	for c, want := range []float64{0.5, -0.25, 0.125} {
		if got := fixed(pos[3*c:]); got != want {
			t.Errorf("stored position %c = %g, want %g", "xyz"[c], got, want)
		}
	}
	rot := unpackSmallest3([4]byte(p[HeaderSize+9+1+3+3:]))
	for c, want := range []float64{0.5, -0.5, -0.5, 0.5} {
		if math.Abs(rot[c]-want) > 3e-3 {
			t.Errorf("stored quaternion %c = %g, want %g (all: %v)", "xyzw"[c], rot[c], want, rot)
		}
	}
	sh := p[HeaderSize+9+1+3+3+4:]
	for k := 1; k < splat.SHCoeffs; k++ {
		for c := 0; c < 3; c++ {
			want := shSign[k] * float32(c+1) / 8
			if got := decodeSH(sh[(k-1)*3+c]); got != want {
				t.Errorf("stored SH coefficient %d channel %d = %g, want %g", k, c, got, want)
			}
		}
	}
}

// TestWriteErrors: what the format cannot hold is refused, naming the
// splat, and nothing is left in a file's place.
func TestWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(g *splat.Gaussians)
		o    Options
		want string
	}{
		{"nan mean", func(g *splat.Gaussians) { g.Means[4] = float32(math.NaN()) }, Options{}, "means of splat 1"},
		{"zero quaternion", func(g *splat.Gaussians) { copy(g.Quats[8:12], []float32{0, 0, 0, 0}) }, Options{}, "splat 2: quaternion"},
		{"far", func(g *splat.Gaussians) { g.Means[5] = 1e7 }, Options{}, "splat 1: position z = 1e+07"},
		{"degree 4", func(*splat.Gaussians) {}, Options{SHDegree: 4}, "SH degree 4"},
		{"version 1", func(*splat.Gaussians) {}, Options{Version: 1}, "version 1, want 2, 3 or 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := randomScene(sceneSeed, 3, 0)
			tc.edit(g)
			path := filepath.Join(t.TempDir(), "bad.spz")
			err := WriteFile(path, g, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "spz: write "+path+": ") {
				t.Fatalf("error %v, want one naming %s and %q", err, path, tc.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("%s exists after a failed write", path)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 0 {
				t.Fatalf("temporary files left behind: %v", entries)
			}
		})
	}
}

// TestWriteFileReplaces: WriteFile replaces an existing file whole.
func TestWriteFileReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scene.spz")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := randomScene(sceneSeed, 4, 1)
	if err := WriteFile(path, g, Options{SHDegree: 1}); err != nil {
		t.Fatal(err)
	}
	back, _, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	within(t, back, g, 1, boundsFor(3, 12))
}

// TestReadErrors corrupts a good file in each way the reader checks and
// wants an error naming the file, the byte offset and the problem.
func TestReadErrors(t *testing.T) {
	good := gunzip(t, encodeBytes(t, randomScene(sceneSeed, 2, 1), Options{SHDegree: 1, Version: 3}))
	edit := func(f func(p []byte) []byte) []byte {
		return gzipBytes(t, f(append([]byte(nil), good...)))
	}
	put32 := func(off int, v uint32) func(p []byte) []byte {
		return func(p []byte) []byte { binary.LittleEndian.PutUint32(p[off:], v); return p }
	}
	set := func(off int, v byte) func(p []byte) []byte {
		return func(p []byte) []byte { p[off] = v; return p }
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"not gzip", good[4:], "neither an NGSP header (version 4) nor a gzip stream"},
		{"uncompressed v3", good, "byte offset 4: version 3 in an uncompressed NGSP header"},
		{"empty", gzipBytes(t, nil), "byte offset 0: header: stream ends after 0 of 16 bytes"},
		{"magic", edit(put32(0, 0x12345678)), "byte offset 0: magic 0x12345678"},
		{"version 1", edit(put32(4, 1)), "byte offset 4: version 1 (float16 positions) is not supported"},
		{"version 4", edit(put32(4, 4)), "byte offset 4: version 4 in a gzipped file, want 2 or 3"},
		{"degree 5", edit(set(12, 5)), "byte offset 12: SH degree 5"},
		{"fractional bits", edit(set(13, 24)), "byte offset 13: 24 fractional bits"},
		{"extensions", edit(set(14, 3)), "byte offset 14: flags 0x03: unknown bits 0x02"},
		{"reserved", edit(set(15, 1)), "byte offset 15: reserved byte is 1"},
		{"count too large", edit(put32(8, 1000)), "byte offset 74: positions: stream ends after 58 of 9000 bytes"},
		{"truncated", edit(func(p []byte) []byte { return p[:len(p)-1] }), "spherical harmonics: stream ends after 17 of 18 bytes"},
		{"trailing", edit(func(p []byte) []byte { return append(p, 0) }), "1 bytes after the last array"},
		{"degree mismatch", edit(set(12, 0)), "18 bytes after the last array (2 splats, SH degree 0, version 3)"},
		{"checksum", func() []byte {
			b := gzipBytes(t, good)
			b[len(b)-5] ^= 1 // in the CRC-32 of the trailer
			return b
		}(), "checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(bytes.NewReader(tc.data), "bad.spz")
			if err == nil || !strings.HasPrefix(err.Error(), "spz: bad.spz: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestReadErrorsV4 corrupts a good version 4 file in each way the reader
// checks and wants an error naming the file, the byte offset and the
// problem.
func TestReadErrorsV4(t *testing.T) {
	good := encodeBytes(t, randomScene(sceneSeed, 2, 1), Options{SHDegree: 1, Version: 4})
	edit := func(f func(p []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	put32 := func(off int, v uint32) func(p []byte) []byte {
		return func(p []byte) []byte { binary.LittleEndian.PutUint32(p[off:], v); return p }
	}
	set := func(off int, v byte) func(p []byte) []byte {
		return func(p []byte) []byte { p[off] = v; return p }
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", good[:20], "byte offset 20: file ends inside the 32-byte header"},
		{"version 5", edit(put32(4, 5)), "byte offset 4: version 5 in an uncompressed NGSP header"},
		{"degree 5", edit(set(12, 5)), "byte offset 12: SH degree 5"},
		{"fractional bits", edit(set(13, 30)), "byte offset 13: 30 fractional bits"},
		{"flags", edit(set(14, 4)), "byte offset 14: flags 0x04"},
		{"stream count", edit(set(15, 5)), "byte offset 15: 5 streams, want 6"},
		{"reserved", edit(set(25, 1)), "byte offset 25: reserved byte is 1"},
		{"toc offset", edit(put32(16, 40)), "byte offset 16: table of contents at byte 40"},
		{"absurd count", edit(put32(8, 1<<30)), "points cannot fit in a"},
		{"count mismatch", edit(put32(8, 3)), "byte offset 40: stream 0 (positions) holds 18 bytes, want 27"},
		{"truncated", good[:len(good)-1], "runs past the end of the file"},
		{"trailing", append(append([]byte(nil), good...), 0), "1 bytes after the last stream"},
		{"corrupt stream", edit(func(p []byte) []byte { p[32+6*16+4] ^= 0xff; return p }), "stream 0 (positions)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(bytes.NewReader(tc.data), "bad.spz")
			if err == nil || !strings.HasPrefix(err.Error(), "spz: bad.spz: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestScaleClampWarns: log scales beyond what the byte holds are clamped
// with one warning giving their count; scales within it give none.
func TestScaleClampWarns(t *testing.T) {
	g := randomScene(sceneSeed, 10, 0)
	for j := range g.LogScales {
		g.LogScales[j] = -3
	}
	var msgs []string
	warn := func(m string) { msgs = append(msgs, m) }
	if err := Write(io.Discard, g, Options{Warn: warn}); err != nil || len(msgs) != 0 {
		t.Fatalf("in range: %v, warnings %q", err, msgs)
	}
	g.LogScales[0], g.LogScales[4], g.LogScales[29] = -12, 7, -30
	if err := Write(io.Discard, g, Options{Warn: warn}); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], "3 of 30 log scales") {
		t.Fatalf("warnings %q, want one counting 3 of 30", msgs)
	}
}

// TestReadSharedV4 reads Niantic-format version 4 fixture written by
// another tool: every splat valid and unit rotations.
func TestReadSharedV4(t *testing.T) {
	path, ok := sharedtest.Find("fixtures/spz/biker.spz")
	if !ok {
		t.Skip("shared fixture fixtures/spz/biker.spz is absent (expected at ../shared/fixtures/spz/biker.spz from the repository root)")
	}
	g, info, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != 4 || info.Count != 152746 || g.Len() != info.Count {
		t.Fatalf("info %+v, %d splats", info, g.Len())
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
}
