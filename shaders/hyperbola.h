// hyperbola.h — the ray model's hyperbolic footprints, (p−c)ᵀQ(p−c) ≥ 1 (common.h's hyperbolic
// Q: the silhouette of a splat reaching behind the camera plane), against boxes of pixel
// centres: bin.cu's tile test and project.cu's tile box, the twins of prep's hyperbolaHit and
// HyperbolaRect. Include after common.h.
#pragma once

// abs_f32 is prep's absF (|−0| stays −0, which no comparison below can tell apart).
DEVICE float abs_f32(float x) { return x < 0.0f ? -x : x; }

// hyper_upper is a candidate's value (dx, dy) of hyperbola_hit, raised by its rounding bound and
// slack (prep's hyperbolaHit, the same operations in the same order).
DEVICE float hyper_upper(float a, float b, float c, float gamma, float dx, float dy, float slack)
{
    float cross = mul_rn(mul_rn(mul_rn(2.0f, b), dx), dy);
    float q = mul_rn(mul_rn(a, dx), dx) + cross + mul_rn(mul_rn(c, dy), dy);
    float s = abs_f32(mul_rn(mul_rn(a, dx), dx)) + abs_f32(cross) + abs_f32(mul_rn(mul_rn(c, dy), dy));
    return q + (mul_rn(gamma, s) + slack);
}

// hyperbola_hit is prep's hyperbolaHit: does (p−c)ᵀQ(p−c) ≥ 1 (a hyperbolic Q: the ray model's
// silhouette of a splat reaching behind the camera plane) hold at a pixel centre of the box
// [x0, x1]×[y0, y1]? The maximum is on an edge: at the clamped maximiser where the edge's
// quadratic is concave, at an end elsewhere; each candidate raised by its error bound.
DEVICE bool hyperbola_hit(float cx, float cy, float a, float b, float c, float x0, float y0, float x1, float y1,
                          float gamma, float dfac)
{
    if (!f32_finite(a) || !f32_finite(b) || !f32_finite(c)) return true;
    float highest = bits_f32(0xff800000u); // −Inf
    for (int e = 0; e < 4; e++) {
        float hi;
        if (e < 2) {
            float dx = (e == 0 ? x0 : x1) - cx;
            if (c < 0.0f) {
                float t = mul_rn(b, dx) / c;
                float y = gminf(gmaxf(cy - t, y0), y1);
                float d = mul_rn(dfac, abs_f32(cy) + abs_f32(t));
                hi = hyper_upper(a, b, c, gamma, dx, y - cy, mul_rn(mul_rn(-c, d), d));
            } else {
                hi = gmaxf(hyper_upper(a, b, c, gamma, dx, y0 - cy, 0.0f), hyper_upper(a, b, c, gamma, dx, y1 - cy, 0.0f));
            }
        } else {
            float dy = (e == 2 ? y0 : y1) - cy;
            if (a < 0.0f) {
                float t = mul_rn(b, dy) / a;
                float x = gminf(gmaxf(cx - t, x0), x1);
                float d = mul_rn(dfac, abs_f32(cx) + abs_f32(t));
                hi = hyper_upper(a, b, c, gamma, x - cx, dy, mul_rn(mul_rn(-a, d), d));
            } else {
                hi = gmaxf(hyper_upper(a, b, c, gamma, x0 - cx, dy, 0.0f), hyper_upper(a, b, c, gamma, x1 - cx, dy, 0.0f));
            }
        }
        if (f32_nan(hi)) return true;
        highest = gmaxf(highest, hi);
    }
    return highest >= 1.0f;
}

// The tile tests' rounding bounds for float32 (prep's roundingBounds): γ = 16u = 2⁻²⁰ and the
// δ factor 8u = 2⁻²¹, both exact.
#define HIT_GAMMA (1.0f / 1048576.0f)
#define HIT_DFAC (1.0f / 2097152.0f)

// hyperbola_bisect is one of prep.HyperbolaRect's bisections over strips of tiles tested with
// hyperbola_hit: columns (cols) or rows [lo, hi] searched, the other axis fixed to [fixLo,
// fixHi); with fromStart the smallest k whose strip [0, k] the footprint reaches, else the
// largest k whose strip [k, hi] it reaches.
DEVICE i32 hyperbola_bisect(float cx, float cy, float a, float b, float c, i32 ts, i32 w, i32 h, i32 lo, i32 hi,
                            i32 fixLo, i32 fixHi, bool cols, bool fromStart)
{
    i32 end = hi + 1;
    while (lo < hi) {
        i32 mid = fromStart ? (lo + hi) / 2 : (lo + hi + 1) / 2;
        i32 k0 = fromStart ? 0 : mid, k1 = fromStart ? mid + 1 : end;
        i32 c0 = cols ? k0 : fixLo, c1 = cols ? k1 : fixHi;
        i32 r0 = cols ? fixLo : k0, r1 = cols ? fixHi : k1;
        float x0 = (float)(c0 * ts) + 0.5f, x1 = (float)(c1 * ts < w ? c1 * ts : w) - 0.5f;
        float y0 = (float)(r0 * ts) + 0.5f, y1 = (float)(r1 * ts < h ? r1 * ts : h) - 0.5f;
        bool reach = hyperbola_hit(cx, cy, a, b, c, x0, y0, x1, y1, HIT_GAMMA, HIT_DFAC);
        if (fromStart) {
            if (reach) hi = mid;
            else lo = mid + 1;
        } else {
            if (reach) lo = mid;
            else hi = mid - 1;
        }
    }
    return lo;
}

// hyperbola_rect is prep.HyperbolaRect: the tile box of a hyperbolic footprint on the image (the
// conservative strip tests clear no strip holding a pixel centre of it); false when no tile of
// the image holds one.
DEVICE bool hyperbola_rect(float cx, float cy, float a, float b, float c, i32 ts, i32 tx, i32 ty, i32 w, i32 h,
                           GPTR i32* rect)
{
    if (tx <= 0 || ty <= 0) return false;
    float x1 = (float)(tx * ts < w ? tx * ts : w) - 0.5f, y1 = (float)(ty * ts < h ? ty * ts : h) - 0.5f;
    if (!hyperbola_hit(cx, cy, a, b, c, 0.5f, 0.5f, x1, y1, HIT_GAMMA, HIT_DFAC)) return false;
    i32 c0 = hyperbola_bisect(cx, cy, a, b, c, ts, w, h, 0, tx - 1, 0, ty, true, true);
    i32 c1 = hyperbola_bisect(cx, cy, a, b, c, ts, w, h, c0, tx - 1, 0, ty, true, false) + 1;
    i32 r0 = hyperbola_bisect(cx, cy, a, b, c, ts, w, h, 0, ty - 1, c0, c1, false, true);
    i32 r1 = hyperbola_bisect(cx, cy, a, b, c, ts, w, h, r0, ty - 1, c0, c1, false, false) + 1;
    rect[0] = c0;
    rect[1] = r0;
    rect[2] = c1;
    rect[3] = r1;
    return true;
}
