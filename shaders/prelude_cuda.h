// prelude_cuda.h — maps the portable kernel vocabulary of shaders/ onto CUDA C.
//
// Kernel bodies never name CUDA directly: they use the words below, so that a Metal prelude
// (address spaces, thread indices, barriers, atomics, simdgroup operations) and the host
// emulator (prelude_emu.h, internal/gpu/emu) can run the very same bodies. Units include the
// backend-neutral "prelude.h", which the device layer maps to each backend's prelude.
//
// Arithmetic: every product whose result feeds a sum goes through mul_rn, which is never
// contracted into a fused multiply-add. The CPU engine (Go, amd64) rounds every operation on
// its own, so this keeps the GPU's projection, binning and loss bit-compatible with it
// (design.md §1: the GPU engine must never be a different algorithm), and tile lists
// identical (design.md §5 step 3). One exception, RLX_HW_EXP below: the rasterizers' alpha.
#pragma once

typedef unsigned int u32;
typedef unsigned short u16;
typedef int i32;
typedef unsigned long long u64;

// The backend macro selects each unit's entry wrappers (shaders/entries/, generated).
#define RLX_BACKEND_CUDA 1

#define KERNEL extern "C" __global__ void
// BOUNDS(threads, blocks) after KERNEL promises blocks of at most `threads` threads and asks the
// compiler to fit `blocks` of them on a multiprocessor (it caps the registers to do so). Only
// for kernels where `bench --kernels` showed the trade pays: fewer registers can mean spills.
#define BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#define DEVICE static __device__ __forceinline__
// GPTR qualifies pointers to device (global) memory; empty on CUDA, `device` on Metal.
#define GPTR
// SHARED declares a block-shared (threadgroup) array at kernel scope; SPTR qualifies pointers
// to such arrays (empty on CUDA, `threadgroup` on Metal).
#define SHARED __shared__
#define SPTR

#define TID (threadIdx.x)
#define BDIM (blockDim.x)
#define BID (blockIdx.x)
#define NBLOCKS (gridDim.x)
#define BARRIER() __syncthreads()

#define WARP 32u
#define LANE (threadIdx.x & 31u)
#define WARP_ID (threadIdx.x >> 5)

// Thr is a thread's place in its launch, built by the generated entry wrappers (Metal passes
// these as kernel parameters, so bodies and the helpers they call take th instead of reading
// TID, LANE and friends). 1-D: tid < bdim, bid < nblocks, lane = tid mod 32, warp = tid / 32.
struct Thr {
    u32 tid, bid, bdim, nblocks, lane, warp;
};

DEVICE float mul_rn(float a, float b) { return __fmul_rn(a, b); }
// exp_alpha is e^x for the rasterizers' exponents (−6 ≲ x ≤ 0; raster.h alpha_of) by the
// hardware's base-2 exponential: two instructions where exp32 takes about twenty (on an H100
// the forward's passes took 19 % less time with it, the backward 6 %). Its relative error
// (about 2⁻²² here) is far inside what the CPU engine's own exponential already differs by
// (internal/raster advances exp along a footprint row by a recurrence, about 1e-6), so images
// and gradients stay within parity's tolerances; a pixel whose skip or termination decides
// that close to its threshold may go the other way (for EWA internal/fused/borderline.go
// accepts either). Forward and backward take the same instruction on the same exponent bits,
// so they still agree on every decision. The emulator and Metal keep exp32 (RLX_HW_EXP
// undefined).
#define RLX_HW_EXP 1
DEVICE float exp_alpha(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(__fmul_rn(x, 1.44269504088896341f)));
    return y;
}
// sqrt_rn is IEEE's correctly rounded square root (never an approximation).
DEVICE float sqrt_rn(float x) { return __fsqrt_rn(x); }
// fma_f32 is one fused multiply-add a·b + c, rounded once. The engine's kernels do not use it
// (it would break the bit-compatibility above); it is for ceiling.cu's arithmetic-rate
// measurement, which must issue FMAs whatever the compiler's contraction setting.
DEVICE float fma_f32(float a, float b, float c) { return fmaf(a, b, c); }

