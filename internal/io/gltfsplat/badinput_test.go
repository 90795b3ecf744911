package gltfsplat

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/qmuntal/gltf"

	"github.com/rlxsplat/rlxsplat/internal/io/finite"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// TestBadInput edits a valid file one way at a time and checks that Read
// refuses it with an error naming the file and what is wrong.
func TestBadInput(t *testing.T) {
	good := encodeBytes(t, randomScene(sceneSeed, 5, 2), Options{SHDegree: 2})
	// edit re-packs the file after f changes its JSON document.
	edit := func(f func(doc map[string]any)) []byte {
		doc, bin := chunks(t, good)
		f(doc)
		return glb(t, doc, bin)
	}
	prim := func(doc map[string]any) map[string]any {
		return doc["meshes"].([]any)[0].(map[string]any)["primitives"].([]any)[0].(map[string]any)
	}
	attrs := func(doc map[string]any) map[string]any { return prim(doc)["attributes"].(map[string]any) }
	accessor := func(doc map[string]any, attr string) map[string]any {
		return doc["accessors"].([]any)[int(attrs(doc)[attr].(float64))].(map[string]any)
	}
	opacityOne := func() []byte {
		// Overwrite the first opacity float with 2.0 in the BIN chunk.
		doc, bin := chunks(t, good)
		acc := accessor(doc, AttrOpacity)
		view := doc["bufferViews"].([]any)[int(acc["bufferView"].(float64))].(map[string]any)
		off := 0
		if o, ok := view["byteOffset"].(float64); ok {
			off = int(o)
		}
		bin = append([]byte(nil), bin...)
		binary.LittleEndian.PutUint32(bin[off:], 0x40000000)
		return glb(t, doc, bin)
	}

	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "shorter than a GLB header"},
		{"truncated", good[:len(good)-4], "header length"},
		{"JSON glTF", []byte(`{"asset":{"version":"2.0"}}                 `), "only binary glTF"},
		{"GLB version 1", append(append(append([]byte(nil), good[:4]...), 1, 0, 0, 0), good[8:]...), "GLB version 1"},
		{"chunk too long", func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint32(b[12:], 1<<30)
			return b
		}(), "runs past the end"},
		{"bad JSON", func() []byte { b := append([]byte(nil), good...); b[20] = '!'; return b }(), "JSON chunk"},
		{"no BIN", func() []byte { doc, _ := chunks(t, good); return glb(t, doc, nil) }(), "no BIN chunk"},
		{"asset version", edit(func(d map[string]any) { d["asset"].(map[string]any)["version"] = "1.0" }), `asset.version "1.0"`},
		{"required extension", edit(func(d map[string]any) { d["extensionsRequired"] = []any{"KHR_spz_compression"} }), "extensionsRequired"},
		{"node transform", edit(func(d map[string]any) {
			d["nodes"].([]any)[0].(map[string]any)["translation"] = []any{1, 0, 0}
		}), "nodes[0] has a transform"},
		{"no extension", edit(func(d map[string]any) { delete(prim(d), "extensions") }), "no mesh primitive has"},
		{"triangles", edit(func(d map[string]any) { prim(d)["mode"] = 4 }), "want POINTS"},
		{"kernel", edit(func(d map[string]any) {
			prim(d)["extensions"].(map[string]any)[ExtensionName].(map[string]any)["kernel"] = "customShape"
		}), `kernel "customShape"`},
		{"colour space", edit(func(d map[string]any) {
			prim(d)["extensions"].(map[string]any)[ExtensionName].(map[string]any)["colorSpace"] = "acescg"
		}), `colorSpace "acescg"`},
		{"no scale", edit(func(d map[string]any) { delete(attrs(d), AttrScale) }), "no " + AttrScale},
		{"partial SH degree", edit(func(d map[string]any) { delete(attrs(d), SHAttr(2, 4)) }), "SH degree 2 has 4 of its 5"},
		{"SH degree 4", edit(func(d map[string]any) { attrs(d)[SHAttr(4, 0)] = attrs(d)[SHAttr(0, 0)] }), "SH_DEGREE_4_COEF_0"},
		{"no DC", edit(func(d map[string]any) {
			for deg := 0; deg <= 2; deg++ {
				for m := 0; m <= 2*deg; m++ {
					delete(attrs(d), SHAttr(deg, m))
				}
			}
		}), "no " + SHAttr(0, 0)},
		{"accessor index", edit(func(d map[string]any) { attrs(d)[AttrRotation] = 99 }), "no such accessor"},
		{"count", edit(func(d map[string]any) { accessor(d, AttrScale)["count"] = 4 }), "count 4, but POSITION has 5"},
		{"huge count", edit(func(d map[string]any) {
			accessor(d, gltf.POSITION)["count"] = 1 << 60
		}), "need more than"},
		{"component type", edit(func(d map[string]any) { accessor(d, AttrRotation)["componentType"] = 5121 }), "componentType 5121"},
		{"unknown component type", edit(func(d map[string]any) { accessor(d, AttrScale)["componentType"] = 1234 }), "componentType 1234"},
		{"accessor type", edit(func(d map[string]any) { accessor(d, AttrScale)["type"] = "VEC4" }), "type VEC4, want VEC3"},
		{"byteOffset", edit(func(d map[string]any) { accessor(d, AttrOpacity)["byteOffset"] = 4 }), "need more than"},
		{"bufferView range", edit(func(d map[string]any) {
			d["bufferViews"].([]any)[0].(map[string]any)["byteLength"] = 1 << 40
		}), "outside buffer 0"},
		{"buffer length", edit(func(d map[string]any) { d["buffers"].([]any)[0].(map[string]any)["byteLength"] = 1 << 40 }), "buffers[0].byteLength"},
		{"buffer uri", edit(func(d map[string]any) { d["buffers"].([]any)[0].(map[string]any)["uri"] = "../../etc/passwd" }), "has a uri"},
		{"stride", edit(func(d map[string]any) { d["bufferViews"].([]any)[0].(map[string]any)["byteStride"] = 6 }), "byteStride 6"},
		{"opacity above 1", opacityOne(), "opacity 2 outside [0, 1]"},
		{"zero quaternion", func() []byte {
			g := randomScene(sceneSeed, 2, 0)
			data := encodeBytes(t, g, Options{})
			doc, bin := chunks(t, data)
			acc := accessor(doc, AttrRotation)
			view := doc["bufferViews"].([]any)[int(acc["bufferView"].(float64))].(map[string]any)
			off := int(view["byteOffset"].(float64)) + 16
			bin = append([]byte(nil), bin...)
			clear(bin[off : off+16])
			return glb(t, doc, bin)
		}(), "splat 1: zero quaternion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(bytes.NewReader(tc.data), "bad.glb")
			if err == nil {
				t.Fatal("read without error")
			}
			if !strings.HasPrefix(err.Error(), "gltfsplat: bad.glb: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want one naming the file and containing %q", err, tc.want)
			}
		})
	}
}

