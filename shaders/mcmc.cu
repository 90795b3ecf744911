// mcmc.cu — the position noise of the MCMC densifier ("3D Gaussian Splatting as Markov Chain
// Monte Carlo", Kheradmand et al. 2024, as gsplat runs it), internal/engine's PerturbMeans to
// the bit: every product through mul_rn, exp32, log32 and the correctly rounded square root and
// division, in the Go code's order. (Its regularisers' gradients join Adam's: adam.h's
// adam_grad, engine.RegularizerGrads's twin.)
//
// mcmc_noise: one thread per splat i < n, after Adam: mean += Σ·ε·(gate(o)·scale), ε_a =
//   normal32(normal_key(seed, step, base + i, a)) (base: the engine's first splat's id in a
//   scene sharded over several, engine.MCMCStep.Base; 0 otherwise), gate(o) = σ(100·((1 − o) − 0.995)), Σ = R S Sᵀ Rᵀ
//   from the normalised quaternion and exp(log s); a splat whose gate·scale is 0 or whose
//   quaternion is zero or not finite stays in place. params [59·n] f32. Nothing runs when
//   readout[RO_ABORT] or readout[RO_PEER] (adam.cu) is set: the step runs again once its lists have grown, and the noise,
//   drawn from the step's number, must move the splats once.
#include "prelude.h"
#include "common.h"
#include "readout.h"
#include "entries/mcmc.h"

DEVICE void mcmc_noise_body(Thr th, mcmc_noise_args a)
{
    u32 n = a.n, i = th.bid * th.bdim + th.tid;
    if (i >= n || a.readout[RO_ABORT] || a.readout[RO_PEER]) return;
    GPTR float* p = a.params;
    float o = sigmoidd(p[OFF_OPAC(n) + i]);
    float gate = sigmoidd(mul_rn(100.0f, (1.0f - o) - 0.995f));
    float f = mul_rn(gate, a.scale);
    if (f == 0.0f) return; // an opaque splat (engine.PerturbMeans skips it too)
    float e[3];
    for (u32 c = 0u; c < 3u; c++) e[c] = mul_rn(normal32(normal_key(a.seedLo, a.seedHi, a.step, a.base + i, c)), f);
    const GPTR float* q = p + OFF_QUATS(n) + 4u * i;
    float nn = mul_rn(q[0], q[0]) + mul_rn(q[1], q[1]);
    nn = nn + mul_rn(q[2], q[2]);
    nn = nn + mul_rn(q[3], q[3]);
    float norm = sqrt_rn(nn);
    if (!(norm > 0.0f) || !f32_finite(norm)) return;
    float w = q[0] / norm, x = q[1] / norm, y = q[2] / norm, z = q[3] / norm;
    float xx = mul_rn(x, x), yy = mul_rn(y, y), zz = mul_rn(z, z);
    float xy = mul_rn(x, y), xz = mul_rn(x, z), yz = mul_rn(y, z);
    float wx = mul_rn(w, x), wy = mul_rn(w, y), wz = mul_rn(w, z);
    float r[3][3] = {
        {1.0f - mul_rn(2.0f, yy + zz), mul_rn(2.0f, xy - wz), mul_rn(2.0f, xz + wy)},
        {mul_rn(2.0f, xy + wz), 1.0f - mul_rn(2.0f, xx + zz), mul_rn(2.0f, yz - wx)},
        {mul_rn(2.0f, xz - wy), mul_rn(2.0f, yz + wx), 1.0f - mul_rn(2.0f, xx + yy)},
    };
    float s[3];
    for (u32 b = 0u; b < 3u; b++) s[b] = exp32(p[OFF_SCALES(n) + 3u * i + b]);
    float m[3][3]; // R·S
    for (u32 r0 = 0u; r0 < 3u; r0++)
        for (u32 b = 0u; b < 3u; b++) m[r0][b] = mul_rn(r[r0][b], s[b]);
    for (u32 r0 = 0u; r0 < 3u; r0++) {
        float cov[3];
        for (u32 b = 0u; b < 3u; b++) {
            float c = mul_rn(m[r0][0], m[b][0]) + mul_rn(m[r0][1], m[b][1]);
            cov[b] = c + mul_rn(m[r0][2], m[b][2]);
        }
        float d = mul_rn(cov[0], e[0]) + mul_rn(cov[1], e[1]);
        d = d + mul_rn(cov[2], e[2]);
        p[OFF_MEANS(n) + 3u * i + r0] += d;
    }
}
