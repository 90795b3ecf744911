// loss.cu — design.md §5 step 5: L1 / MSE and the SSIM term (11×11 Gaussian window, σ = 1.5,
// separable, zero padding, C1 = 0.01², C2 = 0.03²) with the pixel gradient of the blended loss
// (internal/loss/evaluator.go is the CPU twin; the filters sum their taps in the same order with
// the same rounding). Images are [H*W,3] f32, row-major.
//
// The image is cut into TILE×TILE tiles of output pixels, one block of 256 threads a tile (a
// 1-D grid in row-major tile order; thread TID owns pixel (TID % TILE, TID / TILE) of its
// tile). A tile stages its SPAN×SPAN window (the tile and its RADIUS-pixel halo) in shared
// memory and runs both passes of the separable filter there: the maps filtered along x alone
// (15 and 9 floats a pixel) never go through global memory, and one kernel does what took a
// launch per pass. Only dmap does, between the two kernels, because its filter needs the map
// over the halo, which needs the image over twice the halo. The price is the halo: the window
// is 2.6 times the tile, and the pass along x runs over 26 rows for 16. The pass along x runs
// one channel at a time, so that each kernel stays within the 32 KB of threadgroup memory
// Metal allows (loss_map 24 KB, loss_grad 29 KB). Nothing runs when readout[RO_ABORT] is set: whole blocks
// return before their first barrier.
// loss_map: per tile, the partial sums of |x−y| and (x−y)² (two-float partAbs, partSq
//   [tiles, 2]: hi, lo) and
//   the MSE gradient when kind is mse. For the SSIM kinds: x, y, x², y², xy of each channel
//   filtered along x over the window's rows, then along y, give μx, μy, E[x²], E[y²], E[xy];
//   the SSIM map's partial sum per tile (two-float partSsim) and the map's partials with respect to
//   μx, E[x²] and E[xy] into dmap [9, H*W], planar (plane c*3 + {∂μx, ∂E[x²], ∂E[xy]}), so
//   that a warp's stores of a plane are two runs of 16 consecutive floats rather than 32
//   scattered ones. partSsim is 0 without SSIM.
// loss_grad (SSIM kinds): dmap filtered along x then y over the tile's window; grad = pointwise
//   term + ssimCoef·(G*∂S/∂μx + 2x·G*∂S/∂E[x²] + y·G*∂S/∂E[xy]).
// loss_finish: one block of 256 threads sums the partials in a fixed order into the readout's
//   two-float word pairs (deterministic run to run).
//
// Zero padding: the staged window holds 0 outside the image. A filter tap on it adds
// mul_rn(k, 0) = +0 to its running sum, which starts at +0 and so is never −0: adding +0 leaves
// it unchanged bit for bit, the same as skipping the tap as the CPU twin does. This is why the
// filters need no border cases; dmap outside the image is staged as 0 too (it is not the map's
// formula applied to zero inputs).
//
// Shared layout: each staged quantity is a column-major plane of the window, element
// (col, row) at col*SPAN + row, planes PLANE floats apart; the horizontal pass writes its
// outputs (TILE columns × SPAN rows) column-major as well, planes HPX apart. The horizontal
// pass gives work item p = col*SPAN + row to consecutive threads, so tap t reads plane[p +
// t*SPAN]: consecutive words, no bank conflicts. The vertical pass reads (tx*SPAN + ty + t) for
// a warp's 16 tx and two ty: 26·tx mod 32 runs through the 16 even banks, and the two rows add
// an even and an odd offset, so it is free of conflicts too. PLANE is odd so that stage_rgb's
// stores, which run over the channels of neighbouring pixels, spread over the banks.
#include "prelude.h"
#include "common.h"
#include "readout.h"

#define KIND_L1SSIM 0
#define KIND_MSE 1
#define KIND_MSESSIM 2
#define RADIUS 5
#define TAPS (2 * RADIUS + 1)
#define SSIM_C1 1e-4f
#define SSIM_C2 9e-4f

#define TILE 16u                    // output pixels per tile edge (internal/fused/loss.go lossTile)
#define SPAN (TILE + 2u * RADIUS)   // 26: the tile and its halo
#define PLANE (SPAN * SPAN + 1u)    // 677: floats per staged plane (odd: see above)
#define HPX (TILE * SPAN)           // 416: horizontal-pass outputs per plane (13 warps' worth)

// LossP (passed by value: the coefficients and window) is declared in abi.h.

