package gltfsplat

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/qmuntal/gltf"

	"github.com/rlxsplat/rlxsplat/internal/io/finite"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// GLB container constants (glTF 2.0 specification, "Binary glTF Layout").
const (
	glbMagic     = 0x46546c67 // "glTF"
	glbVersion   = 2
	chunkJSON    = 0x4e4f534a // "JSON"
	chunkBIN     = 0x004e4942 // "BIN\0"
	glbHeaderLen = 12
	chunkHdrLen  = 8
)

// ReadFile reads a GLB file; see Read.
func ReadFile(path string) (*splat.Gaussians, Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Info{}, fmt.Errorf("gltfsplat: %w", err)
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads a GLB holding one KHR_gaussian_splatting primitive from r and
// returns its splats in the scene's RDF axes; name (usually the path) is
// used in error messages, which also name the accessor or field at fault.
// Coefficients above the file's SH degree are zero.
//
// The GLB container is parsed here rather than by gltf.Decoder, whose
// buffer allocation trusts buffer.byteLength: every length and offset is
// checked against the bytes actually read before anything is allocated
// from it, so memory stays proportional to the input.
func Read(r io.Reader, name string) (*splat.Gaussians, Info, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, Info{}, fmt.Errorf("gltfsplat: %s: %w", name, err)
	}
	g, info, err := decode(data)
	if err != nil {
		return nil, Info{}, fmt.Errorf("gltfsplat: %s: %w", name, err)
	}
	return g, info, nil
}

// splitGLB returns the JSON and BIN chunks of a GLB; bin is nil when the
// file has no BIN chunk. Chunks after BIN are ignored, as glTF allows.
func splitGLB(data []byte) (js, bin []byte, err error) {
	if len(data) < glbHeaderLen+chunkHdrLen {
		return nil, nil, fmt.Errorf("%d bytes, shorter than a GLB header and its JSON chunk header (%d)", len(data), glbHeaderLen+chunkHdrLen)
	}
	le := binary.LittleEndian
	if m := le.Uint32(data); m != glbMagic {
		return nil, nil, fmt.Errorf("byte offset 0: magic %#08x, want %#08x (glTF); only binary glTF (.glb) is read", m, uint32(glbMagic))
	}
	if v := le.Uint32(data[4:]); v != glbVersion {
		return nil, nil, fmt.Errorf("byte offset 4: GLB version %d, want %d", v, glbVersion)
	}
	if l := uint64(le.Uint32(data[8:])); l != uint64(len(data)) {
		return nil, nil, fmt.Errorf("byte offset 8: header length %d, but the file has %d bytes", l, len(data))
	}
	off := uint64(glbHeaderLen)
	for i := 0; off < uint64(len(data)); i++ {
		if uint64(len(data))-off < chunkHdrLen {
			return nil, nil, fmt.Errorf("byte offset %d: chunk %d: header cut short", off, i)
		}
		l := uint64(le.Uint32(data[off:]))
		typ := le.Uint32(data[off+4:])
		start := off + chunkHdrLen
		if l > uint64(len(data))-start {
			return nil, nil, fmt.Errorf("byte offset %d: chunk %d: length %d runs past the end of the file", off, i, l)
		}
		body := data[start : start+l]
		switch {
		case i == 0 && typ != chunkJSON:
			return nil, nil, fmt.Errorf("byte offset %d: first chunk has type %#08x, want JSON", off+4, typ)
		case i == 0:
			js = body
		case i == 1 && typ == chunkBIN:
			bin = body
		}
		off = start + l
	}
	return js, bin, nil
}

