// project_bwd.cu — design.md §5 step 7: the gradients of the projected data (from raster_bwd)
// mapped back to every splat parameter, through the SH colour, the EWA covariance and Jacobian
// (or the ray model's A and u), the opacity sigmoid and the quaternion normalisation
// (internal/prep/project_bwd.go is the CPU twin), plus the densification statistics.
//
// project_bwd: one thread per visible splat, vis[t] for t < readout[RO_VISIBLE] (bin_compact's
//   list, id order), over a 1-D grid of blocks of SH_BLOCK (128) threads that covers n (at most
//   SH_BLOCK: the shared rows); thread t also clears splat t's words when splat t is out of view.
//   Nothing runs when readout[RO_ABORT] is set.
//   The SH coefficients and their gradients go through shared memory with coalesced loads and
//   stores (below): the block stages its splats' 48 coefficients, each thread replaces its row
//   by the gradients, and the block writes the rows back; every thread of the block reaches
//   both barriers.
//   cam Cam by value; params [59n] f32 packed; valid [n] u32, radius [n] f32 (project)
//   gColor [n,3], gOpacity [n]; EWA gMean2d [n,2], gConic [n,3]; ray gRayU [n,3], gRayA [n,9]
//   grads [59n] f32 packed: every element of a valid splat written once. An invalid splat's
//   gradient is zero and is not written (adam_step does not read it): at 1M splats of which
//   half are in view, that saves a quarter of a gigabyte a step.
//   A batch of views sums its views' gradients in grads: seen [n] u32 marks the splats some
//   view of the batch has written so far. later == 0 (a step's only or first view): grads
//   written as above, seen[i] = valid[i]. later != 0 (a later view of the batch): a valid
//   splat already seen adds its gradients to grads (in view order, as the CPU engine sums
//   them), one not seen writes them; seen[i] |= valid[i]. adam_step then reads seen as the
//   batch's valid.
//   grad2d [n] f32: ‖dL/d(projected centre)‖ in NDC units (pixel gradient × W/2, H/2); with
//   absGrad (EWA) the same of gMean2dAbs [n,2], raster_bwd's sums of the pixels' contributions
//   by magnitude (AbsGS), in place of gMean2d
//   accumulate != 0: statAccum[i] += grad2d, statCount[i] += 1, statMaxRadius[i] = max(…, radius)
//   for valid splats (the 3DGS densification statistics)
#include "prelude.h"
#include "common.h"
#include "geom.h"
#include "readout.h"
#include "entries/project_bwd.h"

// SH staging. A splat's 48 SH floats are 192 bytes apart from the next splat's, so a warp whose
// threads each read or write their own splat's coefficients touches 32 cache lines per
// instruction. project_bwd instead moves the SH rows of its block's splats between global and
// shared memory cooperatively, thread t taking elements t, t+bdim, … of the rows laid end to
// end (consecutive addresses across a warp, within one or two rows), and each thread then uses
// its own row of the shared array (the block-shared sSh, spec). Blocks have at most SH_BLOCK threads (abi.h; 24.5 KB of
// rows); a row is padded to SH_SROW = 49 floats, an odd stride, so that the threads' accesses
// to their rows hit 32 different banks.
// (project, which reads the coefficients of the visible splats alone, stays with direct loads:
// staging every splat's made it slower on real views, where most splats are culled.)
#define SH_SROW 49

