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
// centre for the ray model (camera.PixelRay for a pinhole, evaluated in float64 like it).
//   cam   CamD by value; rays [H*W,3] f32
#include "prelude.h"
#include "common.h"
#include "geom.h"
#include "readout.h"

DEVICE bool set_rect(const Cam& cam, float mx, float my, float ex, float ey, GPTR i32* rect)
{
    double ts = (double)cam.tileSize;
    double tx = (double)cam.tilesX, ty = (double)cam.tilesY;
    double fx0 = floor(((double)(mx - ex) - 0.5) / ts);
    double fx1 = floor(((double)(mx + ex) - 0.5) / ts) + 1.0;
    double fy0 = floor(((double)(my - ey) - 0.5) / ts);
    double fy1 = floor(((double)(my + ey) - 0.5) / ts) + 1.0;
    double sum = fx0 + fx1 + fy0 + fy1;
    if (sum != sum || fx1 <= 0.0 || fy1 <= 0.0 || fx0 >= tx || fy0 >= ty) return false;
    i32 x0 = (i32)gmaxd(fx0, 0.0), x1 = (i32)gmind(fx1, tx);
    i32 y0 = (i32)gmaxd(fy0, 0.0), y1 = (i32)gmind(fy1, ty);
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

// The pinhole silhouette of the iso-ellipsoid where the ray model's alpha reaches AlphaMin,
// projected as a dual quadric in float64 (prep's rayFootprint; distorted lenses are refused
// on the host).
DEVICE bool ray_footprint(const Cam& cam, const Geom& g, float r2, u32 i, const Out& o)
{
    double wr[9];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            wr[r * 3 + c] = (double)(mul_rn(cam.R[r * 3], g.rq[c]) + mul_rn(cam.R[r * 3 + 1], g.rq[3 + c]) + mul_rn(cam.R[r * 3 + 2], g.rq[6 + c]));
    double k[9];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            double v = 0.0;
            for (int j = 0; j < 3; j++) {
                double s = (double)g.s[j];
                v = v + dmul_rn(wr[r * 3 + j], wr[c * 3 + j]) / dmul_rn(dmul_rn(s, s), (double)r2);
            }
            k[r * 3 + c] = v;
        }
    double m[3] = {(double)g.p[0], (double)g.p[1], (double)g.p[2]};
    double km[3];
    for (int r = 0; r < 3; r++) km[r] = dmul_rn(k[r * 3], m[0]) + dmul_rn(k[r * 3 + 1], m[1]) + dmul_rn(k[r * 3 + 2], m[2]);
    double mkm = dmul_rn(km[0], m[0]) + dmul_rn(km[1], m[1]) + dmul_rn(km[2], m[2]);
    if (mkm <= 1.0) return footprint_whole(cam, i, o);
    double mm[9];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) mm[r * 3 + c] = dmul_rn(km[r], km[c]) - dmul_rn(mkm - 1.0, k[r * 3 + c]);
    double n2a = mm[0], n2b = mm[1], n2c = mm[4];
    double det = dmul_rn(n2a, n2c) - dmul_rn(n2b, n2b);
    if (!(det > 0.0) || !(n2a < 0.0)) return footprint_whole(cam, i, o);
    double nx = mm[2], ny = mm[5];
    double c0x = -(dmul_rn(n2c, nx) - dmul_rn(n2b, ny)) / det;
    double c0y = -(dmul_rn(-n2b, nx) + dmul_rn(n2a, ny)) / det;
    double kk = mm[8] + dmul_rn(nx, c0x) + dmul_rn(ny, c0y);
    if (!(kk > 0.0)) return false;
    double qa = -n2a / kk, qb = -n2b / kk, qc = -n2c / kk;
    double qdet = dmul_rn(qa, qc) - dmul_rn(qb, qb);
    double exn = sqrt(qc / qdet), eyn = sqrt(qa / qdet);
    double fx = (double)cam.fx, fy = (double)cam.fy;
    double cx = dmul_rn(fx, c0x) + (double)cam.cx, cy = dmul_rn(fy, c0y) + (double)cam.cy;
    double pa = qa / dmul_rn(fx, fx), pb = qb / dmul_rn(fx, fy), pc = qc / dmul_rn(fy, fy);
    o.boundCenter[i * 2] = (float)cx;
    o.boundCenter[i * 2 + 1] = (float)cy;
    o.boundQ[i * 3] = (float)pa;
    o.boundQ[i * 3 + 1] = (float)pb;
    o.boundQ[i * 3 + 2] = (float)pc;
    double ex = dmul_rn(fx, exn), ey = dmul_rn(fy, eyn);
    // semiMajor: 1/sqrt of the smaller eigenvalue of [[pa,pb],[pb,pc]].
    double mid = dmul_rn(0.5, pa + pc);
    double d = sqrt(gmaxd(dmul_rn(dmul_rn(0.25, pa - pc), pa - pc) + dmul_rn(pb, pb), 0.0));
    double semi = 1.0 / sqrt(gmind(mid + d, mid - d));
    o.radius[i] = (float)dmul_rn(3.0 / sqrt((double)r2), semi);
    return set_rect(cam, (float)cx, (float)cy, (float)ex, (float)ey, o.rect + i * 4);
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
    float r2 = mul_rn(2.0f, logd(opac / amin));
    return ray_footprint(cam, g, r2, i, o);
}

