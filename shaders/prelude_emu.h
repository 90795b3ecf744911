// prelude_emu.h — the kernel vocabulary of prelude_cuda.h for a host C++ compiler, so that the
// shared kernel bodies run (slowly, exactly) on a machine without a GPU. The host emulator
// backend (internal/gpu/emu: --device emu, and the fused tests with RLXSPLAT_FUSED_EMU=1)
// compiles a unit with a host C++ compiler, this file standing for the unit's "prelude.h".
// The execution model (fibers, barriers, warp operations) is emu_runtime.h's.
// mul_rn is a plain product: compile with -ffp-contract=off, so nothing is fused.
#pragma once

#include "emu_runtime.h"

using emu::Thr;

using std::exp;
using std::floor;
using std::log;
using std::sqrt;


#define RLX_BACKEND_EMU 1

#define KERNEL extern "C" void
#define DEVICE static inline
#define BOUNDS(threads, blocks)
#define GPTR
#define SHARED static
#define SPTR

#define TID (emu::blk().cur->tid)
#define BDIM (emu::blk().bdim)
#define BID (emu::blk().bid)
#define NBLOCKS (emu::blk().nblocks)
#define BARRIER() emu::park(emu::AT_BARRIER)

#define WARP 32u
#define LANE (TID & 31u)
#define WARP_ID (TID >> 5)

DEVICE float mul_rn(float a, float b) { return a * b; }
// sqrt_rn is IEEE's correctly rounded square root (never an approximation).
DEVICE float sqrt_rn(float x) { return std::sqrt(x); }
// fma_f32 is one fused multiply-add, rounded once as on the GPU (std::fma is exact, whatever
// -ffp-contract says).
DEVICE float fma_f32(float a, float b, float c) { return std::fma(a, b, c); }

DEVICE u32 f32_bits(float x)
{
    u32 u;
    memcpy(&u, &x, 4);
    return u;
}
DEVICE float bits_f32(u32 x)
{
    float f;
    memcpy(&f, &x, 4);
    return f;
}

struct alignas(16) f4 {
    float x, y, z, w;
};
DEVICE f4 make_f4(float x, float y, float z, float w) { return f4{x, y, z, w}; }

DEVICE void ld4(const GPTR float* p, u32 i, float* out)
{
    for (int k = 0; k < 4; k++) out[k] = p[i + k];
}
DEVICE void st4(GPTR float* p, u32 i, const float* in)
{
    for (int k = 0; k < 4; k++) p[i + k] = in[k];
}

DEVICE u32 warp_ballot(bool p) { return (u32)emu::warp_op(emu::OP_BALLOT, p ? 1 : 0); }
DEVICE bool warp_any(bool p) { return emu::warp_op(emu::OP_ANY, p ? 1 : 0) != 0; }
DEVICE u32 popc(u32 x) { return (u32)__builtin_popcount(x); }
DEVICE float warp_sum16_spread(Thr, float* v)
{
    emu::blk().cur->vec = v;
    u32 bits = (u32)emu::warp_op(emu::OP_SUM16S, 0);
    return bits_f32(bits);
}
DEVICE u32 warp_sum_u32(u32 x) { return (u32)emu::warp_op(emu::OP_SUMU, x); }
DEVICE u32 warp_exscan_u32(u32 x) { return (u32)emu::warp_op(emu::OP_EXSCAN, x); }
DEVICE u32 warp_exscan_u32(Thr, u32 x) { return warp_exscan_u32(x); }

DEVICE float atom_add_f32(float* p, float v)
{
    float o = *p;
    *p = o + v;
    return o;
}
DEVICE u32 atom_add_u32(u32* p, u32 v)
{
    u32 o = *p;
    *p = o + v;
    return o;
}
DEVICE u32 atom_max_u32(u32* p, u32 v)
{
    u32 o = *p;
    if (v > o) *p = v;
    return o;
}
DEVICE u32 shared_add_u32(u32* p, u32 v) { return atom_add_u32(p, v); }
DEVICE float shared_add_f32(float* p, float v) { return atom_add_f32(p, v); }
DEVICE u32 shared_max_u32(u32* p, u32 v) { return atom_max_u32(p, v); }
