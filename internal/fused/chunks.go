package fused

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// chunkEntries is CHUNK of the kernels (declared once, internal/fused/abi/spec): the tile-list
// entries one raster_bwd block walks. The chunks of a tile are those of its walk:
// ⌈w/chunkEntries⌉ for a longest pixel count w, at most ⌈L/chunkEntries⌉ for a list of L.
const chunkEntries = abi.ChunkEntries

// defaultBwdMaxBlocks caps raster_bwd's grid (Engine.bwdMaxBlocks); its blocks stride over the chunks. The chunk count is
// on the device, so the grid is sized for the most the lists' capacity allows, and a block
// past the count only leaves: uncapped, views that saturate early (a resampled scene walks
// ~1% of its lists) would launch tens of thousands of such blocks. The
// trained bonsai scene's bound is ~15k (0.83M entries of capacity / 64 + 1700 tiles), so it
// still gets a block per chunk. An engine field, so that a test can make blocks take several
// chunks.
const defaultBwdMaxBlocks = 16384

// chunkStateFloats is the floats of one chunk's state slot (raster.h, chunk_state): T and the
// front colour r, g, b for every pixel of a tile.
func (e *Engine) chunkStateFloats() int {
	ts := e.set.TileSize
	return 4 * ts * ts
}

// maxChunks bounds the chunks (and the state slots, raster.h's chunk_slot) of lists of up to
// listCap entries over tiles tiles: Σ⌈Lₜ/C⌉ ≤ Σ(⌊Lₜ/C⌋ + 1) ≤ ⌊listCap/C⌋ + tiles.
func maxChunks(listCap, tiles int) int { return listCap/chunkEntries + tiles }

// ensureChunks sizes the chunk buffers for the current list and tile capacities: tileWalk
// [tileCap] u32, chunkStart [tileCap] u32 (tiles+1 words), chunkTile [maxChunks] u32 and
// chunkState [maxChunks, 4, tileSize²] f32. growLists and growPixels call it when either
// capacity grows.
func (e *Engine) ensureChunks() error {
	n := maxChunks(e.listCap, e.tileCap) // ensure keeps buffers that are large enough
	for _, b := range []*gpu.Buffer{&e.tileWalk, &e.chunkStart} {
		if err := e.ensure(b, max(e.tileCap, 1)*4); err != nil {
			return fmt.Errorf("fused: chunk counts for %d tiles: %w", e.tileCap, err)
		}
	}
	if err := e.ensure(&e.chunkTile, n*4); err != nil {
		return fmt.Errorf("fused: chunk table of %d chunks: %w", n, err)
	}
	if err := e.ensure(&e.chunkState, n*e.chunkStateFloats()*4); err != nil {
		return fmt.Errorf("fused: chunk states of %d chunks (%d list entries, %d tiles): %w", n, e.listCap, e.tileCap, err)
	}
	// What the buffers hold, which ensure may have kept larger than n.
	e.chunkCap = min(e.chunkTile.Size()/4, e.chunkState.Size()/(4*e.chunkStateFloats()))
	ns := maxSegments(e.listCap, e.tileCap)
	if err := e.ensure(&e.segItems, 2*max(maxQueued(e.listCap), 1)*4); err != nil {
		return fmt.Errorf("fused: raster queue of %d segments: %w", maxQueued(e.listCap), err)
	}
	// A u32 a pixel and segment: the bytes of one float plane of the states, chunkStateFloats/4 words.
	if err := e.ensure(&e.segCount, ns*e.chunkStateFloats()); err != nil {
		return fmt.Errorf("fused: segment counts of %d segments: %w", ns, err)
	}
	if err := e.ensure(&e.segState, ns*e.chunkStateFloats()*4); err != nil {
		return fmt.Errorf("fused: segment states of %d segments (%d list entries, %d tiles): %w", ns, e.listCap, e.tileCap, err)
	}
	e.segCap = min(e.segCount.Size()/e.chunkStateFloats(), e.segState.Size()/(4*e.chunkStateFloats()))
	return nil
}

// segmentEntries is SEGMENT of the kernels (raster.h): the tile-list entries one raster_fwd
// block walks, internal/raster's SegmentEntries, to which the CPU engine's forward folds alike.
const segmentEntries = abi.SegmentEntries

// maxSegments bounds the segments of lists of up to listCap entries over tiles tiles (a list of
// L has ⌈L/S⌉ of them, an empty one one): ⌊listCap/S⌋ + tiles, as maxChunks.
func maxSegments(listCap, tiles int) int { return listCap/segmentEntries + tiles }

// maxQueued bounds the segments after the first (raster_fwd's second pass) of lists of up to
// listCap entries: Σ(⌈Lₜ/S⌉ − 1) ≤ Σ⌊Lₜ/S⌋ ≤ ⌊listCap/S⌋.
func maxQueued(listCap int) int { return listCap / segmentEntries }
