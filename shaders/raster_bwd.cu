// raster_bwd.cu — design.md §5 step 6: the loss gradient of every splat's prepared data, walking
// each pixel's list back to front from its last contributor and recomputing alpha (no per-pixel
// hit store); internal/raster/backward.go is the CPU twin. With Bⱼ the colour behind splat j,
//   ∂C/∂cⱼ = αⱼTⱼ,   ∂C/∂αⱼ = cⱼTⱼ − Bⱼ/(1−αⱼ),
// and Tⱼ = Tⱼ₊₁/(1−αⱼ) from the forward's final T. Where the 0.99 clamp is active alpha has no
// gradient to opacity or geometry.
//
// raster_bwd_ewa, raster_bwd_ray: one kernel compiled per render model, as raster_fwd_*, with
//   its thread mapping (one block per tile, one thread per pixel, batches of BATCH splats
//   staged in shared memory, walked from the tile's longest count down). For each splat, a
//   warp with any hit sums its lanes' contributions, 16 values a lane (EWA's 9 padded with
//   zeros), with one transposing butterfly (warp_sum16_spread: 16 shuffles, where summing each
//   value on its own took 5 a value), which leaves value i's warp sum in lanes 2i and 2i+1; the
//   even lanes of the values in use then add them to the splat's gradients with one atomic
//   each, all in the same instruction. The atomics' order, and so the last bits, vary from
//   run to run.
//   finalT [H*W] f32, count [H*W] u32 (raster_fwd), dImage [H*W,3] f32 (dL/dpixel)
//   gColor [n,3], gOpacity [n]; EWA: gMean2d [n,2], gConic [n,3]; ray: gRayU [n,3], gRayA [n,9]
//   (f32, zeroed by the host, accumulated here)
#include "prelude_cuda.h"
#include "common.h"
#include "readout.h"
#include "raster.h"

// grad_ptr is the gradient word of value index q (0 ≤ q < 16 for ray, < 9 for EWA) of splat
// id, in raster_bwd's v order: colour 3, opacity 1, then EWA mean2d 2, conic 3 or ray u 3, A 9.
template <bool RAY>
DEVICE GPTR float* grad_ptr(u32 id, u32 q, GPTR float* gColor, GPTR float* gOpacity, GPTR float* gMean2d,
                            GPTR float* gConic, GPTR float* gRayU, GPTR float* gRayA)
{
    if (q < 3u) return gColor + id * 3u + q;
    if (q == 3u) return gOpacity + id;
    if (RAY) return q < 7u ? gRayU + id * 3u + (q - 4u) : gRayA + id * 9u + (q - 7u);
    return q < 6u ? gMean2d + id * 2u + (q - 4u) : gConic + id * 3u + (q - 6u);
}

