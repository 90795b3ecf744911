// project.cu — design.md §5 step 1: every splat projected for one view, for both render models
// (internal/prep/project.go is the CPU twin; the maths and its rounding are the same).
//
// project: one thread per splat, i = BID*BDIM + TID over a 1-D grid of 256-thread blocks.
//   cam         Cam by value (common.h): camera, settings, n = splat count
//   params      [59n] f32 packed parameters (common.h layout)
//   valid       [n] u32, 1 when the splat is in front of the near plane, finite and on the image
//   depth       [n] f32 camera-space z
//   opacity     [n] f32 effective opacity; color [n,3] f32 SH colour (clamped at 0)
//   mean2d      [n,2] f32 projected centre (pixels); conic [n,3] f32 (EWA only)
//   rayU [n,3], rayA [n,9] f32 (ray model only; may be any buffer for EWA)
//   boundCenter [n,2], boundQ [n,3] f32 footprint (p−c)ᵀQ(p−c) ≤ 1; Q = 0: the whole box
//   rect        [n,4] i32 tile box x0,y0,x1,y1 (exclusive ends); radius [n] f32 (pixels)
//   readout     u32 words; readout[RO_VISIBLE] += the number of valid splats
// Entries of invalid splats other than valid are left as they were (never read).
//
// pixel_rays: one thread per pixel (row-major), the unit world direction through the pixel
// centre for the ray model (prep.RayCam.Ray, the CPU engine's float32 rays).
//   cam   RayCam by value; rays [H*W,3] f32
#include "prelude.h"
#include "common.h"
#include "hyperbola.h"
#include "geom.h"
#include "readout.h"

#include "entries/project.h"

// tile_index is prep's tileIndex: floor((v − 0.5)/ts) clamped to [−1, tiles], exact in float32
// and integers for v not NaN and tiles·ts + 1 ≤ 2²³ (the proof is with the Go twin).
DEVICE i32 tile_index(float v, i32 ts, i32 tiles)
{
    if (v <= -1.0f) return -1;
    if (v >= (float)(tiles * ts + 1)) return tiles;
    i32 g = (i32)v; // truncation toward zero
    if (v < (float)g) g--; // floor(v)
    if (v < (float)g + 0.5f) g--; // floor(v − 0.5)
    i32 q = g / ts; // C division truncates; g ≥ −2, so one correction makes it floor
    if (g < 0 && q * ts != g) q--;
    return q < -1 ? -1 : (q > tiles ? tiles : q);
}

// box_ends_ok is prep's boxEndsOK: no end NaN, and not −∞ on one side with +∞ on another.
DEVICE bool box_ends_ok(float v0, float v1, float v2, float v3)
{
    float inf = bits_f32(0x7f800000u);
    bool pos = v0 == inf || v1 == inf || v2 == inf || v3 == inf;
    bool neg = v0 == -inf || v1 == -inf || v2 == -inf || v3 == -inf;
    return !f32_nan(v0) && !f32_nan(v1) && !f32_nan(v2) && !f32_nan(v3) && !(pos && neg);
}

// set_rect is prep's setRect: the tile box of the pixels whose centres lie in [m − e, m + e].
DEVICE bool set_rect(const Cam& cam, float mx, float my, float ex, float ey, GPTR i32* rect)
{
    i32 ts = cam.tileSize, tx = cam.tilesX, ty = cam.tilesY;
    float vx0 = mx - ex, vx1 = mx + ex, vy0 = my - ey, vy1 = my + ey;
    if (!box_ends_ok(vx0, vx1, vy0, vy1)) return false;
    i32 qx0 = tile_index(vx0, ts, tx), qx1 = tile_index(vx1, ts, tx);
    i32 qy0 = tile_index(vy0, ts, ty), qy1 = tile_index(vy1, ts, ty);
    if (qx1 < 0 || qy1 < 0 || qx0 >= tx || qy0 >= ty) return false;
    i32 x0 = qx0 > 0 ? qx0 : 0, x1 = qx1 + 1 < tx ? qx1 + 1 : tx;
    i32 y0 = qy0 > 0 ? qy0 : 0, y1 = qy1 + 1 < ty ? qy1 + 1 : ty;
    if (x0 >= x1 || y0 >= y1) return false;
    rect[0] = x0;
    rect[1] = y0;
    rect[2] = x1;
    rect[3] = y1;
    return true;
}

