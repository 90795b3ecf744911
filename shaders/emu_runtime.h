// emu_runtime.h — the host emulator's execution model, shared by the two vocabularies it runs
// kernels through: prelude_emu.h (the CUDA-like words, for units compiled for the emulated
// gpu.Device) and metal_host.h (Metal's own words, for the exact MSL text the Metal backend
// compiles, run by the fake Metal runtime's host compiler).
//
// Model: blocks run one after another; the threads of a block are fibers (ucontext) switched
// at every barrier and at every warp (SIMD-group) operation. A barrier releases when every live
// thread of the block waits at one; a warp operation completes when every live lane of the warp
// waits at one, and it exchanges the lanes' values. Block-shared arrays are function-level
// statics (one block at a time uses them). Atomics are plain read-modify-writes (one fiber runs
// at a time).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <tuple>
#include <ucontext.h>
#include <utility>
#include <vector>

typedef uint32_t u32;
typedef uint16_t u16;
typedef int32_t i32;
typedef uint64_t u64;

namespace emu {

// Thr: see prelude_cuda.h (each vocabulary names it at global scope: prelude_emu.h as this
// type, prelude_metal.h as its own).
struct Thr {
    u32 tid, bid, bdim, nblocks, lane, warp;
};

enum State { RUNNABLE, AT_BARRIER, AT_WARP, FINISHED };
// OP_GATHER: each lane names a source lane and gets that lane's value (its own when the source
// is outside the warp or has finished), the one primitive behind every SIMD shuffle.
enum WarpOp { OP_BALLOT, OP_ANY, OP_SUM16S, OP_SUMU, OP_EXSCAN, OP_GATHER };

struct Fiber {
    ucontext_t ctx;
    u32 tid;
    State state;
    WarpOp op;
    u64 val;     // the lane's operand
    u64 res;     // the operation's result for this lane
    u32 src;     // OP_GATHER: the lane (0..31) whose value this lane reads
    float* vec;  // OP_SUM16S operand: 16 floats
};

struct Block {
    u32 bid = 0, nblocks = 1, bdim = 1;
    ucontext_t sched;
    std::vector<Fiber> fibers;
    std::vector<char> stacks;
    std::function<void()> body;
    Fiber* cur = nullptr;
};

static Block& blk()
{
    static Block b;
    return b;
}

static const size_t kStack = 64 * 1024;

static void park(State s)
{
    Block& b = blk();
    Fiber* f = b.cur;
    f->state = s;
    swapcontext(&f->ctx, &b.sched);
}

static void trampoline()
{
    Block& b = blk();
    b.body();
    b.cur->state = FINISHED;
    swapcontext(&b.cur->ctx, &b.sched);
}

// resolve_warp completes a warp operation when every live lane of warp w waits at one.
static bool resolve_warp(u32 w)
{
    Block& b = blk();
    u32 lo = w * 32u, hi = lo + 32u < b.bdim ? lo + 32u : b.bdim;
    int waiting = 0;
    for (u32 t = lo; t < hi; t++) {
        State s = b.fibers[t].state;
        if (s == AT_WARP) waiting++;
        else if (s != FINISHED) return false;
    }
    if (waiting == 0) return false;
    WarpOp op = OP_BALLOT;
    for (u32 t = lo; t < hi; t++)
        if (b.fibers[t].state == AT_WARP) op = b.fibers[t].op;
    for (u32 t = lo; t < hi; t++) {
        if (b.fibers[t].state == AT_WARP && b.fibers[t].op != op) {
            fprintf(stderr, "emu: warp %u: lanes wait at different warp operations\n", w);
            abort();
        }
    }
    u32 ballot = 0;
    for (u32 t = lo; t < hi; t++)
        if (b.fibers[t].state == AT_WARP && b.fibers[t].val) ballot |= 1u << (t - lo);
    if (op == OP_SUM16S) {
        // The CUDA prelude's transposing butterfly, step by step (lanes that have finished
        // count as zeros), so that lane l gets the warp sum of v[l >> 1] in the same order.
        float v[32][16];
        for (u32 l = 0; l < 32; l++)
            for (int i = 0; i < 16; i++)
                v[l][i] = (lo + l < hi && b.fibers[lo + l].state == AT_WARP) ? b.fibers[lo + l].vec[i] : 0.0f;
        for (u32 o = 16, h = 8; o > 1; o >>= 1, h >>= 1) {
            float nxt[32][16];
            for (u32 l = 0; l < 32; l++) {
                bool up = (l & o) != 0, pup = !up;
                for (u32 i = 0; i < h; i++) {
                    float keep = up ? v[l][i + h] : v[l][i];
                    float recv = pup ? v[l ^ o][i] : v[l ^ o][i + h];
                    nxt[l][i] = keep + recv;
                }
            }
            for (u32 l = 0; l < 32; l++)
                for (u32 i = 0; i < h; i++) v[l][i] = nxt[l][i];
        }
        for (u32 t = lo; t < hi; t++) {
            if (b.fibers[t].state != AT_WARP) continue;
            u32 l = t - lo;
            float r = v[l][0] + v[l ^ 1u][0];
            u32 bits;
            memcpy(&bits, &r, 4);
            b.fibers[t].res = bits;
        }
    }
    u64 sum = 0;
    for (u32 t = lo; t < hi; t++) {
        Fiber& f = b.fibers[t];
        if (f.state != AT_WARP) continue;
        switch (op) {
        case OP_BALLOT: f.res = ballot; break;
        case OP_ANY: f.res = ballot != 0; break;
        case OP_SUM16S: break;
        case OP_SUMU: {
            u64 s = 0;
            for (u32 q = lo; q < hi; q++)
                if (b.fibers[q].state == AT_WARP) s += b.fibers[q].val;
            f.res = (u32)s;
            break;
        }
        case OP_EXSCAN: f.res = (u32)sum; sum += f.val; break;
        case OP_GATHER: {
            u32 q = lo + f.src;
            f.res = (f.src < 32u && q < hi && b.fibers[q].state == AT_WARP) ? b.fibers[q].val : f.val;
            break;
        }
        }
    }
    for (u32 t = lo; t < hi; t++)
        if (b.fibers[t].state == AT_WARP) b.fibers[t].state = RUNNABLE;
    return true;
}

static void run_block()
{
    Block& b = blk();
    for (u32 t = 0; t < b.bdim; t++) {
        Fiber& f = b.fibers[t];
        f.tid = t;
        f.state = RUNNABLE;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = b.stacks.data() + (size_t)t * kStack;
        f.ctx.uc_stack.ss_size = kStack;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, trampoline, 0);
    }
    for (;;) {
        bool ran = false;
        for (u32 t = 0; t < b.bdim; t++) {
            if (b.fibers[t].state != RUNNABLE) continue;
            b.cur = &b.fibers[t];
            swapcontext(&b.sched, &b.fibers[t].ctx);
            ran = true;
        }
        if (ran) continue;
        bool resolved = false;
        for (u32 w = 0; w * 32u < b.bdim; w++) resolved |= resolve_warp(w);
        if (resolved) continue;
        u32 live = 0, atBarrier = 0;
        for (u32 t = 0; t < b.bdim; t++) {
            if (b.fibers[t].state != FINISHED) live++;
            if (b.fibers[t].state == AT_BARRIER) atBarrier++;
        }
        if (live == 0) return;
        if (atBarrier == live) {
            for (u32 t = 0; t < b.bdim; t++)
                if (b.fibers[t].state == AT_BARRIER) b.fibers[t].state = RUNNABLE;
            continue;
        }
        fprintf(stderr, "emu: block %u deadlocked (%u live threads, %u at a barrier)\n", b.bid, live, atBarrier);
        abort();
    }
}