func decode(data []byte) (*splat.Gaussians, Info, error) {
	js, bin, err := splitGLB(data)
	if err != nil {
		return nil, Info{}, err
	}
	var doc gltf.Document
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, Info{}, fmt.Errorf("JSON chunk: %w", err)
	}
	// gltf.ComponentType decodes an unknown code as FLOAT, so the codes
	// are read again as numbers to check them.
	var codes struct {
		Accessors []struct {
			ComponentType uint16 `json:"componentType"`
		} `json:"accessors"`
	}
	if err := json.Unmarshal(js, &codes); err != nil {
		return nil, Info{}, fmt.Errorf("JSON chunk: accessors: %w", err)
	}
	if !strings.HasPrefix(doc.Asset.Version, "2.") {
		return nil, Info{}, fmt.Errorf("asset.version %q, want 2.x", doc.Asset.Version)
	}
	if len(doc.ExtensionsRequired) > 0 {
		return nil, Info{}, fmt.Errorf("extensionsRequired %v: none is supported", doc.ExtensionsRequired)
	}
	if err := checkNodes(&doc); err != nil {
		return nil, Info{}, err
	}
	prim, where, err := findPrimitive(&doc)
	if err != nil {
		return nil, Info{}, err
	}
	ext, err := primitiveExtension(prim)
	if err != nil {
		return nil, Info{}, fmt.Errorf("%s.extensions.%s: %w", where, ExtensionName, err)
	}
	buf, err := buffer0(&doc, bin)
	if err != nil {
		return nil, Info{}, err
	}
	a := &attrReader{doc: &doc, buf: buf, prim: prim, where: where}
	for _, c := range codes.Accessors {
		a.codes = append(a.codes, c.ComponentType)
	}

	pos, err := a.read(gltf.POSITION, gltf.AccessorVec3, floatOnly, -1)
	if err != nil {
		return nil, Info{}, err
	}
	n := len(pos) / 3
	scale, err := a.read(AttrScale, gltf.AccessorVec3, scaleTypes, n)
	if err != nil {
		return nil, Info{}, err
	}
	rot, err := a.read(AttrRotation, gltf.AccessorVec4, rotationTypes, n)
	if err != nil {
		return nil, Info{}, err
	}
	opacity, err := a.read(AttrOpacity, gltf.AccessorScalar, opacityTypes, n)
	if err != nil {
		return nil, Info{}, err
	}
	deg, err := shDegree(prim, where)
	if err != nil {
		return nil, Info{}, err
	}

	g := splat.New(n)
	for j := range pos {
		g.Means[j] = posSign[j%3] * pos[j]
	}
	var inf finite.Counter
	for j, s := range scale {
		if !(s >= 0) {
			return nil, Info{}, fmt.Errorf("%s: accessor %d (%s): splat %d: scale %g is negative or NaN; the extension requires linear scales ≥ 0", where, prim.Attributes[AttrScale], AttrScale, j/3, s)
		}
		l, clamped := finite.Clamp(toLogScale(s), finite.LogScaleBound)
		if clamped {
			inf.Add(func() string {
				return fmt.Sprintf("%s: accessor %d (%s): splat %d, component %d", where, prim.Attributes[AttrScale], AttrScale, j/3, j%3)
			})
		}
		g.LogScales[j] = float32(l)
	}
	for i := 0; i < n; i++ {
		q := fromGLTF([4]float32(rot[4*i : 4*i+4]))
		copy(g.Quats[4*i:4*i+4], q[:])
		if a := opacity[i]; !(a >= 0 && a <= 1) {
			return nil, Info{}, fmt.Errorf("%s: accessor %d (%s): splat %d: opacity %g outside [0, 1]", where, prim.Attributes[AttrOpacity], AttrOpacity, i, a)
		}
		g.OpacityLogits[i] = toLogit(opacity[i])
	}
	for d := 0; d <= deg; d++ {
		for m := 0; m <= 2*d; m++ {
			k := d*d + m
			coef, err := a.read(SHAttr(d, m), gltf.AccessorVec3, floatOnly, n)
			if err != nil {
				return nil, Info{}, err
			}
			for i := 0; i < n; i++ {
				for c := 0; c < 3; c++ {
					g.SH[(i*splat.SHCoeffs+k)*3+c] = shSign[k] * coef[3*i+c]
				}
			}
		}
	}
	if err := g.Validate(); err != nil {
		return nil, Info{}, err
	}
	for i := 0; i < n; i++ {
		q := g.Quats[4*i : 4*i+4]
		if _, ok := toGLTF(q[0], q[1], q[2], q[3]); !ok {
			return nil, Info{}, fmt.Errorf("%s: accessor %d (%s): splat %d: zero quaternion", where, prim.Attributes[AttrRotation], AttrRotation, i)
		}
	}
	return g, Info{
		Count:         n,
		SHDegree:      deg,
		Kernel:        ext.Kernel,
		ColorSpace:    ext.ColorSpace,
		Projection:    ext.Projection,
		SortingMethod: ext.SortingMethod,
		Generator:     doc.Asset.Generator,
		Warning:       inf.Warning("gltfsplat"),
	}, nil
}

// checkNodes refuses node transforms: the splats would have to be moved,
// turned and scaled (scales and SH included) to apply them, and silently
// dropping them would misplace the scene.
func checkNodes(doc *gltf.Document) error {
	for i, nd := range doc.Nodes {
		if nd == nil {
			return fmt.Errorf("nodes[%d] is null", i)
		}
		if nd.MatrixOrDefault() != gltf.DefaultMatrix || nd.RotationOrDefault() != gltf.DefaultRotation ||
			nd.ScaleOrDefault() != gltf.DefaultScale || nd.TranslationOrDefault() != gltf.DefaultTranslation {
			return fmt.Errorf("nodes[%d] has a transform; node transforms are not supported", i)
		}
	}
	return nil
}