// sh_backward replaces the splat's 48 SH coefficients in sh (its row in shared memory) by their
// gradients (zero above the degree and for clamped channels) and returns dL/dμ through the view
// direction in dmu. The coefficients are read from shared memory rather than held in registers.
// Term k of the basis and its derivatives are computed once, where they are used, for all
// three channels (sh_term: nothing is kept for the other terms); the direction gradient sums
// its terms k by k, channels within each k, as internal/prep's shBackward does. Coefficient
// (k, c) is read before it is overwritten, and the colours it feeds were summed beforehand.
DEVICE void sh_backward(const Cam& cam, SPTR float* sh, const float* mean, const float* dColor, float* dmu)
{
    float d[3] = {mean[0] - cam.center[0], mean[1] - cam.center[1], mean[2] - cam.center[2]};
    float n = sqrtd(dot3(d, d));
    float x = d[0] / n, y = d[1] / n, z = d[2] / n;
    ShDir sd = sh_dir(x, y, z);
    int nc = (cam.shDegree + 1) * (cam.shDegree + 1);
    // Each channel's colour, its terms summed in k order.
    float v[3] = {0.5f, 0.5f, 0.5f};
    for (int k = 0; k < SH_COEFFS; k++) {
        if (k >= nc) continue;
        float b, bx, by, bz;
        sh_term(k, sd, b, bx, by, bz);
        for (int c = 0; c < 3; c++) v[c] += b * sh[k * 3 + c];
    }
    // Clamped at zero: no gradient (design.md §3).
    bool on[3] = {v[0] > 0.0f, v[1] > 0.0f, v[2] > 0.0f};
    float dd[3] = {0.0f, 0.0f, 0.0f};
    for (int k = 0; k < SH_COEFFS; k++) {
        float b, bx, by, bz;
        sh_term(k, sd, b, bx, by, bz);
        for (int c = 0; c < 3; c++) {
            bool use = on[c] && k < nc;
            float gc = dColor[c];
            float s = sh[k * 3 + c];
            sh[k * 3 + c] = use ? b * gc : 0.0f;
            if (use) {
                dd[0] += bx * s * gc;
                dd[1] += by * s * gc;
                dd[2] += bz * s * gc;
            }
        }
    }
    // Through d̂ = d/‖d‖: dd = (dd̂ − d̂(d̂·dd̂))/‖d‖.
    float sdot = x * dd[0] + y * dd[1] + z * dd[2];
    dmu[0] = (dd[0] - x * sdot) / n;
    dmu[1] = (dd[1] - y * sdot) / n;
    dmu[2] = (dd[2] - z * sdot) / n;
}

// quat_vjp maps dL/dR (R the rotation of q̂ = q/n) back to dL/dq of the unnormalised q.
DEVICE void quat_vjp(const float* qh, float n, const float* g, float* dq)
{
    if (n == 0.0f) {
        dq[0] = dq[1] = dq[2] = dq[3] = 0.0f;
        return;
    }
    float w = qh[0], x = qh[1], y = qh[2], z = qh[3];
    float dw = 2.0f * (-z * g[1] + y * g[2] + z * g[3] - x * g[5] - y * g[6] + x * g[7]);
    float dx = 2.0f * (y * g[1] + z * g[2] + y * g[3] - 2.0f * x * g[4] - w * g[5] + z * g[6] + w * g[7] - 2.0f * x * g[8]);
    float dy = 2.0f * (-2.0f * y * g[0] + x * g[1] + w * g[2] + x * g[3] + z * g[5] - w * g[6] + z * g[7] - 2.0f * y * g[8]);
    float dz = 2.0f * (-2.0f * z * g[0] - w * g[1] + x * g[2] + w * g[3] - 2.0f * z * g[4] + y * g[5] + x * g[6] + y * g[7]);
    float d = dw * w + dx * x + dy * y + dz * z;
    dq[0] = (dw - w * d) / n;
    dq[1] = (dx - x * d) / n;
    dq[2] = (dy - y * d) / n;
    dq[3] = (dz - z * d) / n;
}

struct PG {
    const GPTR float* color;
    const GPTR float* opacity;
    const GPTR float* mean2d;
    const GPTR float* conic;
    const GPTR float* rayU;
    const GPTR float* rayA;
    const GPTR float* mean2dAbs; // with absGrad: AbsGS's position statistic (EWA), else null
};

// A splat's gradients but the SH ones, in registers: means 3, log-scales 3, quats 4, opacity 1
// (the packed layout's order, common.h).
#define G_MEANS 0
#define G_SCALES 3
#define G_QUATS 6
#define G_OPAC 10
#define G_N 11

