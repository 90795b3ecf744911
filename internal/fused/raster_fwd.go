package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// tileThreads is a raster block: one thread per pixel of a tile, rounded up to whole warps.
func (e *Engine) tileThreads() gpu.Dim3 {
	ts := e.set.TileSize
	return gpu.Dim3{uint32((ts*ts + 31) / 32 * 32)}
}

// rasterFwd launches raster_fwd.cu, one block per tile (design.md §5 step 4).
func (e *Engine) rasterFwd(cam *camera.Camera, bg [3]float32, tiles int) error {
	return e.dev.Launch(e.k.rasterFwd, gpu.Dim3{uint32(tiles)}, e.tileThreads(), 0,
		gpu.Bytes(rasterBytes(cam, &e.set, bg)), gpu.Ptr(e.readoutBuf), gpu.Ptr(e.tileOffsets), gpu.Ptr(e.sortedIDs),
		gpu.Ptr(e.opacity), gpu.Ptr(e.color), gpu.Ptr(e.mean2d), gpu.Ptr(e.conic), gpu.Ptr(e.or(e.rayU)),
		gpu.Ptr(e.or(e.rayA)), gpu.Ptr(e.or(e.rays)), gpu.Ptr(e.image), gpu.Ptr(e.finalT), gpu.Ptr(e.count))
}
