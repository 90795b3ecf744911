package gltfsplat

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/qmuntal/gltf"
)

// storage is one component type an attribute may use.
type storage struct {
	code       uint16 // glTF componentType: 5120 BYTE … 5126 FLOAT
	normalized bool
}

// The component types the extension's Attributes table allows, and float
// alone for POSITION (core glTF) and the SH coefficients.
var (
	floatOnly     = []storage{{5126, false}}
	rotationTypes = []storage{{5126, false}, {5120, true}, {5122, true}}
	scaleTypes    = []storage{{5126, false}, {5121, false}, {5121, true}, {5123, false}, {5123, true}}
	opacityTypes  = []storage{{5126, false}, {5121, true}, {5123, true}}
)

// componentSize is the byte size of a component type code; 0 if unknown.
func componentSize(code uint16) int {
	switch code {
	case 5120, 5121:
		return 1
	case 5122, 5123:
		return 2
	case 5125, 5126:
		return 4
	}
	return 0
}

// attrReader reads a primitive's attributes out of buffer 0.
type attrReader struct {
	doc   *gltf.Document
	codes []uint16 // componentType of each accessor as the JSON gave it
	buf   []byte
	prim  *gltf.Primitive
	where string
}

// read returns the named attribute's values, count × components of typ,
// converted to float32 (normalised integers as glTF defines them). count
// is the accessor's count; want, unless −1, is what it must be.
func (a *attrReader) read(name string, typ gltf.AccessorType, allowed []storage, want int) ([]float32, error) {
	idx, ok := a.prim.Attributes[name]
	if !ok {
		return nil, fmt.Errorf("%s: no %s attribute", a.where, name)
	}
	v, err := a.accessor(idx, typ, allowed, want)
	if err != nil {
		return nil, fmt.Errorf("%s: accessor %d (%s): %w", a.where, idx, name, err)
	}
	return v, nil
}

func (a *attrReader) accessor(idx int, typ gltf.AccessorType, allowed []storage, want int) ([]float32, error) {
	if idx < 0 || idx >= len(a.doc.Accessors) || a.doc.Accessors[idx] == nil || idx >= len(a.codes) {
		return nil, fmt.Errorf("no such accessor (the file has %d)", len(a.doc.Accessors))
	}
	acc := a.doc.Accessors[idx]
	st := storage{a.codes[idx], acc.Normalized}
	okType := false
	for _, s := range allowed {
		okType = okType || s == st
	}
	if !okType {
		return nil, fmt.Errorf("componentType %d (normalized %t) is not one the attribute allows", st.code, st.normalized)
	}
	if acc.Type != typ {
		return nil, fmt.Errorf("type %v, want %v", acc.Type, typ)
	}
	if acc.Sparse != nil {
		return nil, fmt.Errorf("sparse accessors are not supported")
	}
	if acc.BufferView == nil {
		return nil, fmt.Errorf("no bufferView (all-zero accessors are not supported)")
	}
	if acc.Count < 1 {
		return nil, fmt.Errorf("count %d, want at least 1", acc.Count)
	}
	if want >= 0 && acc.Count != want {
		return nil, fmt.Errorf("count %d, but POSITION has %d", acc.Count, want)
	}
	bv := *acc.BufferView
	if bv < 0 || bv >= len(a.doc.BufferViews) || a.doc.BufferViews[bv] == nil {
		return nil, fmt.Errorf("bufferView %d does not exist (the file has %d)", bv, len(a.doc.BufferViews))
	}
	view := a.doc.BufferViews[bv]
	if view.Buffer != 0 {
		return nil, fmt.Errorf("bufferView %d: buffer %d, only buffer 0 (the BIN chunk) is read", bv, view.Buffer)
	}
	if view.ByteOffset < 0 || view.ByteLength < 1 || view.ByteOffset > len(a.buf) || view.ByteLength > len(a.buf)-view.ByteOffset {
		return nil, fmt.Errorf("bufferView %d: bytes %d+%d outside buffer 0's %d", bv, view.ByteOffset, view.ByteLength, len(a.buf))
	}
	data := a.buf[view.ByteOffset : view.ByteOffset+view.ByteLength]
	cs := componentSize(st.code)
	nc := typ.Components()
	elem := cs * nc
	stride := elem
	if view.ByteStride != 0 {
		// glTF: 4..252, a multiple of 4, and at least one element.
		if view.ByteStride < elem || view.ByteStride > 252 || view.ByteStride%4 != 0 {
			return nil, fmt.Errorf("bufferView %d: byteStride %d, want a multiple of 4 in %d..252", bv, view.ByteStride, max(elem, 4))
		}
		stride = view.ByteStride
	}
	if acc.ByteOffset < 0 || acc.ByteOffset%cs != 0 || acc.ByteOffset > len(data) {
		return nil, fmt.Errorf("byteOffset %d: outside bufferView %d (%d bytes) or not a multiple of %d", acc.ByteOffset, bv, len(data), cs)
	}
	data = data[acc.ByteOffset:]
	// count−1 strides plus one element must fit; dividing first keeps the
	// product from overflowing.
	if len(data) < elem || (acc.Count-1) > (len(data)-elem)/stride {
		return nil, fmt.Errorf("%d elements of %d bytes at stride %d need more than the %d bytes bufferView %d has after byteOffset %d", acc.Count, elem, stride, len(data), bv, acc.ByteOffset)
	}
	out := make([]float32, acc.Count*nc)
	le := binary.LittleEndian
	for i := 0; i < acc.Count; i++ {
		e := data[i*stride:]
		for c := 0; c < nc; c++ {
			b := e[c*cs:]
			var v float32
			switch st {
			case storage{5126, false}:
				v = math.Float32frombits(le.Uint32(b))
			case storage{5120, false}:
				v = float32(int8(b[0]))
			case storage{5120, true}:
				v = max(float32(int8(b[0]))/127, -1)
			case storage{5121, false}:
				v = float32(b[0])
			case storage{5121, true}:
				v = float32(b[0]) / 255
			case storage{5123, false}:
				v = float32(le.Uint16(b))
			case storage{5122, false}:
				v = float32(int16(le.Uint16(b)))
			case storage{5122, true}:
				v = max(float32(int16(le.Uint16(b)))/32767, -1)
			case storage{5123, true}:
				v = float32(le.Uint16(b)) / 65535
			}
			out[i*nc+c] = v
		}
	}
	return out, nil
}
