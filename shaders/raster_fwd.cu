// raster_fwd.cu — design.md §5 step 4: every tile's splats blended front to back
// (internal/raster/forward.go is the CPU twin, with the same decisions and rounding).
//
// raster_fwd_ewa, raster_fwd_ray: the same kernel compiled for each render model (the host
//   launches the one of its rp.model), so that the per-splat loop carries no model test and
//   EWA stages and reads only its 5 geometry floats. Two passes (raster.h, segments): pass 0
//   runs a block per tile, tile tileOrder[bid] (ranges.cu's tile_order puts the longest lists
//   first), on its list's first segment; pass 1 a block per segment the first queued, segItems
//   pair bid (tile, segment) below readout[RO_SEGS] (blocks past it leave), for the pixels
//   that did not finish in the first segment. One thread per
//   pixel of the tile (raster.h's tile_pixel: a warp an 8×4 block; blockDim is tileSize² rounded up to whole
//   warps, and threads past the tile, or past the image edge, only help stage splats). The
//   segment is walked in batches of BATCH splats staged in shared memory, from T = 1. Per
//   pixel and entry: skip when alpha < alphaMin; finish (without blending) when T·(1−alpha) <
//   1e-4; else add colour·alpha·T. A pixel also finishes after rp.maxSteps blends when that is
//   not 0 (then every list is one segment).
//   readout: nothing runs when readout[RO_ABORT] is set; RO_SEGS counts the queued segments
//   tileOffsets [tiles+1] u32, ids [entries] u32 (sorted lists)
//   opacity [n], color [n,3], mean2d [n,2], conic [n,3] (EWA), rayU [n,3], rayA [n,9] (ray) f32
//   rays [H*W,3] f32 (ray model: per-pixel world directions; any buffer for EWA)
//   Where pass 0 finishes the tile (one segment, or no pixel walking at the first's end):
//   image [H*W,3] f32 = Σ cᵢαᵢTᵢ + T·bg; finalT [H*W] f32; count [H*W] u32: entries of the
//   tile's list walked up to and including the last one blended (the backward starts there).
//   tileWalk [tiles] u32: the tile's longest count (raster_bwd runs blocks for its chunks up to
//   there). chunkState [slots,4,tileSize²] f32 (raster.h, chunk_slot): a pixel still walking
//   when it reaches entry k = (c+1)·CHUNK of its tile's list stores T and the front colour
//   after entries [0, k) in the slot of chunk c, where raster_bwd's block for that chunk
//   starts. Only stores are added for the backward: the image is the same.
//   segCont [tiles] u32: pass 0 sets 1 where it queued the tile's other segments, else 0.
//   Then each segment's block stores its pixels' T, colour and count (tile-relative) |
//   SEG_DONE where the pixel finished in segState, segCount, and its chunk states from its
//   own start (T = 1), except at its first entry; segItems [segments after the first, 2] u32.
// raster_fwd_join: one block per tile, threads as raster_fwd's; tiles pass 0 finished leave.
//   Folds each pixel's segments in order (raster.h), writes image, finalT, count and tileWalk
//   as above, the chunk state at each segment's start, and turns the segments' own chunk
//   states into the walk's (T·t, C + T·c) where the backward can read them.
#include "prelude.h"
#include "common.h"
#include "readout.h"
#include "raster.h"
#include "entries/raster_fwd.h"

// write_walk writes a pixel's finished walk (when inside the image: its colour over the
// background, final T and count) and, with the whole block, the tile's longest count, for which
// longest must be 0 and ordered before the call's first barrier.
DEVICE void write_walk(Thr th, const Raster& rp, bool inside, u32 pix, float T, float cr, float cg, float cb, u32 cnt,
                       GPTR float* image, GPTR float* finalT, GPTR u32* count, GPTR u32* tileWalk, u32 tile,
                       SPTR u32& longest)
{
    if (inside) {
        image[pix * 3] = cr + mul_rn(T, rp.bg[0]);
        image[pix * 3 + 1] = cg + mul_rn(T, rp.bg[1]);
        image[pix * 3 + 2] = cb + mul_rn(T, rp.bg[2]);
        finalT[pix] = T;
        count[pix] = cnt;
    }
    BARRIER();
    if (cnt > 0u) shared_max_u32(&longest, cnt);
    BARRIER();
    if (th.tid == 0u) tileWalk[tile] = longest;
}

