// scan.cu — exclusive prefix sums of u32 arrays, the building block of binning (splat offsets
// into the tile lists) and of the radix sort (digit offsets per block). The host runs it level
// by level (internal/fused/scan.go): scan_blocks over the data, then recursively over the block
// sums, then scan_add to fold each block's offset back in.
//
// scan_blocks: blocks of exactly 256 threads; block b scans elements [1024b, 1024b+1024), thread
//   t the four consecutive elements from 1024b+4t.
//   in  [n] u32 (may alias out); out [n] u32 exclusive sums within the block
//   blockSums [gridDim] u32 receives each block's total
// scan_add: one thread per element; out[i] += blockOffsets[i / 1024].
// scan_add_sums: blocks of exactly 256 threads, block b over elements [1024b, 1024b+1024), thread
//   t the four from 1024b+4t; the block first sums blockSums[0, b) itself, then adds that to
//   its elements. It replaces scanning the block sums (a launch or more) and scan_add when the
//   sums are few (the host's choice: every block reads all the sums before its own).
#include "prelude_cuda.h"

#define SCAN_BLOCK 1024u

KERNEL scan_blocks(const GPTR u32* in, GPTR u32* out, u32 n, GPTR u32* blockSums)
{
    SHARED u32 warpTot[8];
    u32 base = BID * SCAN_BLOCK + TID * 4u;
    u32 v[4];
    u32 s = 0;
    for (u32 k = 0; k < 4u; k++) {
        u32 idx = base + k;
        v[k] = idx < n ? in[idx] : 0u;
        s += v[k];
    }
    u32 ex = warp_exscan_u32(s);
    if (LANE == 31u) warpTot[WARP_ID] = ex + s;
    BARRIER();
    if (TID < 32u) {
        u32 w = TID < 8u ? warpTot[TID] : 0u;
        u32 e = warp_exscan_u32(w);
        if (TID < 8u) warpTot[TID] = e;
        if (TID == 7u) blockSums[BID] = e + w;
    }
    BARRIER();
    u32 run = warpTot[WARP_ID] + ex;
    for (u32 k = 0; k < 4u; k++) {
        u32 idx = base + k;
        if (idx < n) out[idx] = run;
        run += v[k];
    }
}

KERNEL scan_add(GPTR u32* out, u32 n, const GPTR u32* blockOffsets)
{
    u32 i = BID * BDIM + TID;
    if (i >= n) return;
    out[i] += blockOffsets[i / SCAN_BLOCK];
}

KERNEL scan_add_sums(GPTR u32* out, u32 n, const GPTR u32* blockSums)
{
    SHARED u32 warpTot[8];
    u32 part = 0;
    for (u32 j = TID; j < BID; j += BDIM) part += blockSums[j];
    // Integer sums are exact in any order: a warp's total is its last lane's inclusive scan.
    u32 ex = warp_exscan_u32(part);
    if (LANE == 31u) warpTot[WARP_ID] = ex + part;
    BARRIER();
    u32 off = 0;
    for (u32 w = 0; w < 8u; w++) off += warpTot[w];
    u32 base = BID * SCAN_BLOCK + TID * 4u;
    for (u32 k = 0; k < 4u; k++) {
        u32 idx = base + k;
        if (idx < n) out[idx] += off;
    }
}