// sh_color: rgb = max(0, 0.5 + Σ_k SH_k(d)·c_k), d = normalize(μ − camera centre).
DEVICE bool sh_color(const Cam& cam, const GPTR float* sh, const float* mean, GPTR float* rgb)
{
    float d[3] = {mean[0] - cam.center[0], mean[1] - cam.center[1], mean[2] - cam.center[2]};
    float n = sqrtd(dot3(d, d));
    if (n == 0.0f) return false;
    float b[SH_COEFFS];
    sh_basis(cam.shDegree, d[0] / n, d[1] / n, d[2] / n, b);
    int nc = (cam.shDegree + 1) * (cam.shDegree + 1);
    // A constant trip count, so that b stays in registers: with k < nc as the bound, b went to
    // local memory (64 bytes a thread, bench --kernels).
    for (int c = 0; c < 3; c++) {
        float v = 0.5f;
        for (int k = 0; k < SH_COEFFS; k++)
            if (k < nc) v = v + mul_rn(b[k], sh[k * 3 + c]);
        rgb[c] = gmaxf(v, 0.0f);
    }
    return true;
}

struct Out {
    GPTR float* opacity;
    GPTR float* mean2d;
    GPTR float* conic;
    GPTR float* rayU;
    GPTR float* rayA;
    GPTR float* boundCenter;
    GPTR float* boundQ;
    GPTR i32* rect;
    GPTR float* radius;
    GPTR float* rayHalf;
};

DEVICE bool project_ewa(const Cam& cam, const Geom& g, u32 i, const Out& o)
{
    float sc[9], m[9], jac[6];
    ewa_cov(cam, g, sc, m);
    float tx, ty;
    bool clx, cly;
    ewa_jacobian(cam, g.p, jac, tx, ty, clx, cly);
    float a0, b, c0;
    cov2d(jac, sc, a0, b, c0);
    float a = a0 + DILATION, c = c0 + DILATION;
    float det = mul_rn(a, c) - mul_rn(b, b);
    if (!(det > 0.0f)) return false;
    float opac = g.opac0;
    if (cam.antialiased) {
        float det0 = mul_rn(a0, c0) - mul_rn(b, b);
        opac = mul_rn(opac, sqrtd(gmaxf(det0 / det, 0.0f)));
    }
    float amin = cam.alphaMin;
    if (!(opac > amin)) return false;
    float z = g.p[2];
    float mx = mul_rn(cam.fx, g.p[0]) / z + cam.cx;
    float my = mul_rn(cam.fy, g.p[1]) / z + cam.cy;
    float ca = c / det, cb = -b / det, cc = a / det;
    o.mean2d[i * 2] = mx;
    o.mean2d[i * 2 + 1] = my;
    o.conic[i * 3] = ca;
    o.conic[i * 3 + 1] = cb;
    o.conic[i * 3 + 2] = cc;
    o.opacity[i] = opac;
    // o·exp(−½dᵀCd) ≥ AlphaMin  ⇔  dᵀ(C/r²)d ≤ 1 with r² = 2 ln(o/AlphaMin).
    float r2 = mul_rn(2.0f, logd(opac / amin));
    o.boundCenter[i * 2] = mx;
    o.boundCenter[i * 2 + 1] = my;
    o.boundQ[i * 3] = ca / r2;
    o.boundQ[i * 3 + 1] = cb / r2;
    o.boundQ[i * 3 + 2] = cc / r2;
    float mid = mul_rn(0.5f, a + c);
    float lmax = mid + sqrtd(gmaxf(mul_rn(mid, mid) - det, 0.1f));
    o.radius[i] = mul_rn(3.0f, sqrtd(lmax));
    return set_rect(cam, mx, my, sqrtd(mul_rn(a, r2)), sqrtd(mul_rn(c, r2)), o.rect + i * 4);
}

