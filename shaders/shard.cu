// shard.cu — Gaussian sharding's records (docs/sharding.md): an owner packs the splats of its
// share that are visible in a view, and the view's renderer unpacks the records it received
// into its projected arrays, as if its own project had written them, so that bin, the depth
// sort, ranges and raster_fwd run unchanged on them. A record is a splat's global id and every
// projected value those stages read, copied bit for bit (abi.h's REC_*: REC_EWA_WORDS words
// for EWA, REC_RAY_WORDS for the ray model): depth, opacity, colour, the footprint
// (boundCenter, boundQ, rect, radius), then mean2d and conic (EWA) or u, A and the half-plane
// (ray). Copying the footprint, rather than recomputing it on the renderer from fewer words,
// keeps the renderer's lists those of the owner's own engine at no risk to project's rounding.
//
// The host runs, on the owner: project, pack_flags, a scan of the flags, pack_visible; on the
// renderer: unpack, then bin.cu and the rest of the forward over the records' count.
//
// pack_flags: one thread per splat i ≤ n: flags[i] = valid[i] for i < n and flags[n] = 0,
//   for the exclusive scan that places the records. valid [n] u32, flags [n+1] u32.
// pack_visible: one thread per splat i < n; flags scanned: a valid splat i writes its record
//   at place flags[i] among the visible ones, so the records are in id order, with global id
//   base + i. ray (0 or 1) picks the model's layout; the other model's buffers are not read.
//   depth [n], opacity [n], color [n,3], mean2d [n,2], conic [n,3], rayU [n,3], rayA [n,9],
//   rayHalf [n,3], boundCenter [n,2], boundQ [n,3], radius [n] f32, rect [n,4] i32;
//   recs [flags[n], words] u32.
// unpack: one thread per record k < count: record k becomes local splat k, valid. Owners
//   send their records in id order and hold contiguous ranges of global ids, and the records
//   arrive in rank order, so local ids follow global ids: the depth sort's ties, broken by
//   local id, fall as they do in one engine holding the whole scene. Thread 0 also sets
//   readout[RO_VISIBLE] = count, as project's count of the valid splats. Buffers as
//   pack_visible's, [count] splats; recs [count, words] u32.
//
// Gradients back: the renderer runs the loss and raster_bwd over the records, whose
// prepared-data gradients (pg's fields, by local id: record k is splat k) pack_grads packs in
// record order, so that each owner's share goes back to it in the order it sent its records
// and no id travels back. The owner scatters its share to the splats the records came from
// (scatter_grads) and runs project_bwd and adam_step as after its own raster_bwd. A gradient
// record is abi.h's GREC_*: colour, opacity, then mean2d, conic and, with absGrad, mean2d's
// absolute sums (EWA: GREC_EWA_WORDS or GREC_EWA_ABS_WORDS floats) or u and A (ray:
// GREC_RAY_WORDS), every value raster_bwd writes.
//
// pack_grads: one thread per record k < count: grecs[k] is splat k's gradients. ray (0 or 1)
//   picks the model; absGrad (EWA) adds the absolute sums; the fields a record leaves out are
//   not read. gColor [count,3], gOpacity [count], gMean2d [count,2], gConic [count,3],
//   gRayU [count,3], gRayA [count,9], gMean2dAbs [count,2] f32 (raster_bwd);
//   grecs [count, words] f32.
// scatter_grads: one thread per splat i < n, on the owner after its pack_visible (valid and
//   the scanned flags as it left them): a valid splat i takes gradient record flags[i], the
//   place its record had, into its pg fields, and becomes vis[flags[i]], so that vis lists the
//   visible splats in id order as bin_compact's does for project_bwd. Thread 0 also sets
//   readout[RO_VISIBLE] = count. grecs [count, words] f32; valid [n] u32, flags [n+1] u32;
//   the pg fields as pack_grads's, [n] splats; vis [count] u32.
#include "prelude.h"
#include "readout.h"
#include "entries/shard.h"

DEVICE u32 rec_words(u32 ray) { return ray != 0u ? REC_RAY_WORDS : REC_EWA_WORDS; }

DEVICE void pack_flags_body(Thr th, pack_flags_args a)
{
    u32 i = th.bid * th.bdim + th.tid;
    if (i > a.n) return;
    a.flags[i] = i < a.n && a.valid[i] ? 1u : 0u;
}

// put_f32s writes m floats of src from element i·m as the record's words from w.
DEVICE void put_f32s(GPTR u32* rec, u32 w, const GPTR float* src, u32 i, u32 m)
{
    for (u32 c = 0u; c < m; c++) rec[w + c] = f32_bits(src[i * m + c]);
}

// get_f32s is put_f32s's inverse.
DEVICE void get_f32s(const GPTR u32* rec, u32 w, GPTR float* dst, u32 k, u32 m)
{
    for (u32 c = 0u; c < m; c++) dst[k * m + c] = bits_f32(rec[w + c]);
}

