// raster_bwd.cu — design.md §5 step 6: the loss gradient of every splat's prepared data, walking
// each pixel's list back to front from its last contributor and recomputing alpha (no per-pixel
// hit store); internal/raster/backward.go is the CPU twin. With Bⱼ the colour behind splat j,
//   ∂C/∂cⱼ = αⱼTⱼ,   ∂C/∂αⱼ = cⱼTⱼ − Bⱼ/(1−αⱼ),
// and Tⱼ = Tⱼ₊₁/(1−αⱼ) from the forward's final T. Where the 0.99 clamp is active alpha has no
// gradient to opacity or geometry.
//
// Chunks: a tile's list is cut into chunks of CHUNK entries (raster.h), each walked by a block
// of its own, so that a tile's walk is no longer one serial chain (the longest lists were
// the stage's tail). Chunk c of a pixel's walk is entries [lo, e) with
// lo = c·CHUNK, e = min((c+1)·CHUNK, count), and starts from the state behind entry e−1: T_e,
// the transmittance in front of entry e, and B_e, the colour behind it. Where the count ends
// inside the chunk that is the forward's end state, T_e = finalT and B_e = finalT·bg, as the
// single walk started. Otherwise raster_fwd stored T_e and the front colour F_e = Σ_{i<e} cᵢαᵢTᵢ
// at the boundary, and since the pixel's colour is C = F_e + B_e (image = F_count + finalT·bg,
// and every term from e on is behind e), B_e = image − F_e. From there the recurrence is the
// single walk's. The stored T_e is the forward's own (the single walk recovered it dividing
// back from finalT), so the gradients differ from the single walk's in rounding only.
//
// raster_bwd_chunks: one block of exactly 256 threads (a few thousand tiles; one launch where
//   scan.cu's level-by-level scan took three); thread i takes the consecutive tiles
//   [i·per, (i+1)·per), per = ceil(tiles/256). A tile's chunks are those of its walk,
//   ceil(tileWalk/CHUNK), not of its whole list: chunks past every pixel's count would only
//   load the counts and leave. Nothing runs when readout[RO_ABORT] is set.
//   tileWalk [tiles] u32 (raster_fwd); chunkStart [tiles+1] u32: the exclusive sum of the
//   tiles' chunk counts, chunkStart[tiles] = every chunk; chunkTile [chunks] u32: each chunk's
//   tile. The chunks number at most entries/CHUNK + tiles (raster.h), as the host sizes them.
// raster_bwd_ewa, raster_bwd_ray: one kernel compiled per render model, as raster_fwd_*, with
//   its thread mapping within a tile: BWD_PX (two) pixels a thread, the block tileSize²/2
//   threads. Block b walks the chunks b, b +
//   nblocks, ... below chunkStart[tiles] (the host sizes the grid for the most chunks the
//   lists' capacity allows, capped: the count is on the device, and the blocks past it leave
//   at once); for each, the chunk's entries up to the tile's walk are staged in shared memory
//   at once and walked back to front, and a pixel whose count ends before the chunk does
//   nothing. For each splat, a warp with any hit sums its lanes' contributions (each lane's
//   pixels' already added up), 16 values a lane (EWA's 9 padded with zeros), with one transposing butterfly (warp_sum16_spread: 16 shuffles, where summing each
//   value on its own took 5 a value), which leaves value i's warp sum in lanes 2i and 2i+1; the
//   even lanes of the values in use then add them to the chunk's sums in shared memory, one
//   shared atomic each, all in the same instruction. Once the chunk is walked, the block adds
//   each splat's non-zero sums to its gradients: one global atomic per value and chunk, where
//   every warp that hit the splat used to add its own (the scenes whose few large splats
//   cover the whole image sent all the tiles' warps to the same words). The atomics' order,
//   and so the last bits, vary from run to run.
//   finalT [H*W] f32, count [H*W] u32, image [H*W,3] f32, tileWalk [tiles] u32, chunkState
//   [slots,4,tileSize²] f32 (raster_fwd; a state is read only for a pixel whose count passes
//   the chunk's end); chunkStart, chunkTile (raster_bwd_chunks); dImage [H*W,3] f32 (dL/dpixel)
//   gColor [n,3], gOpacity [n]; EWA: gMean2d [n,2], gConic [n,3], and with absGrad gMean2dAbs
//   [n,2] (Σ over pixels of |each pixel's contribution to gMean2d|, per component: AbsGS's
//   densification statistic); ray: gRayU [n,3], gRayA [n,9]
//   (f32, zeroed by the host, accumulated here)
#include "prelude.h"
#include "common.h"
#include "readout.h"
#include "raster.h"
#include "entries/raster_bwd.h"

