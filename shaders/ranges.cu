// ranges.cu — design.md §5 step 3: per-tile ranges from the *sorted* keys (seed defect 1 built
// them from the unsorted ones); internal/prep's Ranges is the CPU twin.
//
// tile_ranges: one thread per entry i < m = readout[RO_ENTRIES] (grid sized for the list
//   capacity, at least one thread); nothing runs when readout[RO_ABORT] is set.
//   keys [m] u32 sorted tile ids (sort.cu's tile pass); offsets [numTiles+1] u32: offsets[t]
//   is the first entry of tile t, offsets[numTiles] = m. Thread i writes the offsets of the tiles that start at i.
#include "prelude_cuda.h"
#include "readout.h"

KERNEL tile_ranges(const GPTR u32* keys, const GPTR u32* readout, u32 numTiles, GPTR u32* offsets)
{
    if (readout[RO_ABORT]) return;
    u32 m = readout[RO_ENTRIES];
    u32 i = BID * BDIM + TID;
    if (m == 0u) {
        if (i == 0u)
            for (u32 t = 0; t <= numTiles; t++) offsets[t] = 0u;
        return;
    }
    if (i >= m) return;
    u32 tile = keys[i];
    u32 from = i == 0u ? 0u : keys[i - 1u] + 1u;
    for (u32 t = from; t <= tile; t++) offsets[t] = i;
    if (i == m - 1u)
        for (u32 t = tile + 1u; t <= numTiles; t++) offsets[t] = m;
}