DEVICE void pack_visible_body(Thr th, pack_visible_args a)
{
    u32 i = th.bid * th.bdim + th.tid;
    if (i >= a.n || !a.valid[i]) return;
    u32 words = rec_words(a.ray);
    GPTR u32* rec = a.recs + a.flags[i] * words;
    rec[REC_ID] = a.base + i;
    put_f32s(rec, REC_DEPTH, a.depth, i, 1u);
    put_f32s(rec, REC_OPACITY, a.opacity, i, 1u);
    put_f32s(rec, REC_COLOR, a.color, i, 3u);
    put_f32s(rec, REC_BOUND_CENTER, a.boundCenter, i, 2u);
    put_f32s(rec, REC_BOUND_Q, a.boundQ, i, 3u);
    for (u32 c = 0u; c < 4u; c++) rec[REC_RECT + c] = (u32)a.rect[i * 4u + c];
    put_f32s(rec, REC_RADIUS, a.radius, i, 1u);
    if (a.ray != 0u) {
        put_f32s(rec, REC_RAY_U, a.rayU, i, 3u);
        put_f32s(rec, REC_RAY_A, a.rayA, i, 9u);
        put_f32s(rec, REC_RAY_HALF, a.rayHalf, i, 3u);
    } else {
        put_f32s(rec, REC_MEAN2D, a.mean2d, i, 2u);
        put_f32s(rec, REC_CONIC, a.conic, i, 3u);
    }
}

DEVICE void unpack_body(Thr th, unpack_args a)
{
    u32 k = th.bid * th.bdim + th.tid;
    if (k == 0u) a.readout[RO_VISIBLE] = a.count;
    if (k >= a.count) return;
    u32 words = rec_words(a.ray);
    const GPTR u32* rec = a.recs + k * words;
    a.valid[k] = 1u;
    get_f32s(rec, REC_DEPTH, a.depth, k, 1u);
    get_f32s(rec, REC_OPACITY, a.opacity, k, 1u);
    get_f32s(rec, REC_COLOR, a.color, k, 3u);
    get_f32s(rec, REC_BOUND_CENTER, a.boundCenter, k, 2u);
    get_f32s(rec, REC_BOUND_Q, a.boundQ, k, 3u);
    for (u32 c = 0u; c < 4u; c++) a.rect[k * 4u + c] = (i32)rec[REC_RECT + c];
    get_f32s(rec, REC_RADIUS, a.radius, k, 1u);
    if (a.ray != 0u) {
        get_f32s(rec, REC_RAY_U, a.rayU, k, 3u);
        get_f32s(rec, REC_RAY_A, a.rayA, k, 9u);
        get_f32s(rec, REC_RAY_HALF, a.rayHalf, k, 3u);
    } else {
        get_f32s(rec, REC_MEAN2D, a.mean2d, k, 2u);
        get_f32s(rec, REC_CONIC, a.conic, k, 3u);
    }
}

// grec_words is the floats of a gradient record: ray (0 or 1) picks the model, absGrad adds
// EWA's absolute sums.
DEVICE u32 grec_words(u32 ray, u32 absGrad)
{
    if (ray != 0u) return GREC_RAY_WORDS;
    return absGrad != 0u ? GREC_EWA_ABS_WORDS : GREC_EWA_WORDS;
}

// copy_f32s copies m floats from src[s…] to dst[d…].
DEVICE void copy_f32s(GPTR float* dst, u32 d, const GPTR float* src, u32 s, u32 m)
{
    for (u32 c = 0u; c < m; c++) dst[d + c] = src[s + c];
}

DEVICE void pack_grads_body(Thr th, pack_grads_args a)
{
    u32 k = th.bid * th.bdim + th.tid;
    if (k >= a.count) return;
    GPTR float* g = a.grecs + k * grec_words(a.ray, a.absGrad);
    copy_f32s(g, GREC_COLOR, a.gColor, k * 3u, 3u);
    copy_f32s(g, GREC_OPACITY, a.gOpacity, k, 1u);
    if (a.ray != 0u) {
        copy_f32s(g, GREC_RAY_U, a.gRayU, k * 3u, 3u);
        copy_f32s(g, GREC_RAY_A, a.gRayA, k * 9u, 9u);
        return;
    }
    copy_f32s(g, GREC_MEAN2D, a.gMean2d, k * 2u, 2u);
    copy_f32s(g, GREC_CONIC, a.gConic, k * 3u, 3u);
    if (a.absGrad != 0u) copy_f32s(g, GREC_MEAN2D_ABS, a.gMean2dAbs, k * 2u, 2u);
}

DEVICE void scatter_grads_body(Thr th, scatter_grads_args a)
{
    u32 i = th.bid * th.bdim + th.tid;
    if (i == 0u) a.readout[RO_VISIBLE] = a.count;
    if (i >= a.n || !a.valid[i]) return;
    u32 k = a.flags[i];
    if (k >= a.count) return;
    a.vis[k] = i;
    const GPTR float* g = a.grecs + k * grec_words(a.ray, a.absGrad);
    copy_f32s(a.gColor, i * 3u, g, GREC_COLOR, 3u);
    copy_f32s(a.gOpacity, i, g, GREC_OPACITY, 1u);
    if (a.ray != 0u) {
        copy_f32s(a.gRayU, i * 3u, g, GREC_RAY_U, 3u);
        copy_f32s(a.gRayA, i * 9u, g, GREC_RAY_A, 9u);
        return;
    }
    copy_f32s(a.gMean2d, i * 2u, g, GREC_MEAN2D, 2u);
    copy_f32s(a.gConic, i * 3u, g, GREC_CONIC, 3u);
    if (a.absGrad != 0u) copy_f32s(a.gMean2dAbs, i * 2u, g, GREC_MEAN2D_ABS, 2u);
}
