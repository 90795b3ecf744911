// adam.cu — design.md §5 step 8: packed Adam over the 59 floats of every splat, with per-group
// learning rates and gradient clips, NaN guards and an optional visible-only update
// (internal/adam's stepGroup is the CPU twin, with the same float32 element arithmetic; the
// bias corrections are folded into stepSize and invSqrtBc2 on the host in float64).
//
// adam_step: one thread per element e < 59n of the packed layout (common.h); its group is
//   0 means, 1 log_scales, 2 quats, 3 opacity logits, 4 SH DC (the first 3 of a splat's 48 SH
//   values), 5 SH rest. Nothing runs when readout[RO_ABORT] is set (a step whose lists
//   overflowed is run again).
//   params, m, v [59n] f32 updated in place; grads [59n] f32; valid [n] u32 (visible-only mode)
//   readout[RO_NONFINITE] += non-finite (or overflowing) gradients used as 0, plus updates
//   skipped because the update or the new value was not finite.
// opacity_reset: one thread per splat; logit = min(logit, maxLogit) (the original's opacity
//   reset; the host zeroes the opacity moments).
#include "prelude_cuda.h"
#include "common.h"
#include "readout.h"

struct AdamGroup {
    float stepSize;   // lr / (1 − β1ᵗ)
    float invSqrtBc2; // 1 / sqrt(1 − β2ᵗ)
    float clip;       // |g| ≤ clip; 0 = off
    float pad;
};

// AdamP is passed by value (internal/fused/adam.go): 6 groups then 8 words, 128 bytes.
struct AdamP {
    AdamGroup g[6];
    float b1, b2, c1, c2, eps;
    u32 n, visibleOnly, pad;
};

// |g| < 2⁶⁴ has a finite float32 square (internal/adam's gradLimit).
#define GRAD_LIMIT 18446744073709551616.0f

KERNEL adam_step(AdamP ap, GPTR u32* readout, GPTR float* params, const GPTR float* grads, GPTR float* m,
                 GPTR float* v, const GPTR u32* valid)
{
    if (readout[RO_ABORT]) return;
    u32 n = ap.n;
    u32 e = BID * BDIM + TID;
    if (e >= PARAM_FLOATS * n) return;
    u32 grp, splat;
    if (e < OFF_SCALES(n)) {
        grp = 0u;
        splat = e / 3u;
    } else if (e < OFF_QUATS(n)) {
        grp = 1u;
        splat = (e - OFF_SCALES(n)) / 3u;
    } else if (e < OFF_OPAC(n)) {
        grp = 2u;
        splat = (e - OFF_QUATS(n)) / 4u;
    } else if (e < OFF_SH(n)) {
        grp = 3u;
        splat = e - OFF_OPAC(n);
    } else {
        u32 r = e - OFF_SH(n);
        splat = r / (u32)SH_STRIDE;
        grp = r % (u32)SH_STRIDE < 3u ? 4u : 5u;
    }
    if (ap.visibleOnly && !valid[splat]) return;
    // Constant indices only: a run-time index into the by-value struct would copy all of it
    // to local memory in every thread.
    AdamGroup gc = ap.g[0];
    if (grp == 1u) gc = ap.g[1];
    if (grp == 2u) gc = ap.g[2];
    if (grp == 3u) gc = ap.g[3];
    if (grp == 4u) gc = ap.g[4];
    if (grp == 5u) gc = ap.g[5];
    u32 bad = 0;
    float g = grads[e];
    if (!(g > -GRAD_LIMIT && g < GRAD_LIMIT)) {
        g = 0.0f;
        bad++;
    }
    if (gc.clip > 0.0f) {
        if (g > gc.clip) g = gc.clip;
        else if (g < -gc.clip) g = -gc.clip;
    }
    float mm = mul_rn(ap.b1, m[e]) + mul_rn(ap.c1, g);
    float vv = mul_rn(ap.b2, v[e]) + mul_rn(ap.c2, mul_rn(g, g));
    m[e] = mm;
    v[e] = vv;
    float u = mul_rn(-gc.stepSize, mm) / (mul_rn(sqrtd(vv), gc.invSqrtBc2) + ap.eps);
    float x = params[e] + u;
    if (!f32_finite(u) || !f32_finite(x)) bad++;
    else params[e] = x;
    if (bad) atom_add_u32(readout + RO_NONFINITE, bad);
}

KERNEL opacity_reset(GPTR float* params, u32 n, float maxLogit)
{
    u32 i = BID * BDIM + TID;
    if (i >= n) return;
    params[OFF_OPAC(n) + i] = gminf(params[OFF_OPAC(n) + i], maxLogit);
}
