// loss.cu — design.md §5 step 5: L1 / MSE and the SSIM term (11×11 Gaussian window, σ = 1.5,
// separable, zero padding, C1 = 0.01², C2 = 0.03²) with the pixel gradient of the blended loss
// (internal/loss/evaluator.go is the CPU twin; the filters sum their taps in the same order with
// the same rounding). Images are [H*W,3] f32, row-major.
//
// The image is cut into LOSS_TILE×LOSS_TILE tiles (abi.h: 16) of output pixels, one block of
// 256 threads a tile (a 1-D grid in row-major tile order; thread tid owns pixel
// (tid % LOSS_TILE, tid / LOSS_TILE) of its tile). A tile stages its SPAN×SPAN window (the tile and its RADIUS-pixel halo) in shared
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
// outputs (LOSS_TILE columns × SPAN rows) column-major as well, planes HPX apart. The horizontal
// pass gives work item p = col*SPAN + row to consecutive threads, so tap t reads plane[p +
// t*SPAN]: consecutive words, no bank conflicts. The vertical pass reads (tx*SPAN + ty + t) for
// a warp's 16 tx and two ty: 26·tx mod 32 runs through the 16 even banks, and the two rows add
// an even and an odd offset, so it is free of conflicts too. PLANE is odd so that stage_rgb's
// stores, which run over the channels of neighbouring pixels, spread over the banks.
#include "prelude.h"
#include "common.h"
#include "readout.h"
#include "entries/loss.h"

#define KIND_L1SSIM 0
#define KIND_MSE 1
#define KIND_MSESSIM 2
#define RADIUS 5
#define TAPS (2 * RADIUS + 1)
#define SSIM_C1 1e-4f
#define SSIM_C2 9e-4f

#define SPAN (LOSS_TILE + 2u * RADIUS) // 26: the tile (LOSS_TILE, abi.h) and its halo
#define PLANE (SPAN * SPAN + 1u)       // 677: floats per staged plane (odd: see above)
#define HPX (LOSS_TILE * SPAN)         // 416: horizontal-pass outputs per plane (13 warps' worth)

// LossP (passed by value: the coefficients and window) is declared in abi.h.

// TileAt is the tile of the thread's block and the pixel the thread owns in it.
struct TileAt {
    int x0, y0;  // the tile's first pixel
    u32 tx, ty;  // the thread's pixel within the tile
    bool in;     // the pixel is inside the image
    u32 i;       // its index when in
};

