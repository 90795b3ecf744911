package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// project launches project.cu's project over every splat (design.md §5 step 1).
func (e *Engine) project(cam *camera.Camera, shDegree int) error {
	n := uint32(e.n)
	return e.dev.Launch(e.k.project, gpu.BlocksFor(n, 256), gpu.Dim3{256}, 0,
		gpu.Bytes(camBytes(cam, &e.set, shDegree, e.n)), gpu.Ptr(e.params), gpu.Ptr(e.valid), gpu.Ptr(e.depth),
		gpu.Ptr(e.opacity), gpu.Ptr(e.color), gpu.Ptr(e.mean2d), gpu.Ptr(e.conic), gpu.Ptr(e.or(e.rayU)),
		gpu.Ptr(e.or(e.rayA)), gpu.Ptr(e.boundCenter), gpu.Ptr(e.boundQ), gpu.Ptr(e.rect), gpu.Ptr(e.radius),
		gpu.Ptr(e.readoutBuf))
}

// pixelRays fills the per-pixel world ray directions of the ray model when the camera changed
// (always while capturing: a captured step must have the same launches whatever the view).
func (e *Engine) pixelRays(cam *camera.Camera) error {
	if e.set.Render != prep.Ray || (!e.capturing && e.raysFor != nil && sameCamera(e.raysFor, cam)) {
		return nil
	}
	npx := uint32(cam.Width * cam.Height)
	if err := e.dev.Launch(e.k.pixelRays, gpu.BlocksFor(npx, 256), gpu.Dim3{256}, 0,
		gpu.Bytes(camDBytes(cam)), gpu.Ptr(e.rays)); err != nil {
		return err
	}
	c := *cam
	e.raysFor = &c
	return nil
}

// sameCamera compares the pinhole parameters the rays depend on.
func sameCamera(a, b *camera.Camera) bool {
	return a.Width == b.Width && a.Height == b.Height && a.Fx == b.Fx && a.Fy == b.Fy &&
		a.Cx == b.Cx && a.Cy == b.Cy && a.R == b.R
}