// Returns the position statistic; writes splat i's gradients into g (G_*), but the SH ones,
// which replace the coefficients in sh (the splat's shared row).
DEVICE float ewa_backward(const Cam& cam, const GPTR float* params, u32 n, u32 i, const PG& pg, SPTR float* sh,
                          float* g)
{
    Geom st;
    load_geom(cam, params, n, i, 1.0f, st);
    float sc[9], m[9], jac[6];
    ewa_cov(cam, st, sc, m);
    float tx, ty;
    bool clampX, clampY;
    ewa_jacobian(cam, st.p, jac, tx, ty, clampX, clampY);
    float a0, b, c0;
    cov2d(jac, sc, a0, b, c0);
    float a = a0 + DILATION, c = c0 + DILATION;
    float det = a * c - b * b;
    float z = st.p[2];

    float dColor[3] = {pg.color[i * 3], pg.color[i * 3 + 1], pg.color[i * 3 + 2]};
    float dMu[3];
    sh_backward(cam, sh, st.mean, dColor, dMu);

    float gOpac = pg.opacity[i];
    float ga = 0.0f, gb = 0.0f, gc = 0.0f;
    float comp = 1.0f;
    if (cam.antialiased) {
        float det0 = a0 * c0 - b * b;
        float ratio = gmaxf(det0 / det, 0.0f);
        comp = sqrtd(ratio);
        if (comp > 0.0f) {
            float dRatio = gOpac * st.opac0 / (2.0f * comp);
            float det2 = det * det;
            ga += dRatio * (c0 * det - det0 * c) / det2;
            gc += dRatio * (a0 * det - det0 * a) / det2;
            gb += dRatio * (-2.0f * b * (det - det0)) / det2;
        }
    }
    g[G_OPAC] = gOpac * comp * st.opac0 * (1.0f - st.opac0);

    // Conic (c/det, −b/det, a/det) back to the dilated covariance (a, b, c).
    float gca = pg.conic[i * 3], gcb = pg.conic[i * 3 + 1], gcc = pg.conic[i * 3 + 2];
    float d2 = det * det;
    ga += gca * (-c * c / d2) + gcb * (b * c / d2) + gcc * (1.0f / det - a * c / d2);
    gb += gca * (2.0f * b * c / d2) + gcb * (-1.0f / det - 2.0f * b * b / d2) + gcc * (2.0f * a * b / d2);
    gc += gca * (1.0f / det - a * c / d2) + gcb * (a * b / d2) + gcc * (-a * a / d2);

    // Σ' = J·Σc·Jᵀ: dΣc = Jᵀ·G2·J and dJ = 2·G2·J·Σc, G2 symmetric with b shared.
    float g2[4] = {ga, gb / 2.0f, gb / 2.0f, gc};
    float g2j[6];
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++) g2j[r * 3 + k] = g2[r * 2] * jac[k] + g2[r * 2 + 1] * jac[3 + k];
    float dSc[9];
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++) dSc[r * 3 + k] = jac[r] * g2j[k] + jac[3 + r] * g2j[3 + k];
    float dJ[6];
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 3; k++)
            dJ[r * 3 + k] = 2.0f * (g2j[r * 3] * sc[k] + g2j[r * 3 + 1] * sc[3 + k] + g2j[r * 3 + 2] * sc[6 + k]);

    float gmx = pg.mean2d[i * 2], gmy = pg.mean2d[i * 2 + 1];
    float dP[3] = {0.0f, 0.0f, 0.0f};
    dP[0] += cam.fx / z * gmx;
    dP[1] += cam.fy / z * gmy;
    dP[2] += -cam.fx * st.p[0] / (z * z) * gmx - cam.fy * st.p[1] / (z * z) * gmy;
    float z2 = z * z, z3 = z * z * z;
    dP[2] += -cam.fx / z2 * dJ[0] - cam.fy / z2 * dJ[4];
    if (clampX) {
        dP[2] += cam.fx * tx / z3 * dJ[2];
    } else {
        dP[0] += -cam.fx / z2 * dJ[2];
        dP[2] += 2.0f * cam.fx * tx / z3 * dJ[2];
    }
    if (clampY) {
        dP[2] += cam.fy * ty / z3 * dJ[5];
    } else {
        dP[1] += -cam.fy / z2 * dJ[5];
        dP[2] += 2.0f * cam.fy * ty / z3 * dJ[5];
    }
    float dW[3];
    mul_mtv(cam.R, dP, dW);
    for (int k = 0; k < 3; k++) g[G_MEANS + k] = dMu[k] + dW[k];

    // Σc = W·Σ·Wᵀ → dΣ = Wᵀ·dΣc·W; Σ = M·Mᵀ → dM = 2·dΣ·M.
    float wt[9], t[9], dSigma[9], dM[9], dR[9];
    transpose3(cam.R, wt);
    mul_mm(wt, dSc, t);
    mul_mm(t, cam.R, dSigma);
    mul_mm(dSigma, m, dM);
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++) {
            dM[r * 3 + k] *= 2.0f;
            dR[r * 3 + k] = dM[r * 3 + k] * st.s[k];
        }
    for (int k = 0; k < 3; k++) {
        float ds = dM[k] * st.rq[k] + dM[3 + k] * st.rq[3 + k] + dM[6 + k] * st.rq[6 + k];
        g[G_SCALES + k] = ds * st.s[k];
    }
    quat_vjp(st.qh, st.qn, dR, g + G_QUATS);

    if (pg.mean2dAbs) {
        gmx = pg.mean2dAbs[i * 2];
        gmy = pg.mean2dAbs[i * 2 + 1];
    }
    float nx = gmx * (float)cam.W / 2.0f, ny = gmy * (float)cam.H / 2.0f;
    return sqrtd(nx * nx + ny * ny);
}