// grad_ptr is the gradient word of value index q (0 ≤ q < 16 for ray, < 11 for EWA) of splat
// id, in raster_bwd's v order: colour 3, opacity 1, then EWA mean2d 2, conic 3 and, with
// absGrad, mean2d's absolute sums 2, or ray u 3, A 9.
template <bool RAY>
DEVICE GPTR float* grad_ptr(u32 id, u32 q, GPTR float* gColor, GPTR float* gOpacity, GPTR float* gMean2d,
                            GPTR float* gConic, GPTR float* gRayU, GPTR float* gRayA, GPTR float* gMean2dAbs)
{
    if (q < 3u) return gColor + id * 3u + q;
    if (q == 3u) return gOpacity + id;
    if (RAY) return q < 7u ? gRayU + id * 3u + (q - 4u) : gRayA + id * 9u + (q - 7u);
    if (q >= 9u) return gMean2dAbs + id * 2u + (q - 9u);
    return q < 6u ? gMean2d + id * 2u + (q - 4u) : gConic + id * 3u + (q - 6u);
}

// flush_grads adds a chunk's per-splat sums (NV values each, in sGrad) to the gradients.
template <bool RAY, u32 NV>
DEVICE void flush_grads(Thr th, raster_bwd_args a, SPTR u32* sId, SPTR float* sGrad, u32 nb)
{
    for (u32 i = th.tid; i < nb * NV; i += th.bdim) {
        float g = sGrad[i];
        if (g != 0.0f)
            atom_add_f32(grad_ptr<RAY>(sId[i / NV], i % NV, a.gColor, a.gOpacity, a.gMean2d, a.gConic, a.gRayU, a.gRayA,
                                       a.gMean2dAbs),
                         g);
    }
}

// BWD_PX is how many pixels a raster_bwd thread takes, in both models: two, the vertically
// adjacent 8×4 blocks of the forward's warps w and w + across (tile_pixel), so that a warp
// walks an 8×8 block and each splat's staged loads, warp sum and shared atomics serve 64
// pixels instead of 32.
#define BWD_PX 2u

// bwd_pixel is the forward's thread index (tile_pixel's tid, and the chunk states' pixel) of
// pixel q < BWD_PX of raster_bwd thread tid in a tile of edge ts (8, 16 or 32: ts/4 rows of
// forward warps, an even number).
DEVICE u32 bwd_pixel(u32 tid, int ts, u32 q)
{
    u32 w = tid >> 5u, across = (u32)ts >> 3u;
    u32 f0 = (w / across) * 2u * across + w % across;
    return (f0 + q * across) * 32u + (tid & 31u);
}

