// prelude_metal.h — the kernel vocabulary of prelude_cuda.h in the Metal Shading Language, so that
// the shared kernel bodies compile for Apple GPUs. The Metal backend (internal/gpu/metal, MSL)
// compiles every unit with this file in place of prelude_cuda.h, after
// `#pragma METAL fp contract(off)`, with language version 3.0 and safe math.
//
// What differs from CUDA, and why:
// - Thread and block indices are kernel parameters in MSL, not globals: TID, BID, BDIM, NBLOCKS,
//   LANE and WARP_ID are deliberately left undefined, so a body that still reads them fails to
//   compile naming the word. Bodies take the Thr that the generated entry wrappers build
//   (shaders/entries/, RLX_BACKEND_METAL branch) from [[thread_position_in_threadgroup]] etc.
// - Apple GPUs have no 64-bit float: dmul_rn and bits_f64 are not defined here.
// - u64 is MSL's 64-bit ulong; it is only moved and compared (Metal has no 64-bit atomics that
//   the kernels could rely on, and they use none).
// - Threadgroup memory has no float atomics: shared_add_f32 is a compare-and-swap loop on the
//   bits of a threadgroup atomic_uint.
// - Warp operations are simdgroup functions; the host checks at start that every pipeline's
//   threadExecutionWidth is 32 (WARP), which the helpers and the bodies assume.
#pragma once

#include <metal_stdlib>
using namespace metal;

typedef uint u32;
typedef ushort u16;
typedef int i32;
typedef ulong u64;

// The backend macro selects each unit's entry wrappers (shaders/entries/, generated).
#define RLX_BACKEND_METAL 1

// Entry points are generated wrappers; KERNEL is for a hand-written test kernel, which fails
// to compile here at its first TID (Metal passes thread indices as kernel parameters).
#define KERNEL kernel void
// Launch bounds are the generated wrappers' [[max_total_threads_per_threadgroup(n)]]; MSL has no
// minimum-occupancy hint.
#define BOUNDS(threads, blocks)
#define DEVICE static inline
#define GPTR device
// SHARED declares a threadgroup array at kernel scope (the generated wrappers declare every one
// through it), SPTR qualifies pointers and references to one. A host build of this very text
// (internal/gpu/metal/mslhost, whose <metal_stdlib> is shaders/metal_host.h) maps the two
// before this file, to one instance per threadgroup and no qualifier; Apple's compiler sees
// Metal's word.
#ifndef SHARED
#define SHARED threadgroup
#endif
#ifndef SPTR
#define SPTR threadgroup
#endif

// BARRIER orders threadgroup and device memory, as CUDA's __syncthreads does: bodies verified
// under __syncthreads may read, after a barrier, device words another thread of the block wrote
// before it (readout flags, per-block partial sums), so a threadgroup-only fence would be a
// weaker barrier than the one the bodies were checked with.
#define BARRIER() threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device)

#define WARP 32u

// Thr: see prelude_cuda.h.
struct Thr {
    u32 tid, bid, bdim, nblocks, lane, warp;
};

// With `#pragma METAL fp contract(off)` (MSL, before this file) a product is never fused into a
// following add, so a plain product is rounded on its own, as the CPU engine rounds it.
DEVICE float mul_rn(float a, float b) { return a * b; }
// sqrt_rn is IEEE's correctly rounded square root: precise::, never the fast-math variant that
// the default compile options would pick.
DEVICE float sqrt_rn(float x) { return precise::sqrt(x); }
// fma_f32: see prelude_cuda.h (ceiling.cu's arithmetic-rate measurement only).
DEVICE float fma_f32(float a, float b, float c) { return fma(a, b, c); }

DEVICE u32 f32_bits(float x) { return as_type<u32>(x); }
DEVICE float bits_f32(u32 x) { return as_type<float>(x); }

// f4: see prelude_cuda.h.
typedef float4 f4;
DEVICE f4 make_f4(float x, float y, float z, float w) { return float4(x, y, z, w); }

DEVICE void ld4(const GPTR float* p, u32 i, thread float* out)
{
    float4 q = *(const GPTR float4*)(p + i);
    out[0] = q.x;
    out[1] = q.y;
    out[2] = q.z;
    out[3] = q.w;
}
DEVICE void st4(GPTR float* p, u32 i, const thread float* in) { *(GPTR float4*)(p + i) = float4(in[0], in[1], in[2], in[3]); }

