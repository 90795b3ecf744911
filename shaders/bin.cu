// bin.cu — design.md §5 step 2 on the device: for every valid splat, the tiles its footprint
// reaches (internal/prep/bin.go's Emit is the CPU twin), emitted in depth order as u32 tile
// keys with splat-id values, for sort.cu's stable tile pass. Modes: conic = 1 (gpu-conic)
// keeps a tile only when prep's exact TileHit test passes; conic = 0 (gpu-radius-aabb) keeps
// every tile of the rect.
//
// The host runs: bin_count, bin_count_big, a scan of the valid flags, bin_compact, sort.cu
// over the visible splats' depth keys (4 passes), bin_rank, a scan of the ranked counts,
// bin_total, bin_emit, bin_emit_big.
//
// bin_count: one thread per splat i < n, plus thread n, which writes counts[n] = 0 and
//   flags[n] = 0. A splat whose box has more than bigArea tiles is queued in bigList
//   (readout[RO_BIG] of them, in no particular order) for bin_count_big, a warp per splat; the
//   others' hits are kept as a bit mask (bit k: tile k of the box, row-major; bigArea ≤ 32),
//   so that bin_emit need not test the tiles again (the exact test is float64 arithmetic).
//   A queued splat also reserves ⌈area/32⌉ words of bigBits for its hits (readout[RO_BIGBITS]
//   counts the words asked for): bigOff[b] is where queue entry b's start, or NO_BITS when
//   they do not fit in bitsCap words; bin_emit_big then tests that splat's tiles again (the
//   host grows the bits for the next step).
//   bigOff [n] u32, bigBits [bitsCap] u32
//   flags[i] = valid[i] (1 or 0), for the scan that places the visible splats.
//   valid [n] u32, boundCenter [n,2], boundQ [n,3] f32, rect [n,4] i32;
//   counts [n+1] u32, bigList [n] u32, hitMask [n] u32, flags [n+1] u32
// bin_compact: one thread per splat; flags scanned: a valid splat i writes the depth sort's
//   input at its place flags[i] among the visible ones, in splat-id order (so that the stable
//   sort leaves equal depths in id order): dkeys = the depth's bits (the CPU's key bits),
//   order = i. The sort then covers the V = flags[n] visible splats alone.
//   depth [n] f32; dkeys [n] u32, order [n] u32
// bin_rank: one thread per rank r ≤ n over the depth-sorted order: ranked[r] = counts[order[r]]
//   and rankOf[order[r]] = r for r < V, ranked[r] = 0 from V to n (so that the exclusive scan of
//   ranked ends with the total). After the scan ranked[r] is where the r-th nearest splat's entries start.
// bin_total: one thread; ranked [n+1] u32 scanned; writes readout[RO_ENTRIES] and
//   readout[RO_ABORT] = entries > cap (every later stage then does nothing, and the host grows
//   the lists and runs the step again: entries are never dropped silently), or when the step
//   queued before this one aborted: prev is that step's readout (this step's own when none),
//   so that a step queued behind an aborted one changes nothing either and the host can run
//   both again in order.
// bin_emit: one thread per splat; writes the tiles of its hit mask from ranked[rankOf[i]] in
//   row-major order. bin_emit_big writes the queued splats' tiles, a warp each, in the same
//   order, from the hit bits bin_count_big kept (testing them again where there was no room).
//   keys [cap] u32 tile ids, ids [cap] u32 splat ids
#include "prelude.h"
#include "common.h"
#include "readout.h"

// tile_hit is prep.TileHit: does (p−c)ᵀQ(p−c) ≤ 1 reach a pixel centre of the tile with pixel
// columns [px0, px1) and rows [py0, py1)? It minimises the quadratic over the box of pixel
// centres, in float64, with the CPU's operation order.
DEVICE bool tile_hit(float cxf, float cyf, float qaf, float qbf, float qcf, int px0, int py0, int px1, int py1)
{
    if (qaf == 0.0f && qbf == 0.0f && qcf == 0.0f) return true;
    double x0 = (double)px0 + 0.5, x1 = (double)px1 - 0.5;
    double y0 = (double)py0 + 0.5, y1 = (double)py1 - 0.5;
    double cx = (double)cxf, cy = (double)cyf;
    if (cx >= x0 && cx <= x1 && cy >= y0 && cy <= y1) return true;
    double a = (double)qaf, b = (double)qbf, c = (double)qcf;
    double best = bits_f64(0x7ff0000000000000ull); // +Inf
    for (int e = 0; e < 2; e++) {
        double xe = e == 0 ? x0 : x1;
        double dx = xe - cx;
        double y = cy - dmul_rn(b, dx) / c;
        y = gmind(gmaxd(y, y0), y1);
        double dy = y - cy;
        best = gmind(best, dmul_rn(dmul_rn(a, dx), dx) + dmul_rn(dmul_rn(dmul_rn(2.0, b), dx), dy) + dmul_rn(dmul_rn(c, dy), dy));
    }
    for (int e = 0; e < 2; e++) {
        double ye = e == 0 ? y0 : y1;
        double dy = ye - cy;
        double x = cx - dmul_rn(b, dy) / a;
        x = gmind(gmaxd(x, x0), x1);
        double dx = x - cx;
        best = gmind(best, dmul_rn(dmul_rn(a, dx), dx) + dmul_rn(dmul_rn(dmul_rn(2.0, b), dx), dy) + dmul_rn(dmul_rn(c, dy), dy));
    }
    return best <= 1.0;
}