// TileAt is the tile of block BID and the pixel thread TID owns in it.
struct TileAt {
    int x0, y0;  // the tile's first pixel
    u32 tx, ty;  // the thread's pixel within the tile
    bool in;     // the pixel is inside the image
    u32 i;       // its index when in
};

DEVICE TileAt tile_at(const LossP& lp)
{
    TileAt t;
    u32 tilesX = ((u32)lp.W + TILE - 1u) / TILE;
    t.x0 = (int)((BID % tilesX) * TILE);
    t.y0 = (int)((BID / tilesX) * TILE);
    t.tx = TID % TILE;
    t.ty = TID / TILE;
    int x = t.x0 + (int)t.tx, y = t.y0 + (int)t.ty;
    t.in = x < lp.W && y < lp.H;
    t.i = t.in ? (u32)y * (u32)lp.W + (u32)x : 0u;
    return t;
}

// in_image says whether window element (col, row) of the tile is a pixel of the image, and
// which.
DEVICE bool in_image(const LossP& lp, const TileAt& tl, u32 col, u32 row, u32& j)
{
    int gx = tl.x0 - RADIUS + (int)col, gy = tl.y0 - RADIUS + (int)row;
    j = (u32)gy * (u32)lp.W + (u32)gx;
    return gx >= 0 && gx < lp.W && gy >= 0 && gy < lp.H;
}

// stage_rgb copies the tile's SPAN×SPAN window of an image ([H*W, 3]) into 3 planes of dst, 0
// outside the image. k runs over the window row by row, channel fastest, so that a warp reads
// a contiguous stretch of an image row.
DEVICE void stage_rgb(float* dst, const GPTR float* src, const LossP& lp, const TileAt& tl)
{
    for (u32 k = TID; k < SPAN * SPAN * 3u; k += 256u) {
        u32 row = k / (SPAN * 3u), rem = k - row * (SPAN * 3u);
        u32 col = rem / 3u, c = rem - col * 3u;
        u32 j;
        dst[c * PLANE + col * SPAN + row] = in_image(lp, tl, col, row, j) ? src[j * 3u + c] : 0.0f;
    }
}

// stage_dmap copies the tile's window of dmap's 9 planes into 9 planes of dst, 0 outside the
// image; k runs along the window's rows.
DEVICE void stage_dmap(float* dst, const GPTR float* dmap, const LossP& lp, const TileAt& tl)
{
    u32 npx = (u32)lp.W * (u32)lp.H;
    for (u32 k = TID; k < 9u * SPAN * SPAN; k += 256u) {
        u32 q = k / (SPAN * SPAN), rem = k - q * (SPAN * SPAN);
        u32 row = rem / SPAN, col = rem - row * SPAN;
        u32 j;
        dst[q * PLANE + col * SPAN + row] = in_image(lp, tl, col, row, j) ? dmap[q * npx + j] : 0.0f;
    }
}

// block_sum3 reduces three two-float sums over the block (256 threads; s holds 1536
// floats) in a fixed tree order; thread 0 gets sum k as s[512k] + s[512k + 256].
DEVICE void block_sum3(float* s, float ah, float al, float qh, float ql, float mh, float ml)
{
    s[TID] = ah;
    s[256 + TID] = al;
    s[512 + TID] = qh;
    s[768 + TID] = ql;
    s[1024 + TID] = mh;
    s[1280 + TID] = ml;
    BARRIER();
    for (u32 st = 128u; st > 0u; st >>= 1) {
        if (TID < st) {
            for (u32 k = 0; k < 3u; k++) {
                float* q = s + 512u * k;
                float h = q[TID], l = q[256 + TID];
                df_add(h, l, q[TID + st], q[256 + TID + st]);
                q[TID] = h;
                q[256 + TID] = l;
            }
        }
        BARRIER();
    }
}

// add_diff adds |a − b| to the two-float (ah, al) and (a − b)² to (qh, ql); a − b is exact
// as d + e, and (d + e)² is taken as d² (exact, two_prod) + 2de (e² is below the sum's ulp).
DEVICE void add_diff(float a, float b, float& ah, float& al, float& qh, float& ql)
{
    float e;
    float d = two_sum(a, -b, e);
    if (d < 0.0f)
        df_add(ah, al, -d, -e);
    else
        df_add(ah, al, d, e);
    float pe;
    float p = two_prod(d, d, pe);
    df_add(qh, ql, p, pe + mul_rn(mul_rn(2.0f, d), e));
}

