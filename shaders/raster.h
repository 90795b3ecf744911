// raster.h — what raster_fwd.cu and raster_bwd.cu share: the launch parameters, the per-splat
// data a block stages in shared memory, and the per-pixel alpha of both render models
// (internal/raster/alpha.go is the CPU twin). Both passes must take the very same skip/blend
// decision at every pixel (the backward recomputes alpha), so every expression that feeds a
// decision lives here once, with the CPU's rounding.
#pragma once

// Raster (the launch parameters, passed by value) is declared in abi.h, generated with the
// host's side from internal/fused/abi/spec.
#include "abi.h"

// Splats staged per batch; a block has at least as many threads as a tile has pixels, rounded
// up to whole warps.
#define BATCH 256

// CHUNK (abi.h; the host sizes the chunk buffers with it) is how many entries of a tile's list
// one raster_bwd block walks. Chunk c of a tile is entries
// [c·CHUNK, (c+1)·CHUNK) of its list; the backward runs a block per chunk up to the tile's
// walk (its pixels' longest count), so that no tile's back-to-front walk is one serial chain
// of its whole list (the longest lists were raster_bwd's tail). A power
// of two dividing BATCH: the forward finds the boundaries in a batch with a mask.
static_assert(BATCH % CHUNK == 0 && (CHUNK & (CHUNK - 1u)) == 0u, "CHUNK must be a power of two dividing BATCH");

// Chunk states: raster_fwd stores, for every pixel still walking when it reaches entry
// k = (c+1)·CHUNK of its tile's list, the transmittance T and the front colour Σ cᵢαᵢTᵢ over
// entries [0, k): where raster_bwd's block for chunk c starts. Slot chunk_slot(tile, o, c)
// holds four planes of P = tileSize² floats (T, r, g, b), pixel p (= th.tid) at plane·P + p, so
// that a warp's stores and loads are contiguous. The slot needs no count of the chunks, so the
// forward stores before they are counted: with o the tile's first entry and L its list's
// length, ⌊o/CHUNK⌋ + tile + c is distinct for every tile and chunk c < ⌈L/CHUNK⌉ (tile t's
// last slot stays below tile t+1's first, ⌊(o+L)/CHUNK⌋ + t + 1, since ⌈L/C⌉ ≤ ⌊(o mod C + L)/C⌋
// + 1) and below ⌊entries/CHUNK⌋ + tiles, the slots the host allocates.
DEVICE u32 chunk_slot(u32 tile, u32 o, u32 c) { return o / CHUNK + tile + c; }
// chunk_state is the first float of slot's 4·P (64-bit: 32-pixel tiles pass 2³² floats at 2²⁰
// slots).
DEVICE u64 chunk_state(u32 slot, u32 P) { return (u64)slot * (u64)(4u * P); }

// Segments: raster_fwd walks a tile's list in segments of SEGMENT entries (abi.h), so that the
// forward no longer waits on one block walking the longest list (a trained bonsai view: 2 965
// entries against a mean of 324). Segment s of a list of L entries is entries [s·SEGMENT,
// min((s+1)·SEGMENT, L)); a list of at most SEGMENT entries (or every list, when rp.maxSteps
// caps the blends, and for the ray model: whole) is one segment. The ray model's lists are long
// and its pixels walk far into them (1M bonsai splats: 12M entries against EWA's 4M), so the
// second pass walked nearly every queued segment for nearly every pixel: its forward went from
// 3.52 to 6.28 ms on an H100. A pixel walks each segment from T = 1 and colour 0,
// finishing it (without blending) where T·(1−alpha) would fall below TERMINATE_T; the segments
// are then folded in order, C ← C + T·c and T ← T·t, up to the first that finished the pixel
// or after which T < TERMINATE_T. A one-segment list is the plain front-to-back walk, to the
// bit (internal/raster's Render folds the same way). Only past a crossing of TERMINATE_T inside
// a segment can the two differ: the segment walks on until its own T falls that low, blending
// splats of weight below 1e-4.
//
// raster_fwd's first pass walks every tile's first segment, a block each; where pixels are
// still walking at its end it queues the list's other segments for the second pass, which
// walks them all at once, a block each (a walk's later segments cannot know where the earlier
// ones left it: walking them in the first pass too cost 5× the forward on a scene whose pixels
// all finish early). raster_fwd_join folds the queued lists.
static_assert(SEGMENT % BATCH == 0, "SEGMENT must be a multiple of BATCH");

// seg_count is the segments of a list of len entries (whole: one).
DEVICE u32 seg_count(u32 len, u32 whole) { return whole != 0u || len <= SEGMENT ? 1u : (len + SEGMENT - 1u) / SEGMENT; }

