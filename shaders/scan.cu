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
#include "prelude.h"
#include "abi.h"
#include "entries/scan.h"

DEVICE void scan_blocks_body(Thr th, scan_blocks_args a, SPTR u32* warpTot)
{
    u32 base = th.bid * SCAN_BLOCK + th.tid * 4u;
    u32 v[4];
    u32 s = 0;
    for (u32 k = 0; k < 4u; k++) {
        u32 idx = base + k;
        v[k] = idx < a.n ? a.in[idx] : 0u;
        s += v[k];
    }
    u32 ex = warp_exscan_u32(th, s);
    if (th.lane == 31u) warpTot[th.warp] = ex + s;
    BARRIER();
    if (th.tid < 32u) {
        u32 w = th.tid < 8u ? warpTot[th.tid] : 0u;
        u32 e = warp_exscan_u32(th, w);
        if (th.tid < 8u) warpTot[th.tid] = e;
        if (th.tid == 7u) a.blockSums[th.bid] = e + w;
    }
    BARRIER();
    u32 run = warpTot[th.warp] + ex;
    for (u32 k = 0; k < 4u; k++) {
        u32 idx = base + k;
        if (idx < a.n) a.out[idx] = run;
        run += v[k];
    }
}

DEVICE void scan_add_body(Thr th, scan_add_args a)
{
    u32 i = th.bid * th.bdim + th.tid;
    if (i >= a.n) return;
    a.out[i] += a.blockOffsets[i / SCAN_BLOCK];
}

DEVICE void scan_add_sums_body(Thr th, scan_add_sums_args a, SPTR u32* warpTot)
{
    u32 part = 0;
    for (u32 j = th.tid; j < th.bid; j += th.bdim) part += a.blockSums[j];
    // Integer sums are exact in any order: a warp's total is its last lane's inclusive scan.
    u32 ex = warp_exscan_u32(th, part);
    if (th.lane == 31u) warpTot[th.warp] = ex + part;
    BARRIER();
    u32 off = 0;
    for (u32 w = 0; w < 8u; w++) off += warpTot[w];
    u32 base = th.bid * SCAN_BLOCK + th.tid * 4u;
    for (u32 k = 0; k < 4u; k++) {
        u32 idx = base + k;
        if (idx < a.n) a.out[idx] += off;
    }
}
