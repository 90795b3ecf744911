// Package prep holds the CPU side of everything before rasterization:
// per-splat projection for both render models (and its backward), SH colour,
// bounding conics, tile binning, key sort and tile ranges (design.md §5,
// steps 1–3 and 7). The same code serves the CPU engine and the host part of
// the GPU engine's cpu-conic bin mode.
package prep

import "github.com/rlxsplat/rlxsplat/internal/splat"

// Model selects the render model of design.md §4.
type Model int

const (
	// EWA is the classic 3DGS model: a 2D Gaussian in screen space.
	EWA Model = iota
	// Ray evaluates each 3D Gaussian's maximum along the pixel ray.
	Ray
)

func (m Model) String() string {
	if m == Ray {
		return "ray"
	}
	return "ewa"
}

// AlphaMin is the alpha below which a splat is skipped at a pixel (1/255).
const AlphaMin = 1.0 / 255.0

// AlphaMax clamps alpha so that transmittance never reaches zero.
const AlphaMax = 0.99

// ProjectedOf is what the rasterizer needs about every splat for one camera.
// Arrays are indexed by splat id; entries of invalid splats are unspecified
// (and never read) except Valid, which is false.
//
// It is generic in the float type so that the finite-difference checks run
// the very same code in float64 that the engine runs in float32.
type ProjectedOf[F splat.Float] struct {
	Model Model
	N     int

	Valid   []bool // [N] in front of the near plane, finite, touches the image
	Depth   []F    // [N] camera-space z, the sort key within a tile
	Opacity []F    // [N] effective opacity (sigmoid(logit), times the antialias compensation when on)
	Color   []F    // [N,3] SH colour, clamped at 0 (clamped channels get no gradient)

	// EWA render data: alpha = min(0.99, o·exp(−½ dᵀ·C·d)) with d = pixel centre − Mean2D and
	// C = [[a, b], [b, c]] stored as Conic = (a, b, c).
	Mean2D []F // [N,2] pixels; for the ray model the projected centre (for statistics)
	Conic  []F // [N,3]

	// Ray render data: u = A·(c − μ) and A = diag(1/σ)·R(q̂)ᵀ (row-major 3×3), so that for a
	// pixel with world direction d, v = A·d and alpha = min(0.99, o·exp(−½(‖u‖² − (u·v)²/‖v‖²)))
	// when u·v < 0, else 0.
	RayU []F // [N,3]
	RayA []F // [N,9]
	// RayHalf is the ray model's half-plane (a, b, c) in pixels: where a·px + b·py + c > 0 the
	// pixel's ray has its closest approach to the splat behind the camera (u·v ≥ 0, which the
	// rasterizer skips), with a margin far above the rounding of the rasterizer's u·v; binning
	// drops the tiles whose pixel centres all lie there (TileAhead). (0, 0, −1) drops none.
	RayHalf []F // [N,3]

	// Footprint for binning: a pixel position p lies inside iff
	// (p − BoundCenter)ᵀ·Q·(p − BoundCenter) ≤ 1 with Q = [[qa, qb], [qb, qc]] = BoundQ.
	// It is where alpha can reach AlphaMin.
	BoundCenter []F     // [N,2]
	BoundQ      []F     // [N,3]
	Rect        []int32 // [N,4] tile box x0, y0, x1, y1 (x1, y1 exclusive), clipped to the image
	Radius      []F     // [N] pixel radius of the footprint (half its largest extent)
}

// Projected is the float32 instantiation every engine uses.
type Projected = ProjectedOf[float32]

// NewProjected allocates a ProjectedOf for n splats.
func NewProjected[F splat.Float](m Model, n int) *ProjectedOf[F] {
	p := &ProjectedOf[F]{Model: m}
	p.Resize(n)
	return p
}

// Resize makes room for n splats, reusing memory where it can.
func (p *ProjectedOf[F]) Resize(n int) {
	p.N = n
	p.Valid = resize(p.Valid, n)
	p.Depth = resize(p.Depth, n)
	p.Opacity = resize(p.Opacity, n)
	p.Color = resize(p.Color, n*3)
	p.Mean2D = resize(p.Mean2D, n*2)
	p.Conic = resize(p.Conic, n*3)
	if p.Model == Ray {
		p.RayU = resize(p.RayU, n*3)
		p.RayA = resize(p.RayA, n*9)
		p.RayHalf = resize(p.RayHalf, n*3)
	}
	p.BoundCenter = resize(p.BoundCenter, n*2)
	p.BoundQ = resize(p.BoundQ, n*3)
	p.Rect = resize(p.Rect, n*4)
	p.Radius = resize(p.Radius, n)
}

func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// TileLists is the sorted binning result for one view.
type TileLists struct {
	TileSize       int
	TilesX, TilesY int
	// Keys are tile_id<<32 | depth bits, sorted ascending; ties by splat id.
	Keys []uint64
	IDs  []int32 // splat id of each entry, in key order
	// Offsets has TilesX*TilesY+1 entries: tile t owns IDs[Offsets[t]:Offsets[t+1]].
	Offsets []int32
}

// PrepGradsOf holds the loss gradient with respect to each splat's projected
// (prepare) data, as the rasterizer backward produces it.
type PrepGradsOf[F splat.Float] struct {
	Color   []F // [N,3]
	Opacity []F // [N]
	Mean2D  []F // [N,2] (EWA)
	// Mean2DAbs is [N,2] (EWA, for Settings.AbsGrad; else nil): Σ over pixels of the absolute
	// value of each pixel's contribution to Mean2D, per component (AbsGS's statistic; the
	// rasterizer's backward fills it when it is not nil).
	Mean2DAbs []F
	Conic     []F // [N,3] (EWA), with respect to (a, b, c) as stored
	RayU      []F // [N,3] (Ray)
	RayA      []F // [N,9] (Ray)
}

// PrepGrads is the float32 instantiation.
type PrepGrads = PrepGradsOf[float32]

// NewPrepGrads allocates zeroed gradients for n splats of model m.
func NewPrepGrads[F splat.Float](m Model, n int) *PrepGradsOf[F] {
	g := &PrepGradsOf[F]{Color: make([]F, n*3), Opacity: make([]F, n)}
	if m == Ray {
		g.RayU = make([]F, n*3)
		g.RayA = make([]F, n*9)
	} else {
		g.Mean2D = make([]F, n*2)
		g.Conic = make([]F, n*3)
	}
	return g
}