// Warp (simdgroup) operations; every lane of the simdgroup calls them (blocks are whole warps),
// as in the CUDA prelude and the emulator.
DEVICE u32 warp_ballot(bool p) { return (u32)static_cast<simd_vote::vote_t>(simd_ballot(p)); }
DEVICE bool warp_any(bool p) { return simd_any(p); }
DEVICE u32 popc(u32 x) { return popcount(x); }

// One step of warp_sum16_spread: see prelude_cuda.h.
DEVICE void warp_spread_step(thread float* v, u32 lane, int o, int h)
{
    bool up = (lane & (u32)o) != 0u;
    for (int i = 0; i < h; i++) {
        float keep = up ? v[i + h] : v[i];
        float send = up ? v[i] : v[i + h];
        v[i] = keep + simd_shuffle_xor(send, (ushort)o);
    }
}

// warp_sum16_spread: see prelude_cuda.h; the same butterfly, so the same order of additions.
DEVICE float warp_sum16_spread(Thr th, thread float* v)
{
    warp_spread_step(v, th.lane, 16, 8);
    warp_spread_step(v, th.lane, 8, 4);
    warp_spread_step(v, th.lane, 4, 2);
    warp_spread_step(v, th.lane, 2, 1);
    return v[0] + simd_shuffle_xor(v[0], (ushort)1);
}

// The form without Thr, for bodies written against the CUDA prelude's: MSL has no lane-index
// function, but with every lane of the simdgroup active (which all warp helpers require) the
// exclusive prefix count of the lanes is the lane index.
DEVICE float warp_sum16_spread(thread float* v)
{
    Thr th = {0u, 0u, 0u, 0u, simd_prefix_exclusive_sum(1u), 0u};
    return warp_sum16_spread(th, v);
}

// Integer sums are exact in any order, so simd_sum gives what the CUDA butterfly gives.
DEVICE u32 warp_sum_u32(u32 x) { return simd_sum(x); }

// Exclusive prefix sum over the simdgroup's lanes, in lane order.
DEVICE u32 warp_exscan_u32(u32 x) { return simd_prefix_exclusive_sum(x); }
DEVICE u32 warp_exscan_u32(Thr, u32 x) { return simd_prefix_exclusive_sum(x); }

// Device-memory atomics (relaxed, as CUDA's atomicAdd/atomicMax are). atomic_float needs MSL 3.0
// and an Apple7 or later GPU; the host refuses older ones.
DEVICE float atom_add_f32(GPTR float* p, float v)
{
    return atomic_fetch_add_explicit((GPTR atomic_float*)p, v, memory_order_relaxed);
}
DEVICE u32 atom_add_u32(GPTR u32* p, u32 v) { return atomic_fetch_add_explicit((GPTR atomic_uint*)p, v, memory_order_relaxed); }
DEVICE u32 atom_max_u32(GPTR u32* p, u32 v) { return atomic_fetch_max_explicit((GPTR atomic_uint*)p, v, memory_order_relaxed); }

// Threadgroup-memory atomics.
DEVICE u32 shared_add_u32(SPTR u32* p, u32 v) { return atomic_fetch_add_explicit((SPTR atomic_uint*)p, v, memory_order_relaxed); }
DEVICE u32 shared_max_u32(SPTR u32* p, u32 v) { return atomic_fetch_max_explicit((SPTR atomic_uint*)p, v, memory_order_relaxed); }

// shared_add_f32 adds v to *p atomically and returns the old value, by compare-and-swap on the
// bits (MSL has no float atomics in threadgroup memory). Each attempt rounds old + v once, as a
// hardware float add does; a failed attempt retries with the value another thread stored, so
// the sum is that of some order of the additions, as with CUDA's shared-memory atomicAdd.
DEVICE float shared_add_f32(SPTR float* p, float v)
{
    SPTR atomic_uint* a = (SPTR atomic_uint*)p;
    u32 old = atomic_load_explicit(a, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(a, &old, as_type<u32>(as_type<float>(old) + v), memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
    return as_type<float>(old);
}
