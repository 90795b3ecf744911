package fused

import (
	"encoding/binary"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// The by-value kernel arguments (structs of shaders/common.h, raster.h, loss.cu, adam.cu and
// project.cu) are written here field by field, little-endian, in declaration order. Every field
// is four bytes except CamD's doubles, so there is no padding to reproduce.

type words struct{ b []byte }

func (w *words) f32(v float32) { w.b = binary.LittleEndian.AppendUint32(w.b, math.Float32bits(v)) }
func (w *words) i32(v int32)   { w.b = binary.LittleEndian.AppendUint32(w.b, uint32(v)) }
func (w *words) u32(v uint32)  { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *words) f64(v float64) { w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(v)) }

// camBytes is struct Cam (shaders/common.h): 35 words. The float32 values are exactly those
// of prep.NewCam, so that the device projects with the CPU's numbers.
func camBytes(cam *camera.Camera, set *engine.Settings, shDegree, n int) []byte {
	k := prep.NewCam[float32](cam)
	var w words
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			w.f32(k.R[i][j])
		}
	}
	for i := 0; i < 3; i++ {
		w.f32(k.T[i])
	}
	w.f32(k.Fx)
	w.f32(k.Fy)
	w.f32(k.Cx)
	w.f32(k.Cy)
	for i := 0; i < 3; i++ {
		w.f32(k.Center[i])
	}
	// The Jacobian clamp limits, computed as prep.NewCam does (its fields are unexported).
	tanX := 0.5 * float64(cam.Width) / cam.Fx
	tanY := 0.5 * float64(cam.Height) / cam.Fy
	w.f32(float32(cam.Cx/cam.Fx + 0.3*tanX))                       // limXNeg
	w.f32(float32((float64(cam.Width)-cam.Cx)/cam.Fx + 0.3*tanX))  // limXPos
	w.f32(float32(cam.Cy/cam.Fy + 0.3*tanY))                       // limYNeg
	w.f32(float32((float64(cam.Height)-cam.Cy)/cam.Fy + 0.3*tanY)) // limYPos
	ps := set.Prep(shDegree)
	w.f32(float32(ps.Near))
	w.f32(float32(ps.RadiusScale))
	w.f32(float32(float64(prep.AlphaMin))) // prep's set.alphaMin(), a float64, rounded
	ts := set.TileSize
	w.i32(int32(cam.Width))
	w.i32(int32(cam.Height))
	w.i32(int32(ts))
	w.i32(int32(k.TilesX(ts)))
	w.i32(int32(k.TilesY(ts)))
	w.i32(int32(set.Render))
	w.i32(int32(shDegree))
	aa := int32(0)
	if set.Antialiased {
		aa = 1
	}
	w.i32(aa)
	w.i32(int32(n))
	return w.b
}

// camDBytes is struct CamD (shaders/project.cu): the float64 camera pixel_rays needs.
func camDBytes(cam *camera.Camera) []byte {
	var w words
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			w.f64(cam.R[i][j])
		}
	}
	w.f64(cam.Fx)
	w.f64(cam.Fy)
	w.f64(cam.Cx)
	w.f64(cam.Cy)
	w.i32(int32(cam.Width))
	w.i32(int32(cam.Height))
	return w.b
}

// rasterBytes is struct Raster (shaders/raster.h): 12 words.
func rasterBytes(cam *camera.Camera, set *engine.Settings, bg [3]float32) []byte {
	ts := set.TileSize
	var w words
	w.i32(int32(cam.Width))
	w.i32(int32(cam.Height))
	w.i32(int32(ts))
	w.i32(int32((cam.Width + ts - 1) / ts))
	w.i32(int32(set.Render))
	w.i32(int32(set.MaxSplatSteps))
	w.i32(0)
	w.i32(0)
	for _, c := range bg {
		w.f32(c)
	}
	w.f32(float32(prep.AlphaMin)) // the rasterizer's F(prep.AlphaMin)
	return w.b
}
