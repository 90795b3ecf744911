package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// project launches project.cu's project over every splat (design.md §5 step 1).
func (e *Engine) project(cam *camera.Camera, shDegree int) error {
	n := uint32(e.n)
	return e.k.Project(gpu.BlocksFor(n, 256), gpu.Dim3{256}, abi.ProjectArgs{
		Cam: camArgs(cam, &e.set, shDegree, e.n), Params: abi.B(e.params), Valid: abi.B(e.valid), Depth: abi.B(e.depth),
		Opacity: abi.B(e.opacity), Color: abi.B(e.color), Mean2d: abi.B(e.mean2d), Conic: abi.B(e.conic),
		RayU: abi.B(e.or(e.rayU)), RayA: abi.B(e.or(e.rayA)), RayHalf: abi.B(e.or(e.rayHalf)), BoundCenter: abi.B(e.boundCenter), BoundQ: abi.B(e.boundQ),
		Rect: abi.B(e.rect), Radius: abi.B(e.radius), Readout: e.ro})
}

// pixelRays fills the per-pixel world ray directions of the ray model when the camera changed
// (always while capturing: a captured step must have the same launches whatever the view).
func (e *Engine) pixelRays(cam *camera.Camera) error {
	if e.set.Render != prep.Ray || (!e.capturing && e.raysFor != nil && sameCamera(e.raysFor, cam)) {
		return nil
	}
	npx := uint32(cam.Width * cam.Height)
	if err := e.k.PixelRays(gpu.BlocksFor(npx, 256), gpu.Dim3{256}, abi.PixelRaysArgs{Cam: rayCamArgs(cam), Rays: abi.B(e.rays)}); err != nil {
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