template <bool RAY>
DEVICE void raster_bwd_body(Staged<RAY>& s, u32* sId, u32& longest, const Raster& rp, const GPTR u32* tileOffsets,
                            const GPTR u32* ids, const GPTR float* opacity, const GPTR float* color,
                            const GPTR float* mean2d, const GPTR float* conic, const GPTR float* rayU,
                            const GPTR float* rayA, const GPTR float* rays, const GPTR float* finalT,
                            const GPTR u32* count, const GPTR float* dImage, GPTR float* gColor,
                            GPTR float* gOpacity, GPTR float* gMean2d, GPTR float* gConic, GPTR float* gRayU,
                            GPTR float* gRayA)
{
    // Gradient values per splat: colour 3, opacity 1, EWA mean2d 2 + conic 3, ray u 3 + A 9.
    const u32 nv = RAY ? 16u : 9u;
    u32 tile = BID;
    int ts = rp.tileSize;
    int x = (int)(tile % (u32)rp.tilesX) * ts + (int)(TID % (u32)ts);
    int y = (int)(tile / (u32)rp.tilesX) * ts + (int)(TID / (u32)ts);
    bool inside = TID < (u32)(ts * ts) && x < rp.W && y < rp.H;
    u32 pix = inside ? (u32)y * (u32)rp.W + (u32)x : 0u;
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f;
    float T = 0.0f, br = 0.0f, bg = 0.0f, bb = 0.0f, gr = 0.0f, gg = 0.0f, gb = 0.0f;
    u32 cnt = 0;
    if (inside) {
        if (RAY) {
            d0 = rays[pix * 3];
            d1 = rays[pix * 3 + 1];
            d2 = rays[pix * 3 + 2];
        }
        T = finalT[pix];
        br = mul_rn(T, rp.bg[0]);
        bg = mul_rn(T, rp.bg[1]);
        bb = mul_rn(T, rp.bg[2]);
        gr = dImage[pix * 3];
        gg = dImage[pix * 3 + 1];
        gb = dImage[pix * 3 + 2];
        cnt = count[pix];
    }
    if (TID == 0u) longest = 0u;
    BARRIER();
    if (cnt > 0u) shared_max_u32(&longest, cnt);
    BARRIER();
    u32 start = tileOffsets[tile];
    u32 hi = longest;
    while (hi > 0u) {
        u32 lo = hi > (u32)BATCH ? hi - (u32)BATCH : 0u;
        u32 nb = hi - lo;
        for (u32 j = TID; j < nb; j += BDIM) {
            u32 id = ids[start + lo + j];
            sId[j] = id;
            s.ok[j] = stage_splat<RAY>(rp, id, j, opacity, color, mean2d, conic, rayU, rayA, s) ? 1u : 0u;
        }
        BARRIER();
        for (u32 jj = nb; jj > 0u; jj--) {
            u32 j = jj - 1u;
            if (!s.ok[j]) continue; // the same for every thread
            u32 k = lo + j;
            float v[16];
            for (int q = 0; q < 16; q++) v[q] = 0.0f;
            bool hit = false;
            if (k < cnt) {
                float geo[GEO_N(RAY)];
                load_geo<RAY>(s, j, geo);
                float o = s.opac[j], cut = s.cut[j];
                float power = 0.0f, dx = 0.0f, dy = 0.0f, sc = 0.0f;
                float w[3] = {0.0f, 0.0f, 0.0f}, rv[3];
                bool ok;
                if (RAY) {
                    ok = ray_perp(geo, cut, d0, d1, d2, w, sc, rv);
                    if (ok) power = ray_power(w);
                } else {
                    power = ewa_power(geo, x, y, dx, dy);
                    ok = power >= cut && !(power > 0.0f);
                }
                float g = 0.0f, alpha = 0.0f;
                bool clamped = false;
                if (ok) {
                    alpha = alpha_of(o, power, g, clamped);
                    ok = alpha >= rp.alphaMin;
                }
                if (ok) {
                    hit = true;
                    float c0 = s.col[j * 3], c1 = s.col[j * 3 + 1], c2 = s.col[j * 3 + 2];
                    float inv = 1.0f / (1.0f - alpha);
                    float tj = T * inv;
                    float wt = alpha * tj;
                    float dLdA = gr * (c0 * tj - br * inv) + gg * (c1 * tj - bg * inv) + gb * (c2 * tj - bb * inv);
                    br += c0 * wt;
                    bg += c1 * wt;
                    bb += c2 * wt;
                    T = tj;
                    v[0] = gr * wt;
                    v[1] = gg * wt;
                    v[2] = gb * wt;
                    if (!clamped) {
                        v[3] = dLdA * g;
                        float dp = dLdA * alpha;
                        if (RAY) {
                            v[4] = -dp * w[0];
                            v[5] = -dp * w[1];
                            v[6] = -dp * w[2];
                            float q = dp * sc;
                            for (int r = 0; r < 3; r++) {
                                float qr = q * w[r];
                                v[7 + r * 3] = qr * d0;
                                v[8 + r * 3] = qr * d1;
                                v[9 + r * 3] = qr * d2;
                            }
                        } else {
                            float a = geo[2], b = geo[3], c = geo[4];
                            v[4] = dp * (a * dx + b * dy);
                            v[5] = dp * (b * dx + c * dy);
                            v[6] = -(dp * dx * dx / 2.0f);
                            v[7] = -(dp * dx * dy);
                            v[8] = -(dp * dy * dy / 2.0f);
                        }
                    }
                }
            }
            if (!warp_any(hit)) continue;
            // Lanes 2q and 2q+1 get value q's warp sum; the even ones of the nv values in use
            // add it to its gradient, in one atomic instruction for the warp.
            float sum = warp_sum16_spread(v);
            u32 q = LANE >> 1;
            if ((LANE & 1u) == 0u && q < nv)
                atom_add_f32(grad_ptr<RAY>(sId[j], q, gColor, gOpacity, gMean2d, gConic, gRayU, gRayA), sum);
        }
        BARRIER();
        hi = lo;
    }
}

KERNEL raster_bwd_ewa(Raster rp, const GPTR u32* readout, const GPTR u32* tileOffsets, const GPTR u32* ids,
                      const GPTR float* opacity, const GPTR float* color, const GPTR float* mean2d,
                      const GPTR float* conic, const GPTR float* rayU, const GPTR float* rayA,
                      const GPTR float* rays, const GPTR float* finalT, const GPTR u32* count,
                      const GPTR float* dImage, GPTR float* gColor, GPTR float* gOpacity, GPTR float* gMean2d,
                      GPTR float* gConic, GPTR float* gRayU, GPTR float* gRayA)
{
    if (readout[RO_ABORT]) return;
    SHARED Staged<false> s;
    SHARED u32 sId[BATCH];
    SHARED u32 longest;
    raster_bwd_body<false>(s, sId, longest, rp, tileOffsets, ids, opacity, color, mean2d, conic, rayU, rayA, rays,
                           finalT, count, dImage, gColor, gOpacity, gMean2d, gConic, gRayU, gRayA);
}

KERNEL raster_bwd_ray(Raster rp, const GPTR u32* readout, const GPTR u32* tileOffsets, const GPTR u32* ids,
                      const GPTR float* opacity, const GPTR float* color, const GPTR float* mean2d,
                      const GPTR float* conic, const GPTR float* rayU, const GPTR float* rayA,
                      const GPTR float* rays, const GPTR float* finalT, const GPTR u32* count,
                      const GPTR float* dImage, GPTR float* gColor, GPTR float* gOpacity, GPTR float* gMean2d,
                      GPTR float* gConic, GPTR float* gRayU, GPTR float* gRayA)
{
    if (readout[RO_ABORT]) return;
    SHARED Staged<true> s;
    SHARED u32 sId[BATCH];
    SHARED u32 longest;
    raster_bwd_body<true>(s, sId, longest, rp, tileOffsets, ids, opacity, color, mean2d, conic, rayU, rayA, rays,
                          finalT, count, dImage, gColor, gOpacity, gMean2d, gConic, gRayU, gRayA);
}