// findPrimitive returns the one primitive carrying the extension, and
// where it is for error messages.
func findPrimitive(doc *gltf.Document) (*gltf.Primitive, string, error) {
	var found *gltf.Primitive
	where := ""
	for mi, m := range doc.Meshes {
		if m == nil {
			return nil, "", fmt.Errorf("meshes[%d] is null", mi)
		}
		for pi, p := range m.Primitives {
			if p == nil {
				return nil, "", fmt.Errorf("meshes[%d].primitives[%d] is null", mi, pi)
			}
			if _, ok := p.Extensions[ExtensionName]; !ok {
				continue
			}
			w := fmt.Sprintf("meshes[%d].primitives[%d]", mi, pi)
			if found != nil {
				return nil, "", fmt.Errorf("%s and %s both hold %s; only one splat primitive is supported", where, w, ExtensionName)
			}
			if p.Mode != gltf.PrimitivePoints {
				return nil, "", fmt.Errorf("%s: mode %v, want POINTS as %s requires", w, p.Mode, ExtensionName)
			}
			if p.Indices != nil {
				return nil, "", fmt.Errorf("%s: indexed splat primitives are not supported", w)
			}
			found, where = p, w
		}
	}
	if found == nil {
		return nil, "", fmt.Errorf("no mesh primitive has the %s extension", ExtensionName)
	}
	return found, where, nil
}

// primitiveExtension decodes and checks the extension object. The value is
// raw JSON unless some package registered a decoder for the name with
// gltf.RegisterExtension, in which case it is re-encoded first.
func primitiveExtension(p *gltf.Primitive) (extension, error) {
	var raw []byte
	switch v := p.Extensions[ExtensionName].(type) {
	case json.RawMessage:
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return extension{}, err
		}
		raw = b
	}
	var ext extension
	if err := json.Unmarshal(raw, &ext); err != nil {
		return extension{}, err
	}
	if ext.Kernel != KernelEllipse {
		// The kernel defines what scale, rotation and opacity mean; under
		// another one they cannot be read as 3DGS splats.
		return extension{}, fmt.Errorf("kernel %q, only %q is supported", ext.Kernel, KernelEllipse)
	}
	if ext.ColorSpace != ColorSpaceSRGB && ext.ColorSpace != ColorSpaceLinear {
		return extension{}, fmt.Errorf("colorSpace %q, want %s or %s", ext.ColorSpace, ColorSpaceSRGB, ColorSpaceLinear)
	}
	if ext.Projection != "" && ext.Projection != ProjectionPerspective {
		return extension{}, fmt.Errorf("projection %q, only %s is supported", ext.Projection, ProjectionPerspective)
	}
	return ext, nil
}

// buffer0 returns buffer 0's bytes, which must be the GLB's BIN chunk.
func buffer0(doc *gltf.Document, bin []byte) ([]byte, error) {
	if len(doc.Buffers) == 0 {
		return nil, fmt.Errorf("no buffers")
	}
	for i, b := range doc.Buffers {
		if b == nil {
			return nil, fmt.Errorf("buffers[%d] is null", i)
		}
		if b.URI != "" {
			return nil, fmt.Errorf("buffers[%d] has a uri; only the GLB's BIN chunk is read", i)
		}
	}
	b := doc.Buffers[0]
	if bin == nil {
		return nil, fmt.Errorf("buffers[0] has no uri but the file has no BIN chunk")
	}
	if b.ByteLength < 1 || b.ByteLength > len(bin) {
		return nil, fmt.Errorf("buffers[0].byteLength %d, want 1..%d (the BIN chunk)", b.ByteLength, len(bin))
	}
	return bin[:b.ByteLength], nil
}

// shDegree is the SH degree the primitive's attributes hold: every
// coefficient of every degree up to it must be there (the extension
// forbids partial degrees), and none above it.
func shDegree(p *gltf.Primitive, where string) (int, error) {
	known := map[string]bool{}
	deg := -1
	for d := 0; d <= splat.MaxSHDegree; d++ {
		have := 0
		for m := 0; m <= 2*d; m++ {
			known[SHAttr(d, m)] = true
			if _, ok := p.Attributes[SHAttr(d, m)]; ok {
				have++
			}
		}
		switch {
		case have == 2*d+1 && deg == d-1:
			deg = d
		case have > 0:
			return 0, fmt.Errorf("%s: SH degree %d has %d of its %d coefficient attributes and degree %d is complete; degrees must be complete and contiguous from 0", where, d, have, 2*d+1, deg)
		}
	}
	for name := range p.Attributes {
		if strings.HasPrefix(name, shAttrPrefix) && !known[name] {
			return 0, fmt.Errorf("%s: attribute %s: only SH degrees 0..%d are supported", where, name, splat.MaxSHDegree)
		}
	}
	if deg < 0 {
		// COLOR_0 alone could stand in for the DC term, but the extension
		// requires SH_DEGREE_0_COEF_0 with the ellipse kernel.
		return 0, fmt.Errorf("%s: no %s attribute", where, SHAttr(0, 0))
	}
	return deg, nil
}
