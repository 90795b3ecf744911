package gltfsplat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qmuntal/gltf"
	"github.com/qmuntal/gltf/modeler"

	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
)

// TestRoundTrip writes a degree-3 scene at every SH degree and reads it
// back: the info as written, and every field as the format keeps it
// (same): exact for positions, log scales and SH, normalised quaternions,
// opacities within float32 rounding.
func TestRoundTrip(t *testing.T) {
	for deg := 0; deg <= splat.MaxSHDegree; deg++ {
		t.Run(fmt.Sprintf("deg%d", deg), func(t *testing.T) {
			g := randomScene(sceneSeed+uint64(deg), 300, 3)
			back, info, err := Read(bytes.NewReader(encodeBytes(t, g, Options{SHDegree: deg})), "rt.glb")
			if err != nil {
				t.Fatal(err)
			}
			want := Info{Count: 300, SHDegree: deg, Kernel: KernelEllipse, ColorSpace: ColorSpaceSRGB,
				Projection: ProjectionPerspective, SortingMethod: SortingCameraDistance, Generator: generator}
			if info != want {
				t.Fatalf("info %+v, want %+v", info, want)
			}
			if err := back.Validate(); err != nil {
				t.Fatal(err)
			}
			same(t, back, g, deg)
		})
	}
}

// TestExtremeOpacity: logits whose float32 sigmoid is exactly 0 or 1 come
// back finite and within opacityBound.
func TestExtremeOpacity(t *testing.T) {
	g := randomScene(sceneSeed, 4, 0)
	copy(g.OpacityLogits, []float32{-200, -17, 17, 200})
	back, _, err := Read(bytes.NewReader(encodeBytes(t, g, Options{})), "op.glb")
	if err != nil {
		t.Fatal(err)
	}
	same(t, back, g, 0)
}

