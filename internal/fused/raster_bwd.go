package fused

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// pgAt is the prepared-data gradient field at offset off (pgColor, ...) of the pg buffer.
func (e *Engine) pgAt(off int) gpu.Arg { return gpu.PtrAt(e.pg, off*e.capN*4) }

// rasterBwd zeroes the prepared-data gradients and launches raster_bwd.cu (design.md §5 step 6):
// raster_bwd_chunks numbers the tiles' chunks of chunkEntries entries from the forward's
// walks, then the entry point for the engine's render model walks them, a block per chunk.
// The chunks' number is on the device, so the grid is the most the lists' capacity allows
// (capped at e.bwdMaxBlocks, the blocks striding over the chunks) and blocks past it exit at
// once.
func (e *Engine) rasterBwd(cam *camera.Camera, bg [3]float32, tiles int) error {
	if err := e.dev.Memset(e.pg, 0, pgFloats*e.capN*4, 0); err != nil {
		return err
	}
	if bound := maxChunks(e.listCap, tiles); bound > e.chunkCap {
		return fmt.Errorf("fused: raster backward: up to %d chunks (%d list entries, %d tiles), the chunk buffers hold %d", bound, e.listCap, tiles, e.chunkCap)
	}
	if err := e.dev.Launch(e.k.rasterBwdChunks, gpu.Dim3{1}, gpu.Dim3{256}, 0,
		gpu.Ptr(e.readoutBuf), gpu.Ptr(e.tileWalk), gpu.U32(uint32(tiles)), gpu.Ptr(e.chunkStart), gpu.Ptr(e.chunkTile)); err != nil {
		return fmt.Errorf("fused: raster backward chunks: %w", err)
	}
	k := e.k.rasterBwdEWA
	if e.set.Render == prep.Ray {
		k = e.k.rasterBwdRay
	}
	blocks := min(maxChunks(e.listCap, tiles), e.bwdMaxBlocks)
	return e.dev.Launch(k, gpu.Dim3{uint32(blocks)}, e.tileThreads(), 0,
		gpu.Bytes(rasterBytes(cam, &e.set, bg)), gpu.Ptr(e.readoutBuf), gpu.U32(uint32(tiles)), gpu.Ptr(e.tileOffsets),
		gpu.Ptr(e.sortedIDs), gpu.Ptr(e.opacity), gpu.Ptr(e.color), gpu.Ptr(e.mean2d), gpu.Ptr(e.conic),
		gpu.Ptr(e.or(e.rayU)), gpu.Ptr(e.or(e.rayA)), gpu.Ptr(e.or(e.rays)), gpu.Ptr(e.finalT), gpu.Ptr(e.count),
		gpu.Ptr(e.image), gpu.Ptr(e.tileWalk), gpu.Ptr(e.chunkState), gpu.Ptr(e.chunkStart), gpu.Ptr(e.chunkTile),
		gpu.Ptr(e.dImage), e.pgAt(pgColor), e.pgAt(pgOpacity), e.pgAt(pgMean2D), e.pgAt(pgConic), e.pgAt(pgRayU),
		e.pgAt(pgRayA))
}