// TestQuantisedRead reads a file whose rotation, scale and opacity use the
// normalised integer types the extension allows, written by hand, and
// checks the glTF normalisation rules (c/127 and c/32767 clamped at −1,
// c/255, c/65535).
func TestQuantisedRead(t *testing.T) {
	g := splat.New(1)
	good := encodeBytes(t, g, Options{})
	doc, bin := chunks(t, good)
	bin = append([]byte(nil), bin...)
	off := len(bin)
	// rotation: VEC4 short normalised (−32768 → −1, 0, 0, 16384 → ~0.5);
	// scale: VEC3 unsigned byte (integer linear scales 1, 2, 0) plus one
	// byte of padding; opacity: ubyte normalised 255 → 1, padded to 4.
	bin = append(bin, 0x00, 0x80, 0, 0, 0, 0, 0x00, 0x40, 1, 2, 0, 0, 255, 0, 0, 0)
	doc["bufferViews"] = append(doc["bufferViews"].([]any),
		map[string]any{"buffer": 0, "byteOffset": off, "byteLength": 8},
		map[string]any{"buffer": 0, "byteOffset": off + 8, "byteLength": 3},
		map[string]any{"buffer": 0, "byteOffset": off + 12, "byteLength": 1})
	nv := len(doc["bufferViews"].([]any))
	doc["buffers"].([]any)[0].(map[string]any)["byteLength"] = len(bin)
	prim := doc["meshes"].([]any)[0].(map[string]any)["primitives"].([]any)[0].(map[string]any)
	attrs := prim["attributes"].(map[string]any)
	na := len(doc["accessors"].([]any))
	doc["accessors"] = append(doc["accessors"].([]any),
		map[string]any{"bufferView": nv - 3, "componentType": 5122, "normalized": true, "count": 1, "type": "VEC4"},
		map[string]any{"bufferView": nv - 2, "componentType": 5121, "count": 1, "type": "VEC3"},
		map[string]any{"bufferView": nv - 1, "componentType": 5121, "normalized": true, "count": 1, "type": "SCALAR"})
	attrs[AttrRotation], attrs[AttrScale], attrs[AttrOpacity] = na, na+1, na+2
	back, info, err := Read(bytes.NewReader(glb(t, doc, bin)), "q.glb")
	if err != nil {
		t.Fatal(err)
	}
	// glTF (x,y,z,w) = (−1, 0, 0, 16384/32767) in LUF is (w,x,y,z) =
	// (0.50002, 1, 0, 0) in RDF.
	if want := []float32{16384.0 / 32767, 1, 0, 0}; !equalish(back.Quats, want) {
		t.Errorf("quaternion %v, want %v", back.Quats, want)
	}
	// Linear scale 0 is log scale −Inf, clamped and reported.
	if want := []float32{0, float32(math.Ln2), -finite.LogScaleBound}; !equalish(back.LogScales, want) {
		t.Errorf("log scales %v, want %v", back.LogScales, want)
	}
	if !strings.Contains(info.Warning, "1 infinite values") || !strings.Contains(info.Warning, "splat 0, component 2") {
		t.Errorf("warning %q, want one clamped value at splat 0, component 2", info.Warning)
	}
	if a := splat.Sigmoid(back.OpacityLogits[0]); a < 1-1e-6 {
		t.Errorf("opacity %g, want 1", a)
	}
}

func equalish(got, want []float32) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if d := got[i] - want[i]; d > 1e-6 || d < -1e-6 {
			return false
		}
	}
	return true
}
