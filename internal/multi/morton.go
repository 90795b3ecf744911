package multi

import (
	"cmp"
	"math"
	"slices"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// MortonOrder is the order of g's splats along the Z-order curve of their means, quantised to
// 1024 steps an axis over the means' bounding box (ties in their first order): the order a
// sharded scene starts in, so that each rank's contiguous range is a compact region and a view
// sees the splats of few owners (docs/sharding.md, "Which splats a rank owns").
func MortonOrder(g *splat.Gaussians) []int32 {
	n := g.Len()
	lo := [3]float32{float32(math.Inf(1)), float32(math.Inf(1)), float32(math.Inf(1))}
	hi := [3]float32{float32(math.Inf(-1)), float32(math.Inf(-1)), float32(math.Inf(-1))}
	for i := range n {
		for a := range 3 {
			lo[a] = min(lo[a], g.Means[3*i+a])
			hi[a] = max(hi[a], g.Means[3*i+a])
		}
	}
	codes := make([]uint32, n)
	order := make([]int32, n)
	for i := range n {
		var q [3]uint32
		for a := range 3 {
			if span := float64(hi[a]) - float64(lo[a]); span > 0 {
				q[a] = uint32(min(1023, max(0, (float64(g.Means[3*i+a])-float64(lo[a]))/span*1024)))
			}
		}
		codes[i] = spread10(q[0]) | spread10(q[1])<<1 | spread10(q[2])<<2
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(codes[a], codes[b]) })
	return order
}

// spread10 puts bit k of the 10-bit x at bit 3k, for interleaving three axes.
func spread10(x uint32) uint32 {
	x &= 0x3ff
	x = (x | x<<16) & 0x030000ff
	x = (x | x<<8) & 0x0300f00f
	x = (x | x<<4) & 0x030c30c3
	x = (x | x<<2) & 0x09249249
	return x
}
