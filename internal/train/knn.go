package train

import (
	"math"
	"sort"
)

// kdTree indexes 3D points for nearest-neighbour queries.
type kdTree struct {
	pts   []float32 // [M,3]
	idx   []int32   // permutation; node ranges are implicit (median splits)
	axisB []uint8   // split axis per implicit node, by the median's position
}

func newKDTree(pts []float32) *kdTree {
	m := len(pts) / 3
	t := &kdTree{pts: pts, idx: make([]int32, m), axisB: make([]uint8, m)}
	for i := range t.idx {
		t.idx[i] = int32(i)
	}
	t.build(0, m, 0)
	return t
}

// build orders idx[lo:hi] so that the median (lo+hi)/2 splits on the axis of
// largest spread, recursively.
func (t *kdTree) build(lo, hi, depth int) {
	if hi-lo <= 1 {
		return
	}
	var mn, mx [3]float32
	for a := 0; a < 3; a++ {
		mn[a], mx[a] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	for _, i := range t.idx[lo:hi] {
		for a := 0; a < 3; a++ {
			v := t.pts[int(i)*3+a]
			mn[a], mx[a] = min(mn[a], v), max(mx[a], v)
		}
	}
	axis := 0
	for a := 1; a < 3; a++ {
		if mx[a]-mn[a] > mx[axis]-mn[axis] {
			axis = a
		}
	}
	mid := (lo + hi) / 2
	sub := t.idx[lo:hi]
	sort.Slice(sub, func(a, b int) bool {
		va, vb := t.pts[int(sub[a])*3+axis], t.pts[int(sub[b])*3+axis]
		if va != vb {
			return va < vb
		}
		return sub[a] < sub[b]
	})
	t.axisB[mid] = uint8(axis)
	t.build(lo, mid, depth+1)
	t.build(mid+1, hi, depth+1)
}

// knnMeanSq returns the mean squared distance from point q (an index into
// the tree's points) to its k nearest other points.
func (t *kdTree) knnMeanSq(q int, k int) float64 {
	best := make([]float64, 0, k) // ascending squared distances
	qx, qy, qz := float64(t.pts[q*3]), float64(t.pts[q*3+1]), float64(t.pts[q*3+2])
	var visit func(lo, hi int)
	visit = func(lo, hi int) {
		if lo >= hi {
			return
		}
		mid := (lo + hi) / 2
		i := int(t.idx[mid])
		if i != q {
			dx := float64(t.pts[i*3]) - qx
			dy := float64(t.pts[i*3+1]) - qy
			dz := float64(t.pts[i*3+2]) - qz
			d := dx*dx + dy*dy + dz*dz
			if len(best) < k || d < best[len(best)-1] {
				if len(best) < k {
					best = append(best, d)
				} else {
					best[len(best)-1] = d
				}
				for j := len(best) - 1; j > 0 && best[j] < best[j-1]; j-- {
					best[j], best[j-1] = best[j-1], best[j]
				}
			}
		}
		if hi-lo == 1 {
			return
		}
		axis := int(t.axisB[mid])
		diff := [3]float64{qx, qy, qz}[axis] - float64(t.pts[i*3+axis])
		near, far := [2]int{lo, mid}, [2]int{mid + 1, hi}
		if diff > 0 {
			near, far = far, near
		}
		visit(near[0], near[1])
		if len(best) < k || diff*diff < best[len(best)-1] {
			visit(far[0], far[1])
		}
	}
	visit(0, len(t.idx))
	if len(best) == 0 {
		return 0
	}
	s := 0.0
	for _, d := range best {
		s += d
	}
	return s / float64(len(best))
}
