// geom.h — per-splat geometry shared by project.cu and project_bwd.cu: the SH basis and its
// derivatives, the quaternion rotation, and the intermediates internal/prep's loadGeom,
// ewaJacobian, ewaCov and cov2D compute. Every expression keeps the Go code's operation
// order and rounding (mul_rn: no fused multiply-add), so that the projection is the CPU's bit
// for bit. Include after common.h.
#pragma once

// SH basis constants in the original 3DGS ordering and signs (internal/splat/sh.go).
#define SH_C0 0.28209479177387814f
#define SH_C1 0.4886025119029199f

// ShDir is a unit view direction with the products of its components the basis uses.
struct ShDir {
    float x, y, z, xx, yy, zz, xy, yz, xz;
};

DEVICE ShDir sh_dir(float x, float y, float z)
{
    ShDir s = {x, y, z, mul_rn(x, x), mul_rn(y, y), mul_rn(z, z), mul_rn(x, y), mul_rn(y, z), mul_rn(x, z)};
    return s;
}

// sh_term sets b to basis function k at direction s and dx, dy, dz to its partial derivatives
// with respect to the direction's x, y and z (splat.SHBasis, splat.SHBasisGrad; the same
// expressions, so the same bits). Callers loop over k with a constant trip count, so that
// the switch folds away and nothing is kept for the terms not yet needed: the backward used to
// hold four arrays of 16 (the basis and its three derivatives) in registers at once.
DEVICE void sh_term(int k, const ShDir& s, float& b, float& dx, float& dy, float& dz)
{
    const float c20 = 1.0925484305920792f, c21 = -1.0925484305920792f, c22 = 0.31539156525252005f,
                c23 = -1.0925484305920792f, c24 = 0.5462742152960396f;
    const float c30 = -0.5900435899266435f, c31 = 2.890611442640554f, c32 = -0.4570457994644658f,
                c33 = 0.3731763325901154f, c34 = -0.4570457994644658f, c35 = 1.445305721320277f,
                c36 = -0.5900435899266435f;
    float x = s.x, y = s.y, z = s.z, xx = s.xx, yy = s.yy, zz = s.zz;
    dx = dy = dz = 0.0f;
    switch (k) {
    case 0: b = SH_C0; break;
    case 1: b = mul_rn(-SH_C1, y); dy = -SH_C1; break;
    case 2: b = mul_rn(SH_C1, z); dz = SH_C1; break;
    case 3: b = mul_rn(-SH_C1, x); dx = -SH_C1; break;
    case 4: b = mul_rn(c20, s.xy); dx = mul_rn(c20, y); dy = mul_rn(c20, x); break;
    case 5: b = mul_rn(c21, s.yz); dy = mul_rn(c21, z); dz = mul_rn(c21, y); break;
    case 6:
        b = mul_rn(c22, mul_rn(2.0f, zz) - xx - yy);
        dx = mul_rn(c22, mul_rn(-2.0f, x)); dy = mul_rn(c22, mul_rn(-2.0f, y)); dz = mul_rn(c22, mul_rn(4.0f, z));
        break;
    case 7: b = mul_rn(c23, s.xz); dx = mul_rn(c23, z); dz = mul_rn(c23, x); break;
    case 8: b = mul_rn(c24, xx - yy); dx = mul_rn(c24, mul_rn(2.0f, x)); dy = mul_rn(c24, mul_rn(-2.0f, y)); break;
    case 9:
        b = mul_rn(mul_rn(c30, y), mul_rn(3.0f, xx) - yy);
        dx = mul_rn(mul_rn(mul_rn(c30, 6.0f), x), y); dy = mul_rn(c30, mul_rn(3.0f, xx) - mul_rn(3.0f, yy));
        break;
    case 10:
        b = mul_rn(mul_rn(c31, s.xy), z);
        dx = mul_rn(mul_rn(c31, y), z); dy = mul_rn(mul_rn(c31, x), z); dz = mul_rn(mul_rn(c31, x), y);
        break;
    case 11:
        b = mul_rn(mul_rn(c32, y), mul_rn(4.0f, zz) - xx - yy);
        dx = mul_rn(c32, mul_rn(mul_rn(-2.0f, x), y)); dy = mul_rn(c32, mul_rn(4.0f, zz) - xx - mul_rn(3.0f, yy));
        dz = mul_rn(mul_rn(mul_rn(c32, 8.0f), y), z);
        break;
    case 12:
        b = mul_rn(mul_rn(c33, z), mul_rn(2.0f, zz) - mul_rn(3.0f, xx) - mul_rn(3.0f, yy));
        dx = mul_rn(c33, mul_rn(mul_rn(-6.0f, x), z)); dy = mul_rn(c33, mul_rn(mul_rn(-6.0f, y), z));
        dz = mul_rn(c33, mul_rn(6.0f, zz) - mul_rn(3.0f, xx) - mul_rn(3.0f, yy));
        break;
    case 13:
        b = mul_rn(mul_rn(c34, x), mul_rn(4.0f, zz) - xx - yy);
        dx = mul_rn(c34, mul_rn(4.0f, zz) - mul_rn(3.0f, xx) - yy); dy = mul_rn(c34, mul_rn(mul_rn(-2.0f, x), y));
        dz = mul_rn(mul_rn(mul_rn(c34, 8.0f), x), z);
        break;
    case 14:
        b = mul_rn(mul_rn(c35, z), xx - yy);
        dx = mul_rn(mul_rn(mul_rn(c35, 2.0f), x), z); dy = mul_rn(c35, mul_rn(mul_rn(-2.0f, y), z)); dz = mul_rn(c35, xx - yy);
        break;
    default:
        b = mul_rn(mul_rn(c36, x), xx - mul_rn(3.0f, yy));
        dx = mul_rn(c36, mul_rn(3.0f, xx) - mul_rn(3.0f, yy)); dy = mul_rn(c36, mul_rn(mul_rn(-6.0f, x), y));
        break;
    }
}

