package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// shBlock is project_bwd's block size: SH_BLOCK (internal/fused/abi/spec), the most its shared
// rows, through which its SH loads and stores are coalesced, allow.
const shBlock = abi.ShBlock

// projectBwd launches project_bwd.cu (design.md §5 step 7): parameter gradients into grads
// (added to those of the batch's earlier views when later, seen marking the splats written)
// and, when accumulate, the densification statistics.
func (e *Engine) projectBwd(cam *camera.Camera, shDegree int, accumulate, later bool) error {
	acc, lat := uint32(0), uint32(0)
	if accumulate {
		acc = 1
	}
	if later {
		lat = 1
	}
	return e.k.ProjectBwd(gpu.BlocksFor(uint32(e.n), shBlock), gpu.Dim3{shBlock}, abi.ProjectBwdArgs{
		Cam: camArgs(cam, &e.set, shDegree, e.n), Readout: e.ro, Params: abi.B(e.params),
		Valid: abi.B(e.valid), Radius: abi.B(e.radius), GColor: e.pgAt(pgColor), GOpacity: e.pgAt(pgOpacity),
		GMean2d: e.pgAt(pgMean2D), GConic: e.pgAt(pgConic), GRayU: e.pgAt(pgRayU), GRayA: e.pgAt(pgRayA),
		AbsGrad: e.absGrad(), GMean2dAbs: e.pgAt(pgMean2DAbs), Grads: abi.B(e.grads), Grad2d: abi.B(e.grad2d), Accumulate: acc, StatAccum: abi.B(e.statAccum),
		StatCount: abi.B(e.statCount), StatMaxRadius: abi.B(e.statMaxRadius), Later: lat, Seen: abi.B(e.seen),
		Vis: abi.B(e.vis)})
}