// Segment states: for a queued list, the block of segment s stores each pixel's T and colour r,
// g, b in slot seg_slot(tile, o, s) of segState (four planes of P floats, as the chunk states),
// and its count | SEG_DONE (finished in the segment) in plane seg_slot(...) of segCount. Slots
// as chunk_slot's with SEGMENT for CHUNK: below ⌊entries/SEGMENT⌋ + tiles.
DEVICE u32 seg_slot(u32 tile, u32 o, u32 s) { return o / SEGMENT + tile + s; }
#define SEG_DONE 0x80000000u

// tile_pixel places thread tid of a tile's block (tileSize ts of 8, 16 or 32) at pixel (px, py)
// of the tile: each warp takes an 8×4 block of pixels, the warps in row-major order. A warp of
// whole pixel rows (16×2 in a 16-pixel tile) spans more of a small splat's footprint: a splat a
// few pixels wide meets fewer compact warps, and the backward's warp sum runs once for each
// warp any of whose pixels the splat hits.
DEVICE void tile_pixel(u32 tid, int ts, int& px, int& py)
{
    u32 w = tid >> 5u, l = tid & 31u;
    u32 across = (u32)ts >> 3u; // warps across the tile
    px = (int)((w % across) * 8u + (l & 7u));
    py = (int)((w / across) * 4u + (l >> 3u));
}

// Staged floats per splat: EWA mx, my, a, b, c (5; the forward stages a/2 and c/2); ray u[3],
// A[9], ‖u‖² (13).
#define GEO_EWA 5
#define GEO_RAY 13
#define GEO_N(RAY) ((RAY) ? GEO_RAY : GEO_EWA)

// Staged is the batch a block stages in shared memory (one instance per entry point, declared
// by its generated wrapper), packed in 16-byte packets so that a thread reads a splat with 3
// (EWA) or 5 (ray) broadcast loads, where 11 or 19 four-byte ones did before (their share of
// the rasterizers' per-pixel instructions was a quarter). Slot j is packets PK_N(RAY)·j … PK_N(RAY)·j + PK_N(RAY) − 1:
//   EWA: (mx, my, a, b), meta (c, opacity, power cut, ok), colour (r, g, b, 0)
//   ray: (u0, u1, u2, A0), (A1 … A4), (A5 … A8), meta (‖u‖², opacity, power cut, ok), colour
// ok is 1 when the splat can reach alphaMin somewhere, else 0 (and the other packets are
// unset). The geometry floats in order, GEO_N(RAY) of them, are the packets before meta and
// then meta.x. The model is a template argument so that EWA stages and reads only its own.
// N is the batch's capacity in splats: BATCH for the forward, CHUNK for the backward (which
// stages one chunk; less shared memory per block lets more blocks share an SM).
#define PK_N(RAY) ((RAY) ? 5u : 3u)
template <bool RAY, u32 N = BATCH> struct Staged {
    f4 pk[N * PK_N(RAY)];
};

template <bool RAY, u32 N> DEVICE f4 staged_meta(const SPTR Staged<RAY, N>& s, u32 j) { return s.pk[j * PK_N(RAY) + PK_N(RAY) - 2u]; }
template <bool RAY, u32 N> DEVICE f4 staged_color(const SPTR Staged<RAY, N>& s, u32 j) { return s.pk[j * PK_N(RAY) + PK_N(RAY) - 1u]; }

// powerCut: the exponent below which o·exp(power) is certainly below amin, in float32 as the
// CPU computes it (log32); false when the splat can reach amin nowhere (o ≤ 0, NaN, or cut > 0).
DEVICE bool power_cut(float o, float amin, float& cut)
{
    if (!(o > 0.0f)) return false;
    cut = log32(amin / o) - POWER_SLACK;
    return cut <= 0.0f;
}

// EWA exponent −½(a·dx² + c·dy²) − b·dx·dy at pixel (x, y), as raster's ewaRow/ewaPower, from
// ha = a/2 and hc = c/2 (each rounded on its own, as the CPU rounds them).
DEVICE float ewa_power_h(float mx, float my, float ha, float b, float hc, int x, int y, float& dx, float& dy)
{
    dy = ((float)y + 0.5f) - my;
    float hb = mul_rn(b, dy);
    float hcy = mul_rn(mul_rn(hc, dy), dy);
    dx = ((float)x + 0.5f) - mx;
    return -(mul_rn(dx, mul_rn(ha, dx) + hb) + hcy);
}

// ewa_power is ewa_power_h for staged geometry (mx, my, a, b, c).
DEVICE float ewa_power(const float* geo, int x, int y, float& dx, float& dy)
{
    return ewa_power_h(geo[0], geo[1], geo[2] / 2.0f, geo[3], geo[4] / 2.0f, x, y, dx, dy);
}

