// loss.cu — design.md §5 step 5: L1 / MSE and the SSIM term (11×11 Gaussian window, σ = 1.5,
// separable, zero padding, C1 = 0.01², C2 = 0.03²) with the pixel gradient of the blended loss
// (internal/loss/evaluator.go is the CPU twin; the filters sum their taps in the same order with
// the same rounding). Images are [H*W,3] f32, row-major.
//
// Blocks of exactly 256 threads, one thread per pixel; nothing runs when readout[RO_ABORT] is set.
// The horizontal passes (loss_pointwise, loss_ssim_dx) are row-linear: i = BID*BDIM + TID,
// ceil(H*W/256) blocks, each staging its 256 pixels plus RADIUS on either side (266) into shared
// memory. The vertical passes (loss_ssim, loss_ssim_grad) use 32×8-pixel tiles, ceil(W/32) ×
// ceil(H/8) blocks (BID = tileY*tilesX + tileX), each staging its 32 columns × 18 rows (RADIUS
// above and below). Shared-memory tiles so the 11-tap filters read their neighbourhoods once per
// block, coalesced, instead of up to 11 × 15 floats per pixel from global memory; static shared
// memory per block: loss_pointwise 10.5 KB, loss_ssim 34.6 KB, loss_ssim_dx 13.7 KB,
// loss_ssim_grad 20.7 KB.
// loss_pointwise: partial sums of |x−y| and (x−y)² per block (f64 partAbs, partSq [blocks]);
//   the MSE gradient when kind is mse; for the SSIM kinds the five quantities x, y, x², y², xy
//   of each channel filtered along x into hq [H*W,15].
// loss_ssim: hq filtered along y gives μx, μy, E[x²], E[y²], E[xy]; the SSIM map's values per
//   channel into hd[i*9 .. i*9+2] (scratch until loss_ssim_dx), the map's partials with respect
//   to μx, E[x²] and E[xy] into dmap [H*W,9].
// loss_ssim_dx: the SSIM map's partial sums per row-linear block (f64 partSsim [blocks], summed
//   per pixel and per block in the same order as the loss_pointwise partials); dmap filtered
//   along x into hd [H*W,9].
// loss_ssim_grad: hd filtered along y; grad = pointwise term + ssimCoef·(G*∂S/∂μx + 2x·G*∂S/∂E[x²]
//   + y·G*∂S/∂E[xy]).
// loss_finish: one block of 256 threads sums the partials in a fixed order into the readout's
//   float64 words (deterministic run to run).
#include "prelude_cuda.h"
#include "common.h"
#include "readout.h"

#define KIND_L1SSIM 0
#define KIND_MSE 1
#define KIND_MSESSIM 2
#define RADIUS 5
#define SSIM_C1 1e-4f
#define SSIM_C2 9e-4f

// LossP is passed by value (internal/fused/loss.go): 17 four-byte words.
struct LossP {
    i32 W, H, kind, ssim;
    float pointCoef, ssimCoef;
    float kern[11];
};

// block_sum2 reduces a and b over the block (256 threads) in a fixed tree order; thread 0 gets
// the sums.
DEVICE void block_sum2(double* s, double a, double b)
{
    s[TID] = a;
    s[256 + TID] = b;
    BARRIER();
    for (u32 st = 128u; st > 0u; st >>= 1) {
        if (TID < st) {
            s[TID] += s[TID + st];
            s[256 + TID] += s[256 + TID + st];
        }
        BARRIER();
    }
}

// The filter passes read their 11-tap neighbourhoods from shared memory, staged cooperatively
// (coalesced) with the RADIUS halo, instead of re-reading up to 11 × 15 floats per pixel from
// global memory. Taps outside the image are skipped exactly as before (zero padding), so the
// sums are bit-identical to per-thread global loads.
#define SPAN (256 + 2 * RADIUS) // pixels a 256-pixel row-linear block reads along x
#define TILE_W 32
#define TILE_H 8 // TILE_W * TILE_H == 256 threads
#define TROWS (TILE_H + 2 * RADIUS)

// stage_linear copies the floats of pixels [p0, p0 + SPAN) (nc channels each) into sh, zero
// where a pixel is outside [0, npx); p0 may be negative. All threads of the block call it.
DEVICE void stage_linear(float* sh, const GPTR float* src, int p0, int npx, int nc)
{
    int n = SPAN * nc, g0 = p0 * nc, gend = npx * nc;
    for (int e = (int)TID; e < n; e += 256) {
        int g = g0 + e;
        sh[e] = (g >= 0 && g < gend) ? src[g] : 0.0f;
    }
}

// stage_tile copies the TILE_W × TROWS pixels (nc channels each) at columns x0.., rows
// y0 − RADIUS.. into sh, zero outside the image. All threads of the block call it.
DEVICE void stage_tile(float* sh, const GPTR float* src, int x0, int y0, int W, int H, int nc)
{
    int rowN = TILE_W * nc, n = TROWS * rowN;
    for (int e = (int)TID; e < n; e += 256) {
        int r = e / rowN, rem = e - r * rowN;
        int gx = x0 + rem / nc, gy = y0 - RADIUS + r;
        sh[e] = (gx < W && gy >= 0 && gy < H) ? src[((u32)gy * (u32)W + (u32)gx) * (u32)nc + (u32)(rem % nc)] : 0.0f;
    }
}