DEVICE float ray_backward(const Cam& cam, const GPTR float* params, u32 n, u32 i, const PG& pg, SPTR float* sh,
                          float* g)
{
    Geom st;
    load_geom(cam, params, n, i, cam.radiusScale, st);
    float dColor[3] = {pg.color[i * 3], pg.color[i * 3 + 1], pg.color[i * 3 + 2]};
    float dMu[3];
    sh_backward(cam, sh, st.mean, dColor, dMu);
    g[G_OPAC] = pg.opacity[i] * st.opac0 * (1.0f - st.opac0);

    float a[9];
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) a[k * 3 + j] = st.rq[j * 3 + k] / st.s[k];
    float rel[3] = {cam.center[0] - st.mean[0], cam.center[1] - st.mean[1], cam.center[2] - st.mean[2]};
    float dU[3] = {pg.rayU[i * 3], pg.rayU[i * 3 + 1], pg.rayU[i * 3 + 2]};
    float dA[9];
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++) dA[k * 3 + j] = pg.rayA[i * 9 + k * 3 + j] + dU[k] * rel[j];
    // u = A·(c − μ): dμ = −Aᵀ·dU.
    float du[3];
    mul_mtv(a, dU, du);
    for (int k = 0; k < 3; k++) dMu[k] -= du[k];
    // A[k][j] = R[j][k]/σ_k.
    float dR[9];
    for (int k = 0; k < 3; k++) {
        float ds = 0.0f;
        for (int j = 0; j < 3; j++) {
            dR[j * 3 + k] = dA[k * 3 + j] / st.s[k];
            ds -= dA[k * 3 + j] * st.rq[j * 3 + k] / (st.s[k] * st.s[k]);
        }
        g[G_SCALES + k] = ds * st.s[k];
    }
    quat_vjp(st.qh, st.qn, dR, g + G_QUATS);
    for (int k = 0; k < 3; k++) g[G_MEANS + k] = dMu[k];

    // The position statistic: μ moved along the camera's x and y axes shifts the centre by f·δ/z.
    float z = st.p[2];
    float gx = (dMu[0] * cam.R[0] + dMu[1] * cam.R[1] + dMu[2] * cam.R[2]) * z / cam.fx;
    float gy = (dMu[0] * cam.R[3] + dMu[1] * cam.R[4] + dMu[2] * cam.R[5]) * z / cam.fy;
    float nx = gx * (float)cam.W / 2.0f, ny = gy * (float)cam.H / 2.0f;
    return sqrtd(nx * nx + ny * ny);
}

// pg_zero says the splat's prepared-data gradients are all zero (no pixel's loss reached it):
// every parameter gradient is then zero too, and project_bwd skips the backward.
DEVICE bool pg_zero(const Cam& cam, const PG& pg, u32 i)
{
    bool z = pg.color[i * 3] == 0.0f && pg.color[i * 3 + 1] == 0.0f && pg.color[i * 3 + 2] == 0.0f && pg.opacity[i] == 0.0f;
    if (cam.model == MODEL_RAY) {
        for (u32 k = 0; k < 3u; k++) z = z && pg.rayU[i * 3 + k] == 0.0f;
        for (u32 k = 0; k < 9u; k++) z = z && pg.rayA[i * 9 + k] == 0.0f;
    } else {
        z = z && pg.mean2d[i * 2] == 0.0f && pg.mean2d[i * 2 + 1] == 0.0f;
        for (u32 k = 0; k < 3u; k++) z = z && pg.conic[i * 3 + k] == 0.0f;
    }
    return z;
}

// stats records splat i's position statistic: grad2d always, the densification sums when
// accumulate is set.
DEVICE void stats(u32 i, float stat, u32 accumulate, const GPTR float* radius, GPTR float* grad2d, GPTR float* statAccum,
                  GPTR u32* statCount, GPTR float* statMaxRadius)
{
    grad2d[i] = stat;
    if (accumulate) {
        statAccum[i] = statAccum[i] + stat;
        statCount[i] = statCount[i] + 1u;
        statMaxRadius[i] = gmaxf(statMaxRadius[i], radius[i]);
    }
}

// sh_stage_list_in copies the 48 SH floats of the cnt splats list names (list[j], j < cnt) into
// the rows of s. Every thread of the block takes part; a BARRIER() must follow before the rows
// are read.
DEVICE void sh_stage_list_in(Thr th, const GPTR float* sh, const GPTR u32* list, u32 cnt, SPTR float* s)
{
    u32 total = cnt * SH_STRIDE;
    for (u32 e = th.tid; e < total; e += th.bdim) {
        u32 j = e / SH_STRIDE, r = e - j * SH_STRIDE;
        s[j * SH_SROW + r] = sh[list[j] * SH_STRIDE + r];
    }
}

