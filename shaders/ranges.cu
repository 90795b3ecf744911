// ranges.cu — design.md §5 step 3: per-tile ranges from the *sorted* keys (seed defect 1 built
// them from the unsorted ones); internal/prep's Ranges is the CPU twin.
//
// tile_ranges: one thread per entry i < m = readout[RO_ENTRIES] (grid sized for the list
//   capacity, at least one thread); nothing runs when readout[RO_ABORT] is set.
//   keys [m] u32 sorted tile ids (sort.cu's tile pass); offsets [numTiles+1] u32: offsets[t]
//   is the first entry of tile t, offsets[numTiles] = m. Thread i writes the offsets of the tiles that start at i.
#include "prelude.h"
#include "abi.h"
#include "entries/ranges.h"

DEVICE void tile_ranges_body(Thr th, tile_ranges_args a)
{
    if (a.readout[RO_ABORT]) return;
    u32 m = a.readout[RO_ENTRIES];
    u32 i = th.bid * th.bdim + th.tid;
    if (m == 0u) {
        if (i == 0u)
            for (u32 t = 0; t <= a.numTiles; t++) a.offsets[t] = 0u;
        return;
    }
    if (i >= m) return;
    u32 tile = a.keys[i];
    u32 from = i == 0u ? 0u : a.keys[i - 1u] + 1u;
    for (u32 t = from; t <= tile; t++) a.offsets[t] = i;
    if (i == m - 1u)
        for (u32 t = tile + 1u; t <= a.numTiles; t++) a.offsets[t] = m;
}
