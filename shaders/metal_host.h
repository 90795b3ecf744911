// metal_host.h — a stand-in for <metal_stdlib> that lets a host C++ compiler build the exact
// MSL text the Metal backend hands to Apple's compiler (internal/gpu/metal.MSL), so that the
// fake Metal runtime runs the real kernels on Linux (internal/gpu/metal/mslhost). It defines
// only what the kernels and prelude_metal.h use, each with Metal's meaning on the host
// emulator's execution model (emu_runtime.h): a missing word is a compile error, not a guess.
//
// - Address spaces (device, constant, thread, threadgroup) are one flat host memory. Block-
//   shared arrays need one instance per threadgroup, not one per thread: prelude_metal.h
//   declares them through SHARED and qualifies pointers to them with SPTR, and lets a host
//   build map those two words (static storage; no qualifier) before it defines them.
// - threadgroup_barrier waits for every live thread of the block; simd_* functions wait for
//   every live lane of the simdgroup (32 wide, as the Metal host checks) and exchange values.
// - Atomics are plain read-modify-writes: one fiber runs at a time.
// - Metal attributes ([[buffer(i)]], [[thread_position_in_threadgroup]], …) are ignored by the
//   host compiler (-Wno-attributes); mslhost binds the arguments by parsing them.
#pragma once

#include "emu_runtime.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sys/types.h> // uint, ushort, ulong: the host's spellings of Metal's scalar types

#define kernel
#define device
#define constant
#define thread
#define threadgroup
#define SHARED static
#define SPTR

namespace metal {

using std::ceil;
using std::exp;
using std::fabs;
using std::floor;
using std::fma;
using std::fmax;
using std::fmin;
using std::isinf;
using std::isnan;
using std::log;
using std::max;
using std::min;
using std::sqrt;

// precise:: is IEEE arithmetic (the host's std:: functions), the one variant kernels may use.
namespace precise {
using std::exp;
using std::log;
using std::sqrt;
} // namespace precise

template <class T> static inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }

template <class To, class From> static inline To as_type(From x)
{
    static_assert(sizeof(To) == sizeof(From), "as_type: sizes differ");
    To t;
    memcpy(&t, &x, sizeof t);
    return t;
}

static inline uint popcount(uint x) { return (uint)__builtin_popcount(x); }

struct alignas(8) float2 {
    float x, y;
    float2() = default;
    float2(float x_, float y_) : x(x_), y(y_) {}
};
struct alignas(16) float4 {
    float x, y, z, w;
    float4() = default;
    float4(float x_, float y_, float z_, float w_) : x(x_), y(y_), z(z_), w(w_) {}
};

enum class mem_flags : uint { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
static inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags((uint)a | (uint)b); }

static inline void threadgroup_barrier(mem_flags) { emu::park(emu::AT_BARRIER); }

enum memory_order { memory_order_relaxed };

// The atomic types wrap one word of their value's layout, so a cast of a u32/float pointer to
// one of them reads and writes that very word, as on the GPU.
template <class T> struct atomic {
    T v;
};
typedef atomic<uint> atomic_uint;
typedef atomic<int> atomic_int;
typedef atomic<float> atomic_float;

template <class T> static inline T atomic_load_explicit(atomic<T>* a, memory_order) { return a->v; }
template <class T> static inline void atomic_store_explicit(atomic<T>* a, T v, memory_order) { a->v = v; }
template <class T> static inline T atomic_fetch_add_explicit(atomic<T>* a, T v, memory_order)
{
    T o = a->v;
    a->v = o + v;
    return o;
}
template <class T> static inline T atomic_fetch_max_explicit(atomic<T>* a, T v, memory_order)
{
    T o = a->v;
    if (v > o) a->v = v;
    return o;
}
template <class T> static inline T atomic_fetch_min_explicit(atomic<T>* a, T v, memory_order)
{
    T o = a->v;
    if (v < o) a->v = v;
    return o;
}
template <class T> static inline T atomic_exchange_explicit(atomic<T>* a, T v, memory_order)
{
    T o = a->v;
    a->v = v;
    return o;
}
template <class T>
static inline bool atomic_compare_exchange_weak_explicit(atomic<T>* a, T* expected, T desired, memory_order, memory_order)
{
    if (memcmp(&a->v, expected, sizeof(T)) == 0) {
        a->v = desired;
        return true;
    }
    *expected = a->v;
    return false;
}

// simd_vote: Metal's ballot result, a 64-bit lane mask (lanes 32–63 are zero at width 32).
struct simd_vote {
    typedef uint64_t vote_t;
    vote_t bits;
    explicit operator vote_t() const { return bits; }
};
static inline simd_vote simd_ballot(bool p) { return simd_vote{emu::warp_op(emu::OP_BALLOT, p ? 1 : 0)}; }
static inline bool simd_any(bool p) { return emu::warp_op(emu::OP_ANY, p ? 1 : 0) != 0; }
static inline bool simd_all(bool p) { return emu::warp_op(emu::OP_ANY, p ? 0 : 1) == 0; }

static inline uint lane_of_caller() { return emu::blk().cur->tid & 31u; }

template <class T> static inline T simd_gather(T v, uint src)
{
    static_assert(sizeof(T) <= 8, "simd shuffle of a value wider than 64 bits");
    uint64_t bits = 0;
    memcpy(&bits, &v, sizeof(T));
    bits = emu::warp_gather(bits, src);
    T r;
    memcpy(&r, &bits, sizeof(T));
    return r;
}
template <class T> static inline T simd_shuffle(T v, ushort lane) { return simd_gather(v, lane); }
template <class T> static inline T simd_broadcast(T v, ushort lane) { return simd_gather(v, lane); }
template <class T> static inline T simd_shuffle_xor(T v, ushort mask) { return simd_gather(v, lane_of_caller() ^ mask); }
// Out-of-range sources keep the lane's own value, as Metal specifies for shuffle up and down.
template <class T> static inline T simd_shuffle_down(T v, ushort d) { return simd_gather(v, lane_of_caller() + d); }
template <class T> static inline T simd_shuffle_up(T v, ushort d)
{
    uint l = lane_of_caller();
    return simd_gather(v, l >= d ? l - d : 32u);
}

// Integer reductions only: a float sum's order is unspecified in Metal, and the kernels build
// theirs from shuffles so that the order is the CUDA engine's.
static inline uint simd_sum(uint x) { return (uint)emu::warp_op(emu::OP_SUMU, x); }
static inline uint simd_prefix_exclusive_sum(uint x) { return (uint)emu::warp_op(emu::OP_EXSCAN, x); }

} // namespace metal