// sh_stage_list_out writes the rows of s of the cnt splats list names to their SH gradients in
// dst, adding them to dst's values where add marks it (a later view of a batch, the splat's
// gradients already written). Every thread of the block takes part, after a BARRIER().
DEVICE void sh_stage_list_out(Thr th, const SPTR float* s, const GPTR u32* list, const SPTR u32* add, u32 cnt, GPTR float* dst)
{
    u32 total = cnt * SH_STRIDE;
    for (u32 e = th.tid; e < total; e += th.bdim) {
        u32 j = e / SH_STRIDE, r = e - j * SH_STRIDE;
        u32 at = list[j] * SH_STRIDE + r;
        float x = s[j * SH_SROW + r];
        dst[at] = add[j] ? dst[at] + x : x;
    }
}

// project_bwd walks the view's visible splats (vis, readout[RO_VISIBLE] of them) rather than
// every splat: on a trained scene a quarter of the splats are in view, and a thread a splat left
// three lanes of four idle through the backward's arithmetic (0.28 ms for 0.9M splats, of which
// the gradients' bytes explain a tenth). Thread t of the grid handles visible splat vis[t] and,
// apart, splat t's own words when it is out of view (grad2d = 0, and seen = 0 for a step's
// first view): the two sets of splats are disjoint, so no word is written twice.
DEVICE void project_bwd_body(Thr th, project_bwd_args a, SPTR float* sSh, SPTR u32* sAdd)
{
    // readout[RO_ABORT] is the same for every thread: whole blocks leave, before any barrier.
    if (a.readout[RO_ABORT]) return;
    const Cam& cam = a.cam;
    u32 n = (u32)cam.n;
    u32 first = th.bid * th.bdim;
    u32 t = first + th.tid;
    if (t < n && !a.valid[t]) {
        a.grad2d[t] = 0.0f;
        if (!a.later) a.seen[t] = 0u;
    }
    u32 nv = a.readout[RO_VISIBLE];
    u32 cnt = first < nv ? (nv - first < th.bdim ? nv - first : th.bdim) : 0u;
    const GPTR u32* list = a.vis + first;
    sh_stage_list_in(th, a.params + OFF_SH(n), list, cnt, sSh);
    BARRIER();
    SPTR float* sh = sSh + th.tid * SH_SROW;
    // Whether the batch's earlier views wrote splat i's gradients (added to below), read before
    // seen[i] is updated; each thread reads and writes its own splat's word only.
    u32 add = 0u;
    if (th.tid < cnt) {
        u32 i = list[th.tid];
        add = a.later ? a.seen[i] : 0u;
        a.seen[i] = 1u;
        // A visible splat's backward writes (or adds) each of its 59 gradients once (the SH ones
        // through sh); one whose prepared-data gradients are all zero has zero gradients.
        PG pg = {a.gColor, a.gOpacity, a.gMean2d, a.gConic, a.gRayU, a.gRayA, a.absGrad ? a.gMean2dAbs : 0};
        float g[G_N];
        float stat = 0.0f;
        if (pg_zero(cam, pg, i)) {
            for (u32 k = 0; k < G_N; k++) g[k] = 0.0f;
            for (u32 k = 0; k < SH_STRIDE; k++) sh[k] = 0.0f;
        } else {
            stat = cam.model == MODEL_RAY ? ray_backward(cam, a.params, n, i, pg, sh, g)
                                          : ewa_backward(cam, a.params, n, i, pg, sh, g);
        }
        u32 el[G_N];
        for (u32 k = 0; k < 3u; k++) {
            el[G_MEANS + k] = OFF_MEANS(n) + i * 3u + k;
            el[G_SCALES + k] = OFF_SCALES(n) + i * 3u + k;
        }
        for (u32 k = 0; k < 4u; k++) el[G_QUATS + k] = OFF_QUATS(n) + i * 4u + k;
        el[G_OPAC] = OFF_OPAC(n) + i;
        for (u32 k = 0; k < G_N; k++) a.grads[el[k]] = add ? a.grads[el[k]] + g[k] : g[k];
        stats(i, stat, a.accumulate, a.radius, a.grad2d, a.statAccum, a.statCount, a.statMaxRadius);
    }
    sAdd[th.tid] = add;
    BARRIER();
    sh_stage_list_out(th, sSh, list, sAdd, cnt, a.grads + OFF_SH(n));
}