// Ray model: with v = A·d and sc = (u·v)/‖v‖², w = u − sc·v; false when the closest approach is
// behind the camera or certainly too far (raster's rayPerp). qcut = −2·cut.
DEVICE bool ray_perp(const float* geo, float qcut, float d0, float d1, float d2, float* w, float& sc, float* v)
{
    const float* u = geo;
    const float* A = geo + 3;
    float uu = geo[12];
    v[0] = mul_rn(A[0], d0) + mul_rn(A[1], d1) + mul_rn(A[2], d2);
    v[1] = mul_rn(A[3], d0) + mul_rn(A[4], d1) + mul_rn(A[5], d2);
    v[2] = mul_rn(A[6], d0) + mul_rn(A[7], d1) + mul_rn(A[8], d2);
    float uv = mul_rn(u[0], v[0]) + mul_rn(u[1], v[1]) + mul_rn(u[2], v[2]);
    if (!(uv < 0.0f)) return false;
    float vv = mul_rn(v[0], v[0]) + mul_rn(v[1], v[1]) + mul_rn(v[2], v[2]);
    if (!(mul_rn(uu, vv) - mul_rn(uv, uv) <= mul_rn(qcut, vv))) return false;
    sc = uv / vv;
    w[0] = u[0] - mul_rn(sc, v[0]);
    w[1] = u[1] - mul_rn(sc, v[1]);
    w[2] = u[2] - mul_rn(sc, v[2]);
    return true;
}

DEVICE float ray_power(const float* w) { return -(mul_rn(w[0], w[0]) + mul_rn(w[1], w[1]) + mul_rn(w[2], w[2])) / 2.0f; }

// alpha = min(0.99, o·exp32(power)); clamped says the clamp is active (no gradient then). Both
// models' powers are ≤ 0 here (EWA skips positive ones, the ray model's is −‖w‖²/2), where
// exp32_nonpos gives exp32's bits; on CUDA the hardware's exponential (prelude_cuda.h
// exp_alpha).
DEVICE float alpha_of(float o, float power, float& g, bool& clamped)
{
#ifdef RLX_HW_EXP
    g = exp_alpha(power);
#else
    g = exp32_nonpos(power);
#endif
    float alpha = mul_rn(o, g);
    clamped = alpha > ALPHA_MAX;
    return clamped ? ALPHA_MAX : alpha;
}

// stage_splat loads splat id into the batch slot j of s, with ok = whether it can reach
// alpha_min anywhere (else every pixel skips it). HALF stages EWA's a/2 and c/2 in place of a
// and c (the forward, which uses nothing else: two products a pair fewer); the backward, which
// needs a and c for the gradient, stages them whole.
template <bool RAY, u32 N, bool HALF = false>
DEVICE void stage_splat(const Raster& rp, u32 id, u32 j, const GPTR float* opacity, const GPTR float* color,
                        const GPTR float* mean2d, const GPTR float* conic, const GPTR float* rayU,
                        const GPTR float* rayA, SPTR Staged<RAY, N>& s)
{
    SPTR f4* pk = s.pk + j * PK_N(RAY);
    float o = opacity[id];
    float cut;
    if (!power_cut(o, rp.alphaMin, cut)) {
        pk[PK_N(RAY) - 2u] = make_f4(0.0f, 0.0f, 0.0f, 0.0f);
        return;
    }
    pk[PK_N(RAY) - 1u] = make_f4(color[id * 3], color[id * 3 + 1], color[id * 3 + 2], 0.0f);
    if (RAY) {
        float u0 = rayU[id * 3], u1 = rayU[id * 3 + 1], u2 = rayU[id * 3 + 2];
        const GPTR float* A = rayA + id * 9u;
        pk[0] = make_f4(u0, u1, u2, A[0]);
        pk[1] = make_f4(A[1], A[2], A[3], A[4]);
        pk[2] = make_f4(A[5], A[6], A[7], A[8]);
        float uu = mul_rn(u0, u0) + mul_rn(u1, u1) + mul_rn(u2, u2);
        pk[3] = make_f4(uu, o, mul_rn(-2.0f, cut), 1.0f);
    } else {
        float a = conic[id * 3], c = conic[id * 3 + 2];
        if (HALF) {
            a = a / 2.0f;
            c = c / 2.0f;
        }
        pk[0] = make_f4(mean2d[id * 2], mean2d[id * 2 + 1], a, conic[id * 3 + 1]);
        pk[1] = make_f4(c, o, cut, 1.0f);
    }
}

// load_geo copies slot j's geometry into registers, meta being staged_meta(s, j) (every
// thread reads the same words: shared-memory broadcasts).
template <bool RAY, u32 N> DEVICE void load_geo(const SPTR Staged<RAY, N>& s, u32 j, f4 meta, float* geo)
{
    for (u32 q = 0; q + 2u < PK_N(RAY); q++) {
        f4 p = s.pk[j * PK_N(RAY) + q];
        geo[4 * q] = p.x;
        geo[4 * q + 1] = p.y;
        geo[4 * q + 2] = p.z;
        geo[4 * q + 3] = p.w;
    }
    geo[GEO_N(RAY) - 1] = meta.x;
}
