// edit.cu — design.md §5's densification edits on the device: the gather that clone, split
// and prune resolve to (internal/engine's EditPlan), so that the packed parameters and both
// Adam moments never leave the device. The host plans the edit (indices only) and computes the
// few split children's means and scales; this file moves the rows.
//
// gather_rows: one thread per element t < 59·newN of the new packed layout (common.h), new
//   splat j = t mod newN of field element k = t / newN (so neighbouring threads write
//   neighbouring splats of one field). dst[j] = src[srcIdx[j]] field by field, re-laid out
//   from oldN to newN splats; with zeroFresh set, splats j ≥ fresh get 0 (new splats start
//   with zero moments).
//   src [59·oldN] f32, dst [59·newN] f32 (distinct buffers), srcIdx [newN] i32 < oldN.
#include "prelude.h"
#include "common.h"
#include "entries/edit.h"

DEVICE void gather_rows_body(Thr th, gather_rows_args a)
{
    u32 oldN = a.oldN, newN = a.newN;
    u32 t = th.bid * th.bdim + th.tid;
    if (t >= PARAM_FLOATS * newN) return;
    u32 k = t / newN, j = t - k * newN;
    // Field of element k of a splat's 59: its offset (in splats) and width in the packed layout.
    u32 off, width, comp;
    if (k < 3u) {
        off = 0u, width = 3u, comp = k;
    } else if (k < 6u) {
        off = 3u, width = 3u, comp = k - 3u;
    } else if (k < 10u) {
        off = 6u, width = 4u, comp = k - 6u;
    } else if (k < 11u) {
        off = 10u, width = 1u, comp = 0u;
    } else {
        off = 11u, width = 48u, comp = k - 11u;
    }
    u32 d = off * newN + j * width + comp;
    if (a.zeroFresh && j >= a.fresh) {
        a.dst[d] = 0.0f;
        return;
    }
    u32 s = (u32)a.srcIdx[j];
    a.dst[d] = a.src[off * oldN + s * width + comp];
}
