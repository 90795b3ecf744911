// adam.h — the Adam element update and its per-group settings, for adam.cu's adam_step
// (internal/adam's stepGroup is the CPU twin, with the same float32 element arithmetic).
#pragma once

// |g| < 2⁶⁴ has a finite float32 square (internal/adam's gradLimit).
#define GRAD_LIMIT 18446744073709551616.0f

// adam_update applies gradient g to one element's parameter p and moments m, v under group gc
// and returns how many of its values were not finite: the gradient (used as 0), and the update
// or the new value (p then keeps its value; the moments keep their new values, as on the CPU).
DEVICE u32 adam_update(const AdamP& ap, const AdamGroup& gc, float g, float& p, float& m, float& v)
{
    u32 bad = 0;
    if (!(g > -GRAD_LIMIT && g < GRAD_LIMIT)) {
        g = 0.0f;
        bad++;
    }
    if (gc.clip > 0.0f) {
        if (g > gc.clip) g = gc.clip;
        else if (g < -gc.clip) g = -gc.clip;
    }
    m = mul_rn(ap.b1, m) + mul_rn(ap.c1, g);
    v = mul_rn(ap.b2, v) + mul_rn(ap.c2, mul_rn(g, g));
    float u = mul_rn(-gc.stepSize, m) / (mul_rn(sqrtd(v), gc.invSqrtBc2) + ap.eps);
    float x = p + u;
    if (!f32_finite(u) || !f32_finite(x)) bad++;
    else p = x;
    return bad;
}

// adam_groups loads the six groups' stepSize, invSqrtBc2 and clip into the block-shared gtab
// (18 floats), where an element's group can index them. Selected from the by-value struct with
// constant indices (a run-time index would copy all of it to local memory in every thread),
// they took registers for all six groups at once: 54 a thread, 4 blocks of 256 an SM, at 81% of
// the copy ceiling. Every thread calls it; a BARRIER() must follow before gtab is read.
DEVICE void adam_groups(Thr th, const AdamP& ap, SPTR float* gtab)
{
    if (th.tid < 6u) {
        AdamGroup g = ap.g[0];
        if (th.tid == 1u) g = ap.g[1];
        if (th.tid == 2u) g = ap.g[2];
        if (th.tid == 3u) g = ap.g[3];
        if (th.tid == 4u) g = ap.g[4];
        if (th.tid == 5u) g = ap.g[5];
        gtab[th.tid * 3u] = g.stepSize;
        gtab[th.tid * 3u + 1u] = g.invSqrtBc2;
        gtab[th.tid * 3u + 2u] = g.clip;
    }
}

// adam_group_update is adam_update with group grp's settings from gtab.
DEVICE u32 adam_group_update(const AdamP& ap, const SPTR float* gtab, u32 grp, float g, float& p, float& m, float& v)
{
    AdamGroup gc = {gtab[grp * 3u], gtab[grp * 3u + 1u], gtab[grp * 3u + 2u], 0.0f};
    return adam_update(ap, gc, g, p, m, v);
}

// adam_grad is the gradient Adam takes for element p of group grp whose loss gradient is g: g
// plus the MCMC regularisers' (engine.RegularizerGrads, to the bit) when they are on,
// co·σ(p)(1−σ(p)) for an opacity logit and cs·exp(p) for a log-scale. The regularisers are
// means over every splat: every splat Adam updates takes them, in view or not, unless
// ap.regInView keeps them to the splats in the step's view (inView), as the loss gradient is.
DEVICE float adam_grad(const AdamP& ap, u32 grp, float g, float p, bool inView)
{
    if (ap.regInView && !inView) return g;
    if (grp == 3u && ap.co != 0.0f) {
        float s = sigmoidd(p);
        return g + mul_rn(ap.co, mul_rn(s, 1.0f - s));
    }
    if (grp == 1u && ap.cs != 0.0f) return g + mul_rn(ap.cs, exp32(p));
    return g;
}
