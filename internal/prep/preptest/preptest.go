// Package preptest holds what tests of several engines share about prep's binning: the
// entries a projection bins to with and without the ray model's half-plane cut, so that a test
// can show its scene exercises the cut. Tests only; nothing outside _test files imports it.
package preptest

import (
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// HalfPlaneEntries bins the ray-model projection p of a w×h view (tiles of ts, conic tests on)
// as it is, and again with every splat's RayHalf set to keep all tiles, and returns both
// entry counts. p is left as it was.
func HalfPlaneEntries(t testing.TB, p *prep.Projected, w, h, ts int) (with, without int) {
	t.Helper()
	count := func(q *prep.Projected) int {
		var b prep.Binner
		var l prep.TileLists
		if err := prep.Emit(&b, q, w, h, ts, true, 2); err != nil {
			t.Fatal(err)
		}
		b.SortInto(&l)
		return len(l.IDs)
	}
	with = count(p)
	keep := slices.Clone(p.RayHalf)
	defer copy(p.RayHalf, keep)
	for i := 0; i < p.N; i++ {
		p.RayHalf[i*3], p.RayHalf[i*3+1], p.RayHalf[i*3+2] = 0, 0, -1
	}
	return with, count(p)
}