// The whole-image footprint of a splat whose silhouette is not a bounded ellipse.
DEVICE bool footprint_whole(const Cam& cam, u32 i, const Out& o)
{
    float hw = (float)cam.W / 2.0f, hh = (float)cam.H / 2.0f;
    o.boundCenter[i * 2] = hw;
    o.boundCenter[i * 2 + 1] = hh;
    o.boundQ[i * 3] = 0.0f;
    o.boundQ[i * 3 + 1] = 0.0f;
    o.boundQ[i * 3 + 2] = 0.0f;
    o.radius[i] = (float)(cam.W > cam.H ? cam.W : cam.H);
    return set_rect(cam, hw, hh, (float)cam.W, (float)cam.H, o.rect + i * 4);
}

// DF is prep's df: the unevaluated sum hi + lo of two floats (about 48 bits of significand from
// float32 alone; Metal has no float64), with the Go twin's operations in the same order. The
// error-free steps are common.h's two_sum and two_prod.
struct DF {
    float hi, lo;
};

DEVICE DF df_of(float x)
{
    DF r = {x, 0.0f};
    return r;
}
DEVICE DF df_norm(float s, float e)
{
    float hi = s + e;
    DF r = {hi, e - (hi - s)};
    return r;
}
DEVICE DF df_exact_prod(float a, float b)
{
    DF r;
    r.hi = two_prod(a, b, r.lo);
    return r;
}
DEVICE DF df_sum(DF a, DF b)
{
    float e;
    float s = two_sum(a.hi, b.hi, e);
    return df_norm(s, e + (a.lo + b.lo));
}
DEVICE DF df_neg(DF a)
{
    DF r = {-a.hi, -a.lo};
    return r;
}
DEVICE DF df_diff(DF a, DF b) { return df_sum(a, df_neg(b)); }
DEVICE DF df_prod(DF a, DF b)
{
    float e;
    float p = two_prod(a.hi, b.hi, e);
    return df_norm(p, e + (mul_rn(a.hi, b.lo) + mul_rn(a.lo, b.hi)));
}
DEVICE DF df_quot(DF a, DF b)
{
    float q1 = a.hi / b.hi;
    DF r = df_diff(a, df_prod(b, df_of(q1)));
    return df_norm(q1, r.hi / b.hi);
}
DEVICE DF df_root(DF a)
{
    float x = sqrt_rn(a.hi);
    if (!(a.hi > 0.0f) || a.hi == bits_f32(0x7f800000u)) return df_of(x);
    DF r = df_diff(a, df_exact_prod(x, x));
    return df_norm(x, r.hi / mul_rn(2.0f, x));
}

