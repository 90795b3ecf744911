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
#define POWER_SLACK 1e-3

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
DEVICE double gmaxd(double a, double b)
{
    if (a != a || b != b) return a + b;
    if (a > b) return a;
    if (b > a) return b;
    return a == 0.0 && 1.0 / a < 0 ? b : a;
}
DEVICE double gmind(double a, double b)
{
    if (a != a || b != b) return a + b;
    if (a < b) return a;
    if (b < a) return b;
    return a == 0.0 && 1.0 / a < 0 ? a : b;
}

// The float32 transcendental functions of the Go code: evaluated in float64 and rounded, as
// prep's exp/log/sqrt/sigmoid helpers do.
DEVICE float expd(float x) { return (float)exp((double)x); }
DEVICE float logd(float x) { return (float)log((double)x); }
DEVICE float sqrtd(float x) { return (float)sqrt((double)x); }
DEVICE float sigmoidd(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }

// exp32 is internal/raster's exp32 (the rasterizer's exponential), in float32 alone: n is
// rounded by adding 1.5·2²³, r = x − n·ln2 is reduced with ln2 split in two, e^r = 1 + r +
// r²·P(r) with a degree-5 P, and e^x = e^r·2ⁿ; 0 below e^-87 and for NaN. Every product is
// mul_rn (never fused), so the bits are the CPU's and the skip decisions of forward and
// backward the CPU's. A float64 polynomial did this before: at half the float32 rate, with
// two slow 64-bit conversions, it was most of the rasterizers' arithmetic.
DEVICE float exp32(float x)
{
    const float round = 12582912.0f; // 1.5·2²³
    const float ln2Hi = 0.693359375f, ln2Lo = -2.12194440e-4f;
    if (!(x > -87.0f)) return 0.0f;
    if (!(x < 88.0f)) return (float)exp((double)x);
    float j = mul_rn(x, 1.44269504088896341f) + round;
    float nf = j - round;
    i32 n = (i32)(f32_bits(j) - f32_bits(round)); // |n| <= 127
    float r = (x - mul_rn(nf, ln2Hi)) - mul_rn(nf, ln2Lo);
    float p = mul_rn(1.9875691500e-4f, r) + 1.3981999507e-3f;
    p = mul_rn(p, r) + 8.3334519073e-3f;
    p = mul_rn(p, r) + 4.1665795894e-2f;
    p = mul_rn(p, r) + 1.6666665459e-1f;
    p = mul_rn(p, r) + 5.0000001201e-1f;
    float y = (mul_rn(p, mul_rn(r, r)) + r) + 1.0f;
    return mul_rn(y, bits_f32((u32)(n + 127) << 23));
}
