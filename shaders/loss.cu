// loss.cu — design.md §5 step 5: L1 / MSE and the SSIM term (11×11 Gaussian window, σ = 1.5,
// separable, zero padding, C1 = 0.01², C2 = 0.03²) with the pixel gradient of the blended loss
// (internal/loss/evaluator.go is the CPU twin; the filters sum their taps in the same order with
// the same rounding). Images are [H*W,3] f32, row-major.
//
// Every kernel: one thread per pixel, i = BID*BDIM + TID, blocks of exactly 256 threads;
// nothing runs when readout[RO_ABORT] is set.
// loss_pointwise: partial sums of |x−y| and (x−y)² per block (f64 partAbs, partSq [blocks]);
//   the MSE gradient when kind is mse; for the SSIM kinds the five quantities x, y, x², y², xy
//   of each channel filtered along x into hq [H*W,15].
// loss_ssim: hq filtered along y gives μx, μy, E[x²], E[y²], E[xy]; the SSIM map's partial sums
//   per block (f64 partSsim); with a gradient, the map's partials with respect to μx, E[x²] and
//   E[xy] into dmap [H*W,9].
// loss_ssim_dx: dmap filtered along x into hd [H*W,9].
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

KERNEL loss_pointwise(LossP lp, const GPTR u32* readout, const GPTR float* img, const GPTR float* target,
                      GPTR float* grad, GPTR float* hq, GPTR double* partAbs, GPTR double* partSq)
{
    if (readout[RO_ABORT]) return;
    SHARED double s[512];
    u32 npx = (u32)lp.W * (u32)lp.H;
    u32 i = BID * BDIM + TID;
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
                u32 j = i + (u32)(xs - x);
                for (int c = 0; c < 3; c++) {
                    float a = img[j * 3 + c], b = target[j * 3 + c];
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

KERNEL loss_ssim(LossP lp, const GPTR u32* readout, const GPTR float* hq, GPTR float* dmap, u32 wantGrad,
                 GPTR double* partSsim)
{
    if (readout[RO_ABORT]) return;
    SHARED double s[512];
    u32 npx = (u32)lp.W * (u32)lp.H;
    u32 i = BID * BDIM + TID;
    double sum = 0.0;
    if (i < npx) {
        int y = (int)(i / (u32)lp.W);
        float m[15];
        for (int q = 0; q < 15; q++) m[q] = 0.0f;
        for (int t = -RADIUS; t <= RADIUS; t++) {
            int ys = y + t;
            if (ys < 0 || ys >= lp.H) continue;
            float k = lp.kern[t + RADIUS];
            u32 j = (u32)((int)i + t * lp.W);
            for (int q = 0; q < 15; q++) m[q] = m[q] + mul_rn(k, hq[j * 15 + q]);
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
            sum += (double)sv;
            if (wantGrad) {
                dmap[i * 9 + c * 3] = mul_rn(mul_rn(mul_rn(2.0f, my), a2 - a1), inv) - mul_rn(mul_rn(mul_rn(2.0f, mx), sv), 1.0f / b1 - 1.0f / b2);
                dmap[i * 9 + c * 3 + 1] = -sv / b2;
                dmap[i * 9 + c * 3 + 2] = mul_rn(mul_rn(2.0f, a1), inv);
            }
        }
    }
    block_sum2(s, sum, 0.0);
    if (TID == 0u) partSsim[BID] = s[0];
}

KERNEL loss_ssim_dx(LossP lp, const GPTR u32* readout, const GPTR float* dmap, GPTR float* hd)
{
    if (readout[RO_ABORT]) return;
    u32 npx = (u32)lp.W * (u32)lp.H;
    u32 i = BID * BDIM + TID;
    if (i >= npx) return;
    int x = (int)(i % (u32)lp.W);
    float acc[9];
    for (int q = 0; q < 9; q++) acc[q] = 0.0f;
    for (int t = -RADIUS; t <= RADIUS; t++) {
        int xs = x + t;
        if (xs < 0 || xs >= lp.W) continue;
        float k = lp.kern[t + RADIUS];
        u32 j = i + (u32)(xs - x);
        for (int q = 0; q < 9; q++) acc[q] = acc[q] + mul_rn(k, dmap[j * 9 + q]);
    }
    for (int q = 0; q < 9; q++) hd[i * 9 + q] = acc[q];
}

KERNEL loss_ssim_grad(LossP lp, const GPTR u32* readout, const GPTR float* hd, const GPTR float* img,
                      const GPTR float* target, GPTR float* grad)
{
    if (readout[RO_ABORT]) return;
    u32 npx = (u32)lp.W * (u32)lp.H;
    u32 i = BID * BDIM + TID;
    if (i >= npx) return;
    int y = (int)(i / (u32)lp.W);
    float gd[9];
    for (int q = 0; q < 9; q++) gd[q] = 0.0f;
    for (int t = -RADIUS; t <= RADIUS; t++) {
        int ys = y + t;
        if (ys < 0 || ys >= lp.H) continue;
        float k = lp.kern[t + RADIUS];
        u32 j = (u32)((int)i + t * lp.W);
        for (int q = 0; q < 9; q++) gd[q] = gd[q] + mul_rn(k, hd[j * 9 + q]);
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