// raster_fwd_run is both entry points' body; the block-shared s (the staged batch), alive (the
// tile's pixels still walking) and longest (the tile's longest count) are the wrapper's.
template <bool RAY>
DEVICE void raster_fwd_run(Thr th, raster_fwd_args a, SPTR Staged<RAY>& s, SPTR u32& alive, SPTR u32& longest)
{
    if (a.readout[RO_ABORT]) return;
    const Raster& rp = a.rp;
    const GPTR float* rays = a.rays;
    u32 tile, seg = 0u;
    if (a.pass == 0u) {
        tile = a.tileOrder[th.bid];
    } else {
        if (th.bid >= a.readout[RO_SEGS]) return; // the same for the whole block, before any barrier
        tile = a.segItems[2u * th.bid];
        seg = a.segItems[2u * th.bid + 1u];
    }
    int ts = rp.tileSize;
    int x, y;
    tile_pixel(th.tid, ts, x, y);
    x += (int)(tile % (u32)rp.tilesX) * ts;
    y += (int)(tile / (u32)rp.tilesX) * ts;
    bool inside = th.tid < (u32)(ts * ts) && x < rp.W && y < rp.H;
    u32 pix = inside ? (u32)y * (u32)rp.W + (u32)x : 0u;
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f;
    if (RAY && inside) {
        d0 = rays[pix * 3];
        d1 = rays[pix * 3 + 1];
        d2 = rays[pix * 3 + 2];
    }
    float T = 1.0f, cr = 0.0f, cg = 0.0f, cb = 0.0f;
    u32 cnt = 0, hits = 0;
    bool done = !inside;
    u32 start = a.tileOffsets[tile], end = a.tileOffsets[tile + 1];
    u32 nseg = seg_count(end - start, (u32)rp.maxSteps | (RAY ? 1u : 0u));
    u32 P = (u32)(ts * ts);
    // A pixel that finished in its first segment has no later one to walk (the join never reads
    // it, nor the backward its chunk states): on a scene whose pixels mostly finish early the
    // second pass would otherwise walk every queued segment for every pixel of its tile.
    if (seg > 0u && inside) done = (a.segCount[(u64)seg_slot(tile, start, 0u) * (u64)P + th.tid] & SEG_DONE) != 0u;
    u32 lo = start + seg * (u32)SEGMENT;
    u32 hi = nseg == 1u || end - lo < (u32)SEGMENT ? end : lo + (u32)SEGMENT;
    // This pixel's words of the tile's chunk states (chunk c's plane q at +c·4P + q·P); only
    // dereferenced at a boundary inside the list, so never for a tile without chunks.
    GPTR float* st = a.chunkState + chunk_state(chunk_slot(tile, start, 0u), P) + th.tid;
    if (th.tid == 0u) longest = 0u; // ordered before the maxima below by the loop's or the final barrier
    for (u32 b0 = lo; b0 < hi; b0 += BATCH) {
        if (th.tid == 0u) alive = 0u;
        BARRIER();
        if (!done) shared_add_u32(&alive, 1u);
        BARRIER();
        if (alive == 0u) break; // every pixel of the tile is finished
        u32 nb = hi - b0 < (u32)BATCH ? hi - b0 : (u32)BATCH;
        for (u32 j = th.tid; j < nb; j += th.bdim)
            stage_splat<RAY, BATCH, true>(rp, a.ids[b0 + j], j, a.opacity, a.color, a.mean2d, a.conic, a.rayU, a.rayA, s);
        BARRIER();
        // The batch in chunks of CHUNK entries (BATCH is a multiple of CHUNK): entry k = b0 −
        // start + c0 starts chunk k/CHUNK, and the state after entries [0, k) is where the
        // backward's block for the chunk before it starts. A pixel that finished earlier never
        // gets here, and its count ends before k: the backward starts its last chunk from
        // finalT and never reads this slot for it. At a segment's first entry the state is
        // the join's to store.
        for (u32 c0 = 0; c0 < nb && !done; c0 += CHUNK) {
            if (b0 + c0 != lo) {
                GPTR float* q = st + chunk_state((b0 - start + c0) / CHUNK - 1u, P);
                q[0] = T;
                q[P] = cr;
                q[2u * P] = cg;
                q[3u * P] = cb;
            }
            u32 ce = nb - c0 < CHUNK ? nb : c0 + CHUNK;
            for (u32 j = c0; j < ce; j++) {
                f4 meta = staged_meta(s, j);
                if (meta.w == 0.0f) continue;
                float geo[GEO_N(RAY)];
                load_geo<RAY>(s, j, meta, geo);
                float o = meta.y, cut = meta.z;
                float power;
                if (RAY) {
                    float w[3], v[3], sc;
                    if (!ray_perp(geo, cut, d0, d1, d2, w, sc, v)) continue;
                    power = ray_power(w);
                } else {
                    float dx, dy; // staged with a/2 and c/2 (HALF)
                    power = ewa_power_h(geo[0], geo[1], geo[2], geo[3], geo[4], x, y, dx, dy);
                    if (!(power >= cut) || power > 0.0f) continue;
                }
                float g;
                bool clamped;
                float alpha = alpha_of(o, power, g, clamped);
                if (!(alpha >= rp.alphaMin)) continue;
                float tn = mul_rn(T, 1.0f - alpha);
                if (tn < TERMINATE_T) {
                    done = true;
                    break;
                }
                float wt = mul_rn(alpha, T);
                f4 col = staged_color(s, j);
                cr = cr + mul_rn(wt, col.x);
                cg = cg + mul_rn(wt, col.y);
                cb = cb + mul_rn(wt, col.z);
                T = tn;
                cnt = b0 - start + j + 1u;
                hits++;
                if (rp.maxSteps != 0 && hits == (u32)rp.maxSteps) {
                    done = true;
                    break;
                }
            }
        }
        BARRIER();
    }
    if (nseg > 1u && a.pass == 0u) { // queue the other segments if a pixel still walks
        if (th.tid == 0u) alive = 0u;
        BARRIER();
        if (!done) shared_add_u32(&alive, 1u);
        BARRIER();
        bool more = alive != 0u;
        if (th.tid == 0u) {
            a.segCont[tile] = more ? 1u : 0u;
            if (more) {
                u32 at = atom_add_u32(a.readout + RO_SEGS, nseg - 1u);
                for (u32 k = 1; k < nseg; k++) {
                    a.segItems[2u * (at + k - 1u)] = tile;
                    a.segItems[2u * (at + k - 1u) + 1u] = k;
                }
            }
        }
        if (!more) nseg = 1u; // every pixel finished in the first segment: its walk is the tile's
    } else if (a.pass == 0u && th.tid == 0u) {
        a.segCont[tile] = 0u;
    }
    if (nseg > 1u) { // the join's to fold
        if (th.tid < P) {
            u32 slot = seg_slot(tile, start, seg);
            GPTR float* q = a.segState + chunk_state(slot, P) + th.tid;
            q[0] = T;
            q[P] = cr;
            q[2u * P] = cg;
            q[3u * P] = cb;
            a.segCount[(u64)slot * (u64)P + th.tid] = cnt | (done && inside ? SEG_DONE : 0u);
        }
        return;
    }
    write_walk(th, rp, inside, pix, T, cr, cg, cb, cnt, a.image, a.finalT, a.count, a.tileWalk, tile, longest);
}