DEVICE u32 f32_bits(float x) { return __float_as_uint(x); }
DEVICE float bits_f32(u32 x) { return __uint_as_float(x); }

// f4 is four floats moved as one 16-byte access (16-byte aligned, in shared memory too).
typedef float4 f4;
DEVICE f4 make_f4(float x, float y, float z, float w) { return make_float4(x, y, z, w); }

// ld4/st4 move 4 consecutive floats, p[i..i+3] with i a multiple of 4, as one 16-byte access
// (the buffers are 256-byte aligned): a quarter of the memory instructions of four loads.
DEVICE void ld4(const GPTR float* p, u32 i, float* out)
{
    float4 q = *(const GPTR float4*)(p + i);
    out[0] = q.x;
    out[1] = q.y;
    out[2] = q.z;
    out[3] = q.w;
}
DEVICE void st4(GPTR float* p, u32 i, const float* in) { *(GPTR float4*)(p + i) = make_float4(in[0], in[1], in[2], in[3]); }

// Warp (simdgroup) operations; every lane of the warp calls them (blocks are whole warps).
DEVICE u32 warp_ballot(bool p) { return __ballot_sync(0xffffffffu, p); }
DEVICE bool warp_any(bool p) { return __any_sync(0xffffffffu, p) != 0; }
DEVICE u32 popc(u32 x) { return (u32)__popc(x); }

// One step of warp_sum16_spread (not for kernels: the emulator has no counterpart): 2h values
// become h, o = 2h being the xor offset.
DEVICE void warp_spread_step(float* v, u32 lane, int o, int h)
{
    bool up = (lane & (u32)o) != 0u;
    for (int i = 0; i < h; i++) {
        float keep = up ? v[i + h] : v[i];
        float send = up ? v[i] : v[i + h];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
}

// warp_sum16_spread sums 16 values per lane over the warp at the cost of 16 shuffles (summing
// each on its own costs 5 a value): it returns, in lane l, the warp-wide sum of v[l >> 1], so
// lanes 2i and 2i+1 hold value i's sum. A transposing butterfly: at xor offsets 16, 8, 4, 2 a
// lane keeps the half of its values selected by that bit of its lane index, sends the other
// half to its partner and adds what the partner sends (its values of the kept half); after
// them v[0] holds value l >> 1 summed over the 16 lanes sharing bit 0 of l, and a last xor-1
// shuffle adds the other 16. v is clobbered. The indices are constants once unrolled, so v
// stays in registers.
DEVICE float warp_sum16_spread(Thr th, float* v)
{
    u32 lane = th.lane;
    warp_spread_step(v, lane, 16, 8);
    warp_spread_step(v, lane, 8, 4);
    warp_spread_step(v, lane, 4, 2);
    warp_spread_step(v, lane, 2, 1);
    return v[0] + __shfl_xor_sync(0xffffffffu, v[0], 1);
}

DEVICE u32 warp_sum_u32(u32 x)
{
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Exclusive prefix sum over the warp's lanes.
DEVICE u32 warp_exscan_u32(u32 x)
{
    u32 lane = LANE;
    u32 s = x;
    for (u32 o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += y;
    }
    return s - x;
}

DEVICE u32 warp_exscan_u32(Thr th, u32 x)
{
    u32 s = x;
    for (u32 o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, s, o);
        if (th.lane >= o) s += y;
    }
    return s - x;
}

DEVICE float atom_add_f32(GPTR float* p, float v) { return atomicAdd(p, v); }
DEVICE u32 atom_add_u32(GPTR u32* p, u32 v) { return atomicAdd(p, v); }
DEVICE u32 atom_max_u32(GPTR u32* p, u32 v) { return atomicMax(p, v); }
// Shared-memory atomics (a separate address space on Metal).
DEVICE u32 shared_add_u32(u32* p, u32 v) { return atomicAdd(p, v); }
DEVICE float shared_add_f32(float* p, float v) { return atomicAdd(p, v); }
DEVICE u32 shared_max_u32(u32* p, u32 v) { return atomicMax(p, v); }