// bigArea (a parameter; 16 in use) is the largest box, in tiles, a thread tests on its own; a
// splat with a larger box is queued for a whole warp, so that a few splats covering hundreds of
// tiles do not hold up the warps of their small neighbours (real views have a long tail of
// near, large splats).

DEVICE int rect_area(const GPTR i32* rect, u32 i)
{
    return (rect[i * 4 + 2] - rect[i * 4]) * (rect[i * 4 + 3] - rect[i * 4 + 1]);
}

// NO_BITS marks a queued splat whose hit bits did not fit in bigBits.
#define NO_BITS 0xffffffffu

// splat_tile is the id of tile k (row-major) of splat i's box.
DEVICE int splat_tile(Cam cam, const GPTR i32* rect, u32 i, int k)
{
    int rx0 = rect[i * 4], ry0 = rect[i * 4 + 1], rw = rect[i * 4 + 2] - rx0;
    return (ry0 + k / rw) * cam.tilesX + rx0 + k % rw;
}

// splat_tile_hit tests tile k (row-major) of splat i's box.
DEVICE bool splat_tile_hit(Cam cam, const GPTR float* boundCenter, const GPTR float* boundQ, const GPTR i32* rect,
                           u32 conic, u32 i, int k, int* tile)
{
    int ts = cam.tileSize, W = cam.W, H = cam.H;
    int rx0 = rect[i * 4], ry0 = rect[i * 4 + 1], rw = rect[i * 4 + 2] - rx0;
    int tx = rx0 + k % rw, ty = ry0 + k / rw;
    *tile = ty * cam.tilesX + tx;
    if (!conic) return true;
    int px1 = (tx + 1) * ts < W ? (tx + 1) * ts : W;
    int py1 = (ty + 1) * ts < H ? (ty + 1) * ts : H;
    return tile_hit(boundCenter[i * 2], boundCenter[i * 2 + 1], boundQ[i * 3], boundQ[i * 3 + 1], boundQ[i * 3 + 2],
                    tx * ts, ty * ts, px1, py1);
}

KERNEL bin_count(Cam cam, const GPTR u32* valid, const GPTR float* boundCenter, const GPTR float* boundQ,
                 const GPTR i32* rect, u32 conic, int bigArea, GPTR u32* counts, GPTR u32* readout,
                 GPTR u32* bigList, GPTR u32* hitMask, GPTR u32* flags, GPTR u32* bigOff, u32 bitsCap)
{
    u32 n = (u32)cam.n;
    u32 i = BID * BDIM + TID;
    if (i > n) return;
    if (i == n || !valid[i]) {
        counts[i] = 0u;
        flags[i] = 0u;
        return;
    }
    flags[i] = 1u;
    int area = rect_area(rect, i);
    if (area > bigArea) {
        counts[i] = 0u; // bin_count_big writes it
        u32 b = atom_add_u32(&readout[RO_BIG], 1u);
        bigList[b] = i;
        u32 words = ((u32)area + 31u) / 32u;
        u32 off = atom_add_u32(&readout[RO_BIGBITS], words);
        bigOff[b] = off <= bitsCap && words <= bitsCap - off ? off : NO_BITS;
        return;
    }
    u32 mask = 0;
    for (int k = 0; k < area; k++) {
        int tile;
        if (splat_tile_hit(cam, boundCenter, boundQ, rect, conic, i, k, &tile)) mask |= 1u << k;
    }
    counts[i] = popc(mask);
    hitMask[i] = mask;
}

// bin_count_big: a grid-stride loop of warps over the readout[RO_BIG] queued splats; the lanes
// test 32 tiles at a time and keep each round's ballot in the splat's hit bits.
KERNEL bin_count_big(Cam cam, const GPTR float* boundCenter, const GPTR float* boundQ, const GPTR i32* rect,
                     u32 conic, const GPTR u32* readout, const GPTR u32* bigList, GPTR u32* counts,
                     const GPTR u32* bigOff, GPTR u32* bigBits)
{
    u32 big = readout[RO_BIG];
    u32 warps = NBLOCKS * (BDIM / WARP);
    for (u32 b = BID * (BDIM / WARP) + WARP_ID; b < big; b += warps) {
        u32 i = bigList[b];
        u32 off = bigOff[b];
        int area = rect_area(rect, i);
        u32 count = 0;
        for (int k0 = 0; k0 < area; k0 += (int)WARP) {
            int k = k0 + (int)LANE, tile;
            bool hit = k < area && splat_tile_hit(cam, boundCenter, boundQ, rect, conic, i, k, &tile);
            u32 mask = warp_ballot(hit);
            count += popc(mask);
            if (off != NO_BITS && LANE == 0u) bigBits[off + (u32)k0 / WARP] = mask;
        }
        if (LANE == 0u) counts[i] = count;
    }
}