// The pinhole silhouette of the iso-ellipsoid where the ray model's alpha reaches AlphaMin, in
// df arithmetic and the cancellation-free form of prep's rayConic (the derivation is there);
// distorted lenses are refused on the host.
DEVICE bool ray_footprint(const Cam& cam, const Geom& g, float r2, u32 i, const Out& o)
{
    float wr[9];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            wr[r * 3 + c] = mul_rn(cam.R[r * 3], g.rq[c]) + mul_rn(cam.R[r * 3 + 1], g.rq[3 + c]) + mul_rn(cam.R[r * 3 + 2], g.rq[6 + c]);
    float smin = gminf(gminf(g.s[0], g.s[1]), g.s[2]);
    if (!(smin > 0.0f) || !(r2 > 0.0f) || !(g.p[2] > 0.0f)) return footprint_whole(cam, i, o);
    DF lam = df_prod(df_of(smin), df_root(df_of(r2)));
    // B̃ row j = (σmin/σⱼ)·(column j of W·R); c̃ = B̃m.
    DF bt[9], ct[3];
    for (int j = 0; j < 3; j++) {
        DF t = df_quot(df_of(smin), df_of(g.s[j]));
        for (int k = 0; k < 3; k++) bt[j * 3 + k] = df_prod(t, df_of(wr[k * 3 + j]));
        ct[j] = df_sum(df_sum(df_prod(bt[j * 3], df_of(g.p[0])), df_prod(bt[j * 3 + 1], df_of(g.p[1]))),
                       df_prod(bt[j * 3 + 2], df_of(g.p[2])));
    }
    DF cn2 = df_sum(df_sum(df_prod(ct[0], ct[0]), df_prod(ct[1], ct[1])), df_prod(ct[2], ct[2]));
    DF h2 = df_diff(cn2, df_prod(lam, lam));
    if (!(h2.hi > 0.0f)) return footprint_whole(cam, i, o); // the camera is inside the ellipsoid
    DF cn = df_root(cn2);
    DF ih = df_quot(lam, df_root(h2)); // 1/h
    DF chat[3];
    for (int j = 0; j < 3; j++) chat[j] = df_quot(ct[j], cn);
    DF gv[2], qp[6];
    for (int k = 0; k < 2; k++) {
        gv[k] = df_sum(df_sum(df_prod(bt[k], chat[0]), df_prod(bt[3 + k], chat[1])), df_prod(bt[6 + k], chat[2]));
        for (int j = 0; j < 3; j++) qp[j * 2 + k] = df_diff(bt[j * 3 + k], df_prod(chat[j], gv[k]));
        gv[k] = df_prod(gv[k], ih);
    }
    DF a0 = df_prod(df_quot(cn, df_of(g.p[2])), ih);
    DF a00 = df_diff(df_sum(df_sum(df_prod(qp[0], qp[0]), df_prod(qp[2], qp[2])), df_prod(qp[4], qp[4])), df_prod(gv[0], gv[0]));
    DF a01 = df_diff(df_sum(df_sum(df_prod(qp[0], qp[1]), df_prod(qp[2], qp[3])), df_prod(qp[4], qp[5])), df_prod(gv[0], gv[1]));
    DF a11 = df_diff(df_sum(df_sum(df_prod(qp[1], qp[1]), df_prod(qp[3], qp[3])), df_prod(qp[5], qp[5])), df_prod(gv[1], gv[1]));
    DF det = df_diff(df_prod(a00, a11), df_prod(a01, a01));
    float inf = bits_f32(0x7f800000u);
    // det < 0: the footprint reaches behind the camera plane and its silhouette is the insides
    // of a hyperbola's branches, (δ−δ₀)ᵀ(A/kk)(δ−δ₀) ≥ 1 with kk < 0 (prep's rayConic).
    bool ellipse = det.hi > 0.0f && a00.hi > 0.0f;
    if (!(ellipse || det.hi < 0.0f) || det.hi == inf || det.hi == -inf) return footprint_whole(cam, i, o);
    DF v0 = df_quot(df_diff(df_prod(a11, gv[0]), df_prod(a01, gv[1])), det);
    DF v1 = df_quot(df_diff(df_prod(a00, gv[1]), df_prod(a01, gv[0])), det);
    DF kk = df_prod(df_prod(a0, a0), df_sum(df_sum(df_of(1.0f), df_prod(gv[0], v0)), df_prod(gv[1], v1)));
    if (ellipse && !(kk.hi > 0.0f)) return false;
    if (!ellipse && !(kk.hi < 0.0f)) return footprint_whole(cam, i, o);
    DF c0x = df_sum(df_quot(df_of(g.p[0]), df_of(g.p[2])), df_prod(a0, v0));
    DF c0y = df_sum(df_quot(df_of(g.p[1]), df_of(g.p[2])), df_prod(a0, v1));
    DF qa = df_quot(a00, kk), qb = df_quot(a01, kk), qc = df_quot(a11, kk);
    // Pixels p = f·x_n + c: the conic scales by 1/f².
    DF fx = df_of(cam.fx), fy = df_of(cam.fy);
    DF fxx = df_prod(fx, fx), fxy = df_prod(fx, fy), fyy = df_prod(fy, fy);
    DF cx = df_sum(df_prod(fx, c0x), df_of(cam.cx)), cy = df_sum(df_prod(fy, c0y), df_of(cam.cy));
    DF pa = df_quot(qa, fxx), pb = df_quot(qb, fxy), pc = df_quot(qc, fyy);
    if (!ellipse) {
        // The whole image's radius; the hyperbola for the tile test where its float32 Q is
        // clearly indefinite, with the tiles it reaches as the box (none: the splat is off the
        // image), else the whole box.
        bool ok = footprint_whole(cam, i, o);
        if (ok && hyperbolic(pa.hi, pb.hi, pc.hi) && f32_finite(cx.hi) && f32_finite(cy.hi)) {
            o.boundCenter[i * 2] = cx.hi;
            o.boundCenter[i * 2 + 1] = cy.hi;
            o.boundQ[i * 3] = pa.hi;
            o.boundQ[i * 3 + 1] = pb.hi;
            o.boundQ[i * 3 + 2] = pc.hi;
            ok = hyperbola_rect(cx.hi, cy.hi, pa.hi, pb.hi, pc.hi, cam.tileSize, cam.tilesX, cam.tilesY, cam.W, cam.H,
                                o.rect + i * 4);
        }
        return ok;
    }
    DF exn = df_root(df_quot(df_prod(a11, kk), det)), eyn = df_root(df_quot(df_prod(a00, kk), det));
    o.boundCenter[i * 2] = cx.hi;
    o.boundCenter[i * 2 + 1] = cy.hi;
    o.boundQ[i * 3] = pa.hi;
    o.boundQ[i * 3 + 1] = pb.hi;
    o.boundQ[i * 3 + 2] = pc.hi;
    DF ex = df_prod(fx, exn), ey = df_prod(fy, eyn);
    // 3/r times the longest semi-axis: sqrt((mid + d)/det) of [[pa,pb],[pb,pc]].
    DF mid = df_prod(df_of(0.5f), df_sum(pa, pc));
    DF dd = df_sum(df_prod(df_prod(df_of(0.25f), df_diff(pa, pc)), df_diff(pa, pc)), df_prod(pb, pb));
    DF pdet = df_quot(df_quot(det, df_prod(kk, fxx)), df_prod(kk, fyy));
    DF semi = df_root(df_quot(df_sum(mid, df_root(dd)), pdet));
    o.radius[i] = df_prod(df_quot(df_of(3.0f), df_root(df_of(r2))), semi).hi;
    return set_rect(cam, cx.hi, cy.hi, ex.hi, ey.hi, o.rect + i * 4);
}