KERNEL loss_pointwise(LossP lp, const GPTR u32* readout, const GPTR float* img, const GPTR float* target,
                      GPTR float* grad, GPTR float* hq, GPTR double* partAbs, GPTR double* partSq)
{
    if (readout[RO_ABORT]) return;
    SHARED double s[512];
    SHARED float sa_img[SPAN * 3];
    SHARED float sa_tgt[SPAN * 3];
    u32 npx = (u32)lp.W * (u32)lp.H;
    u32 i = BID * BDIM + TID;
    if (lp.ssim) { // uniform per launch
        int p0 = (int)(BID * BDIM) - RADIUS;
        stage_linear(sa_img, img, p0, (int)npx, 3);
        stage_linear(sa_tgt, target, p0, (int)npx, 3);
        BARRIER();
    }
    double sa = 0.0, sq = 0.0;
    if (i < npx) {
        int x = (int)(i % (u32)lp.W);
        for (int c = 0; c < 3; c++) {
            float a = img[i * 3 + c], b = target[i * 3 + c];
            double d = (double)a - (double)b;
            sa += d < 0.0 ? -d : d;
            sq += d * d;
            if (lp.kind == KIND_MSE) grad[i * 3 + c] = mul_rn(lp.pointCoef, a - b);
        }
        if (lp.ssim) {
            float acc[15];
            for (int q = 0; q < 15; q++) acc[q] = 0.0f;
            for (int t = -RADIUS; t <= RADIUS; t++) {
                int xs = x + t;
                if (xs < 0 || xs >= lp.W) continue;
                float k = lp.kern[t + RADIUS];
                u32 j = TID + (u32)(RADIUS + t); // pixel i + t in the staged span
                for (int c = 0; c < 3; c++) {
                    float a = sa_img[j * 3 + c], b = sa_tgt[j * 3 + c];
                    acc[c * 5] = acc[c * 5] + mul_rn(k, a);
                    acc[c * 5 + 1] = acc[c * 5 + 1] + mul_rn(k, b);
                    acc[c * 5 + 2] = acc[c * 5 + 2] + mul_rn(k, mul_rn(a, a));
                    acc[c * 5 + 3] = acc[c * 5 + 3] + mul_rn(k, mul_rn(b, b));
                    acc[c * 5 + 4] = acc[c * 5 + 4] + mul_rn(k, mul_rn(a, b));
                }
            }
            for (int q = 0; q < 15; q++) hq[i * 15 + q] = acc[q];
        }
    }
    block_sum2(s, sa, sq);
    if (TID == 0u) {
        partAbs[BID] = s[0];
        partSq[BID] = s[256];
    }
}

// 2-D tiles: BID → tile (BID % tilesX, BID / tilesX), TID → pixel (TID % TILE_W, TID / TILE_W).
// The SSIM map values go to hd[i*9 .. i*9+2] (hd is free until loss_ssim_dx, which reads them
// back per pixel, sums them in the old order and writes partSsim per row-linear block).
KERNEL loss_ssim(LossP lp, const GPTR u32* readout, const GPTR float* hq, GPTR float* dmap, GPTR float* hd)
{
    if (readout[RO_ABORT]) return;
    SHARED float sq[TROWS * TILE_W * 15];
    u32 tilesX = ((u32)lp.W + TILE_W - 1u) / TILE_W;
    int x0 = (int)((BID % tilesX) * TILE_W), y0 = (int)((BID / tilesX) * TILE_H);
    stage_tile(sq, hq, x0, y0, lp.W, lp.H, 15);
    BARRIER();
    int lx = (int)(TID % TILE_W), ly = (int)(TID / TILE_W);
    int x = x0 + lx, y = y0 + ly;
    if (x < lp.W && y < lp.H) {
        u32 i = (u32)y * (u32)lp.W + (u32)x;
        float m[15];
        for (int q = 0; q < 15; q++) m[q] = 0.0f;
        for (int t = -RADIUS; t <= RADIUS; t++) {
            int ys = y + t;
            if (ys < 0 || ys >= lp.H) continue;
            float k = lp.kern[t + RADIUS];
            u32 j = (u32)((ly + RADIUS + t) * TILE_W + lx);
            for (int q = 0; q < 15; q++) m[q] = m[q] + mul_rn(k, sq[j * 15 + q]);
        }
        for (int c = 0; c < 3; c++) {
            float mx = m[c * 5], my = m[c * 5 + 1];
            float sx = m[c * 5 + 2] - mul_rn(mx, mx);
            float sy = m[c * 5 + 3] - mul_rn(my, my);
            float sxy = m[c * 5 + 4] - mul_rn(mx, my);
            float a1 = mul_rn(mul_rn(2.0f, mx), my) + SSIM_C1;
            float a2 = mul_rn(2.0f, sxy) + SSIM_C2;
            float b1 = mul_rn(mx, mx) + mul_rn(my, my) + SSIM_C1;
            float b2 = sx + sy + SSIM_C2;
            float inv = 1.0f / mul_rn(b1, b2);
            float sv = mul_rn(mul_rn(a1, a2), inv);
            hd[i * 9 + c] = sv;
            dmap[i * 9 + c * 3] = mul_rn(mul_rn(mul_rn(2.0f, my), a2 - a1), inv) - mul_rn(mul_rn(mul_rn(2.0f, mx), sv), 1.0f / b1 - 1.0f / b2);
            dmap[i * 9 + c * 3 + 1] = -sv / b2;
            dmap[i * 9 + c * 3 + 2] = mul_rn(mul_rn(2.0f, a1), inv);
        }
    }
}