// TestValidGLTF decodes a written file with qmuntal/gltf's own decoder and
// checks what glTF 2.0 and the extension require of it: asset version
// 2.0; the extension in extensionsUsed but not extensionsRequired; one
// POINTS primitive with exactly the expected attributes; every accessor
// float, of the right type and count, inside its buffer view, and every
// buffer view inside the buffer; min/max on POSITION equal to the data's;
// COLOR_0 in [0, 1]; and the extension object. POSITION and COLOR_0 are
// then read with the library's modeler, independently of Read, and
// compared with the scene mapped by hand to glTF's axes.
func TestValidGLTF(t *testing.T) {
	for deg := 0; deg <= splat.MaxSHDegree; deg++ {
		t.Run(fmt.Sprintf("deg%d", deg), func(t *testing.T) {
			const n = 50
			g := randomScene(sceneSeed, n, 3)
			var doc gltf.Document
			if err := gltf.NewDecoder(bytes.NewReader(encodeBytes(t, g, Options{SHDegree: deg}))).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			if doc.Asset.Version != "2.0" {
				t.Errorf("asset.version %q", doc.Asset.Version)
			}
			if !slices.Equal(doc.ExtensionsUsed, []string{ExtensionName}) || len(doc.ExtensionsRequired) != 0 {
				t.Errorf("extensionsUsed %v, extensionsRequired %v", doc.ExtensionsUsed, doc.ExtensionsRequired)
			}
			if doc.Scene == nil || len(doc.Scenes) != 1 || len(doc.Nodes) != 1 || doc.Nodes[0].Mesh == nil || len(doc.Meshes) != 1 || len(doc.Meshes[0].Primitives) != 1 {
				t.Fatalf("want one scene, node, mesh and primitive")
			}
			if len(doc.Buffers) != 1 || len(doc.Buffers[0].Data) != doc.Buffers[0].ByteLength {
				t.Fatalf("want one buffer held in the BIN chunk")
			}
			p := doc.Meshes[0].Primitives[0]
			if p.Mode != gltf.PrimitivePoints || p.Indices != nil {
				t.Errorf("mode %v, indices %v; want POINTS, none", p.Mode, p.Indices)
			}
			wantAttrs := map[string]gltf.AccessorType{
				gltf.POSITION: gltf.AccessorVec3, gltf.COLOR_0: gltf.AccessorVec4,
				AttrScale: gltf.AccessorVec3, AttrRotation: gltf.AccessorVec4, AttrOpacity: gltf.AccessorScalar,
			}
			for d := 0; d <= deg; d++ {
				for m := 0; m <= 2*d; m++ {
					wantAttrs[SHAttr(d, m)] = gltf.AccessorVec3
				}
			}
			if len(p.Attributes) != len(wantAttrs) {
				t.Errorf("%d attributes, want %d: %v", len(p.Attributes), len(wantAttrs), p.Attributes)
			}
			bufLen := doc.Buffers[0].ByteLength
			for name, typ := range wantAttrs {
				idx, ok := p.Attributes[name]
				if !ok {
					t.Fatalf("no attribute %s", name)
				}
				acc := doc.Accessors[idx]
				if acc.ComponentType != gltf.ComponentFloat || acc.Normalized || acc.Type != typ || acc.Count != n || acc.BufferView == nil {
					t.Fatalf("%s: accessor %+v", name, acc)
				}
				view := doc.BufferViews[*acc.BufferView]
				size := 4 * typ.Components()
				if view.Buffer != 0 || view.ByteOffset%4 != 0 || view.ByteOffset+view.ByteLength > bufLen ||
					acc.ByteOffset+(n-1)*max(view.ByteStride, size)+size > view.ByteLength {
					t.Fatalf("%s: accessor %+v outside view %+v (buffer %d bytes)", name, acc, view, bufLen)
				}
			}

			posAcc := doc.Accessors[p.Attributes[gltf.POSITION]]
			pos, err := modeler.ReadPosition(&doc, posAcc, nil)
			if err != nil {
				t.Fatal(err)
			}
			lo := []float64{math.Inf(1), math.Inf(1), math.Inf(1)}
			hi := []float64{math.Inf(-1), math.Inf(-1), math.Inf(-1)}
			for i := 0; i < n; i++ {
				want := [3]float32{-g.Means[3*i], -g.Means[3*i+1], g.Means[3*i+2]}
				if pos[i] != want {
					t.Fatalf("splat %d: POSITION %v, want %v (RDF %v)", i, pos[i], want, g.Means[3*i:3*i+3])
				}
				for c := 0; c < 3; c++ {
					lo[c], hi[c] = min(lo[c], float64(want[c])), max(hi[c], float64(want[c]))
				}
			}
			if !slices.Equal(posAcc.Min, lo) || !slices.Equal(posAcc.Max, hi) {
				t.Errorf("POSITION min %v max %v, want %v %v", posAcc.Min, posAcc.Max, lo, hi)
			}

			raw, err := modeler.ReadAccessor(&doc, doc.Accessors[p.Attributes[gltf.COLOR_0]], nil)
			if err != nil {
				t.Fatal(err)
			}
			col := raw.([][4]float32)
			for i := 0; i < n; i++ {
				for c := 0; c < 3; c++ {
					// The clamped sRGB diffuse colour, decoded to linear.
					w := min(max(0.5+splat.SHC0*float64(g.SH[i*splat.SHCoeffs*3+c]), 0), 1)
					if w > 0.04045 {
						w = math.Pow((w+0.055)/1.055, 2.4)
					} else {
						w /= 12.92
					}
					if d := math.Abs(float64(col[i][c]) - w); d > 1e-6 {
						t.Fatalf("splat %d: COLOR_0[%d] = %g, want %g", i, c, col[i][c], w)
					}
				}
				if a := splat.Sigmoid(g.OpacityLogits[i]); col[i][3] != a {
					t.Fatalf("splat %d: COLOR_0 alpha %g, want opacity %g", i, col[i][3], a)
				}
			}

			var ext map[string]string
			if err := json.Unmarshal(p.Extensions[ExtensionName].(json.RawMessage), &ext); err != nil {
				t.Fatal(err)
			}
			wantExt := map[string]string{"kernel": "ellipse", "colorSpace": "srgb_rec709_display", "projection": "perspective", "sortingMethod": "cameraDistance"}
			if fmt.Sprint(ext) != fmt.Sprint(wantExt) {
				t.Errorf("extension %v, want %v", ext, wantExt)
			}
		})
	}
}