// ray_half is prep's rayHalf (the GPU runs pinhole cameras only): the half-plane a·px + b·py
// + c > 0 of the pixels whose ray has its closest approach to the splat behind the camera,
// from h = Aᵀu and g = R·h, with the margin τ = 10⁻⁴·|u|·‖A‖·dmax (see there).
DEVICE void ray_half(const Cam& cam, const float* a, const float* u, GPTR float* out)
{
    float h[3], g[3];
    float aa = 0.0f;
    for (int j = 0; j < 3; j++) {
        h[j] = (mul_rn(a[j], u[0]) + mul_rn(a[3 + j], u[1])) + mul_rn(a[6 + j], u[2]);
        aa = ((aa + mul_rn(a[j * 3], a[j * 3])) + mul_rn(a[j * 3 + 1], a[j * 3 + 1])) + mul_rn(a[j * 3 + 2], a[j * 3 + 2]);
    }
    for (int r = 0; r < 3; r++) g[r] = (mul_rn(cam.R[r * 3], h[0]) + mul_rn(cam.R[r * 3 + 1], h[1])) + mul_rn(cam.R[r * 3 + 2], h[2]);
    float uu = (mul_rn(u[0], u[0]) + mul_rn(u[1], u[1])) + mul_rn(u[2], u[2]);
    float xm = gmaxf(cam.cx, (float)cam.W - cam.cx) / cam.fx;
    float ym = gmaxf(cam.cy, (float)cam.H - cam.cy) / cam.fy;
    float dmax2 = (mul_rn(xm, xm) + mul_rn(ym, ym)) + 1.0f;
    float tau = mul_rn(1e-4f, sqrtd(mul_rn(mul_rn(uu, aa), dmax2)));
    float ga = g[0] / cam.fx, gb = g[1] / cam.fy;
    out[0] = ga;
    out[1] = gb;
    out[2] = ((g[2] - mul_rn(ga, cam.cx)) - mul_rn(gb, cam.cy)) - tau;
}

