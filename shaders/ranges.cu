// ranges.cu — design.md §5 step 3: per-tile ranges from the *sorted* keys (seed defect 1 built
// them from the unsorted ones); internal/prep's Ranges is the CPU twin.
//
// tile_ranges: one thread per entry i < m = readout[RO_ENTRIES] (grid sized for the list
//   capacity, at least one thread); nothing runs when readout[RO_ABORT] is set.
//   keys [m] u32 sorted tile ids (sort.cu's tile pass); offsets [numTiles+1] u32: offsets[t]
//   is the first entry of tile t, offsets[numTiles] = m. Thread i writes the offsets of the tiles that start at i.
// tile_order: one block of 1024 threads; nothing runs when readout[RO_ABORT] is set.
//   offsets [numTiles+1] u32 (tile_ranges); order [numTiles] u32: every tile once, the longest
//   lists first, by length class (len_class: four an octave; order within a class is the
//   atomics', so it varies from run to run). raster_fwd's block b renders tile order[b]: the
//   blocks start in index order, and with the long tiles in the first wave the short ones
//   fill the SMs behind them instead of the long ones running alone at the end (the
//   trained bonsai's forward kept its SMs busy 43 % of its time in tile order). Each tile's
//   pixels are computed the same either way: only the order of the tiles changes.
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

// TILE_CLASSES bounds len_class: 4·(31 − 1) + 3 < 128.
#define TILE_CLASSES 128u

// len_class is increasing in len: len itself below 4, then four classes an octave (the two
// bits below the leading one).
DEVICE u32 len_class(u32 len)
{
    if (len < 4u) return len;
    u32 k = 2u; // the leading bit's position
    while (k < 31u && (len >> (k + 1u)) != 0u) k++;
    return 4u * (k - 1u) + ((len >> (k - 2u)) & 3u);
}

DEVICE void tile_order_body(Thr th, tile_order_args a, SPTR u32* classes)
{
    if (a.readout[RO_ABORT]) return;
    u32 nt = a.numTiles;
    for (u32 c = th.tid; c < TILE_CLASSES; c += th.bdim) classes[c] = 0u;
    BARRIER();
    for (u32 t = th.tid; t < nt; t += th.bdim) shared_add_u32(&classes[len_class(a.offsets[t + 1u] - a.offsets[t])], 1u);
    BARRIER();
    if (th.tid == 0u) { // each class's first position, the longest class first
        u32 at = 0u;
        for (u32 c = TILE_CLASSES; c-- > 0u;) {
            u32 k = classes[c];
            classes[c] = at;
            at += k;
        }
    }
    BARRIER();
    for (u32 t = th.tid; t < nt; t += th.bdim)
        a.order[shared_add_u32(&classes[len_class(a.offsets[t + 1u] - a.offsets[t])], 1u)] = t;
}