DEVICE void raster_fwd_ewa_body(Thr th, raster_fwd_args a, SPTR Staged<false>& s, SPTR u32& alive, SPTR u32& longest)
{
    raster_fwd_run<false>(th, a, s, alive, longest);
}

DEVICE void raster_fwd_ray_body(Thr th, raster_fwd_args a, SPTR Staged<true>& s, SPTR u32& alive, SPTR u32& longest)
{
    raster_fwd_run<true>(th, a, s, alive, longest);
}

DEVICE void raster_fwd_join_body(Thr th, raster_fwd_join_args a, SPTR u32& longest)
{
    if (a.readout[RO_ABORT]) return;
    const Raster& rp = a.rp;
    u32 tile = th.bid;
    u32 start = a.tileOffsets[tile], len = a.tileOffsets[tile + 1] - start;
    u32 nseg = seg_count(len, (u32)rp.maxSteps);
    if (nseg == 1u || a.segCont[tile] == 0u) return; // raster_fwd wrote it; the same for the whole block
    int ts = rp.tileSize;
    int x, y;
    tile_pixel(th.tid, ts, x, y);
    x += (int)(tile % (u32)rp.tilesX) * ts;
    y += (int)(tile / (u32)rp.tilesX) * ts;
    bool inside = th.tid < (u32)(ts * ts) && x < rp.W && y < rp.H;
    u32 P = (u32)(ts * ts);
    float T = 1.0f, cr = 0.0f, cg = 0.0f, cb = 0.0f;
    u32 cnt = 0;
    bool done = !inside;
    GPTR float* st = a.chunkState + chunk_state(chunk_slot(tile, start, 0u), P) + th.tid;
    for (u32 sg = 0; sg < nseg && !done; sg++) {
        u32 slot = seg_slot(tile, start, sg);
        const GPTR float* q = a.segState + chunk_state(slot, P) + th.tid;
        u32 sc = a.segCount[(u64)slot * (u64)P + th.tid];
        u32 lc = sc & ~SEG_DONE;
        bool fin = (sc & SEG_DONE) != 0u;
        if (sg > 0u) {
            // The walk's state in front of the segment, where the backward's chunk before it
            // starts; then the segment's own states, stored from its T = 1, for the
            // boundaries it reached (all of them, unless it finished: then those before its
            // count, the only ones the backward reads).
            u32 k0 = sg * (u32)SEGMENT, k1 = len - k0 < (u32)SEGMENT ? len : k0 + (u32)SEGMENT;
            GPTR float* w = st + chunk_state(k0 / CHUNK - 1u, P);
            w[0] = T;
            w[P] = cr;
            w[2u * P] = cg;
            w[3u * P] = cb;
            for (u32 k = k0 + CHUNK; k < k1 && !(fin && k >= lc); k += CHUNK) {
                w = st + chunk_state(k / CHUNK - 1u, P);
                w[P] = cr + mul_rn(T, w[P]);
                w[2u * P] = cg + mul_rn(T, w[2u * P]);
                w[3u * P] = cb + mul_rn(T, w[3u * P]);
                w[0] = mul_rn(T, w[0]);
            }
        }
        cr = cr + mul_rn(T, q[P]);
        cg = cg + mul_rn(T, q[2u * P]);
        cb = cb + mul_rn(T, q[3u * P]);
        T = mul_rn(T, q[0]);
        if (lc > 0u) cnt = lc;
        done = fin || T < TERMINATE_T;
    }
    if (th.tid == 0u) longest = 0u; // ordered before the maxima by write_walk's first barrier
    write_walk(th, rp, inside, inside ? (u32)y * (u32)rp.W + (u32)x : 0u, T, cr, cg, cb, cnt, a.image, a.finalT, a.count,
               a.tileWalk, tile, longest);
}