// 3 blocks an SM rather than 2 (96 registers): 0.056 → 0.050 ms at 799×532 on the H200.
KERNEL BOUNDS(256, 3) loss_map(LossP lp, const GPTR u32* readout, const GPTR float* img, const GPTR float* target,
                GPTR float* grad, GPTR float* dmap, GPTR float* partAbs, GPTR float* partSq,
                GPTR float* partSsim)
{
    if (readout[RO_ABORT]) return;
    // The staged image (planes 0..2) and target (3..5); afterwards the reduction's scratch.
    SHARED float sIn[6u * PLANE];
    // The horizontal pass of one channel at a time (32 KB of threadgroup memory at most, for
    // Metal): plane {x, y, x², y², xy}.
    SHARED float sH[5u * HPX];
    TileAt tl = tile_at(lp);
    float ah = 0.0f, al = 0.0f, qh = 0.0f, ql = 0.0f, mh = 0.0f, ml = 0.0f;
    if (!lp.ssim) {
        if (tl.in) {
            for (u32 c = 0; c < 3u; c++) {
                float a = img[tl.i * 3u + c], b = target[tl.i * 3u + c];
                add_diff(a, b, ah, al, qh, ql);
                if (lp.kind == KIND_MSE) grad[tl.i * 3u + c] = mul_rn(lp.pointCoef, a - b);
            }
        }
    } else {
        stage_rgb(sIn, img, lp, tl);
        stage_rgb(sIn + 3u * PLANE, target, lp, tl);
        BARRIER();
        const u32 own = (tl.tx + RADIUS) * SPAN + tl.ty + RADIUS;
        if (tl.in) {
            for (u32 c = 0; c < 3u; c++) add_diff(sIn[c * PLANE + own], sIn[(3u + c) * PLANE + own], ah, al, qh, ql);
        }
        const u32 col = tl.tx * SPAN + tl.ty;
        const u32 npx = (u32)lp.W * (u32)lp.H;
        for (u32 c = 0; c < 3u; c++) {
            // Along x, for the TILE columns over all SPAN rows of the window: HPX items.
            for (u32 p = TID; p < HPX; p += 256u) {
                const float* pa = sIn + c * PLANE + p;
                const float* pb = sIn + (3u + c) * PLANE + p;
                float q0 = 0.0f, q1 = 0.0f, q2 = 0.0f, q3 = 0.0f, q4 = 0.0f;
                for (u32 t = 0; t < TAPS; t++) {
                    float kk = lp.kern[t];
                    float a = pa[t * SPAN], b = pb[t * SPAN];
                    q0 = q0 + mul_rn(kk, a);
                    q1 = q1 + mul_rn(kk, b);
                    q2 = q2 + mul_rn(kk, mul_rn(a, a));
                    q3 = q3 + mul_rn(kk, mul_rn(b, b));
                    q4 = q4 + mul_rn(kk, mul_rn(a, b));
                }
                float* o = sH + p;
                o[0] = q0;
                o[HPX] = q1;
                o[2u * HPX] = q2;
                o[3u * HPX] = q3;
                o[4u * HPX] = q4;
            }
            BARRIER();
            // Along y, for the thread's own pixel.
            float m[5];
            for (u32 q = 0; q < 5u; q++) m[q] = 0.0f;
            for (u32 t = 0; t < TAPS; t++) {
                float kk = lp.kern[t];
                for (u32 q = 0; q < 5u; q++) m[q] = m[q] + mul_rn(kk, sH[q * HPX + col + t]);
            }
            if (tl.in) {
                float mx = m[0], my = m[1];
                float sx = m[2] - mul_rn(mx, mx);
                float sy = m[3] - mul_rn(my, my);
                float sxy = m[4] - mul_rn(mx, my);
                float a1 = mul_rn(mul_rn(2.0f, mx), my) + SSIM_C1;
                float a2 = mul_rn(2.0f, sxy) + SSIM_C2;
                float b1 = mul_rn(mx, mx) + mul_rn(my, my) + SSIM_C1;
                float b2 = sx + sy + SSIM_C2;
                float inv = 1.0f / mul_rn(b1, b2);
                float sv = mul_rn(mul_rn(a1, a2), inv);
                df_add(mh, ml, sv, 0.0f);
                GPTR float* dm = dmap + c * 3u * npx + tl.i;
                dm[0] = mul_rn(mul_rn(mul_rn(2.0f, my), a2 - a1), inv) - mul_rn(mul_rn(mul_rn(2.0f, mx), sv), 1.0f / b1 - 1.0f / b2);
                dm[npx] = -sv / b2;
                dm[2u * npx] = mul_rn(mul_rn(2.0f, a1), inv);
            }
            BARRIER(); // before the next channel's pass overwrites sH (and block_sum3 sIn)
        }
    }
    block_sum3(sIn, ah, al, qh, ql, mh, ml);
    if (TID == 0u) {
        partAbs[2u * BID] = sIn[0];
        partAbs[2u * BID + 1u] = sIn[256];
        partSq[2u * BID] = sIn[512];
        partSq[2u * BID + 1u] = sIn[768];
        partSsim[2u * BID] = sIn[1024];
        partSsim[2u * BID + 1u] = sIn[1280];
    }
}

