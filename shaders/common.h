// common.h — what several stages share: the camera block every per-view kernel takes, the
// packed parameter layout, Go-semantics min/max, and the rounding-exact transcendental
// helpers. Include after the prelude.
#pragma once

// Render models (prep.Model).
#define MODEL_EWA 0
#define MODEL_RAY 1

// AlphaMax clamps alpha (prep.AlphaMax); TerminateT ends a pixel (raster.TerminateT).
#define ALPHA_MAX 0.99f
#define TERMINATE_T 1e-4f
// The EWA dilation added to every 2D covariance (prep.Dilation).
#define DILATION 0.3f
// powerSlack of internal/raster: the cheap exponent test is widened by this much so that it
// never skips a pixel the exact alpha rule would blend.
#define POWER_SLACK 1e-3f

#define SH_COEFFS 16
#define SH_STRIDE 48

// Cam (one view's camera and projection settings, passed by value) and PARAM_FLOATS are
// declared in abi.h, generated from internal/fused/abi/spec with the host's side.
#include "abi.h"

// Packed parameter layout (the same for parameters, gradients and both Adam moments): for
// n splats, means [n,3] at 0, log_scales [n,3] at 3n, quats [n,4] at 6n, opacity logits [n]
// at 10n, sh [n,16,3] at 11n; 59n floats in all (splat.Gaussians.Fields order).
#define OFF_MEANS(n) 0u
#define OFF_SCALES(n) (3u * (n))
#define OFF_QUATS(n) (6u * (n))
#define OFF_OPAC(n) (10u * (n))
#define OFF_SH(n) (11u * (n))

DEVICE bool f32_nan(float x) { return x != x; }
DEVICE bool f32_finite(float x) { return x - x == 0.0f; }

// hyperbolic is prep.Hyperbolic: Q = [[a, b], [b, c]] indefinite by a clear margin,
// b² > a·c·(1 + 2⁻⁹): a footprint (p−c)ᵀQ(p−c) ≥ 1, the ray model's silhouette of a splat that
// reaches behind the camera plane (project.cu writes one only with that margin; bin.cu tests it).
DEVICE bool hyperbolic(float a, float b, float c) { return mul_rn(b, b) > mul_rn(mul_rn(a, c), 1.001953125f); }

// Go's built-in max/min on floats: NaN if either is NaN, and +0 > -0.
DEVICE float gmaxf(float a, float b)
{
    if (a != a || b != b) return a + b;
    if (a > b) return a;
    if (b > a) return b;
    return (f32_bits(a) >> 31) ? b : a;
}
DEVICE float gminf(float a, float b)
{
    if (a != a || b != b) return a + b;
    if (a < b) return a;
    if (b < a) return b;
    return (f32_bits(a) >> 31) ? a : b;
}

// Two-float sums (hi + lo, |lo| ≤ ½ulp(hi)): about 48 bits of significand from float32
// operations alone, for the loss sums that float64 held before (Metal has no float64). Only
// additions and mul_rn products, so no compiler contraction can change them.

// two_sum returns a + b rounded and sets e to its exact rounding error (Knuth's TwoSum).
DEVICE float two_sum(float a, float b, float& e)
{
    float s = a + b;
    float bb = s - a;
    e = (a - (s - bb)) + (b - bb);
    return s;
}

// two_prod returns a·b rounded and sets e to its exact rounding error (Dekker's product with
// Veltkamp's split by 2¹²+1; exact unless a product underflows or overflows).
DEVICE float two_prod(float a, float b, float& e)
{
    float p = mul_rn(a, b);
    float ca = mul_rn(4097.0f, a), cb = mul_rn(4097.0f, b);
    float ah = ca - (ca - a), bh = cb - (cb - b);
    float al = a - ah, bl = b - bh;
    e = ((mul_rn(ah, bh) - p) + mul_rn(ah, bl) + mul_rn(al, bh)) + mul_rn(al, bl);
    return p;
}

// df_add adds (bh, bl) to (hi, lo), renormalised.
DEVICE void df_add(float& hi, float& lo, float bh, float bl)
{
    float e;
    float s = two_sum(hi, bh, e);
    e = e + (lo + bl);
    hi = s + e;
    lo = e - (hi - s);
}

// The float32 elementary functions of the Go code (internal/fmath), in float32 alone: Metal has
// no float64, and the CPU engine evaluates the very same operations. sqrt_rn is IEEE's
// correctly rounded square root, which is what float32(math.Sqrt(float64(x))) gives (float64
// has more than 2·24+2 bits, so rounding twice cannot differ).
DEVICE float sqrtd(float x) { return sqrt_rn(x); }

// exp32 is internal/fmath's Exp (the rasterizer's exponential and prep's), in float32 alone: n
// is rounded by adding 1.5·2²³, r = x − n·ln2 is reduced with ln2 split in two, e^r = 1 + r +
// r²·P(r) with a degree-5 P, and e^x = e^r·2ⁿ; 0 below e^-87 and for NaN, +Inf from 89. Every
// product is mul_rn (never fused), so the bits are the CPU's and the skip decisions of forward
// and backward the CPU's. exp32_reduced is its body for −87 < x < 89: e^r with r = x − n·ln2,
// and n.
DEVICE float exp32_reduced(float x, i32& n)
{
    const float round = 12582912.0f; // 1.5·2²³
    const float ln2Hi = 0.693359375f, ln2Lo = -2.12194440e-4f;
    float j = mul_rn(x, 1.44269504088896341f) + round;
    float nf = j - round;
    n = (i32)(f32_bits(j) - f32_bits(round)); // |n| <= 128
    float r = (x - mul_rn(nf, ln2Hi)) - mul_rn(nf, ln2Lo);
    float p = mul_rn(1.9875691500e-4f, r) + 1.3981999507e-3f;
    p = mul_rn(p, r) + 8.3334519073e-3f;
    p = mul_rn(p, r) + 4.1665795894e-2f;
    p = mul_rn(p, r) + 1.6666665459e-1f;
    p = mul_rn(p, r) + 5.0000001201e-1f;
    return (mul_rn(p, mul_rn(r, r)) + r) + 1.0f;
}

