package fused

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// pgAt is the prepared-data gradient field at offset off (pgColor, ...) of the pg buffer, whose
// fields are capV splats apart: raster_bwd writes them for a forward's splats, a renderer's
// records included, and project_bwd reads them for the engine's own.
func (e *Engine) pgAt(off int) abi.Buf { return abi.At(e.pg, off*e.capV*4) }

// rasterBwd zeroes the prepared-data gradients and launches raster_bwd.cu (design.md §5 step 6):
// raster_bwd_chunks numbers the tiles' chunks of chunkEntries entries from the forward's
// walks, then the entry point for the engine's render model walks them, a block per chunk.
// The chunks' number is on the device, so the grid is the most the lists' capacity allows
// (capped at e.bwdMaxBlocks, the blocks striding over the chunks) and blocks past it exit at
// once.
func (e *Engine) rasterBwd(cam *camera.Camera, bg [3]float32, tiles int) error {
	if err := e.zeroPG(); err != nil {
		return err
	}
	if bound := maxChunks(e.listCap, tiles); bound > e.chunkCap {
		return fmt.Errorf("fused: raster backward: up to %d chunks (%d list entries, %d tiles), the chunk buffers hold %d", bound, e.listCap, tiles, e.chunkCap)
	}
	if err := e.k.RasterBwdChunks(gpu.Dim3{1}, gpu.Dim3{abi.RasterBwdChunksBlock}, abi.RasterBwdChunksArgs{Readout: e.ro,
		TileWalk: abi.B(e.tileWalk), NumTiles: uint32(tiles), ChunkStart: abi.B(e.chunkStart), ChunkTile: abi.B(e.chunkTile)}); err != nil {
		return fmt.Errorf("fused: raster backward chunks: %w", err)
	}
	launch := e.k.RasterBwdEwa
	if e.set.Render == prep.Ray {
		launch = e.k.RasterBwdRay
	}
	blocks := min(maxChunks(e.listCap, tiles), e.bwdMaxBlocks)
	return launch(gpu.Dim3{uint32(blocks)}, e.bwdThreads(), abi.RasterBwdArgs{
		Rp: rasterArgs(cam, &e.set, bg), Readout: e.ro, NumTiles: uint32(tiles),
		TileOffsets: abi.B(e.tileOffsets), Ids: abi.B(e.sortedIDs), Opacity: abi.B(e.opacity), Color: abi.B(e.color),
		Mean2d: abi.B(e.mean2d), Conic: abi.B(e.conic), RayU: abi.B(e.or(e.rayU)), RayA: abi.B(e.or(e.rayA)),
		Rays: abi.B(e.or(e.rays)), FinalT: abi.B(e.finalT), Count: abi.B(e.count), Image: abi.B(e.image),
		TileWalk: abi.B(e.tileWalk), ChunkState: abi.B(e.chunkState), ChunkStart: abi.B(e.chunkStart),
		ChunkTile: abi.B(e.chunkTile), DImage: abi.B(e.dImage), GColor: e.pgAt(pgColor), GOpacity: e.pgAt(pgOpacity),
		GMean2d: e.pgAt(pgMean2D), GConic: e.pgAt(pgConic), GRayU: e.pgAt(pgRayU), GRayA: e.pgAt(pgRayA),
		AbsGrad: e.absGrad(), GMean2dAbs: e.pgAt(pgMean2DAbs)})
}

// bwdThreads is a raster_bwd block: raster_bwd.cu's BWD_PX pixels a thread, two in both
// render models (a whole number of warps for tiles of 8, 16 and 32 pixels).
func (e *Engine) bwdThreads() gpu.Dim3 {
	ts := e.set.TileSize
	return gpu.Dim3{uint32((ts*ts/2 + 31) / 32 * 32)}
}

// zeroPG zeroes the pg fields the render model uses (pgUsed), which raster_bwd and
// scatter_grads accumulate into or fill.
func (e *Engine) zeroPG() error { return e.dev.Memset(e.pg, 0, e.pgUsed()*e.capV*4, 0) }

// pgUsed is how many of the pg buffer's fields (from pgColor on) the render model writes, which
// rasterBwd zeroes: the ray model all, EWA colour to conic, and its absolute sums with AbsGrad.
func (e *Engine) pgUsed() int {
	switch {
	case e.set.Render == prep.Ray:
		return pgFloats
	case e.set.AbsGrad:
		return pgMean2DAbs + 2
	}
	return pgConic + 3
}

// absGrad is the kernels' flag for engine.Settings.AbsGrad (EWA only: Validate refuses it for ray).
func (e *Engine) absGrad() uint32 {
	if e.set.AbsGrad {
		return 1
	}
	return 0
}
