package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// shBlock is project_bwd's block size: at most SH_BLOCK of shaders/geom.h, the shared rows
// through which its SH loads and stores are coalesced.
const shBlock = 128

// projectBwd launches project_bwd.cu (design.md §5 step 7): parameter gradients into grads and,
// when accumulate, the densification statistics.
func (e *Engine) projectBwd(cam *camera.Camera, shDegree int, accumulate bool) error {
	acc := uint32(0)
	if accumulate {
		acc = 1
	}
	return e.dev.Launch(e.k.projectBwd, gpu.BlocksFor(uint32(e.n), shBlock), gpu.Dim3{shBlock}, 0,
		gpu.Bytes(camBytes(cam, &e.set, shDegree, e.n)), gpu.Ptr(e.readoutBuf), gpu.Ptr(e.params), gpu.Ptr(e.valid),
		gpu.Ptr(e.radius), e.pgAt(pgColor), e.pgAt(pgOpacity), e.pgAt(pgMean2D), e.pgAt(pgConic), e.pgAt(pgRayU),
		e.pgAt(pgRayA), gpu.Ptr(e.grads), gpu.Ptr(e.grad2d), gpu.U32(acc), gpu.Ptr(e.statAccum),
		gpu.Ptr(e.statCount), gpu.Ptr(e.statMaxRadius))
}
