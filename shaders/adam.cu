// adam.cu — design.md §5 step 8: packed Adam over the 59 floats of every splat, with per-group
// learning rates and gradient clips, NaN guards and optional visible-only groups
// (internal/adam's stepGroup is the CPU twin, with the same float32 element arithmetic; the
// bias corrections are folded into stepSize and invSqrtBc2 on the host in float64).
//
// adam_step: one thread per 4 consecutive elements 4t..4t+3 of the 59n of the packed layout
//   (common.h), moved with 16-byte loads and stores (the kernel is bound by memory: it reads
//   and writes every parameter and both moments). An element's group is 0 means, 1
//   log_scales, 2 quats, 3 opacity logits, 4 SH DC (the first 3 of a splat's 48 SH values),
//   5 SH rest. Nothing runs when readout[RO_ABORT] is set (a step whose lists overflowed is
//   run again), nor when readout[RO_PEER] is (another rank's views of a data-parallel step
//   overflowed: every rank leaves its parameters as they are, and the step runs again).
//   params, m, v [59n] f32 updated in place; valid [n] u32 (project)
//   grads [59n] f32: read for valid splats only. An invalid splat's gradient is zero, and
//   project_bwd does not write it: its elements take g = 0, or no update at all in a group
//   whose bit g of ap.visibleOnly is set (engine.AdamSettings.SparseGroups: every group, or
//   the SH rest alone). A thread whose four elements are all left loads nothing but the flags.
//   After a batch of views, grads holds the sum of the views' gradients and valid is
//   project_bwd's seen (valid in some view of the batch); each read gradient is multiplied by
//   ap.gradScale (1/B: the batch's mean loss; 1 for one view, which leaves it exact).
//   readout[RO_NONFINITE] += non-finite (or overflowing) gradients used as 0, plus updates
//   skipped because the update or the new value was not finite.
//   With the MCMC regularisers on (ap.co, ap.cs), their gradient joins every updated element's
//   (adam.h's adam_grad), in view or not (ap.regInView: in view only).
//   SH floats at or above ap.shLive in their splat's row are left alone: they belong to bands
//   above the highest degree any step has used, so their gradients and moments are zero and
//   the dense update (m = v = 0, u = −0) would leave every value as it is, bit for bit. The
//   first 3000 steps of a degree-3 schedule, and every step of a lower model.sh_degree, then
//   skip a fifth to three quarters of the 59 floats.
// opacity_reset: one thread per splat; logit = min(logit, maxLogit) (the original's opacity
//   reset; the host zeroes the opacity moments).
#include "prelude.h"
#include "common.h"
#include "readout.h"
#include "adam.h"
#include "entries/adam.h"

// AdamP and its AdamGroup (passed by value: one step's sizes and corrections) are declared in
// abi.h.

// locate returns element e's group and sets its splat and, for an SH element, its place col
// in the splat's 48 SH floats (left alone otherwise).
DEVICE u32 locate(u32 e, u32 n, u32& splat, u32& col)
{
    if (e < OFF_SCALES(n)) {
        splat = e / 3u;
        return 0u;
    }
    if (e < OFF_QUATS(n)) {
        splat = (e - OFF_SCALES(n)) / 3u;
        return 1u;
    }
    if (e < OFF_OPAC(n)) {
        splat = (e - OFF_QUATS(n)) / 4u;
        return 2u;
    }
    if (e < OFF_SH(n)) {
        splat = e - OFF_OPAC(n);
        return 3u;
    }
    u32 r = e - OFF_SH(n);
    splat = r / (u32)SH_STRIDE;
    col = r % (u32)SH_STRIDE;
    return col < 3u ? 4u : 5u;
}

DEVICE void adam_step_body(Thr th, adam_step_args a, SPTR float* gtab)
{
    if (a.readout[RO_ABORT] || a.readout[RO_PEER]) return;
    const AdamP& ap = a.ap;
    adam_groups(th, ap, gtab);
    BARRIER();
    GPTR float* params = a.params;
    GPTR float* m = a.m;
    GPTR float* v = a.v;
    const GPTR float* grads = a.grads;
    const GPTR u32* valid = a.valid;
    u32 n = ap.n;
    u32 total = PARAM_FLOATS * n;
    u32 e0 = (th.bid * th.bdim + th.tid) * 4u;
    if (e0 >= total) return;
    u32 cnt = total - e0 < 4u ? total - e0 : 4u;
    u32 grp[4];
    bool live[4], upd[4];
    bool anyLive = false, anyUpd = false;
    for (u32 q = 0; q < 4u; q++) {
        live[q] = upd[q] = false;
        grp[q] = 0u;
        if (q >= cnt) continue;
        u32 splat, col = 0u;
        grp[q] = locate(e0 + q, n, splat, col);
        if (grp[q] >= 4u && col >= ap.shLive) continue; // above every degree used so far: a no-op
        live[q] = valid[splat] != 0u;
        upd[q] = live[q] || ((ap.visibleOnly >> grp[q]) & 1u) == 0u;
        anyLive = anyLive || live[q];
        anyUpd = anyUpd || upd[q];
    }
    if (!anyUpd) return;
    float p[4], mm[4], vv[4], g[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (cnt == 4u) {
        ld4(params, e0, p);
        ld4(m, e0, mm);
        ld4(v, e0, vv);
        if (anyLive) ld4(grads, e0, g);
    } else {
        for (u32 q = 0; q < cnt; q++) {
            p[q] = params[e0 + q];
            mm[q] = m[e0 + q];
            vv[q] = v[e0 + q];
            if (live[q]) g[q] = grads[e0 + q];
        }
    }
    u32 bad = 0;
    for (u32 q = 0; q < 4u; q++) {
        if (!upd[q]) continue;
        float gq = live[q] ? mul_rn(ap.gradScale, g[q]) : 0.0f;
        bad += adam_group_update(ap, gtab, grp[q], adam_grad(ap, grp[q], gq, p[q], live[q]), p[q], mm[q], vv[q]);
    }
    // Elements left alone (visible-only) are written back unchanged.
    if (cnt == 4u) {
        st4(params, e0, p);
        st4(m, e0, mm);
        st4(v, e0, vv);
    } else {
        for (u32 q = 0; q < cnt; q++) {
            params[e0 + q] = p[q];
            m[e0 + q] = mm[q];
            v[e0 + q] = vv[q];
        }
    }
    if (bad) atom_add_u32(a.readout + RO_NONFINITE, bad);
}

DEVICE void opacity_reset_body(Thr th, opacity_reset_args a)
{
    u32 i = th.bid * th.bdim + th.tid;
    u32 n = a.n;
    if (i >= n) return;
    a.params[OFF_OPAC(n) + i] = gminf(a.params[OFF_OPAC(n) + i], a.maxLogit);
}