KERNEL loss_ssim_dx(LossP lp, const GPTR u32* readout, const GPTR float* dmap, GPTR float* hd,
                    GPTR double* partSsim)
{
    if (readout[RO_ABORT]) return;
    SHARED double s[512];
    SHARED float sd[SPAN * 9];
    u32 npx = (u32)lp.W * (u32)lp.H;
    u32 i = BID * BDIM + TID;
    stage_linear(sd, dmap, (int)(BID * BDIM) - RADIUS, (int)npx, 9);
    BARRIER();
    double sum = 0.0;
    if (i < npx) {
        for (int c = 0; c < 3; c++) sum += (double)hd[i * 9 + c]; // loss_ssim's map values
        int x = (int)(i % (u32)lp.W);
        float acc[9];
        for (int q = 0; q < 9; q++) acc[q] = 0.0f;
        for (int t = -RADIUS; t <= RADIUS; t++) {
            int xs = x + t;
            if (xs < 0 || xs >= lp.W) continue;
            float k = lp.kern[t + RADIUS];
            u32 j = TID + (u32)(RADIUS + t);
            for (int q = 0; q < 9; q++) acc[q] = acc[q] + mul_rn(k, sd[j * 9 + q]);
        }
        for (int q = 0; q < 9; q++) hd[i * 9 + q] = acc[q];
    }
    block_sum2(s, sum, 0.0);
    if (TID == 0u) partSsim[BID] = s[0];
}

KERNEL loss_ssim_grad(LossP lp, const GPTR u32* readout, const GPTR float* hd, const GPTR float* img,
                      const GPTR float* target, GPTR float* grad)
{
    if (readout[RO_ABORT]) return;
    SHARED float sh[TROWS * TILE_W * 9];
    u32 tilesX = ((u32)lp.W + TILE_W - 1u) / TILE_W;
    int x0 = (int)((BID % tilesX) * TILE_W), y0 = (int)((BID / tilesX) * TILE_H);
    stage_tile(sh, hd, x0, y0, lp.W, lp.H, 9);
    BARRIER();
    int lx = (int)(TID % TILE_W), ly = (int)(TID / TILE_W);
    int x = x0 + lx, y = y0 + ly;
    if (x >= lp.W || y >= lp.H) return; // after the only barrier
    u32 i = (u32)y * (u32)lp.W + (u32)x;
    float gd[9];
    for (int q = 0; q < 9; q++) gd[q] = 0.0f;
    for (int t = -RADIUS; t <= RADIUS; t++) {
        int ys = y + t;
        if (ys < 0 || ys >= lp.H) continue;
        float k = lp.kern[t + RADIUS];
        u32 j = (u32)((ly + RADIUS + t) * TILE_W + lx);
        for (int q = 0; q < 9; q++) gd[q] = gd[q] + mul_rn(k, sh[j * 9 + q]);
    }
    for (int c = 0; c < 3; c++) {
        float a = img[i * 3 + c], b = target[i * 3 + c];
        float ds = gd[c * 3] + mul_rn(mul_rn(2.0f, a), gd[c * 3 + 1]) + mul_rn(b, gd[c * 3 + 2]);
        float pt;
        if (lp.kind == KIND_L1SSIM)
            pt = a > b ? lp.pointCoef : (a < b ? -lp.pointCoef : 0.0f);
        else
            pt = mul_rn(lp.pointCoef, a - b);
        grad[i * 3 + c] = pt + mul_rn(lp.ssimCoef, ds);
    }
}

// One block of 256 threads; thread t sums partials t, t+256, ... in order, then a fixed tree.
KERNEL loss_finish(const GPTR double* partAbs, const GPTR double* partSq, const GPTR double* partSsim,
                   u32 blocks, u32 ssim, GPTR u32* readout)
{
    if (readout[RO_ABORT]) return;
    SHARED double s[512];
    double a = 0.0, q = 0.0, m = 0.0;
    for (u32 b = TID; b < blocks; b += 256u) {
        a += partAbs[b];
        q += partSq[b];
        if (ssim) m += partSsim[b];
    }
    block_sum2(s, a, q);
    double sa = s[0], sq = s[256];
    BARRIER();
    block_sum2(s, m, 0.0);
    if (TID == 0u) {
        GPTR double* out = (GPTR double*)readout;
        out[RO_L1 / 2] = sa;
        out[RO_SQ / 2] = sq;
        out[RO_SSIM / 2] = s[0];
    }
}
