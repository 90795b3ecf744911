// ceiling.cu — the device's own ceilings for the roofline of `rlxsplat bench --roofline`
// (internal/fused/ceiling.go times them): how fast it can stream device memory and how fast it
// can do FP32 arithmetic, measured on the device at hand instead of taken from a data sheet.
// Nothing here is part of a training step.
//
// ceiling_copy: dst[i] = src[i] for i < n, a grid-stride loop over any 1-D grid. Each sweep
//   covers 4·T elements (T = nblocks·bdim threads): thread t copies elements base + t + k·T,
//   k = 0..3, so that every warp access is 32 consecutive floats (coalesced) and each thread
//   has four independent loads in flight before it stores. The elements after the last whole
//   sweep go one per thread. The host keeps n + 4·T below 2³².
//   src [n] f32 (read), dst [n] f32 (written); they must not overlap.
//
// ceiling_fma: one thread per element of out, i = bid·bdim + tid (the grid covers out
//   exactly). Each thread runs 8 independent chains a ← fma(a, x, y) in registers, 64 fused
//   multiply-adds per iteration of iters iterations (8 chains × 8 steps, written out, so that
//   loop overhead is a small share of the issued instructions and no chain waits on another),
//   and stores the chains' sum so that the compiler cannot drop the work. x and y are run-time
//   arguments (the compiler cannot fold the chains); with |x| < 1 the chains converge to
//   y/(1−x) and never overflow or go subnormal.
//   out [NBLOCKS·BDIM] f32 (written)
#include "prelude.h"
#include "abi.h"
#include "entries/ceiling.h"

DEVICE void ceiling_copy_body(Thr th, ceiling_copy_args a)
{
    const GPTR float* src = a.src;
    GPTR float* dst = a.dst;
    u32 n = a.n;
    u32 threads = th.nblocks * th.bdim;
    u32 t = th.bid * th.bdim + th.tid;
    u32 sweep = 4u * threads;
    u32 full = n - n % sweep;
    for (u32 base = 0; base < full; base += sweep) {
        u32 i = base + t;
        float v0 = src[i];
        float v1 = src[i + threads];
        float v2 = src[i + 2u * threads];
        float v3 = src[i + 3u * threads];
        dst[i] = v0;
        dst[i + threads] = v1;
        dst[i + 2u * threads] = v2;
        dst[i + 3u * threads] = v3;
    }
    for (u32 i = full + t; i < n; i += threads) dst[i] = src[i];
}

// fma8 advances each of the 8 chains by one fused multiply-add.
DEVICE void fma8(float* a, float x, float y)
{
    a[0] = fma_f32(a[0], x, y);
    a[1] = fma_f32(a[1], x, y);
    a[2] = fma_f32(a[2], x, y);
    a[3] = fma_f32(a[3], x, y);
    a[4] = fma_f32(a[4], x, y);
    a[5] = fma_f32(a[5], x, y);
    a[6] = fma_f32(a[6], x, y);
    a[7] = fma_f32(a[7], x, y);
}

DEVICE void ceiling_fma_body(Thr th, ceiling_fma_args p)
{
    float x = p.x, y = p.y;
    u32 i = th.bid * th.bdim + th.tid;
    float a[8];
    for (int k = 0; k < 8; k++) a[k] = (float)(th.tid + (u32)k) * 1e-3f;
    for (u32 it = 0; it < p.iters; it++) {
        fma8(a, x, y);
        fma8(a, x, y);
        fma8(a, x, y);
        fma8(a, x, y);
        fma8(a, x, y);
        fma8(a, x, y);
        fma8(a, x, y);
        fma8(a, x, y);
    }
    p.out[i] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
