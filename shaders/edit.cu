// edit.cu — design.md §5's densification edits on the device: the gather that clone, split
// and prune resolve to (internal/engine's EditPlan), so that the packed parameters and both
// Adam moments never leave the device. The host plans the edit (indices only) and computes the
// few split children's means and scales; this file moves the rows.
//
// gather_rows: one thread per element t < 59·newN of the new packed layout (common.h), in
//   layout order (field_at: neighbouring threads write neighbouring words, and read whole rows
//   of a source splat's field; taking splat j = t mod newN of field element t / newN instead
//   spread a warp's words a row apart, up to 48 floats, and on bonsai the shapes read back
//   after a growth waited 11–16 ms at 0.6–0.8M splats for the work the edit had queued, three
//   such gathers among it). dst[j] = src[srcIdx[j]] field
//   by field, re-laid out from oldN to newN splats; with zeroFresh set, splats j ≥ fresh get
//   0 (new splats start with zero moments).
//   src [59·oldN] f32, dst [59·newN] f32 (distinct buffers), srcIdx [newN] i32 < oldN.
//
// The MCMC densifier's moves (engine.Relocation) are a gather_rows of the parameters and the
// moments, then:
// scatter_shapes: one thread per listed row k < count: the opacity logit and the three
//   log-scales of splat rows[k] become logits[k] and logScales[3k..3k+2] (the corrected
//   values the host computed). params [59·n] f32, rows [count] i32 < n, logits [count] f32,
//   logScales [3·count] f32.
// zero_rows: one thread per element t < 59·count, row j = t mod count of field element
//   k = t / count: zeroes every value of splat rows[j] (the moments of a rewritten splat).
//   buf [59·n] f32, rows [count] i32 < n.
//
// Gaussian sharding moves whole rows between ranks (fused.Engine's ExportRows, InsertRows,
// WriteRows): a row block is gather_rows's layout of the rows sent, and the receiver puts it
// back with
// put_rows: one thread per element t < 59·count of the block's packed layout of count rows,
//   in layout order as gather_rows (field_at: neighbouring threads read neighbouring words of
//   the block and write a destination splat's field whole): the element of block row j goes
//   to splat rows[j] of dst, the packed layout of n splats. Rows must not repeat: two block
//   rows would race for one splat's words. src [59·count] f32, dst [59·n] f32 (distinct
//   buffers), rows [count] i32 < n.
#include "prelude.h"
#include "common.h"
#include "entries/edit.h"

// field_of places element k of a splat's 59 in the packed layout: its field's offset (in
// splats), the field's width and the component.
DEVICE void field_of(u32 k, u32& off, u32& width, u32& comp)
{
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
}

// field_at places word d of the packed layout of n splats: its field's offset (in splats) and
// width, the splat j and the component.
DEVICE void field_at(u32 d, u32 n, u32& off, u32& width, u32& j, u32& comp)
{
    if (d < 3u * n) {
        off = 0u, width = 3u;
    } else if (d < 6u * n) {
        off = 3u, width = 3u;
    } else if (d < 10u * n) {
        off = 6u, width = 4u;
    } else if (d < 11u * n) {
        off = 10u, width = 1u;
    } else {
        off = 11u, width = 48u;
    }
    u32 r = d - off * n;
    j = r / width;
    comp = r - j * width;
}

DEVICE void gather_rows_body(Thr th, gather_rows_args a)
{
    u32 oldN = a.oldN, newN = a.newN;
    u32 d = th.bid * th.bdim + th.tid;
    if (d >= PARAM_FLOATS * newN) return;
    u32 off, width, j, comp;
    field_at(d, newN, off, width, j, comp);
    if (a.zeroFresh && j >= a.fresh) {
        a.dst[d] = 0.0f;
        return;
    }
    u32 s = (u32)a.srcIdx[j];
    a.dst[d] = a.src[off * oldN + s * width + comp];
}

DEVICE void scatter_shapes_body(Thr th, scatter_shapes_args a)
{
    u32 k = th.bid * th.bdim + th.tid;
    if (k >= a.count) return;
    u32 n = a.n, i = (u32)a.rows[k];
    a.params[OFF_OPAC(n) + i] = a.logits[k];
    for (u32 c = 0u; c < 3u; c++) a.params[OFF_SCALES(n) + 3u * i + c] = a.logScales[3u * k + c];
}

DEVICE void zero_rows_body(Thr th, zero_rows_args a)
{
    u32 count = a.count;
    u32 t = th.bid * th.bdim + th.tid;
    if (t >= PARAM_FLOATS * count) return;
    u32 k = t / count, j = t - k * count;
    u32 off, width, comp;
    field_of(k, off, width, comp);
    a.buf[off * a.n + (u32)a.rows[j] * width + comp] = 0.0f;
}

DEVICE void put_rows_body(Thr th, put_rows_args a)
{
    u32 count = a.count;
    u32 t = th.bid * th.bdim + th.tid;
    if (t >= PARAM_FLOATS * count) return;
    u32 off, width, j, comp;
    field_at(t, count, off, width, j, comp);
    a.dst[off * a.n + (u32)a.rows[j] * width + comp] = a.src[t];
}