DEVICE float exp32(float x)
{
    if (!(x > -87.0f)) return 0.0f;
    if (!(x < 89.0f)) return bits_f32(0x7f800000u); // +Inf
    i32 n;
    float y = exp32_reduced(x, n);
    if (n > 127) { // 2¹²⁸ is no float: scale by 2 first (exact), overflowing only where e^x does
        y = mul_rn(y, 2.0f);
        n -= 1;
    }
    return mul_rn(y, bits_f32((u32)(n + 127) << 23));
}

// exp32_nonpos is exp32 for x ≤ 0 (or NaN), the rasterizers' exponents: the same bits without
// the tests that only larger x need (the +Inf cut and the 2¹²⁸ scaling; −126 ≤ n ≤ 0 here).
DEVICE float exp32_nonpos(float x)
{
    if (!(x > -87.0f)) return 0.0f;
    i32 n;
    float y = exp32_reduced(x, n);
    return mul_rn(y, bits_f32((u32)(n + 127) << 23));
}

// log32 is internal/fmath's Log: x = m·2ᵉ with m in [√½, √2), f = m − 1 (exact), log x = f −
// f²/2 + f³·P(f) + e·ln2 with a degree-8 P and ln2 split in two; subnormals scaled by 2²⁴.
DEVICE float log32(float x)
{
    const float ln2Hi = 0.693359375f, ln2Lo = -2.12194440e-4f;
    if (!(x > 0.0f)) return x == 0.0f ? bits_f32(0xff800000u) : bits_f32(0x7fc00000u);
    u32 b = f32_bits(x);
    if (b >= 0x7f800000u) return x; // +Inf
    i32 e = 0;
    if (b < 0x00800000u) {
        x = mul_rn(x, 16777216.0f); // 2²⁴
        b = f32_bits(x);
        e = -24;
    }
    e += (i32)(b >> 23) - 127;
    float m = bits_f32((b & 0x007fffffu) | 0x3f800000u);
    if (m > 1.41421356f) {
        m = mul_rn(m, 0.5f);
        e += 1;
    }
    float f = m - 1.0f;
    float z = mul_rn(f, f);
    float p = mul_rn(7.0376836292e-2f, f) + -1.1514610310e-1f;
    p = mul_rn(p, f) + 1.1676998740e-1f;
    p = mul_rn(p, f) + -1.2420140846e-1f;
    p = mul_rn(p, f) + 1.4249322787e-1f;
    p = mul_rn(p, f) + -1.6668057665e-1f;
    p = mul_rn(p, f) + 2.0000714765e-1f;
    p = mul_rn(p, f) + -2.4999993993e-1f;
    p = mul_rn(p, f) + 3.3333331174e-1f;
    float y = mul_rn(mul_rn(p, f), z);
    float ef = (float)e;
    y = y + mul_rn(ef, ln2Lo);
    y = y - mul_rn(0.5f, z);
    float r = f + y;
    return r + mul_rn(ef, ln2Hi);
}

// The float32 transcendental functions of prep (internal/fmath through prep's exp/log/sigmoid).
DEVICE float expd(float x) { return exp32(x); }
DEVICE float logd(float x) { return log32(x); }
DEVICE float sigmoidd(float x) { return 1.0f / (1.0f + exp32(-x)); }

// The MCMC densifier's standard-normal samples, internal/fmath's NormalKey and Normal: a pure
// function of (seed, step, splat, axis), so that every engine draws the same ones. mix32 is
// MurmurHash3's 32-bit finaliser; the polar method's uniforms lie on a grid of 2⁻²³ in
// [−1, 1), converted and scaled exactly; NORMAL_ATTEMPTS is fmath.NormalAttempts.
#define NORMAL_ATTEMPTS 32u

DEVICE u32 mix32(u32 h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

DEVICE u32 normal_key(u32 seedLo, u32 seedHi, u32 step, u32 splat, u32 axis)
{
    u32 h = mix32(seedLo ^ 0x9e3779b9u);
    h = mix32(h ^ seedHi);
    h = mix32(h ^ step);
    h = mix32(h ^ splat);
    return mix32(h ^ (axis * 0x632be5abu));
}

DEVICE float uniform11(u32 h) { return mul_rn((float)(h >> 8), 1.0f / 8388608.0f) - 1.0f; }

DEVICE float normal32(u32 key)
{
    for (u32 k = 0u; k < NORMAL_ATTEMPTS; k++) {
        float u = uniform11(mix32(key ^ (2u * k + 1u)));
        float v = uniform11(mix32(key ^ (2u * k + 2u)));
        float s = mul_rn(u, u) + mul_rn(v, v);
        if (s > 0.0f && s < 1.0f) {
            float f = mul_rn(-2.0f, log32(s)) / s;
            return mul_rn(u, sqrt_rn(f));
        }
    }
    return 0.0f;
}