template <bool RAY>
DEVICE void raster_bwd_chunk(Thr th, raster_bwd_args a, SPTR Staged<RAY, CHUNK>& s, SPTR u32* sId, SPTR float* sGrad, u32 chunk)
{
    const Raster& rp = a.rp;
    const u32 PX = BWD_PX;
    // Gradient values per splat: colour 3, opacity 1, EWA mean2d 2 + conic 3 (+ mean2d's
    // absolute sums 2 with absGrad), ray u 3 + A 9.
    const u32 nv = RAY ? 16u : (a.absGrad ? 11u : 9u);
    u32 tile = a.chunkTile[chunk];
    u32 ci = chunk - a.chunkStart[tile]; // the tile's chunk ci: entries [lo, stop) of its list
    u32 lo = ci * CHUNK, stop = lo + CHUNK;
    u32 walk = a.tileWalk[tile];
    u32 hi = walk < stop ? walk : stop; // > lo: the tile has chunks up to its walk only
    u32 start = a.tileOffsets[tile];
    int ts = rp.tileSize;
    u32 P = (u32)(ts * ts);
    // Each pixel's walk state: where its count ends, T and the colour behind the entry, its
    // loss gradient, and (ray) its direction.
    int x[BWD_PX], y[BWD_PX];
    u32 cnt[BWD_PX];
    float T[BWD_PX], br[BWD_PX], bg[BWD_PX], bb[BWD_PX];
    float gr[BWD_PX], gg[BWD_PX], gb[BWD_PX];
    float d0[BWD_PX], d1[BWD_PX], d2[BWD_PX];
    for (u32 q = 0; q < PX; q++) {
        u32 fp = bwd_pixel(th.tid, ts, q);
        tile_pixel(fp, ts, x[q], y[q]);
        x[q] += (int)(tile % (u32)rp.tilesX) * ts;
        y[q] += (int)(tile / (u32)rp.tilesX) * ts;
        bool inside = fp < P && x[q] < rp.W && y[q] < rp.H;
        u32 pix = inside ? (u32)y[q] * (u32)rp.W + (u32)x[q] : 0u;
        cnt[q] = inside ? a.count[pix] : 0u;
        T[q] = br[q] = bg[q] = bb[q] = gr[q] = gg[q] = gb[q] = 0.0f;
        d0[q] = d1[q] = d2[q] = 0.0f;
        if (cnt[q] > lo) {
            if (RAY) {
                d0[q] = a.rays[pix * 3];
                d1[q] = a.rays[pix * 3 + 1];
                d2[q] = a.rays[pix * 3 + 2];
            }
            if (cnt[q] <= stop) { // the walk ends in this chunk: start from the forward's end state
                T[q] = a.finalT[pix];
                br[q] = mul_rn(T[q], rp.bg[0]);
                bg[q] = mul_rn(T[q], rp.bg[1]);
                bb[q] = mul_rn(T[q], rp.bg[2]);
            } else { // it goes on behind the chunk: the state raster_fwd stored at its far end
                const GPTR float* st = a.chunkState + chunk_state(chunk_slot(tile, start, ci), P) + fp;
                T[q] = st[0];
                br[q] = a.image[pix * 3] - st[P];
                bg[q] = a.image[pix * 3 + 1] - st[2u * P];
                bb[q] = a.image[pix * 3 + 2] - st[3u * P];
            }
            gr[q] = a.dImage[pix * 3];
            gg[q] = a.dImage[pix * 3 + 1];
            gb[q] = a.dImage[pix * 3 + 2];
        }
    }
    u32 last = cnt[0]; // the thread's longest count
    for (u32 q = 1; q < PX; q++) last = cnt[q] > last ? cnt[q] : last;
    u32 nb = hi - lo;
    for (u32 j = th.tid; j < nb; j += th.bdim) {
        u32 id = a.ids[start + lo + j];
        sId[j] = id;
        stage_splat<RAY>(rp, id, j, a.opacity, a.color, a.mean2d, a.conic, a.rayU, a.rayA, s);
    }
    for (u32 i = th.tid; i < nb * nv; i += th.bdim) sGrad[i] = 0.0f;
    BARRIER();
    for (u32 jj = nb; jj > 0u; jj--) {
        u32 j = jj - 1u;
        f4 meta = staged_meta(s, j);
        if (meta.w == 0.0f) continue; // the same for every thread
        u32 k = lo + j;
        // The thread's pixels' contributions, summed (the warp sum adds them up in any case).
        float v[16];
        for (int q = 0; q < 16; q++) v[q] = 0.0f;
        bool hit = false;
        if (k < last) {
            float geo[GEO_N(RAY)];
            load_geo<RAY>(s, j, meta, geo);
            float o = meta.y, cut = meta.z;
            f4 col = staged_color(s, j);
            for (u32 q = 0; q < PX; q++) {
                if (!(k < cnt[q])) continue;
                float power = 0.0f, dx = 0.0f, dy = 0.0f, sc = 0.0f;
                float w[3] = {0.0f, 0.0f, 0.0f}, rv[3];
                bool ok;
                if (RAY) {
                    ok = ray_perp(geo, cut, d0[q], d1[q], d2[q], w, sc, rv);
                    if (ok) power = ray_power(w);
                } else {
                    power = ewa_power(geo, x[q], y[q], dx, dy);
                    ok = power >= cut && !(power > 0.0f);
                }
                float g = 0.0f, alpha = 0.0f;
                bool clamped = false;
                if (ok) {
                    alpha = alpha_of(o, power, g, clamped);
                    ok = alpha >= rp.alphaMin;
                }
                if (!ok) continue;
                hit = true;
                float c0 = col.x, c1 = col.y, c2 = col.z;
                float inv = 1.0f / (1.0f - alpha);
                float tj = T[q] * inv;
                float wt = alpha * tj;
                float dLdA = gr[q] * (c0 * tj - br[q] * inv) + gg[q] * (c1 * tj - bg[q] * inv) +
                             gb[q] * (c2 * tj - bb[q] * inv);
                br[q] += c0 * wt;
                bg[q] += c1 * wt;
                bb[q] += c2 * wt;
                T[q] = tj;
                v[0] += gr[q] * wt;
                v[1] += gg[q] * wt;
                v[2] += gb[q] * wt;
                if (clamped) continue;
                v[3] += dLdA * g;
                float dp = dLdA * alpha;
                if (RAY) {
                    v[4] += -dp * w[0];
                    v[5] += -dp * w[1];
                    v[6] += -dp * w[2];
                    float qs = dp * sc;
                    for (int r = 0; r < 3; r++) {
                        float qr = qs * w[r];
                        v[7 + r * 3] += qr * d0[q];
                        v[8 + r * 3] += qr * d1[q];
                        v[9 + r * 3] += qr * d2[q];
                    }
                } else {
                    float ka = geo[2], kb = geo[3], kc = geo[4];
                    float m0 = dp * (ka * dx + kb * dy), m1 = dp * (kb * dx + kc * dy);
                    v[4] += m0;
                    v[5] += m1;
                    v[6] += -(dp * dx * dx / 2.0f);
                    v[7] += -(dp * dx * dy);
                    v[8] += -(dp * dy * dy / 2.0f);
                    v[9] += m0 < 0.0f ? -m0 : m0; // AbsGS's statistic (read with absGrad)
                    v[10] += m1 < 0.0f ? -m1 : m1;
                }
            }
        }
        if (!warp_any(hit)) continue;
        // Lanes 2q and 2q+1 get value q's warp sum; the even ones of the nv values in use
        // add it to the chunk's sum, in one shared atomic instruction for the warp.
        float sum = warp_sum16_spread(th, v);
        u32 q = th.lane >> 1;
        if ((th.lane & 1u) == 0u && q < nv) shared_add_f32(&sGrad[j * nv + q], sum);
    }
    // The block's sums to the gradients (zero where no pixel was hit: nothing to add), with
    // the values per splat a constant (divisions by a variable nv cost the EWA kernel 2 %).
    BARRIER();
    if (RAY) flush_grads<RAY, 16u>(th, a, sId, sGrad, nb);
    else if (nv == 11u) flush_grads<RAY, 11u>(th, a, sId, sGrad, nb);
    else flush_grads<RAY, 9u>(th, a, sId, sGrad, nb);
}

