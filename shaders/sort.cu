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
// be; block b owns elements [4096b, 4096b+4096) of the m = *count elements (a device word: the
// counts come from earlier kernels); nothing runs when readout[RO_ABORT] is set.
// sort_hist: hist [256*nb] u32 digit-major: hist[d*nb + b] = count of digit d in block b.
// (The host scans hist exclusively into offsets.)
// sort_scatter: writes every element to offsets[d*nb + b] plus its rank among the elements of
//   its block with the same digit, in element order: 16 rounds of 256 elements, each ranked
//   within its warp by a multisplit on ballots and across warps through shared counts.
#include "prelude_cuda.h"
#include "readout.h"

#define SORT_THREADS 256u
#define SORT_ROUNDS 16u
#define SORT_CHUNK (SORT_THREADS * SORT_ROUNDS)

KERNEL sort_hist(const GPTR u32* keys, const GPTR u32* readout, const GPTR u32* count, u32 shift, u32 nb,
                 GPTR u32* hist)
{
    if (readout[RO_ABORT]) return;
    SHARED u32 h[256];
    u32 m = *count;
    h[TID] = 0u;
    BARRIER();
    u32 base = BID * SORT_CHUNK;
    u32 end = m < base + SORT_CHUNK ? m : base + SORT_CHUNK;
    for (u32 idx = base + TID; idx < end; idx += SORT_THREADS) {
        u32 d = (keys[idx] >> shift) & 255u;
        shared_add_u32(&h[d], 1u);
    }
    BARRIER();
    hist[TID * nb + BID] = h[TID];
}

KERNEL sort_scatter(const GPTR u32* keysIn, const GPTR u32* valsIn, GPTR u32* keysOut, GPTR u32* valsOut,
                    const GPTR u32* readout, const GPTR u32* count, u32 shift, u32 nb, const GPTR u32* offsets)
{
    if (readout[RO_ABORT]) return;
    SHARED u32 base[256];
    SHARED u32 wcnt[8 * 256]; // [warp][digit]
    SHARED u32 roundTot[256];
    u32 m = *count;
    base[TID] = offsets[TID * nb + BID];
    u32 start = BID * SORT_CHUNK;
    u32 lane = LANE, warp = WARP_ID;
    u32 below = (1u << lane) - 1u;
    for (u32 r = 0; r < SORT_ROUNDS; r++) {
        u32 first = start + r * SORT_THREADS;
        if (first >= m) break; // the same for every thread of the block
        u32 idx = first + TID;
        bool ok = idx < m;
        u32 key = 0, val = 0, d = 0;
        if (ok) {
            key = keysIn[idx];
            val = valsIn[idx];
            d = (key >> shift) & 255u;
        }
        // Lanes with the same digit: intersect the ballots of each digit bit.
        u32 peers = warp_ballot(ok);
        for (u32 b = 0; b < 8u; b++) {
            bool bit = ((d >> b) & 1u) != 0u;
            u32 set = warp_ballot(bit);
            peers &= bit ? set : ~set;
        }
        u32 rank = popc(peers & below);
        for (u32 w = 0; w < 8u; w++) wcnt[w * 256u + TID] = 0u;
        BARRIER();
        if (ok && rank == 0u) wcnt[warp * 256u + d] = popc(peers);
        BARRIER();
        {
            u32 run = 0;
            for (u32 w = 0; w < 8u; w++) {
                u32 c = wcnt[w * 256u + TID];
                wcnt[w * 256u + TID] = run;
                run += c;
            }
            roundTot[TID] = run;
        }
        BARRIER();
        if (ok) {
            u32 pos = base[d] + wcnt[warp * 256u + d] + rank;
            keysOut[pos] = key;
            valsOut[pos] = val;
        }
        BARRIER();
        base[TID] += roundTot[TID];
        BARRIER();
    }
}
