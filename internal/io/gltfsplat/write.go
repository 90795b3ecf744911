package gltfsplat

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/qmuntal/gltf"
	"github.com/qmuntal/gltf/modeler"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Options says what Write writes.
type Options struct {
	// SHDegree is the degree of the SH coefficients written (0..3);
	// coefficients above it are dropped.
	SHDegree int
}

// generator is asset.generator, so a file says what wrote it.
const generator = "rlxsplat"

// maxBin is the most bytes the BIN chunk may hold: the GLB header stores
// the file length as a u32, and the JSON chunk (a few kilobytes) and the
// headers must fit beside it.
const maxBin = math.MaxUint32 - 1<<20

// Write writes g as a GLB to w. g must pass g.Validate() and hold at least
// one splat (a glTF accessor holds at least one element); a zero quaternion
// is an error.
func Write(w io.Writer, g *splat.Gaussians, o Options) error {
	if err := encode(w, g, o); err != nil {
		return fmt.Errorf("gltfsplat: write: %w", err)
	}
	return nil
}

// WriteFile writes g to path as Write does, atomically (atomicfile): a
// crash leaves the old file or the new one, never a partial one.
func WriteFile(path string, g *splat.Gaussians, o Options) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return encode(w, g, o) }, nil); err != nil {
		return fmt.Errorf("gltfsplat: write %s: %w", path, err)
	}
	return nil
}

// encode is Write without the package prefix on its errors.
func encode(w io.Writer, g *splat.Gaussians, o Options) error {
	doc, err := build(g, o)
	if err != nil {
		return err
	}
	// The encoder drops the errors of some of its writes; ew keeps the
	// first one so a full disk is not reported as success.
	ew := &errWriter{w: w}
	if err := gltf.NewEncoder(ew).Encode(doc); err != nil {
		return err
	}
	return ew.err
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// build makes the glTF document of g: one scene, node, mesh and POINTS
// primitive, every attribute in its own buffer view of buffer 0.
func build(g *splat.Gaussians, o Options) (*gltf.Document, error) {
	if o.SHDegree < 0 || o.SHDegree > splat.MaxSHDegree {
		return nil, fmt.Errorf("SH degree %d, want 0..%d", o.SHDegree, splat.MaxSHDegree)
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	n := g.Len()
	if n == 0 {
		return nil, fmt.Errorf("no splats: a glTF accessor must hold at least one element")
	}
	perSplat := 4 * (3 + 4 + 3 + 4 + 1 + 3*splat.NumCoeffs(o.SHDegree))
	if int64(n) > maxBin/int64(perSplat) {
		return nil, fmt.Errorf("%d splats at SH degree %d need %d bytes, more than the %d a GLB holds", n, o.SHDegree, int64(n)*int64(perSplat), int64(maxBin))
	}

	pos := make([][3]float32, n)
	col := make([][4]float32, n)
	scale := make([][3]float32, n)
	rot := make([][4]float32, n)
	opacity := make([]float32, n)
	for i := 0; i < n; i++ {
		q := g.Quats[4*i : 4*i+4]
		r, ok := toGLTF(q[0], q[1], q[2], q[3])
		if !ok {
			return nil, fmt.Errorf("splat %d: quaternion (%g, %g, %g, %g) cannot be normalised", i, q[0], q[1], q[2], q[3])
		}
		rot[i] = r
		dc := g.SH[i*splat.SHCoeffs*3 : i*splat.SHCoeffs*3+3]
		a := splat.Sigmoid(g.OpacityLogits[i])
		opacity[i] = a
		col[i] = [4]float32{fallbackColour(dc[0]), fallbackColour(dc[1]), fallbackColour(dc[2]), a}
		for c := 0; c < 3; c++ {
			pos[i][c] = posSign[c] * g.Means[3*i+c]
			// The extension stores linear scales (standard deviations),
			// not the logs the splats train.
			s := float32(math.Exp(float64(g.LogScales[3*i+c])))
			if math.IsInf(float64(s), 0) {
				return nil, fmt.Errorf("splat %d: log scale %g overflows a float32 linear scale", i, g.LogScales[3*i+c])
			}
			scale[i][c] = s
		}
	}

	doc := &gltf.Document{
		Asset:          gltf.Asset{Version: "2.0", Generator: generator},
		ExtensionsUsed: []string{ExtensionName},
		Scene:          gltf.Index(0),
		Scenes:         []*gltf.Scene{{Nodes: []int{0}}},
		Nodes:          []*gltf.Node{{Mesh: gltf.Index(0)}},
	}
	// WritePosition sets the accessor's min and max, which glTF requires
	// of POSITION.
	attrs := gltf.PrimitiveAttributes{
		gltf.POSITION: modeler.WritePosition(doc, pos),
		gltf.COLOR_0:  modeler.WriteAccessor(doc, gltf.TargetArrayBuffer, col),
		AttrScale:     modeler.WriteAccessor(doc, gltf.TargetArrayBuffer, scale),
		AttrRotation:  modeler.WriteAccessor(doc, gltf.TargetArrayBuffer, rot),
		AttrOpacity:   modeler.WriteAccessor(doc, gltf.TargetArrayBuffer, opacity),
	}
	coef := make([][3]float32, n)
	for deg := 0; deg <= o.SHDegree; deg++ {
		for m := 0; m <= 2*deg; m++ {
			k := deg*deg + m
			for i := 0; i < n; i++ {
				sh := g.SH[(i*splat.SHCoeffs+k)*3:]
				coef[i] = [3]float32{shSign[k] * sh[0], shSign[k] * sh[1], shSign[k] * sh[2]}
			}
			// The modeler copies coef into the buffer, so it is reused.
			attrs[SHAttr(deg, m)] = modeler.WriteAccessor(doc, gltf.TargetArrayBuffer, coef)
		}
	}
	ext, err := json.Marshal(extension{
		Kernel:        KernelEllipse,
		ColorSpace:    ColorSpaceSRGB,
		Projection:    ProjectionPerspective,
		SortingMethod: SortingCameraDistance,
	})
	if err != nil {
		return nil, err
	}
	doc.Meshes = []*gltf.Mesh{{Primitives: []*gltf.Primitive{{
		Attributes: attrs,
		Mode:       gltf.PrimitivePoints,
		Extensions: gltf.Extensions{ExtensionName: json.RawMessage(ext)},
	}}}}
	return doc, nil
}
