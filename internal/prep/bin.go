package prep

import (
	"fmt"
	"math"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Binner turns projected splats into sorted per-tile lists (design.md §5
// steps 2–3). It owns its scratch buffers so that a training loop does not
// allocate per step.
type Binner struct {
	tileSize, tilesX, tilesY int

	chunks  []binChunk
	order   []int32  // valid splats by depth (ties by id)
	depths  []uint32 // their depth bits
	tmpOrd  []int32
	tmpDep  []uint32
	keys    []uint64
	ids     []int32
	tmpKeys []uint64
	tmpIDs  []int32
	hist    []int
}

// TileHit reports whether the footprint (p−c)ᵀQ(p−c) ≤ 1 reaches a pixel
// centre of the tile whose pixel columns are [px0, px1) and rows [py0, py1).
// It minimises the quadratic over the box of pixel centres: on a vertical edge
// x = xe the quadratic in y is minimised at y* = cy − b·(xe − cx)/c, clamped
// to the edge; likewise for horizontal edges. Q = 0 marks a conservative
// footprint that covers its whole box.
//
// It runs in F's own precision (float32 for the engines' float32 instance and
// the kernel twin, bin.cu's tile_hit: Metal has no float64) and is
// conservative: each candidate's value q̂ is lowered by a bound on its error
// before the comparison with 1, so that a tile the exact minimum reaches is
// never missed; a tile is added only where the minimum lies within that bound
// above 1. The bound, with u the unit roundoff of F and S = a·dx² + 2|b·dx·dy|
// + c·dy² at the candidate:
//   - rounding of dx, dy and of the sum of products: |q̂ − q(P)| ≤ 6u·S to first
//     order, taken as 16u·S;
//   - the candidate P lies on the box (it is clamped there) but off the edge's
//     minimiser by δ ≤ 4u·(|cy| + |b·dx/c|) (c, cx and a for horizontal edges),
//     and the edge's quadratic rises by at most c·δ² there; δ is taken as 8u·(…).
//
// Only a, c > 0 is needed: each edge's quadratic is then convex, and the
// minimum over the box of a positive definite (or indefinite) Q is on its
// boundary when c lies outside; a Q with a or c ≤ 0 or b not finite covers the
// whole box, and so does a candidate whose bound overflowed: conservative
// again. A hyperbolic Q (Hyperbolic) is another footprint, (p−c)ᵀQ(p−c) ≥ 1,
// tested by hyperbolaHit.
//
// Measured against the float64 test of the same float32 inputs
// (TestTileHitFloat32IsConservative): no tile missing; extra tiles 0.0001% of
// those around typical ellipses, 0.03% for axis ratios to 10⁻³, 0.5% to 10⁻⁵.
// TileAhead says whether a pixel centre of the tile with pixel columns [px0, px1) and rows
// [py0, py1) lies where a·px + b·py + c ≤ 0: the ray model's RayHalf, outside which the
// rasterizer skips the splat. The form is linear, so the four corner centres decide; a NaN
// keeps the tile.
func TileAhead[F splat.Float](a, b, c F, px0, py0, px1, py1 int) bool {
	x0, x1 := F(px0)+0.5, F(px1)-0.5
	y0, y1 := F(py0)+0.5, F(py1)-0.5
	for _, x := range [2]F{x0, x1} {
		for _, y := range [2]F{y0, y1} {
			if !((F(a*x)+F(b*y))+c > 0) {
				return true
			}
		}
	}
	return false
}

func TileHit[F splat.Float](cx, cy, qa, qb, qc F, px0, py0, px1, py1 int) bool {
	if qa == 0 && qb == 0 && qc == 0 {
		return true
	}
	x0, x1 := F(px0)+0.5, F(px1)-0.5
	y0, y1 := F(py0)+0.5, F(py1)-0.5
	a, b, c := qa, qb, qc
	gamma, dfac := roundingBounds[F]()
	// A hyperbola's centre lies between its branches, outside the footprint: the box holding
	// it decides like any other.
	if Hyperbolic(a, b, c) {
		return hyperbolaHit(cx, cy, a, b, c, x0, y0, x1, y1, gamma, dfac)
	}
	if cx >= x0 && cx <= x1 && cy >= y0 && cy <= y1 {
		return true
	}
	if !(a > 0) || !(c > 0) || !finiteF(b) {
		return true
	}
	lowest := F(math.Inf(1))
	for e := 0; e < 4; e++ {
		var dx, dy, slack F
		if e < 2 {
			xe := x0
			if e == 1 {
				xe = x1
			}
			dx = xe - cx
			t := F(b*dx) / c
			y := min(max(cy-t, y0), y1)
			dy = y - cy
			d := dfac * (absF(cy) + absF(t))
			slack = F(c*d) * d
		} else {
			ye := y0
			if e == 3 {
				ye = y1
			}
			dy = ye - cy
			t := F(b*dy) / a
			x := min(max(cx-t, x0), x1)
			dx = x - cx
			d := dfac * (absF(cx) + absF(t))
			slack = F(a*d) * d
		}
		// Every product rounded on its own (F(…)): no multiply-add fused into the sums, as
		// on the GPU.
		cross := F(F(2*b)*dx) * dy
		q := F(F(a*dx)*dx) + cross + F(F(c*dy)*dy)
		s := F(F(a*dx)*dx) + absF(cross) + F(F(c*dy)*dy)
		lo := q - (F(gamma*s) + slack)
		if isNaN(lo) {
			return true // overflow: no bound can be trusted
		}
		lowest = min(lowest, lo)
	}
	return lowest <= 1
}

// roundingBounds are TileHit's γ = 16u and δ factor 8u for F: 2⁻²⁰ and 2⁻²¹ for float32,
// 2⁻⁴⁹ and 2⁻⁵⁰ for float64.
func roundingBounds[F splat.Float]() (gamma, dfac F) {
	if F(0x1p-30) != F(0x1p-30)+F(0x1p-60) { // F keeps more than 30 bits: float64
		return F(0x1p-49), F(0x1p-50)
	}
	return F(0x1p-20), F(0x1p-21)
}

// HyperbolaRect is the tile box of a hyperbolic footprint (p−c)ᵀQ(p−c) ≥ 1 on an image of
// w×h pixels in tiles of ts (tx×ty of them): the smallest box of tiles outside which no
// tile holds a pixel centre of the footprint, or false when no tile does. The footprint is
// unbounded, but its box within the image is found by bisection on strips of tiles: "does
// the footprint reach the columns [0, k]?" is hyperbolaHit over that strip, which is
// conservative, so the first column where it answers yes has none of the footprint to its
// left (and likewise from the right, then for the rows within the columns found). About
// 2·log₂(tx) + 2·log₂(ty) + 1 tests where testing every tile of the image took tx·ty.
func HyperbolaRect[F splat.Float](cx, cy, a, b, c F, ts, tx, ty, w, h int) (rect [4]int32, ok bool) {
	gamma, dfac := roundingBounds[F]()
	// hit tests the tiles of columns [c0, c1) and rows [r0, r1).
	hit := func(c0, c1, r0, r1 int) bool {
		x0, x1 := F(c0*ts)+0.5, F(min(c1*ts, w))-0.5
		y0, y1 := F(r0*ts)+0.5, F(min(r1*ts, h))-0.5
		return hyperbolaHit(cx, cy, a, b, c, x0, y0, x1, y1, gamma, dfac)
	}
	if tx <= 0 || ty <= 0 || !hit(0, tx, 0, ty) {
		return rect, false
	}
	// first returns the smallest k in [lo, hi] with reach(k) (reach(hi) holds), last the
	// largest with reach(lo) holding; reach is monotone in exact arithmetic, and wherever the
	// bisection stops, the test that moved it past a strip said no to that strip.
	first := func(lo, hi int, reach func(int) bool) int {
		for lo < hi {
			if mid := (lo + hi) / 2; reach(mid) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return lo
	}
	last := func(lo, hi int, reach func(int) bool) int {
		for lo < hi {
			if mid := (lo + hi + 1) / 2; reach(mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}
	x0 := first(0, tx-1, func(k int) bool { return hit(0, k+1, 0, ty) })
	x1 := last(x0, tx-1, func(k int) bool { return hit(k, tx, 0, ty) }) + 1
	y0 := first(0, ty-1, func(k int) bool { return hit(x0, x1, 0, k+1) })
	y1 := last(y0, ty-1, func(k int) bool { return hit(x0, x1, k, ty) }) + 1
	return [4]int32{int32(x0), int32(y0), int32(x1), int32(y1)}, true
}

// Hyperbolic says that Q = [[a, b], [b, c]] is indefinite by a clear margin, b² > a·c·(1 +
// 2⁻⁹): the ray model's silhouette of a splat that reaches behind the camera plane, whose
// footprint is (p−c)ᵀQ(p−c) ≥ 1, two branches of a hyperbola (prep's rayFootprint writes one
// only with that margin). An ellipse's Q has b² < a·c, which no rounding takes past the margin.
func Hyperbolic[F splat.Float](a, b, c F) bool {
	return F(b*b) > F(F(a*c)*F(1+0x1p-9))
}

// hyperbolaHit is TileHit for a hyperbolic Q: does (p−c)ᵀQ(p−c) ≥ 1 hold at a pixel centre of
// the box [x0, x1]×[y0, y1]? An indefinite form has no maximum inside the box: it is on an
// edge, at the clamped maximiser where the edge's quadratic is concave (c < 0 for vertical
// edges, a < 0 for horizontal ones) and at an end where it is convex or linear. Each
// candidate's value is raised by the bound on its error (TileHit's γ and δ), so that a tile the
// exact maximum reaches is never missed; any value not finite keeps the tile.
func hyperbolaHit[F splat.Float](cx, cy, a, b, c, x0, y0, x1, y1, gamma, dfac F) bool {
	if !finiteF(a) || !finiteF(b) || !finiteF(c) {
		return true
	}
	upper := func(dx, dy, slack F) F {
		cross := F(F(2*b)*dx) * dy
		q := F(F(a*dx)*dx) + cross + F(F(c*dy)*dy)
		s := absF(F(F(a*dx)*dx)) + absF(cross) + absF(F(F(c*dy)*dy))
		return q + (F(gamma*s) + slack)
	}
	highest := F(math.Inf(-1))
	for e := 0; e < 4; e++ {
		var hi F
		if e < 2 {
			xe := x0
			if e == 1 {
				xe = x1
			}
			dx := xe - cx
			if c < 0 {
				t := F(b*dx) / c
				y := min(max(cy-t, y0), y1)
				d := dfac * (absF(cy) + absF(t))
				hi = upper(dx, y-cy, F(F(-c*d)*d))
			} else {
				hi = max(upper(dx, y0-cy, 0), upper(dx, y1-cy, 0))
			}
		} else {
			ye := y0
			if e == 3 {
				ye = y1
			}
			dy := ye - cy
			if a < 0 {
				t := F(b*dy) / a
				x := min(max(cx-t, x0), x1)
				d := dfac * (absF(cx) + absF(t))
				hi = upper(x-cx, dy, F(F(-a*d)*d))
			} else {
				hi = max(upper(x0-cx, dy, 0), upper(x1-cx, dy, 0))
			}
		}
		if isNaN(hi) {
			return true
		}
		highest = max(highest, hi)
	}
	return highest >= 1
}

func absF[F splat.Float](x F) F {
	if x < 0 {
		return -x
	}
	return x
}

func finiteF[F splat.Float](x F) bool { return x-x == 0 }

// DepthBits maps a positive depth to the low 32 bits of a sort key; for
// positive IEEE floats the bit pattern orders like the value.
func DepthBits(z float32) uint32 { return math.Float32bits(z) }

// Bin emits, for every valid splat and every tile its footprint reaches, a
// key tile<<32 | depth bits, sorts the keys (stably, so ties keep splat-id
// order) and builds per-tile offsets from the sorted keys. With conic false
// every tile of the splat's box is emitted (the gpu-radius-aabb mode).
// The result is written into out, whose buffers are reused.
func Bin[F splat.Float](b *Binner, p *ProjectedOf[F], w, h, tileSize int, conic bool, workers int, out *TileLists) error {
	if err := Emit(b, p, w, h, tileSize, conic, workers); err != nil {
		return err
	}
	b.SortInto(out)
	return nil
}

// binChunk is one worker's share of Emit: the entries of a contiguous run of
// splats, in splat order.
type binChunk struct {
	keys []uint64
	ids  []int32
}

// Emit is the first half of Bin: it writes the unsorted keys. Splats are
// visited nearest first (ties in splat-id order) and each splat's tiles in
// row-major order, so that SortInto needs only one stable pass by tile: the
// result is the order of a full sort by (tile, depth), equal keys by splat id.
// Each worker fills its own chunk for a contiguous run of the depth order in
// one pass over the tiles (the exact tile test is the costly part, so it
// runs once per tile), and the chunks are then joined in order.
func Emit[F splat.Float](b *Binner, p *ProjectedOf[F], w, h, tileSize int, conic bool, workers int) error {
	tx, ty := (w+tileSize-1)/tileSize, (h+tileSize-1)/tileSize
	nt := tx * ty
	if nt >= 1<<31 {
		return fmt.Errorf("prep: %d×%d tiles is too many", tx, ty)
	}
	b.tileSize, b.tilesX, b.tilesY = tileSize, tx, ty
	depthOrder(b, p)
	n := len(b.order)
	workers = max(workers, 1)
	if n < 256 {
		workers = 1
	}
	if len(b.chunks) < workers {
		b.chunks = append(b.chunks, make([]binChunk, workers-len(b.chunks))...)
	}
	chunks := b.chunks[:workers]
	per := (n + workers - 1) / workers
	var wg sync.WaitGroup
	for c := range chunks {
		wg.Add(1)
		go func(ch *binChunk, lo, hi int) {
			defer wg.Done()
			ch.keys, ch.ids = ch.keys[:0], ch.ids[:0]
			for _, i := range b.order[lo:hi] {
				ch.keys, ch.ids = appendTiles(p, int(i), w, h, tileSize, tx, conic, ch.keys, ch.ids)
			}
		}(&chunks[c], min(c*per, n), min((c+1)*per, n))
	}
	wg.Wait()
	total := 0
	for _, ch := range chunks {
		total += len(ch.keys)
	}
	if total >= math.MaxInt32 {
		return fmt.Errorf("prep: tile lists would hold more than %d entries (%d splats on %d×%d px)", math.MaxInt32, p.N, w, h)
	}
	b.keys = resize(b.keys, total)
	b.ids = resize(b.ids, total)
	at := 0
	for c := range chunks {
		ch := &chunks[c]
		wg.Add(1)
		go func(at int) {
			defer wg.Done()
			copy(b.keys[at:], ch.keys)
			copy(b.ids[at:], ch.ids)
		}(at)
		at += len(ch.keys)
	}
	wg.Wait()
	return nil
}

// depthOrder fills b.order with the valid splats sorted by depth, stably (so
// equal depths keep splat-id order), by an LSD radix sort of the depth bits
// in three 11-bit digits (positive float32 bits order like the values; the
// sign bit is clear).
func depthOrder[F splat.Float](b *Binner, p *ProjectedOf[F]) {
	b.order, b.depths = b.order[:0], b.depths[:0]
	for i := 0; i < p.N; i++ {
		if p.Valid[i] {
			b.order = append(b.order, int32(i))
			b.depths = append(b.depths, DepthBits(float32(p.Depth[i])))
		}
	}
	m := len(b.order)
	b.tmpOrd = resize(b.tmpOrd, m)
	b.tmpDep = resize(b.tmpDep, m)
	src, dst := b.depths, b.tmpDep
	srcO, dstO := b.order, b.tmpOrd
	const digit = 11
	var hist [1 << digit]int
	for shift := 0; shift < 32; shift += digit {
		hist = [1 << digit]int{}
		for _, k := range src {
			hist[(k>>shift)&(1<<digit-1)]++
		}
		sum := 0
		for d := range hist {
			hist[d], sum = sum, sum+hist[d]
		}
		for j, k := range src {
			d := (k >> shift) & (1<<digit - 1)
			dst[hist[d]] = k
			dstO[hist[d]] = srcO[j]
			hist[d]++
		}
		src, dst = dst, src
		srcO, dstO = dstO, srcO
	}
	b.depths, b.tmpDep = src, dst
	b.order, b.tmpOrd = srcO, dstO
}

// SortInto is the second half of Bin: it sorts the emitted keys and writes
// the lists and tile offsets into out.
func (b *Binner) SortInto(out *TileLists) {
	nt := b.tilesX * b.tilesY
	b.sort(nt)
	out.TileSize, out.TilesX, out.TilesY = b.tileSize, b.tilesX, b.tilesY
	out.Keys = append(out.Keys[:0], b.keys...)
	out.IDs = append(out.IDs[:0], b.ids...)
	out.Offsets = resize(out.Offsets, nt+1)
	Ranges(out.Keys, nt, out.Offsets)
}

// appendTiles appends a key tile<<32 | depth bits and the id i for each tile
// splat i reaches, in row-major tile order.
func appendTiles[F splat.Float](p *ProjectedOf[F], i, w, h, ts, tilesX int, conic bool, keys []uint64, ids []int32) ([]uint64, []int32) {
	if !p.Valid[i] {
		return keys, ids
	}
	r := p.Rect[i*4 : i*4+4]
	cx, cy := p.BoundCenter[i*2], p.BoundCenter[i*2+1]
	qa, qb, qc := p.BoundQ[i*3], p.BoundQ[i*3+1], p.BoundQ[i*3+2]
	ray := conic && p.Model == Ray
	var ha, hb, hc F
	if ray {
		ha, hb, hc = p.RayHalf[i*3], p.RayHalf[i*3+1], p.RayHalf[i*3+2]
	}
	depth := uint64(DepthBits(float32(p.Depth[i])))
	for ty := int(r[1]); ty < int(r[3]); ty++ {
		py0, py1 := ty*ts, min((ty+1)*ts, h)
		for tx := int(r[0]); tx < int(r[2]); tx++ {
			px1 := min((tx+1)*ts, w)
			if conic && !TileHit(cx, cy, qa, qb, qc, tx*ts, py0, px1, py1) {
				continue
			}
			if ray && !TileAhead(ha, hb, hc, tx*ts, py0, px1, py1) {
				continue
			}
			keys = append(keys, uint64(ty*tilesX+tx)<<32|depth)
			ids = append(ids, int32(i))
		}
	}
	return keys, ids
}

// sort orders keys (and ids with them) by tile with one stable counting
// pass: Emit wrote them in (depth, splat id) order, so the result is sorted
// by the whole key, equal keys in splat-id order.
func (b *Binner) sort(numTiles int) {
	m := len(b.keys)
	b.tmpKeys = resize(b.tmpKeys, m)
	b.tmpIDs = resize(b.tmpIDs, m)
	b.hist = resize(b.hist, numTiles+1)
	hist := b.hist
	clear(hist)
	for _, k := range b.keys {
		hist[k>>32]++
	}
	sum := 0
	for t := range hist {
		hist[t], sum = sum, sum+hist[t]
	}
	dst, dstID := b.tmpKeys, b.tmpIDs
	for j, k := range b.keys {
		t := k >> 32
		dst[hist[t]] = k
		dstID[hist[t]] = b.ids[j]
		hist[t]++
	}
	b.keys, b.tmpKeys = dst, b.keys
	b.ids, b.tmpIDs = dstID, b.ids
}

// Ranges fills offsets[t] with the first index of tile t in the sorted keys,
// and offsets[numTiles] with len(keys) (seed defect 1 built these from the
// unsorted keys).
func Ranges(keys []uint64, numTiles int, offsets []int32) {
	j := 0
	for t := 0; t <= numTiles; t++ {
		for j < len(keys) && int(keys[j]>>32) < t {
			j++
		}
		offsets[t] = int32(j)
	}
}