KERNEL loss_grad(LossP lp, const GPTR u32* readout, const GPTR float* dmap, const GPTR float* img,
                 const GPTR float* target, GPTR float* grad)
{
    if (readout[RO_ABORT]) return;
    SHARED float sD[9u * PLANE]; // the staged dmap: plane c*3 + {∂μx, ∂E[x²], ∂E[xy]}
    SHARED float sHd[3u * HPX];  // one channel's horizontal pass (≤ 32 KB in all, for Metal)
    TileAt tl = tile_at(lp);
    stage_dmap(sD, dmap, lp, tl);
    BARRIER();
    const u32 col = tl.tx * SPAN + tl.ty;
    float gd[9];
    for (u32 c = 0; c < 3u; c++) {
        for (u32 p = TID; p < HPX; p += 256u) {
            const float* src = sD + 3u * c * PLANE + p;
            float h0 = 0.0f, h1 = 0.0f, h2 = 0.0f;
            for (u32 t = 0; t < TAPS; t++) {
                float kk = lp.kern[t];
                h0 = h0 + mul_rn(kk, src[t * SPAN]);
                h1 = h1 + mul_rn(kk, src[PLANE + t * SPAN]);
                h2 = h2 + mul_rn(kk, src[2u * PLANE + t * SPAN]);
            }
            float* o = sHd + p;
            o[0] = h0;
            o[HPX] = h1;
            o[2u * HPX] = h2;
        }
        BARRIER();
        for (u32 q = 0; q < 3u; q++) gd[c * 3u + q] = 0.0f;
        for (u32 t = 0; t < TAPS; t++) {
            float kk = lp.kern[t];
            for (u32 q = 0; q < 3u; q++) gd[c * 3u + q] = gd[c * 3u + q] + mul_rn(kk, sHd[q * HPX + col + t]);
        }
        BARRIER(); // before the next channel's pass overwrites sHd
    }
    if (!tl.in) return;
    u32 i = tl.i;
    for (u32 c = 0; c < 3u; c++) {
        float a = img[i * 3u + c], b = target[i * 3u + c];
        float ds = gd[c * 3] + mul_rn(mul_rn(2.0f, a), gd[c * 3 + 1]) + mul_rn(b, gd[c * 3 + 2]);
        float pt;
        if (lp.kind == KIND_L1SSIM)
            pt = a > b ? lp.pointCoef : (a < b ? -lp.pointCoef : 0.0f);
        else
            pt = mul_rn(lp.pointCoef, a - b);
        grad[i * 3u + c] = pt + mul_rn(lp.ssimCoef, ds);
    }
}

// One block of 256 threads; thread t sums partials t, t+256, ... in order, then a fixed tree;
// the readout gets each sum as a two-float, hi and lo in its two words.
// loss_map writes all three partials of every tile (partSsim 0 without SSIM).
KERNEL loss_finish(const GPTR float* partAbs, const GPTR float* partSq, const GPTR float* partSsim,
                   u32 blocks, GPTR u32* readout)
{
    if (readout[RO_ABORT]) return;
    SHARED float s[1536];
    float ah = 0.0f, al = 0.0f, qh = 0.0f, ql = 0.0f, mh = 0.0f, ml = 0.0f;
    for (u32 b = TID; b < blocks; b += 256u) {
        df_add(ah, al, partAbs[2u * b], partAbs[2u * b + 1u]);
        df_add(qh, ql, partSq[2u * b], partSq[2u * b + 1u]);
        df_add(mh, ml, partSsim[2u * b], partSsim[2u * b + 1u]);
    }
    block_sum3(s, ah, al, qh, ql, mh, ml);
    if (TID == 0u) {
        readout[RO_L1] = f32_bits(s[0]);
        readout[RO_L1 + 1] = f32_bits(s[256]);
        readout[RO_SQ] = f32_bits(s[512]);
        readout[RO_SQ + 1] = f32_bits(s[768]);
        readout[RO_SSIM] = f32_bits(s[1024]);
        readout[RO_SSIM + 1] = f32_bits(s[1280]);
    }
}