DEVICE bool project_ray(const Cam& cam, const Geom& g, u32 i, const Out& o)
{
    float opac = g.opac0;
    float amin = cam.alphaMin;
    if (!(opac > amin)) return false;
    // A = diag(1/σ)·R(q̂)ᵀ: row k is column k of R(q̂) over σ_k.
    float a[9];
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) a[k * 3 + j] = g.rq[j * 3 + k] / g.s[k];
    float rel[3] = {cam.center[0] - g.mean[0], cam.center[1] - g.mean[1], cam.center[2] - g.mean[2]};
    float u[3];
    mul_mv(a, rel, u);
    for (int k = 0; k < 3; k++) o.rayU[i * 3 + k] = u[k];
    for (int k = 0; k < 9; k++) o.rayA[i * 9 + k] = a[k];
    o.opacity[i] = opac;
    float z = g.p[2];
    o.mean2d[i * 2] = mul_rn(cam.fx, g.p[0] / z) + cam.cx;
    o.mean2d[i * 2 + 1] = mul_rn(cam.fy, g.p[1] / z) + cam.cy;
    ray_half(cam, a, u, o.rayHalf + i * 3);
    float r2 = mul_rn(2.0f, logd(opac / amin));
    return ray_footprint(cam, g, r2, i, o);
}

DEVICE void project_body(Thr th, project_args a)
{
    const Cam& cam = a.cam;
    u32 n = (u32)cam.n;
    u32 i = th.bid * th.bdim + th.tid;
    bool ok = false;
    if (i < n) {
        Out o = {a.opacity, a.mean2d, a.conic, a.rayU, a.rayA, a.boundCenter, a.boundQ, a.rect, a.radius, a.rayHalf};
        float sigmaScale = cam.model == MODEL_RAY ? cam.radiusScale : 1.0f;
        Geom g;
        load_geom(cam, a.params, n, i, sigmaScale, g);
        if (g.finite && !(g.p[2] < cam.nearZ)) {
            a.depth[i] = g.p[2];
            // The footprint before the colour: the 48 SH values are read for the splats on the
            // image alone. A splat is valid when both succeed, in either order; the entries of
            // an invalid one are never read.
            ok = cam.model == MODEL_RAY ? project_ray(cam, g, i, o) : project_ewa(cam, g, i, o);
            if (ok) ok = sh_color(cam, a.params + OFF_SH(n) + i * SH_STRIDE, g.mean, a.color + i * 3);
        }
        a.valid[i] = ok ? 1u : 0u;
    }
    u32 votes = warp_ballot(ok);
    if (th.lane == 0u && votes != 0u) atom_add_u32(a.readout + RO_VISIBLE, popc(votes));
}

// pixel_rays is prep's RayCam.Ray: Rᵀd/|d| with d = ((x+½ − cx)/fx, (y+½ − cy)/fy, 1), in df
// arithmetic from the camera's float32 pairs, rounded once.
DEVICE void pixel_rays_body(Thr th, pixel_rays_args a)
{
    const RayCam& cam = a.cam;
    u32 i = th.bid * th.bdim + th.tid;
    u32 npx = (u32)cam.W * (u32)cam.H;
    if (i >= npx) return;
    float px = (float)(i % (u32)cam.W) + 0.5f, py = (float)(i / (u32)cam.W) + 0.5f;
    DF fx = {cam.f[0], cam.fLo[0]}, fy = {cam.f[1], cam.fLo[1]};
    DF cx = {cam.f[2], cam.fLo[2]}, cy = {cam.f[3], cam.fLo[3]};
    DF xu = df_quot(df_diff(df_of(px), cx), fx);
    DF yu = df_quot(df_diff(df_of(py), cy), fy);
    DF nrm = df_root(df_sum(df_sum(df_prod(xu, xu), df_prod(yu, yu)), df_of(1.0f)));
    DF v0 = df_quot(xu, nrm), v1 = df_quot(yu, nrm), v2 = df_quot(df_of(1.0f), nrm);
    for (int k = 0; k < 3; k++) {
        DF r0 = {cam.R[k], cam.RLo[k]}, r1 = {cam.R[3 + k], cam.RLo[3 + k]}, r2 = {cam.R[6 + k], cam.RLo[6 + k]};
        a.rays[i * 3 + k] = df_sum(df_sum(df_prod(r0, v0), df_prod(r1, v1)), df_prod(r2, v2)).hi;
    }
}
