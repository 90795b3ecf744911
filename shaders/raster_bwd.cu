// raster_bwd.cu — design.md §5 step 6: the loss gradient of every splat's prepared data, walking
// each pixel's list back to front from its last contributor and recomputing alpha (no per-pixel
// hit store); internal/raster/backward.go is the CPU twin. With Bⱼ the colour behind splat j,
//   ∂C/∂cⱼ = αⱼTⱼ,   ∂C/∂αⱼ = cⱼTⱼ − Bⱼ/(1−αⱼ),
// and Tⱼ = Tⱼ₊₁/(1−αⱼ) from the forward's final T. Where the 0.99 clamp is active alpha has no
// gradient to opacity or geometry.
//
// raster_bwd: the thread mapping of raster_fwd (one block per tile, one thread per pixel,
//   batches of BATCH splats staged in shared memory, walked from the tile's longest count down).
//   For each splat, a warp with any hit sums its lanes' contributions (warp_sum_n) and lane 0
//   adds them to the splat's gradients with atomics, so the summation order, and the last bits,
//   vary from run to run.
//   finalT [H*W] f32, count [H*W] u32 (raster_fwd), dImage [H*W,3] f32 (dL/dpixel)
//   gColor [n,3], gOpacity [n]; EWA: gMean2d [n,2], gConic [n,3]; ray: gRayU [n,3], gRayA [n,9]
//   (f32, zeroed by the host, accumulated here)
#include "prelude_cuda.h"
#include "common.h"
#include "readout.h"
#include "raster.h"

KERNEL raster_bwd(Raster rp, const GPTR u32* readout, const GPTR u32* tileOffsets, const GPTR u32* ids,
                  const GPTR float* opacity, const GPTR float* color, const GPTR float* mean2d,
                  const GPTR float* conic, const GPTR float* rayU, const GPTR float* rayA, const GPTR float* rays,
                  const GPTR float* finalT, const GPTR u32* count, const GPTR float* dImage,
                  GPTR float* gColor, GPTR float* gOpacity, GPTR float* gMean2d, GPTR float* gConic,
                  GPTR float* gRayU, GPTR float* gRayA)
{
    if (readout[RO_ABORT]) return;
    SHARED float sGeo[BATCH * GEO];
    SHARED float sOpac[BATCH];
    SHARED float sCut[BATCH];
    SHARED float sCol[BATCH * 3];
    SHARED u32 sOk[BATCH];
    SHARED u32 sId[BATCH];
    SHARED u32 longest;

    u32 tile = BID;
    int ts = rp.tileSize;
    int x = (int)(tile % (u32)rp.tilesX) * ts + (int)(TID % (u32)ts);
    int y = (int)(tile / (u32)rp.tilesX) * ts + (int)(TID / (u32)ts);
    bool inside = TID < (u32)(ts * ts) && x < rp.W && y < rp.H;
    u32 pix = inside ? (u32)y * (u32)rp.W + (u32)x : 0u;
    bool ray = rp.model == MODEL_RAY;
    float d0 = 0.0f, d1 = 0.0f, d2 = 0.0f;
    float T = 0.0f, br = 0.0f, bg = 0.0f, bb = 0.0f, gr = 0.0f, gg = 0.0f, gb = 0.0f;
    u32 cnt = 0;
    if (inside) {
        if (ray) {
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
            sOk[j] = stage_splat(rp, id, opacity, color, mean2d, conic, rayU, rayA, sGeo + j * GEO, sOpac + j,
                                 sCut + j, sCol + j * 3) ? 1u : 0u;
        }
        BARRIER();
        for (u32 jj = nb; jj > 0u; jj--) {
            u32 j = jj - 1u;
            if (!sOk[j]) continue; // the same for every thread
            u32 k = lo + j;
            float v[16];
            for (int q = 0; q < 16; q++) v[q] = 0.0f;
            bool hit = false;
            if (k < cnt) {
                float geo[GEO];
                for (int q = 0; q < GEO; q++) geo[q] = sGeo[j * GEO + q];
                float o = sOpac[j], cut = sCut[j];
                float power = 0.0f, dx = 0.0f, dy = 0.0f, sc = 0.0f;
                float w[3] = {0.0f, 0.0f, 0.0f}, rv[3];
                bool ok;
                if (ray) {
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
                    float c0 = sCol[j * 3], c1 = sCol[j * 3 + 1], c2 = sCol[j * 3 + 2];
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
                        if (ray) {
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
            // Constant counts, so that v stays in registers.
            if (ray)
                warp_sum_n(v, 16);
            else
                warp_sum_n(v, 9);
            if (LANE == 0u) {
                u32 id = sId[j];
                atom_add_f32(gColor + id * 3, v[0]);
                atom_add_f32(gColor + id * 3 + 1, v[1]);
                atom_add_f32(gColor + id * 3 + 2, v[2]);
                atom_add_f32(gOpacity + id, v[3]);
                if (ray) {
                    for (int q = 0; q < 3; q++) atom_add_f32(gRayU + id * 3 + q, v[4 + q]);
                    for (int q = 0; q < 9; q++) atom_add_f32(gRayA + id * 9 + q, v[7 + q]);
                } else {
                    atom_add_f32(gMean2d + id * 2, v[4]);
                    atom_add_f32(gMean2d + id * 2 + 1, v[5]);
                    atom_add_f32(gConic + id * 3, v[6]);
                    atom_add_f32(gConic + id * 3 + 1, v[7]);
                    atom_add_f32(gConic + id * 3 + 2, v[8]);
                }
            }
        }
        BARRIER();
        hi = lo;
    }
}