// raster_bwd_run is both entry points' body: it walks this block's chunks, with the
// wrapper's block-shared s (the chunk's staged splats), sId (their ids) and sGrad (their
// gradient sums). The barrier after each chunk keeps the next one's staging from overwriting
// the splats and sums the last one's atomics still read.
template <bool RAY>
DEVICE void raster_bwd_run(Thr th, raster_bwd_args a, SPTR Staged<RAY, CHUNK>& s, SPTR u32* sId, SPTR float* sGrad)
{
    if (a.readout[RO_ABORT]) return;
    u32 chunks = a.chunkStart[a.numTiles];
    for (u32 chunk = th.bid; chunk < chunks; chunk += th.nblocks) {
        raster_bwd_chunk<RAY>(th, a, s, sId, sGrad, chunk);
        BARRIER();
    }
}

// raster_bwd_chunks numbers the chunks (the block-shared warpTot: the warps' totals, then
// their offsets).
DEVICE void raster_bwd_chunks_body(Thr th, raster_bwd_chunks_args a, SPTR u32* warpTot)
{
    if (a.readout[RO_ABORT]) return;
    const u32 threads = 256u; // the spec's block size
    u32 numTiles = a.numTiles;
    u32 per = (numTiles + threads - 1u) / threads;
    u32 t0 = th.tid * per < numTiles ? th.tid * per : numTiles;
    u32 t1 = t0 + per < numTiles ? t0 + per : numTiles;
    u32 sum = 0;
    for (u32 t = t0; t < t1; t++) sum += (a.tileWalk[t] + CHUNK - 1u) / CHUNK;
    // A block-wide exclusive scan of the threads' sums: within each warp, then over the warps.
    u32 ex = warp_exscan_u32(th, sum);
    if (th.lane == 31u) warpTot[th.warp] = ex + sum;
    BARRIER();
    if (th.tid < 32u) {
        const u32 nw = threads / 32u;
        u32 w = th.tid < nw ? warpTot[th.tid] : 0u;
        u32 e = warp_exscan_u32(th, w);
        if (th.tid < nw) warpTot[th.tid] = e;
        if (th.tid == nw - 1u) a.chunkStart[numTiles] = e + w;
    }
    BARRIER();
    u32 run = warpTot[th.warp] + ex;
    for (u32 t = t0; t < t1; t++) {
        a.chunkStart[t] = run;
        u32 n = (a.tileWalk[t] + CHUNK - 1u) / CHUNK;
        for (u32 q = 0; q < n; q++) a.chunkTile[run + q] = t;
        run += n;
    }
}

// raster_bwd_ewa and raster_bwd_ray have launch bounds (internal/fused/abi/spec says why).
DEVICE void raster_bwd_ewa_body(Thr th, raster_bwd_args a, SPTR Staged<false, CHUNK>& s, SPTR u32* sId, SPTR float* sGrad)
{
    raster_bwd_run<false>(th, a, s, sId, sGrad);
}

DEVICE void raster_bwd_ray_body(Thr th, raster_bwd_args a, SPTR Staged<true, CHUNK>& s, SPTR u32* sId, SPTR float* sGrad)
{
    raster_bwd_run<true>(th, a, s, sId, sGrad);
}