KERNEL bin_compact(const GPTR u32* valid, const GPTR float* depth, const GPTR u32* flags, u32 n, GPTR u32* dkeys,
                   GPTR u32* order)
{
    u32 i = BID * BDIM + TID;
    if (i >= n || !valid[i]) return;
    u32 at = flags[i];
    dkeys[at] = f32_bits(depth[i]);
    order[at] = i;
}

KERNEL bin_rank(const GPTR u32* counts, const GPTR u32* order, const GPTR u32* flags, u32 n, GPTR u32* ranked,
                GPTR u32* rankOf)
{
    u32 r = BID * BDIM + TID;
    if (r > n) return;
    if (r >= flags[n]) {
        ranked[r] = 0u;
        return;
    }
    u32 i = order[r];
    ranked[r] = counts[i];
    rankOf[i] = r;
}

KERNEL bin_total(const GPTR u32* offsets, u32 n, u32 cap, const GPTR u32* prev, GPTR u32* readout)
{
    if (BID * BDIM + TID != 0u) return;
    u32 total = offsets[n];
    readout[RO_ENTRIES] = total;
    readout[RO_ABORT] = total > cap || prev[RO_ABORT] != 0u ? 1u : 0u;
}

KERNEL bin_emit(Cam cam, const GPTR u32* valid, const GPTR i32* rect, const GPTR u32* hitMask,
                const GPTR u32* ranked, const GPTR u32* rankOf, int bigArea, const GPTR u32* readout,
                GPTR u32* keys, GPTR u32* ids)
{
    if (readout[RO_ABORT]) return;
    u32 n = (u32)cam.n;
    u32 i = BID * BDIM + TID;
    if (i >= n || !valid[i]) return;
    int area = rect_area(rect, i);
    if (area > bigArea) return; // bin_emit_big
    u32 at = ranked[rankOf[i]];
    int rx0 = rect[i * 4], ry0 = rect[i * 4 + 1], rw = rect[i * 4 + 2] - rx0;
    for (u32 mask = hitMask[i]; mask != 0u; mask &= mask - 1u) {
        int k = (int)popc((mask & (0u - mask)) - 1u); // the lowest set bit
        keys[at] = (u32)((ry0 + k / rw) * cam.tilesX + rx0 + k % rw);
        ids[at] = i;
        at++;
    }
}

// bin_emit_big writes the queued splats' entries, a warp per splat: each lane's position is its
// splat's offset plus the hits of the lower lanes and of the earlier rounds, which keeps the
// row-major tile order of bin_emit.
KERNEL bin_emit_big(Cam cam, const GPTR float* boundCenter, const GPTR float* boundQ, const GPTR i32* rect,
                    u32 conic, const GPTR u32* ranked, const GPTR u32* rankOf, const GPTR u32* readout,
                    const GPTR u32* bigList, GPTR u32* keys, GPTR u32* ids, const GPTR u32* bigOff,
                    const GPTR u32* bigBits)
{
    if (readout[RO_ABORT]) return;
    u32 big = readout[RO_BIG];
    u32 warps = NBLOCKS * (BDIM / WARP);
    u32 below = (1u << LANE) - 1u;
    for (u32 b = BID * (BDIM / WARP) + WARP_ID; b < big; b += warps) {
        u32 i = bigList[b];
        u32 off = bigOff[b]; // the same for the whole warp: the branches below do not diverge
        int area = rect_area(rect, i);
        u32 at = ranked[rankOf[i]];
        for (int k0 = 0; k0 < area; k0 += (int)WARP) {
            int k = k0 + (int)LANE, tile = 0;
            u32 mask;
            bool hit;
            if (off != NO_BITS) {
                mask = bigBits[off + (u32)k0 / WARP];
                hit = ((mask >> LANE) & 1u) != 0u;
                if (hit) tile = splat_tile(cam, rect, i, k);
            } else {
                hit = k < area && splat_tile_hit(cam, boundCenter, boundQ, rect, conic, i, k, &tile);
                mask = warp_ballot(hit);
            }
            if (hit) {
                u32 slot = at + popc(mask & below);
                keys[slot] = (u32)tile;
                ids[slot] = i;
            }
            at += popc(mask);
        }
    }
}