DEVICE TileAt tile_at(Thr th, const LossP& lp)
{
    TileAt t;
    u32 tilesX = ((u32)lp.W + LOSS_TILE - 1u) / LOSS_TILE;
    t.x0 = (int)((th.bid % tilesX) * LOSS_TILE);
    t.y0 = (int)((th.bid / tilesX) * LOSS_TILE);
    t.tx = th.tid % LOSS_TILE;
    t.ty = th.tid / LOSS_TILE;
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
DEVICE void stage_rgb(Thr th, SPTR float* dst, const GPTR float* src, const LossP& lp, const TileAt& tl)
{
    for (u32 k = th.tid; k < SPAN * SPAN * 3u; k += 256u) {
        u32 row = k / (SPAN * 3u), rem = k - row * (SPAN * 3u);
        u32 col = rem / 3u, c = rem - col * 3u;
        u32 j;
        dst[c * PLANE + col * SPAN + row] = in_image(lp, tl, col, row, j) ? src[j * 3u + c] : 0.0f;
    }
}

// stage_dmap copies the tile's window of dmap's 9 planes into 9 planes of dst, 0 outside the
// image; k runs along the window's rows.
DEVICE void stage_dmap(Thr th, SPTR float* dst, const GPTR float* dmap, const LossP& lp, const TileAt& tl)
{
    u32 npx = (u32)lp.W * (u32)lp.H;
    for (u32 k = th.tid; k < 9u * SPAN * SPAN; k += 256u) {
        u32 q = k / (SPAN * SPAN), rem = k - q * (SPAN * SPAN);
        u32 row = rem / SPAN, col = rem - row * SPAN;
        u32 j;
        dst[q * PLANE + col * SPAN + row] = in_image(lp, tl, col, row, j) ? dmap[q * npx + j] : 0.0f;
    }
}

// block_sum3 reduces three two-float sums over the block (256 threads; s holds 1536
// floats) in a fixed tree order; thread 0 gets sum k as s[512k] + s[512k + 256].
DEVICE void block_sum3(Thr th, SPTR float* s, float ah, float al, float qh, float ql, float mh, float ml)
{
    const u32 tid = th.tid;
    s[tid] = ah;
    s[256 + tid] = al;
    s[512 + tid] = qh;
    s[768 + tid] = ql;
    s[1024 + tid] = mh;
    s[1280 + tid] = ml;
    BARRIER();
    for (u32 st = 128u; st > 0u; st >>= 1) {
        if (tid < st) {
            for (u32 k = 0; k < 3u; k++) {
                SPTR float* q = s + 512u * k;
                float h = q[tid], l = q[256 + tid];
                df_add(h, l, q[tid + st], q[256 + tid + st]);
                q[tid] = h;
                q[256 + tid] = l;
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

// The block-shared sIn holds the staged image (planes 0..2) and target (3..5), afterwards the
// reduction's scratch; sH the horizontal pass of one channel at a time (planes x, y, x², y², xy;
// 32 KB of threadgroup memory at most, for Metal).
DEVICE void loss_map_body(Thr th, loss_map_args a, SPTR float* sIn, SPTR float* sH)
{
    if (a.readout[RO_ABORT]) return;
    const LossP& lp = a.lp;
    const GPTR float* img = a.img;
    const GPTR float* target = a.target;
    TileAt tl = tile_at(th, lp);
    float ah = 0.0f, al = 0.0f, qh = 0.0f, ql = 0.0f, mh = 0.0f, ml = 0.0f;
    if (!lp.ssim) {
        if (tl.in) {
            for (u32 c = 0; c < 3u; c++) {
                float x = img[tl.i * 3u + c], y = target[tl.i * 3u + c];
                add_diff(x, y, ah, al, qh, ql);
                if (lp.kind == KIND_MSE) a.grad[tl.i * 3u + c] = mul_rn(lp.pointCoef, x - y);
            }
        }
    } else {
        stage_rgb(th, sIn, img, lp, tl);
        stage_rgb(th, sIn + 3u * PLANE, target, lp, tl);
        BARRIER();
        const u32 own = (tl.tx + RADIUS) * SPAN + tl.ty + RADIUS;
        if (tl.in) {
            for (u32 c = 0; c < 3u; c++) add_diff(sIn[c * PLANE + own], sIn[(3u + c) * PLANE + own], ah, al, qh, ql);
        }
        const u32 col = tl.tx * SPAN + tl.ty;
        const u32 npx = (u32)lp.W * (u32)lp.H;
        for (u32 c = 0; c < 3u; c++) {
            // Along x, for the LOSS_TILE columns over all SPAN rows of the window: HPX items.
            for (u32 p = th.tid; p < HPX; p += 256u) {
                const SPTR float* pa = sIn + c * PLANE + p;
                const SPTR float* pb = sIn + (3u + c) * PLANE + p;
                float q0 = 0.0f, q1 = 0.0f, q2 = 0.0f, q3 = 0.0f, q4 = 0.0f;
                for (u32 t = 0; t < TAPS; t++) {
                    float kk = lp.kern[t];
                    float x = pa[t * SPAN], y = pb[t * SPAN];
                    q0 = q0 + mul_rn(kk, x);
                    q1 = q1 + mul_rn(kk, y);
                    q2 = q2 + mul_rn(kk, mul_rn(x, x));
                    q3 = q3 + mul_rn(kk, mul_rn(y, y));
                    q4 = q4 + mul_rn(kk, mul_rn(x, y));
                }
                SPTR float* o = sH + p;
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
                GPTR float* dm = a.dmap + c * 3u * npx + tl.i;
                dm[0] = mul_rn(mul_rn(mul_rn(2.0f, my), a2 - a1), inv) - mul_rn(mul_rn(mul_rn(2.0f, mx), sv), 1.0f / b1 - 1.0f / b2);
                dm[npx] = -sv / b2;
                dm[2u * npx] = mul_rn(mul_rn(2.0f, a1), inv);
            }
            BARRIER(); // before the next channel's pass overwrites sH (and block_sum3 sIn)
        }
    }
    block_sum3(th, sIn, ah, al, qh, ql, mh, ml);
    if (th.tid == 0u) {
        a.partAbs[2u * th.bid] = sIn[0];
        a.partAbs[2u * th.bid + 1u] = sIn[256];
        a.partSq[2u * th.bid] = sIn[512];
        a.partSq[2u * th.bid + 1u] = sIn[768];
        a.partSsim[2u * th.bid] = sIn[1024];
        a.partSsim[2u * th.bid + 1u] = sIn[1280];
    }
}

// The block-shared sD holds the staged dmap (plane c*3 + {∂μx, ∂E[x²], ∂E[xy]}), sHd one
// channel's horizontal pass (≤ 32 KB in all, for Metal).
DEVICE void loss_grad_body(Thr th, loss_grad_args a, SPTR float* sD, SPTR float* sHd)
{
    if (a.readout[RO_ABORT]) return;
    const LossP& lp = a.lp;
    TileAt tl = tile_at(th, lp);
    stage_dmap(th, sD, a.dmap, lp, tl);
    BARRIER();
    const u32 col = tl.tx * SPAN + tl.ty;
    float gd[9];
    for (u32 c = 0; c < 3u; c++) {
        for (u32 p = th.tid; p < HPX; p += 256u) {
            const SPTR float* src = sD + 3u * c * PLANE + p;
            float h0 = 0.0f, h1 = 0.0f, h2 = 0.0f;
            for (u32 t = 0; t < TAPS; t++) {
                float kk = lp.kern[t];
                h0 = h0 + mul_rn(kk, src[t * SPAN]);
                h1 = h1 + mul_rn(kk, src[PLANE + t * SPAN]);
                h2 = h2 + mul_rn(kk, src[2u * PLANE + t * SPAN]);
            }
            SPTR float* o = sHd + p;
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
        float x = a.img[i * 3u + c], y = a.target[i * 3u + c];
        float ds = gd[c * 3] + mul_rn(mul_rn(2.0f, x), gd[c * 3 + 1]) + mul_rn(y, gd[c * 3 + 2]);
        float pt;
        if (lp.kind == KIND_L1SSIM)
            pt = x > y ? lp.pointCoef : (x < y ? -lp.pointCoef : 0.0f);
        else
            pt = mul_rn(lp.pointCoef, x - y);
        a.grad[i * 3u + c] = pt + mul_rn(lp.ssimCoef, ds);
    }
}

// One block of 256 threads; thread t sums partials t, t+256, ... in order, then a fixed tree;
// the readout gets each sum as a two-float, hi and lo in its two words.
// loss_map writes all three partials of every tile (partSsim 0 without SSIM).
DEVICE void loss_finish_body(Thr th, loss_finish_args a, SPTR float* s)
{
    GPTR u32* readout = a.readout;
    if (readout[RO_ABORT]) return;
    float ah = 0.0f, al = 0.0f, qh = 0.0f, ql = 0.0f, mh = 0.0f, ml = 0.0f;
    for (u32 b = th.tid; b < a.blocks; b += 256u) {
        df_add(ah, al, a.partAbs[2u * b], a.partAbs[2u * b + 1u]);
        df_add(qh, ql, a.partSq[2u * b], a.partSq[2u * b + 1u]);
        df_add(mh, ml, a.partSsim[2u * b], a.partSsim[2u * b + 1u]);
    }
    block_sum3(th, s, ah, al, qh, ql, mh, ml);
    if (th.tid == 0u) {
        readout[RO_L1] = f32_bits(s[0]);
        readout[RO_L1 + 1] = f32_bits(s[256]);
        readout[RO_SQ] = f32_bits(s[512]);
        readout[RO_SQ + 1] = f32_bits(s[768]);
        readout[RO_SSIM] = f32_bits(s[1024]);
        readout[RO_SSIM + 1] = f32_bits(s[1280]);
    }
}
