// Package splat holds the Gaussian scene representation shared by every
// engine and file format: a structure of arrays of float32 parameters in the
// conventions of design.md §3, plus the real spherical-harmonics basis.
//
// It does no I/O and knows nothing about devices.
package splat

import (
	"fmt"
	"math"
)

// Float is the constraint of the generic numeric code: the engine runs it in
// float32, the finite-difference checks in float64.
type Float interface{ ~float32 | ~float64 }

// SHCoeffs is the number of SH coefficients per colour channel at degree 3.
const SHCoeffs = 16

// MaxSHDegree is the highest spherical-harmonics degree supported.
const MaxSHDegree = 3

// Gaussians holds N splats as a structure of arrays.
//
// SH is coefficient-major per splat: the value for splat i, coefficient k
// (0 = DC) and channel c lives at SH[(i*SHCoeffs+k)*3+c]. Coefficients above
// the scene's degree are kept (zero, or trained later as the degree grows).
//
// The type is generic so that gradient checks can hold float64 copies; every
// engine and file uses the float32 instantiation Gaussians.
type GaussiansOf[F Float] struct {
	Means         []F // [N,3] world positions
	LogScales     []F // [N,3] log of the per-axis standard deviations
	Quats         []F // [N,4] w,x,y,z, stored unnormalised
	OpacityLogits []F // [N] opacity = sigmoid(logit)
	SH            []F // [N,16,3]
}

// Gaussians is the float32 scene every engine and file format uses.
type Gaussians = GaussiansOf[float32]

// New returns n zeroed float32 Gaussians with identity rotations.
func New(n int) *Gaussians { return NewOf[float32](n) }

// NewOf returns n zeroed Gaussians with identity rotations.
func NewOf[F Float](n int) *GaussiansOf[F] {
	g := &GaussiansOf[F]{
		Means:         make([]F, n*3),
		LogScales:     make([]F, n*3),
		Quats:         make([]F, n*4),
		OpacityLogits: make([]F, n),
		SH:            make([]F, n*SHCoeffs*3),
	}
	for i := 0; i < n; i++ {
		g.Quats[i*4] = 1
	}
	return g
}

// Len is the number of splats.
func (g *GaussiansOf[F]) Len() int { return len(g.OpacityLogits) }

// Validate checks that every array has the length N implies and that no
// value is NaN or infinite. The error names the field and the first bad index.
func (g *GaussiansOf[F]) Validate() error {
	n := g.Len()
	for _, f := range g.Fields() {
		if len(f.Data) != n*f.Width {
			return fmt.Errorf("splat: %s has %d values, want %d (N=%d × %d)", f.Name, len(f.Data), n*f.Width, n, f.Width)
		}
		for j, v := range f.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("splat: %s of splat %d is %v", f.Name, j/f.Width, v)
			}
		}
	}
	return nil
}

// Field names one parameter array and its per-splat width.
type Field[F Float] struct {
	Name  string
	Width int
	Data  []F
}

// Fields lists the parameter arrays in a fixed order (means, log_scales,
// quats, opacity_logits, sh). Engines, checkpoints and Adam use this order.
func (g *GaussiansOf[F]) Fields() []Field[F] {
	return []Field[F]{
		{"means", 3, g.Means},
		{"log_scales", 3, g.LogScales},
		{"quats", 4, g.Quats},
		{"opacity_logits", 1, g.OpacityLogits},
		{"sh", SHCoeffs * 3, g.SH},
	}
}

// Clone returns a deep copy.
func (g *GaussiansOf[F]) Clone() *GaussiansOf[F] {
	c := &GaussiansOf[F]{}
	c.Means = append([]F(nil), g.Means...)
	c.LogScales = append([]F(nil), g.LogScales...)
	c.Quats = append([]F(nil), g.Quats...)
	c.OpacityLogits = append([]F(nil), g.OpacityLogits...)
	c.SH = append([]F(nil), g.SH...)
	return c
}

