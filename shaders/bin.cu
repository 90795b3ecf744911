// bin.cu — design.md §5 step 2 on the device: for every valid splat, the tiles its footprint
// reaches (internal/prep/bin.go's Emit is the CPU twin), emitted in depth order as u32 tile
// keys with splat-id values, for sort.cu's stable tile pass. Modes: conic = 1 (gpu-conic)
// keeps a tile only when prep's TileHit test passes; conic = 0 (gpu-radius-aabb) keeps
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
//   so that bin_emit need not test the tiles again (the tile test is the costly part).
//   A queued splat also reserves ⌈area/32⌉ words of bigBits for its hits (readout[RO_BIGBITS]
//   counts the words asked for): bigOff[b] is where queue entry b's start, or NO_BITS when
//   they do not fit in bitsCap words; bin_emit_big then tests that splat's tiles again (the
//   host grows the bits for the next step).
//   bigOff [n] u32, bigBits [bitsCap] u32
//   flags[i] = valid[i] (1 or 0), for the scan that places the visible splats.
//   valid [n] u32, boundCenter [n,2], boundQ [n,3] f32, rect [n,4] i32, rayHalf [n,3] f32 (ray
//   model: a tile also needs a pixel centre where the half-plane form is ≤ 0, prep.TileAhead);
//   counts [n+1] u32, bigList [n] u32, hitMask [n] u32, flags [n+1] u32
// bin_compact: one thread per splat; flags scanned: a valid splat i writes the depth sort's
//   input at its place flags[i] among the visible ones, in splat-id order (so that the stable
//   sort leaves equal depths in id order): dkeys = the depth's bits (the CPU's key bits),
//   order = i. The sort then covers the V = flags[n] visible splats alone. vis = i as well:
//   the visible splats in id order, which the sort leaves alone, for project_bwd.
//   depth [n] f32; dkeys [n] u32, order [n] u32, vis [n] u32
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
#include "hyperbola.h"
#include "readout.h"
#include "entries/bin.h"