// TestGolden checks one hand-made splat against values worked out from
// the spec: RDF (1, 2, 3) is LUF (−1, −2, 3); quaternion (w,x,y,z) =
// (0.6, 0.8, 0, 0) is LUF (0.6, −0.8, 0, 0), stored x,y,z,w as
// (−0.8, 0, 0, 0.6); coefficient 1 (odd in y) is negated, coefficient 2
// (z) kept, coefficient 4 (xy) kept, coefficient 7 (xz) negated; opacity
// logit 0 is 0.5.
func TestGolden(t *testing.T) {
	g := splat.New(1)
	copy(g.Means, []float32{1, 2, 3})
	copy(g.Quats, []float32{0.6, 0.8, 0, 0})
	copy(g.LogScales, []float32{-1, -2, -3})
	g.SH[1*3+0] = 0.25
	g.SH[2*3+1] = 0.5
	g.SH[4*3+2] = 0.125
	g.SH[7*3+0] = -0.75
	var doc gltf.Document
	if err := gltf.NewDecoder(bytes.NewReader(encodeBytes(t, g, Options{SHDegree: 2}))).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Meshes[0].Primitives[0]
	read := func(name string) any {
		t.Helper()
		v, err := modeler.ReadAccessor(&doc, doc.Accessors[p.Attributes[name]], nil)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name string
		want any
	}{
		{gltf.POSITION, [][3]float32{{-1, -2, 3}}},
		{AttrRotation, [][4]float32{{-0.8, 0, 0, 0.6}}},
		{AttrScale, [][3]float32{{float32(math.Exp(-1)), float32(math.Exp(-2)), float32(math.Exp(-3))}}},
		{AttrOpacity, []float32{0.5}},
		{SHAttr(1, 0), [][3]float32{{-0.25, 0, 0}}},
		{SHAttr(1, 1), [][3]float32{{0, 0.5, 0}}},
		{SHAttr(2, 0), [][3]float32{{0, 0, 0.125}}},
		{SHAttr(2, 3), [][3]float32{{0.75, 0, 0}}},
		// sRGB 0.5 is linear ((0.5+0.055)/1.055)^2.4 = 0.21404114.
		{gltf.COLOR_0, [][4]float32{{0.21404114, 0.21404114, 0.21404114, 0.5}}},
	} {
		// Compared as numbers: −0 (a negated zero) equals 0.
		if got := read(tc.name); !slices.Equal(flat(got), flat(tc.want)) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// flat lists the components of an accessor's values as modeler returns
// them.
func flat(v any) []float32 {
	var out []float32
	switch v := v.(type) {
	case []float32:
		out = v
	case [][3]float32:
		for _, e := range v {
			out = append(out, e[:]...)
		}
	case [][4]float32:
		for _, e := range v {
			out = append(out, e[:]...)
		}
	}
	return out
}

// TestConvertColour checks the RDF→LUF map on its own (splattest.CheckAxisFlip): colours
// move with the directions, and rotations R become F·R·F, F = diag(−1,−1,1); and fromGLTF
// undoes toGLTF up to the normalisation.
func TestConvertColour(t *testing.T) {
	splattest.CheckAxisFlip(t, sceneSeed, splattest.AxisFlip{Pos: posSign, SHSign: shSign,
		Quat: func(w, x, y, z float32) ([4]float64, bool) {
			q, ok := toGLTF(w, x, y, z)
			return [4]float64{float64(q[3]), float64(q[0]), float64(q[1]), float64(q[2])}, ok // x,y,z,w → w,x,y,z
		}})
	g := randomScene(sceneSeed, 20, 3)
	for i := 0; i < g.Len(); i++ {
		q := g.Quats[4*i : 4*i+4]
		xyzw, ok := toGLTF(q[0], q[1], q[2], q[3])
		if !ok {
			t.Fatal("toGLTF refused a random quaternion")
		}
		if back := fromGLTF(xyzw); back != unitQuat(q) {
			t.Fatalf("splat %d: fromGLTF(toGLTF(q)) = %v, want %v", i, back, unitQuat(q))
		}
	}
}

// TestWriteErrors: what the format cannot hold is refused with the splat
// or value named, and nothing is written.
func TestWriteErrors(t *testing.T) {
	zeroQuat := randomScene(sceneSeed, 3, 0)
	copy(zeroQuat.Quats[4:8], []float32{0, 0, 0, 0})
	nan := randomScene(sceneSeed, 3, 0)
	nan.Means[5] = float32(math.NaN())
	for _, tc := range []struct {
		name string
		g    *splat.Gaussians
		o    Options
		want string
	}{
		{"empty", splat.New(0), Options{}, "no splats"},
		{"zero quaternion", zeroQuat, Options{}, "splat 1: quaternion (0, 0, 0, 0)"},
		{"NaN", nan, Options{}, "splat 1"},
		{"degree 4", randomScene(sceneSeed, 3, 0), Options{SHDegree: 4}, "SH degree 4"},
		{"degree -1", randomScene(sceneSeed, 3, 0), Options{SHDegree: -1}, "SH degree -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.g, tc.o)
			if err == nil || !strings.HasPrefix(err.Error(), "gltfsplat: write: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("%d bytes written before the error", buf.Len())
			}
		})
	}
}

// TestWriteFile writes through atomicfile and reads the file back; a
// failed write leaves an existing file as it was.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scene.glb")
	g := randomScene(sceneSeed, 10, 1)
	if err := WriteFile(path, g, Options{SHDegree: 1}); err != nil {
		t.Fatal(err)
	}
	back, info, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.SHDegree != 1 {
		t.Errorf("SH degree %d, want 1", info.SHDegree)
	}
	same(t, back, g, 1)
	before, _ := os.ReadFile(path)
	err = WriteFile(path, splat.New(0), Options{})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want one naming %s", err, path)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a failed write changed the existing file")
	}
}