// sh_basis writes the (deg+1)² basis functions at the unit direction (x, y, z) to out
// (splat.SHBasis); the entries above the degree are left as they are.
DEVICE void sh_basis(int deg, float x, float y, float z, float* out)
{
    ShDir s = sh_dir(x, y, z);
    int nc = (deg + 1) * (deg + 1);
    for (int k = 0; k < SH_COEFFS; k++) {
        float dx, dy, dz;
        if (k < nc) sh_term(k, s, out[k], dx, dy, dz);
    }
}

DEVICE float dot3(const float* a, const float* b) { return mul_rn(a[0], b[0]) + mul_rn(a[1], b[1]) + mul_rn(a[2], b[2]); }

// m·v for a row-major 3×3 m.
DEVICE void mul_mv(const float* m, const float* v, float* out)
{
    for (int r = 0; r < 3; r++) out[r] = mul_rn(m[r * 3], v[0]) + mul_rn(m[r * 3 + 1], v[1]) + mul_rn(m[r * 3 + 2], v[2]);
}

// mᵀ·v.
DEVICE void mul_mtv(const float* m, const float* v, float* out)
{
    for (int c = 0; c < 3; c++) out[c] = mul_rn(m[c], v[0]) + mul_rn(m[3 + c], v[1]) + mul_rn(m[6 + c], v[2]);
}

// a·b for row-major 3×3 matrices.
DEVICE void mul_mm(const float* a, const float* b, float* out)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            out[i * 3 + j] = mul_rn(a[i * 3], b[j]) + mul_rn(a[i * 3 + 1], b[3 + j]) + mul_rn(a[i * 3 + 2], b[6 + j]);
}

DEVICE void transpose3(const float* a, float* out)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) out[i * 3 + j] = a[j * 3 + i];
}

// quat_to_mat writes the rotation of q̂ = q/‖q‖ (w,x,y,z), q̂ and ‖q‖; a zero quaternion maps to
// the identity with ‖q‖ = 0 (prep's quatToMat).
DEVICE float quat_to_mat(const float* q, float* rm, float* qh)
{
    float n = sqrtd(mul_rn(q[0], q[0]) + mul_rn(q[1], q[1]) + mul_rn(q[2], q[2]) + mul_rn(q[3], q[3]));
    if (n == 0.0f) {
        for (int i = 0; i < 9; i++) rm[i] = (i % 4 == 0) ? 1.0f : 0.0f;
        qh[0] = 1.0f; qh[1] = 0.0f; qh[2] = 0.0f; qh[3] = 0.0f;
        return 0.0f;
    }
    float w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
    qh[0] = w; qh[1] = x; qh[2] = y; qh[3] = z;
    rm[0] = 1.0f - mul_rn(2.0f, mul_rn(y, y) + mul_rn(z, z));
    rm[1] = mul_rn(2.0f, mul_rn(x, y) - mul_rn(w, z));
    rm[2] = mul_rn(2.0f, mul_rn(x, z) + mul_rn(w, y));
    rm[3] = mul_rn(2.0f, mul_rn(x, y) + mul_rn(w, z));
    rm[4] = 1.0f - mul_rn(2.0f, mul_rn(x, x) + mul_rn(z, z));
    rm[5] = mul_rn(2.0f, mul_rn(y, z) - mul_rn(w, x));
    rm[6] = mul_rn(2.0f, mul_rn(x, z) - mul_rn(w, y));
    rm[7] = mul_rn(2.0f, mul_rn(y, z) + mul_rn(w, x));
    rm[8] = 1.0f - mul_rn(2.0f, mul_rn(x, x) + mul_rn(y, y));
    return n;
}

