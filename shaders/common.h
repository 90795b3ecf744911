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

// Cam is one view's camera and projection settings, passed by value. The Go side
// (internal/fused/cam.go) writes it field by field in this order: 35 four-byte words.
struct Cam {
    float R[9];      // world-to-camera rotation, row-major (float32 as prep.Cam holds it)
    float T[3];
    float fx, fy, cx, cy;
    float center[3]; // camera centre in world coordinates
    float limXNeg, limXPos, limYNeg, limYPos; // EWA Jacobian clamp (prep.NewCam)
    float nearZ;       // cull z below this
    float radiusScale; // ray model: sigma = radiusScale * exp(log_scale)
    float alphaMin;    // float32(prep.AlphaMin)
    i32 W, H, tileSize, tilesX, tilesY;
    i32 model, shDegree, antialiased, n;
};

// Packed parameter layout (the same for parameters, gradients and both Adam moments): for
// n splats, means [n,3] at 0, log_scales [n,3] at 3n, quats [n,4] at 6n, opacity logits [n]
// at 10n, sh [n,16,3] at 11n; 59n floats in all (splat.Gaussians.Fields order).
#define OFF_MEANS(n) 0u
#define OFF_SCALES(n) (3u * (n))
#define OFF_QUATS(n) (6u * (n))
#define OFF_OPAC(n) (10u * (n))
#define OFF_SH(n) (11u * (n))
#define PARAM_FLOATS 59u

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

// exp32 is internal/raster's exp32 (the rasterizer's exponential): e^x rounded to float32
// through a degree-7 Taylor polynomial around the nearest multiple of ln 2, flushing results
// below e^-100 to 0. The same polynomial keeps the skip decisions of forward and backward the
// CPU's.
DEVICE float exp32(float xf)
{
    const double log2e = 1.4426950408889634;
    const double ln2 = 0.6931471805599453;
    double v = (double)xf;
    if (!(v > -100.0)) return 0.0f;
    if (v > 0.0) return (float)exp(v);
    long long n = (long long)(dmul_rn(v, log2e) - 0.5); // round to nearest, for v <= 0 (truncation toward zero)
    double r = v - dmul_rn((double)n, ln2);
    double p = 1.0 + dmul_rn(r, 1.0 + dmul_rn(r, 1.0 / 2 + dmul_rn(r, 1.0 / 6 + dmul_rn(r, 1.0 / 24 + dmul_rn(r, 1.0 / 120 + dmul_rn(r, 1.0 / 720 + dmul_rn(r, 1.0 / 5040)))))));
    return (float)dmul_rn(p, bits_f64((u64)(n + 1023) << 52));
}