// tile_hit is prep.TileHit: does (p−c)ᵀQ(p−c) ≤ 1 reach a pixel centre of the tile with pixel
// columns [px0, px1) and rows [py0, py1)? It minimises the quadratic over the box of pixel
// centres in float32, with the CPU's operation order, lowering each candidate's value by a
// bound on its rounding error so that no tile the exact minimum reaches is dropped (the bound
// and its derivation are with the Go twin).
DEVICE bool tile_hit(float cx, float cy, float a, float b, float c, int px0, int py0, int px1, int py1)
{
    if (a == 0.0f && b == 0.0f && c == 0.0f) return true;
    float x0 = (float)px0 + 0.5f, x1 = (float)px1 - 0.5f;
    float y0 = (float)py0 + 0.5f, y1 = (float)py1 - 0.5f;
    const float gamma = HIT_GAMMA, dfac = HIT_DFAC;
    // A hyperbola's centre lies between its branches, outside the footprint.
    if (hyperbolic(a, b, c)) return hyperbola_hit(cx, cy, a, b, c, x0, y0, x1, y1, gamma, dfac);
    if (cx >= x0 && cx <= x1 && cy >= y0 && cy <= y1) return true;
    if (!(a > 0.0f) || !(c > 0.0f) || !f32_finite(b)) return true;
    float lowest = bits_f32(0x7f800000u); // +Inf
    for (int e = 0; e < 4; e++) {
        float dx, dy, slack;
        if (e < 2) {
            float xe = e == 0 ? x0 : x1;
            dx = xe - cx;
            float t = mul_rn(b, dx) / c;
            float y = gminf(gmaxf(cy - t, y0), y1);
            dy = y - cy;
            float d = mul_rn(dfac, abs_f32(cy) + abs_f32(t));
            slack = mul_rn(mul_rn(c, d), d);
        } else {
            float ye = e == 2 ? y0 : y1;
            dy = ye - cy;
            float t = mul_rn(b, dy) / a;
            float x = gminf(gmaxf(cx - t, x0), x1);
            dx = x - cx;
            float d = mul_rn(dfac, abs_f32(cx) + abs_f32(t));
            slack = mul_rn(mul_rn(a, d), d);
        }
        float cross = mul_rn(mul_rn(mul_rn(2.0f, b), dx), dy);
        float q = mul_rn(mul_rn(a, dx), dx) + cross + mul_rn(mul_rn(c, dy), dy);
        float s = mul_rn(mul_rn(a, dx), dx) + abs_f32(cross) + mul_rn(mul_rn(c, dy), dy);
        float lo = q - (mul_rn(gamma, s) + slack);
        if (f32_nan(lo)) return true; // overflow: no bound can be trusted
        lowest = gminf(lowest, lo);
    }
    return lowest <= 1.0f;
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

// tile_ahead is prep.TileAhead: does a pixel centre of the tile lie where a·px + b·py + c ≤ 0
// (the ray model's RayHalf: elsewhere the closest approach is behind the camera)? The form is
// linear, so the corner centres decide; a NaN keeps the tile.
DEVICE bool tile_ahead(float a, float b, float c, int px0, int py0, int px1, int py1)
{
    float x0 = (float)px0 + 0.5f, x1 = (float)px1 - 0.5f;
    float y0 = (float)py0 + 0.5f, y1 = (float)py1 - 0.5f;
    for (int e = 0; e < 4; e++) {
        float x = (e & 1) ? x1 : x0, y = (e & 2) ? y1 : y0;
        if (!((mul_rn(a, x) + mul_rn(b, y)) + c > 0.0f)) return true;
    }
    return false;
}

// splat_tile_hit tests tile k (row-major) of splat i's box: the conic (conic = 1) and, for the
// ray model, the half-plane of rays whose closest approach is ahead (rayHalf).
DEVICE bool splat_tile_hit(Cam cam, const GPTR float* boundCenter, const GPTR float* boundQ, const GPTR i32* rect,
                           const GPTR float* rayHalf, u32 conic, u32 i, int k, int* tile)
{
    int ts = cam.tileSize, W = cam.W, H = cam.H;
    int rx0 = rect[i * 4], ry0 = rect[i * 4 + 1], rw = rect[i * 4 + 2] - rx0;
    int tx = rx0 + k % rw, ty = ry0 + k / rw;
    *tile = ty * cam.tilesX + tx;
    if (!conic) return true;
    int px1 = (tx + 1) * ts < W ? (tx + 1) * ts : W;
    int py1 = (ty + 1) * ts < H ? (ty + 1) * ts : H;
    if (!tile_hit(boundCenter[i * 2], boundCenter[i * 2 + 1], boundQ[i * 3], boundQ[i * 3 + 1], boundQ[i * 3 + 2],
                  tx * ts, ty * ts, px1, py1))
        return false;
    return cam.model != MODEL_RAY || tile_ahead(rayHalf[i * 3], rayHalf[i * 3 + 1], rayHalf[i * 3 + 2], tx * ts, ty * ts, px1, py1);
}

DEVICE void bin_count_body(Thr th, bin_count_args a)
{
    u32 n = (u32)a.cam.n;
    u32 i = th.bid * th.bdim + th.tid;
    if (i > n) return;
    if (i == n || !a.valid[i]) {
        a.counts[i] = 0u;
        a.flags[i] = 0u;
        return;
    }
    a.flags[i] = 1u;
    int area = rect_area(a.rect, i);
    if (area > a.bigArea) {
        a.counts[i] = 0u; // bin_count_big writes it
        u32 b = atom_add_u32(&a.readout[RO_BIG], 1u);
        a.bigList[b] = i;
        u32 words = ((u32)area + 31u) / 32u;
        u32 off = atom_add_u32(&a.readout[RO_BIGBITS], words);
        a.bigOff[b] = off <= a.bitsCap && words <= a.bitsCap - off ? off : NO_BITS;
        return;
    }
    u32 mask = 0;
    for (int k = 0; k < area; k++) {
        int tile;
        if (splat_tile_hit(a.cam, a.boundCenter, a.boundQ, a.rect, a.rayHalf, a.conic, i, k, &tile)) mask |= 1u << k;
    }
    a.counts[i] = popc(mask);
    a.hitMask[i] = mask;
}

// bin_count_big: a grid-stride loop of warps over the readout[RO_BIG] queued splats; the lanes
// test 32 tiles at a time and keep each round's ballot in the splat's hit bits.
DEVICE void bin_count_big_body(Thr th, bin_count_big_args a)
{
    u32 big = a.readout[RO_BIG];
    u32 warps = th.nblocks * (th.bdim / WARP);
    for (u32 b = th.bid * (th.bdim / WARP) + th.warp; b < big; b += warps) {
        u32 i = a.bigList[b];
        u32 off = a.bigOff[b];
        int area = rect_area(a.rect, i);
        u32 count = 0;
        for (int k0 = 0; k0 < area; k0 += (int)WARP) {
            int k = k0 + (int)th.lane, tile;
            bool hit = k < area && splat_tile_hit(a.cam, a.boundCenter, a.boundQ, a.rect, a.rayHalf, a.conic, i, k, &tile);
            u32 mask = warp_ballot(hit);
            count += popc(mask);
            if (off != NO_BITS && th.lane == 0u) a.bigBits[off + (u32)k0 / WARP] = mask;
        }
        if (th.lane == 0u) a.counts[i] = count;
    }
}

DEVICE void bin_compact_body(Thr th, bin_compact_args a)
{
    u32 i = th.bid * th.bdim + th.tid;
    if (i >= a.n || !a.valid[i]) return;
    u32 at = a.flags[i];
    a.dkeys[at] = f32_bits(a.depth[i]);
    a.order[at] = i;
    a.vis[at] = i;
}

DEVICE void bin_rank_body(Thr th, bin_rank_args a)
{
    u32 r = th.bid * th.bdim + th.tid;
    if (r > a.n) return;
    if (r >= a.flags[a.n]) {
        a.ranked[r] = 0u;
        return;
    }
    u32 i = a.order[r];
    a.ranked[r] = a.counts[i];
    a.rankOf[i] = r;
}

DEVICE void bin_total_body(Thr th, bin_total_args a)
{
    if (th.bid * th.bdim + th.tid != 0u) return;
    u32 total = a.offsets[a.n];
    a.readout[RO_ENTRIES] = total;
    a.readout[RO_ABORT] = total > a.cap || a.prev[RO_ABORT] != 0u ? 1u : 0u;
}

DEVICE void bin_emit_body(Thr th, bin_emit_args a)
{
    if (a.readout[RO_ABORT]) return;
    u32 n = (u32)a.cam.n;
    u32 i = th.bid * th.bdim + th.tid;
    if (i >= n || !a.valid[i]) return;
    int area = rect_area(a.rect, i);
    if (area > a.bigArea) return; // bin_emit_big
    u32 at = a.ranked[a.rankOf[i]];
    int rx0 = a.rect[i * 4], ry0 = a.rect[i * 4 + 1], rw = a.rect[i * 4 + 2] - rx0;
    for (u32 mask = a.hitMask[i]; mask != 0u; mask &= mask - 1u) {
        int k = (int)popc((mask & (0u - mask)) - 1u); // the lowest set bit
        a.keys[at] = (u32)((ry0 + k / rw) * a.cam.tilesX + rx0 + k % rw);
        a.ids[at] = i;
        at++;
    }
}

// bin_emit_big writes the queued splats' entries, a warp per splat: each lane's position is its
// splat's offset plus the hits of the lower lanes and of the earlier rounds, which keeps the
// row-major tile order of bin_emit.
DEVICE void bin_emit_big_body(Thr th, bin_emit_big_args a)
{
    if (a.readout[RO_ABORT]) return;
    u32 big = a.readout[RO_BIG];
    u32 warps = th.nblocks * (th.bdim / WARP);
    u32 below = (1u << th.lane) - 1u;
    for (u32 b = th.bid * (th.bdim / WARP) + th.warp; b < big; b += warps) {
        u32 i = a.bigList[b];
        u32 off = a.bigOff[b]; // the same for the whole warp: the branches below do not diverge
        int area = rect_area(a.rect, i);
        u32 at = a.ranked[a.rankOf[i]];
        for (int k0 = 0; k0 < area; k0 += (int)WARP) {
            int k = k0 + (int)th.lane, tile = 0;
            u32 mask;
            bool hit;
            if (off != NO_BITS) {
                mask = a.bigBits[off + (u32)k0 / WARP];
                hit = ((mask >> th.lane) & 1u) != 0u;
                if (hit) tile = splat_tile(a.cam, a.rect, i, k);
            } else {
                hit = k < area && splat_tile_hit(a.cam, a.boundCenter, a.boundQ, a.rect, a.rayHalf, a.conic, i, k, &tile);
                mask = warp_ballot(hit);
            }
            if (hit) {
                u32 slot = at + popc(mask & below);
                a.keys[slot] = (u32)tile;
                a.ids[slot] = i;
            }
            at += popc(mask);
        }
    }
}