KERNEL project(Cam cam, const GPTR float* params, GPTR u32* valid, GPTR float* depth, GPTR float* opacity,
               GPTR float* color, GPTR float* mean2d, GPTR float* conic, GPTR float* rayU, GPTR float* rayA,
               GPTR float* boundCenter, GPTR float* boundQ, GPTR i32* rect, GPTR float* radius, GPTR u32* readout)
{
    u32 n = (u32)cam.n;
    u32 i = BID * BDIM + TID;
    bool ok = false;
    if (i < n) {
        Out o = {opacity, mean2d, conic, rayU, rayA, boundCenter, boundQ, rect, radius};
        float sigmaScale = cam.model == MODEL_RAY ? cam.radiusScale : 1.0f;
        Geom g;
        load_geom(cam, params, n, i, sigmaScale, g);
        if (g.finite && !(g.p[2] < cam.nearZ)) {
            depth[i] = g.p[2];
            if (sh_color(cam, params + OFF_SH(n) + i * SH_STRIDE, g.mean, color + i * 3)) {
                ok = cam.model == MODEL_RAY ? project_ray(cam, g, i, o) : project_ewa(cam, g, i, o);
            }
        }
        valid[i] = ok ? 1u : 0u;
    }
    u32 votes = warp_ballot(ok);
    if (LANE == 0 && votes != 0) atom_add_u32(readout + RO_VISIBLE, popc(votes));
}

struct CamD {
    double R[9];
    double fx, fy, cx, cy;
    i32 W, H;
};

KERNEL pixel_rays(CamD cam, GPTR float* rays)
{
    u32 i = BID * BDIM + TID;
    u32 npx = (u32)cam.W * (u32)cam.H;
    if (i >= npx) return;
    double px = (double)(i % (u32)cam.W) + 0.5, py = (double)(i / (u32)cam.W) + 0.5;
    double xu = (px - cam.cx) / cam.fx;
    double yu = (py - cam.cy) / cam.fy;
    double nrm = sqrt(dmul_rn(xu, xu) + dmul_rn(yu, yu) + 1.0);
    double v0 = xu / nrm, v1 = yu / nrm, v2 = 1.0 / nrm;
    for (int k = 0; k < 3; k++)
        rays[i * 3 + k] = (float)(dmul_rn(cam.R[k], v0) + dmul_rn(cam.R[3 + k], v1) + dmul_rn(cam.R[6 + k], v2));
}
