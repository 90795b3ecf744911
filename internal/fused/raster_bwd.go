package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// pgAt is the prepared-data gradient field at offset off (pgColor, ...) of the pg buffer.
func (e *Engine) pgAt(off int) gpu.Arg { return gpu.PtrAt(e.pg, off*e.capN*4) }

// rasterBwd zeroes the prepared-data gradients and launches raster_bwd.cu (design.md §5 step 6),
// its entry point for the engine's render model.
func (e *Engine) rasterBwd(cam *camera.Camera, bg [3]float32, tiles int) error {
	if err := e.dev.Memset(e.pg, 0, pgFloats*e.capN*4, 0); err != nil {
		return err
	}
	k := e.k.rasterBwdEWA
	if e.set.Render == prep.Ray {
		k = e.k.rasterBwdRay
	}
	return e.dev.Launch(k, gpu.Dim3{uint32(tiles)}, e.tileThreads(), 0,
		gpu.Bytes(rasterBytes(cam, &e.set, bg)), gpu.Ptr(e.readoutBuf), gpu.Ptr(e.tileOffsets), gpu.Ptr(e.sortedIDs),
		gpu.Ptr(e.opacity), gpu.Ptr(e.color), gpu.Ptr(e.mean2d), gpu.Ptr(e.conic), gpu.Ptr(e.or(e.rayU)),
		gpu.Ptr(e.or(e.rayA)), gpu.Ptr(e.or(e.rays)), gpu.Ptr(e.finalT), gpu.Ptr(e.count), gpu.Ptr(e.dImage),
		e.pgAt(pgColor), e.pgAt(pgOpacity), e.pgAt(pgMean2D), e.pgAt(pgConic), e.pgAt(pgRayU), e.pgAt(pgRayA))
}