// Geom holds the intermediates of one splat's geometry that forward and backward share
// (prep's splatGeom); the backward recomputes it.
struct Geom {
    float mean[3];
    float p[3];  // camera-space mean
    float rq[9]; // rotation of the normalised quaternion
    float qh[4];
    float qn;
    float s[3]; // exp(log_scale), times the radius scale for the ray model
    float opac0;
    bool finite;
};

DEVICE bool finite3(const float* v) { return f32_finite(v[0]) && f32_finite(v[1]) && f32_finite(v[2]); }

DEVICE void load_geom(const Cam& cam, const GPTR float* params, u32 n, u32 i, float sigmaScale, Geom& g)
{
    const GPTR float* means = params + OFF_MEANS(n);
    const GPTR float* ls = params + OFF_SCALES(n);
    const GPTR float* quats = params + OFF_QUATS(n);
    for (int k = 0; k < 3; k++) g.mean[k] = means[i * 3 + k];
    mul_mv(cam.R, g.mean, g.p);
    g.p[0] = g.p[0] + cam.T[0];
    g.p[1] = g.p[1] + cam.T[1];
    g.p[2] = g.p[2] + cam.T[2];
    float q[4] = {quats[i * 4], quats[i * 4 + 1], quats[i * 4 + 2], quats[i * 4 + 3]};
    g.qn = quat_to_mat(q, g.rq, g.qh);
    for (int k = 0; k < 3; k++) g.s[k] = mul_rn(sigmaScale, expd(ls[i * 3 + k]));
    g.opac0 = sigmoidd(params[OFF_OPAC(n) + i]);
    g.finite = g.qn > 0.0f && finite3(g.p) && finite3(g.s) && !f32_nan(g.opac0);
}

// EWA Jacobian of the perspective projection at p, with the frustum clamp (prep's ewaJacobian).
// j is 2×3 row-major.
DEVICE void ewa_jacobian(const Cam& cam, const float* p, float* j, float& tx, float& ty, bool& clampX, bool& clampY)
{
    float z = p[2];
    float ux = p[0] / z, uy = p[1] / z;
    float cx = gminf(cam.limXPos, gmaxf(-cam.limXNeg, ux));
    float cy = gminf(cam.limYPos, gmaxf(-cam.limYNeg, uy));
    clampX = cx != ux;
    clampY = cy != uy;
    tx = mul_rn(cx, z);
    ty = mul_rn(cy, z);
    float zz = mul_rn(z, z);
    j[0] = cam.fx / z;
    j[1] = 0.0f;
    j[2] = mul_rn(-cam.fx, tx) / zz;
    j[3] = 0.0f;
    j[4] = cam.fy / z;
    j[5] = mul_rn(-cam.fy, ty) / zz;
}

// Camera-space covariance Σc = W·M·Mᵀ·Wᵀ with M = R(q̂)·diag(s), and M (prep's ewaCov).
DEVICE void ewa_cov(const Cam& cam, const Geom& g, float* sc, float* m)
{
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) m[r * 3 + c] = mul_rn(g.rq[r * 3 + c], g.s[c]);
    float sigma[9];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            sigma[r * 3 + c] = mul_rn(m[r * 3], m[c * 3]) + mul_rn(m[r * 3 + 1], m[c * 3 + 1]) + mul_rn(m[r * 3 + 2], m[c * 3 + 2]);
    float wt[9], t[9];
    transpose3(cam.R, wt);
    mul_mm(cam.R, sigma, t);
    mul_mm(t, wt, sc);
}

// J·Σc·Jᵀ without the dilation (prep's cov2D).
DEVICE void cov2d(const float* j, const float* sc, float& a, float& b, float& c)
{
    float js[6];
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++)
            js[r * 3 + k] = mul_rn(j[r * 3], sc[k]) + mul_rn(j[r * 3 + 1], sc[3 + k]) + mul_rn(j[r * 3 + 2], sc[6 + k]);
    a = mul_rn(js[0], j[0]) + mul_rn(js[1], j[1]) + mul_rn(js[2], j[2]);
    b = mul_rn(js[0], j[3]) + mul_rn(js[1], j[4]) + mul_rn(js[2], j[5]);
    c = mul_rn(js[3], j[3]) + mul_rn(js[4], j[4]) + mul_rn(js[5], j[5]);
}