template <class... A, size_t... I>
static void call(void (*fn)(A...), void** args, std::index_sequence<I...>)
{
    std::tuple<A...> vals{*reinterpret_cast<A*>(args[I])...};
    std::apply(fn, vals);
}

// launch_body runs body on a 1-D grid (dims = grid x,y,z then block x,y,z; only x is used) for
// every thread of every block, handing each its Thr (the generated entry wrappers use it).
template <class F>
static void launch_body(const u32* dims, const F& body)
{
    Block& b = blk();
    b.nblocks = dims[0] * (dims[1] ? dims[1] : 1) * (dims[2] ? dims[2] : 1);
    b.bdim = dims[3];
    if (b.fibers.size() < b.bdim) {
        b.fibers.resize(b.bdim);
        b.stacks.resize((size_t)b.bdim * kStack);
    }
    b.body = [&]() {
        u32 t = b.cur->tid;
        body(Thr{t, b.bid, b.bdim, b.nblocks, t & 31u, t >> 5});
    };
    for (u32 bid = 0; bid < b.nblocks; bid++) {
        b.bid = bid;
        run_block();
    }
}

// launch runs fn, a hand-written kernel that reads the thread indices itself, on a 1-D grid
// (dims as for launch_body), each thread with args unpacked into fn's parameters.
template <class... A>
static void launch(void (*fn)(A...), const u32* dims, void** args)
{
    launch_body(dims, [&](Thr) { call(fn, args, std::index_sequence_for<A...>{}); });
}

static u64 warp_op(WarpOp op, u64 val)
{
    Fiber* f = blk().cur;
    f->op = op;
    f->val = val;
    park(AT_WARP);
    return f->res;
}

// warp_gather is OP_GATHER: this lane offers val and reads lane src's offer.
static u64 warp_gather(u64 val, u32 src)
{
    blk().cur->src = src;
    return warp_op(OP_GATHER, val);
}

} // namespace emu
