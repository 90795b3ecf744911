// sort.cu — design.md §5 step 3: a stable LSD radix sort of the 64-bit tile-list keys with their
// u32 splat-id values, 8 bits per pass over the 32 depth bits and as many tile bits as there are
// tiles (the host runs ceil((32+bits(tiles))/8) passes, ping-ponging two buffer pairs). Equal
// keys keep their emission order (splat-id order), so every engine gets identical lists
// (internal/prep's Binner.sort is the CPU twin).
//
// Both kernels: blocks of exactly 256 threads; block b owns elements [4096b, 4096b+4096) of the
// m = readout[RO_ENTRIES] entries; nothing runs when readout[RO_ABORT] is set.
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

KERNEL sort_hist(const GPTR u64* keys, const GPTR u32* readout, u32 shift, u32 nb, GPTR u32* hist)
{
    if (readout[RO_ABORT]) return;
    SHARED u32 h[256];
    u32 m = readout[RO_ENTRIES];
    h[TID] = 0u;
    BARRIER();
    u32 base = BID * SORT_CHUNK;
    u32 end = m < base + SORT_CHUNK ? m : base + SORT_CHUNK;
    for (u32 idx = base + TID; idx < end; idx += SORT_THREADS) {
        u32 d = (u32)(keys[idx] >> shift) & 255u;
        shared_add_u32(&h[d], 1u);
    }
    BARRIER();
    hist[TID * nb + BID] = h[TID];
}

KERNEL sort_scatter(const GPTR u64* keysIn, const GPTR u32* valsIn, GPTR u64* keysOut, GPTR u32* valsOut,
                    const GPTR u32* readout, u32 shift, u32 nb, const GPTR u32* offsets)
{
    if (readout[RO_ABORT]) return;
    SHARED u32 base[256];
    SHARED u32 wcnt[8 * 256]; // [warp][digit]
    SHARED u32 roundTot[256];
    u32 m = readout[RO_ENTRIES];
    base[TID] = offsets[TID * nb + BID];
    u32 start = BID * SORT_CHUNK;
    u32 lane = LANE, warp = WARP_ID;
    u32 below = (1u << lane) - 1u;
    for (u32 r = 0; r < SORT_ROUNDS; r++) {
        u32 first = start + r * SORT_THREADS;
        if (first >= m) break; // the same for every thread of the block
        u32 idx = first + TID;
        bool ok = idx < m;
        u64 key = 0;
        u32 val = 0, d = 0;
        if (ok) {
            key = keysIn[idx];
            val = valsIn[idx];
            d = (u32)(key >> shift) & 255u;
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