// CopyInto copies g into dst's arrays, resized to g's length (their capacity reused; new
// arrays only where it falls short), and returns dst, or a new copy when dst is nil: for a
// caller that copies a million splats again and again, where fresh arrays would cost a page
// fault every 4 KiB on first touch.
func (g *GaussiansOf[F]) CopyInto(dst *GaussiansOf[F]) *GaussiansOf[F] {
	if dst == nil {
		return g.Clone()
	}
	dst.Resize(g.Len())
	df := dst.Fields()
	for k, f := range g.Fields() {
		copy(df[k].Data, f.Data)
	}
	return dst
}

// Resize makes every array of g hold n splats, reusing its capacity; the values are left as
// they are (those beyond the old length are whatever the arrays held, or zero).
func (g *GaussiansOf[F]) Resize(n int) {
	re := func(s []F, w int) []F {
		if cap(s) < n*w {
			return make([]F, n*w)
		}
		return s[:n*w]
	}
	g.Means, g.LogScales, g.Quats = re(g.Means, 3), re(g.LogScales, 3), re(g.Quats, 4)
	g.OpacityLogits, g.SH = re(g.OpacityLogits, 1), re(g.SH, SHCoeffs*3)
}

// Range returns a copy of splats [lo, hi) (0 ≤ lo ≤ hi ≤ Len): a share of the scene, as
// Gaussian sharding gives each rank its contiguous range.
func (g *GaussiansOf[F]) Range(lo, hi int) *GaussiansOf[F] {
	out := NewOf[F](hi - lo)
	src := g.Fields()
	for j, f := range out.Fields() {
		copy(f.Data, src[j].Data[lo*f.Width:hi*f.Width])
	}
	return out
}

// SHC0 is the degree-0 real SH basis constant; rgb = 0.5 + SHC0·dc for a
// splat with only a DC term (INRIA's RGB2SH/SH2RGB).
const SHC0 = 0.28209479177387814

// RGBToDC converts a colour in [0,1] to the DC coefficient that renders it.
func RGBToDC(rgb float32) float32 { return (rgb - 0.5) / SHC0 }

// Sigmoid is the logistic function used for opacities.
func Sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// Logit is the inverse of Sigmoid, for p in (0,1).
func Logit(p float32) float32 { return float32(math.Log(float64(p) / (1 - float64(p)))) }

// Zeros returns n splats with every value 0, the zero quaternion included
// (for optimizer moments and gradients, which New's identity rotations
// would make wrong).
func Zeros[F Float](n int) *GaussiansOf[F] {
	return &GaussiansOf[F]{
		Means:         make([]F, n*3),
		LogScales:     make([]F, n*3),
		Quats:         make([]F, n*4),
		OpacityLogits: make([]F, n),
		SH:            make([]F, n*SHCoeffs*3),
	}
}

// Gather returns splat src[i] of g at index i; an index of −1 gives a splat
// of zeros. Densification edits (prune, clone, split) are gathers of the
// parameters and of the optimizer's moments alike.
func Gather[F Float](g *GaussiansOf[F], src []int32) *GaussiansOf[F] {
	out := Zeros[F](len(src))
	from, to := g.Fields(), out.Fields()
	for fi := range from {
		GatherRows(to[fi].Data, from[fi].Data, from[fi].Width, src)
	}
	return out
}

// GatherRows sets row j of dst (rows of w values) to row src[j] of from, leaving it as it is
// where src[j] is −1. A run of consecutive sources is one copy: an edit keeps its splats in
// order, and a copy a row took ~10 ms for a million splats' shapes.
func GatherRows[F Float](dst, from []F, w int, src []int32) {
	for j := 0; j < len(src); {
		k := j + 1
		for k < len(src) && src[k-1] >= 0 && src[k] == src[k-1]+1 {
			k++
		}
		if s := int(src[j]); s >= 0 {
			copy(dst[j*w:k*w], from[s*w:(s+k-j)*w])
		}
		j = k
	}
}

// Concat returns the splats of parts one after the other: the whole scene from the shares
// Range cut, in their order.
func Concat[F Float](parts ...*GaussiansOf[F]) *GaussiansOf[F] {
	n := 0
	for _, p := range parts {
		n += p.Len()
	}
	out := NewOf[F](n)
	at := 0
	for _, p := range parts {
		src := p.Fields()
		for j, f := range out.Fields() {
			copy(f.Data[at*f.Width:], src[j].Data)
		}
		at += p.Len()
	}
	return out
}
