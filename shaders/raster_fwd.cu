// raster_fwd.cu — design.md §5 step 4: every tile's splats blended front to back
// (internal/raster/forward.go is the CPU twin, with the same decisions and rounding).
//
// raster_fwd_ewa, raster_fwd_ray: the same kernel compiled for each render model (the host
//   launches the one of its rp.model), so that the per-splat loop carries no model test and
//   EWA stages and reads only its 5 geometry floats. One block per tile (tile tileOrder[th.bid],
//   tile ids row-major; ranges.cu's tile_order puts the longest lists first), one thread per pixel of the tile (th.tid = ly*tileSize + lx; blockDim is
//   tileSize² rounded up to whole warps, and threads past the tile, or past the image edge,
//   only help stage splats). The tile's list is walked in batches of BATCH splats staged in
//   shared memory. Per pixel and entry: skip when alpha < alphaMin; finish (without blending)
//   when T·(1−alpha) < 1e-4; else add colour·alpha·T. A pixel also finishes after
//   rp.maxSteps blends when that is not 0.
//   readout: nothing runs when readout[RO_ABORT] is set
//   tileOffsets [tiles+1] u32, ids [entries] u32 (sorted lists)
//   opacity [n], color [n,3], mean2d [n,2], conic [n,3] (EWA), rayU [n,3], rayA [n,9] (ray) f32
//   rays [H*W,3] f32 (ray model: per-pixel world directions; any buffer for EWA)
//   image [H*W,3] f32 = Σ cᵢαᵢTᵢ + T·bg; finalT [H*W] f32; count [H*W] u32: entries of the
//   tile's list walked up to and including the last one blended (the backward starts there).
//   tileWalk [tiles] u32: the tile's longest count (raster_bwd runs blocks for its chunks up to
//   there). chunkState [slots,4,tileSize²] f32 (raster.h, chunk_slot): a pixel still walking
//   when it reaches entry k = (c+1)·CHUNK of its tile's list stores T and the front colour
//   after entries [0, k) in the slot of chunk c, where raster_bwd's block for that chunk
//   starts. Only stores are added for the backward: the image is the same.
#include "prelude.h"
#include "common.h"
#include "readout.h"
#include "raster.h"
#include "entries/raster_fwd.h"

// raster_fwd_run is both entry points' body; the block-shared s (the staged batch), alive (the
// tile's pixels still walking) and longest (the tile's longest count) are the wrapper's.
template <bool RAY>
DEVICE void raster_fwd_run(Thr th, raster_fwd_args a, SPTR Staged<RAY>& s, SPTR u32& alive, SPTR u32& longest)
{
    if (a.readout[RO_ABORT]) return;
    const Raster& rp = a.rp;
    const GPTR float* rays = a.rays;
    u32 tile = a.tileOrder[th.bid];
    int ts = rp.tileSize;
    int x = (int)(tile % (u32)rp.tilesX) * ts + (int)(th.tid % (u32)ts);
    int y = (int)(tile / (u32)rp.tilesX) * ts + (int)(th.tid / (u32)ts);
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
    // This pixel's words of the tile's chunk states (chunk c's plane q at +c·4P + q·P); only
    // dereferenced at a boundary inside the list, so never for a tile without chunks.
    u32 P = (u32)(ts * ts);
    GPTR float* st = a.chunkState + chunk_state(chunk_slot(tile, start, 0u), P) + th.tid;
    if (th.tid == 0u) longest = 0u; // ordered before the maxima below by the loop's or the final barrier
    for (u32 b0 = start; b0 < end; b0 += BATCH) {
        if (th.tid == 0u) alive = 0u;
        BARRIER();
        if (!done) shared_add_u32(&alive, 1u);
        BARRIER();
        if (alive == 0u) break; // every pixel of the tile is finished
        u32 nb = end - b0 < (u32)BATCH ? end - b0 : (u32)BATCH;
        for (u32 j = th.tid; j < nb; j += th.bdim)
            stage_splat<RAY, BATCH, true>(rp, a.ids[b0 + j], j, a.opacity, a.color, a.mean2d, a.conic, a.rayU, a.rayA, s);
        BARRIER();
        // The batch in chunks of CHUNK entries (BATCH is a multiple of CHUNK): entry k = b0 −
        // start + c0 starts chunk k/CHUNK, and the state after entries [0, k) is where the
        // backward's block for the chunk before it starts. A pixel that finished earlier never
        // gets here, and its count ends before k: the backward starts its last chunk from
        // finalT and never reads this slot for it.
        for (u32 c0 = 0; c0 < nb && !done; c0 += CHUNK) {
            if (b0 + c0 != start) {
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
    if (inside) {
        a.image[pix * 3] = cr + mul_rn(T, rp.bg[0]);
        a.image[pix * 3 + 1] = cg + mul_rn(T, rp.bg[1]);
        a.image[pix * 3 + 2] = cb + mul_rn(T, rp.bg[2]);
        a.finalT[pix] = T;
        a.count[pix] = cnt;
    }
    BARRIER();
    if (cnt > 0u) shared_max_u32(&longest, cnt);
    BARRIER();
    if (th.tid == 0u) a.tileWalk[tile] = longest;
}

DEVICE void raster_fwd_ewa_body(Thr th, raster_fwd_args a, SPTR Staged<false>& s, SPTR u32& alive, SPTR u32& longest)
{
    raster_fwd_run<false>(th, a, s, alive, longest);
}

DEVICE void raster_fwd_ray_body(Thr th, raster_fwd_args a, SPTR Staged<true>& s, SPTR u32& alive, SPTR u32& longest)
{
    raster_fwd_run<true>(th, a, s, alive, longest);
}
