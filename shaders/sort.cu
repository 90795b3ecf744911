// sort.cu — design.md §5 step 3: a stable LSD radix sort of 32-bit keys with u32 values, 8 bits
// a pass (the host runs as many passes as the keys have bits, ping-ponging two buffer pairs).
// Binning uses it twice (internal/fused/bin.go, sort.go): once over the splats by depth, and
// once over the tile-list entries by tile. Because the entries are emitted in depth order, the
// stable tile sort leaves each tile's list ordered by depth, equal depths in splat-id order —
// the order of internal/prep's Binner.sort, which sorts tile<<32 | depth keys in one go. Two
// short sorts move far fewer bytes than one over 64-bit keys: the depth bits are sorted once
// per splat instead of once per entry.
//
// Both kernels: blocks of exactly 256 threads, a grid sized for the most elements there can
// be; block b owns elements [3072b, 3072b+3072) of the m = *count elements (a device word: the
// counts come from earlier kernels); nothing runs when readout[RO_ABORT] is set.
// sort_hist: hist [256*nb] u32 digit-major: hist[d*nb + b] = count of digit d in block b.
// (The host scans hist exclusively into offsets.)
// sort_scatter: writes every element to offsets[d*nb + b] plus its rank among the elements of
//   its block with the same digit, in element order. It ranks in 12 rounds of 256 elements,
//   each ranked within its warp by a multisplit on ballots and across warps through shared
//   counts, but does not store straight to global memory: with random digits a warp's 32
//   stores would land in ~32 different runs, each 4-byte store costing a whole 32-byte sector
//   (keys and values both). Instead it places the block's elements in shared memory in their
//   sorted local order (digit d's run starting at the block's count of smaller digits, read
//   off neighbouring offsets), then writes them out in that order, so consecutive threads
//   store consecutive addresses within each digit's run. Shared memory: 24 KB of staged keys
//   and values plus 5 KB of counts and offsets, under the 32 KB that Metal allows a
//   threadgroup (12 rounds, not 16, and 16-bit round counts: a warp's count of a digit is at
//   most 32 and a running offset less than SORT_CHUNK).
#include "prelude.h"
#include "abi.h"
#include "entries/sort.h"

DEVICE void sort_hist_body(Thr th, sort_hist_args a, SPTR u32* h)
{
    if (a.readout[RO_ABORT]) return;
    u32 m = *a.count;
    h[th.tid] = 0u;
    BARRIER();
    u32 base = th.bid * SORT_CHUNK;
    u32 end = m < base + SORT_CHUNK ? m : base + SORT_CHUNK;
    for (u32 idx = base + th.tid; idx < end; idx += SORT_THREADS) {
        u32 d = (a.keys[idx] >> a.shift) & 255u;
        shared_add_u32(&h[d], 1u);
    }
    BARRIER();
    a.hist[th.tid * a.nb + th.bid] = h[th.tid];
}

// The block-shared arrays (spec): skeys and svals hold the block's elements in their sorted
// local order; wcnt [warp][digit] a round's counts, then their running offsets; gdelta[d] + i is
// the global position of local position i of digit d; wsum the warps' digit-count totals.
DEVICE void sort_scatter_body(Thr th, sort_scatter_args a, SPTR u32* skeys, SPTR u32* svals, SPTR u16* wcnt,
                              SPTR u32* gdelta, SPTR u32* wsum)
{
    if (a.readout[RO_ABORT]) return;
    u32 m = *a.count;
    u32 start = th.bid * SORT_CHUNK;
    if (start >= m) return; // the same for every thread of the block; also m = 0
    u32 n = m - start < SORT_CHUNK ? m - start : SORT_CHUNK;
    u32 lane = th.lane, warp = th.warp;

    // Thread tid owns digit tid. Its count in this block is the difference of two neighbouring
    // offsets (hist is digit-major, so offsets[d*nb + b + 1] follows block b's run of digit d);
    // the last digit needs none, as nothing comes after it in the local order.
    u32 d0 = th.tid * a.nb + th.bid;
    u32 goff = a.offsets[d0];
    u32 cnt = th.tid < 255u ? a.offsets[d0 + 1u] - goff : 0u;
    u32 local = warp_exscan_u32(th, cnt);
    if (lane == 31u) wsum[warp] = local + cnt;
    BARRIER();
    for (u32 w = 0; w < warp; w++) local += wsum[w];
    gdelta[th.tid] = goff - local; // mod 2^32: gdelta + i is in range for the digit's i
    u32 next = local;               // local position of this digit's next element

    u32 below = (1u << lane) - 1u;
    for (u32 r = 0; r * SORT_THREADS < n; r++) {
        u32 idx = start + r * SORT_THREADS + th.tid;
        bool ok = idx < m;
        u32 key = 0, val = 0, d = 0;
        if (ok) {
            key = a.keysIn[idx];
            val = a.valsIn[idx];
            d = (key >> a.shift) & 255u;
        }
        // Lanes with the same digit: intersect the ballots of each digit bit.
        u32 peers = warp_ballot(ok);
        for (u32 b = 0; b < 8u; b++) {
            bool bit = ((d >> b) & 1u) != 0u;
            u32 set = warp_ballot(bit);
            peers &= bit ? set : ~set;
        }
        u32 rank = popc(peers & below);
        for (u32 w = 0; w < 8u; w++) wcnt[w * 256u + th.tid] = (u16)0u;
        BARRIER();
        if (ok && rank == 0u) wcnt[warp * 256u + d] = (u16)popc(peers);
        BARRIER();
        // Digit tid's elements of this round go after those of earlier rounds, warp by warp.
        for (u32 w = 0; w < 8u; w++) {
            u32 c = wcnt[w * 256u + th.tid];
            wcnt[w * 256u + th.tid] = (u16)next;
            next += c;
        }
        BARRIER();
        if (ok) {
            u32 pos = wcnt[warp * 256u + d] + rank;
            skeys[pos] = key;
            svals[pos] = val;
        }
        BARRIER(); // before the next round clears wcnt, and before the write-out below
    }

    // Consecutive threads write consecutive local positions, which within a digit's run are
    // consecutive global addresses: the stores coalesce instead of scattering over 256 runs.
    for (u32 i = th.tid; i < n; i += SORT_THREADS) {
        u32 key = skeys[i];
        u32 pos = gdelta[(key >> a.shift) & 255u] + i;
        a.keysOut[pos] = key;
        a.valsOut[pos] = svals[i];
    }
}
