package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// The by-value kernel arguments. Their layouts are declared once (internal/fused/abi/spec);
// here they are filled from the engine's camera and settings.

// camArgs is struct Cam. The float32 values are exactly those of prep.NewCam, so that the
// device projects with the CPU's numbers.
func camArgs(cam *camera.Camera, set *engine.Settings, shDegree, n int) abi.Cam {
	k := prep.NewCam[float32](cam)
	// The Jacobian clamp limits, computed as prep.NewCam does (its fields are unexported).
	tanX := 0.5 * float64(cam.Width) / cam.Fx
	tanY := 0.5 * float64(cam.Height) / cam.Fy
	ps := set.Prep(shDegree)
	ts := set.TileSize
	c := abi.Cam{
		T:           [3]float32(k.T),
		Fx:          k.Fx,
		Fy:          k.Fy,
		Cx:          k.Cx,
		Cy:          k.Cy,
		Center:      [3]float32(k.Center),
		LimXNeg:     float32(cam.Cx/cam.Fx + 0.3*tanX),
		LimXPos:     float32((float64(cam.Width)-cam.Cx)/cam.Fx + 0.3*tanX),
		LimYNeg:     float32(cam.Cy/cam.Fy + 0.3*tanY),
		LimYPos:     float32((float64(cam.Height)-cam.Cy)/cam.Fy + 0.3*tanY),
		NearZ:       float32(ps.Near),
		RadiusScale: float32(ps.RadiusScale),
		AlphaMin:    float32(float64(prep.AlphaMin)), // prep's set.alphaMin(), a float64, rounded
		W:           int32(cam.Width),
		H:           int32(cam.Height),
		TileSize:    int32(ts),
		TilesX:      int32(k.TilesX(ts)),
		TilesY:      int32(k.TilesY(ts)),
		Model:       int32(set.Render),
		ShDegree:    int32(shDegree),
		N:           int32(n),
	}
	for i := range 3 {
		for j := range 3 {
			c.R[3*i+j] = k.R[i][j]
		}
	}
	if set.Antialiased {
		c.Antialiased = 1
	}
	return c
}

// rayCamArgs is struct RayCam: the camera pixel_rays needs, as prep.NewRayCam splits it (the
// CPU engine's float32 rays come from the same values).
func rayCamArgs(cam *camera.Camera) abi.RayCam {
	rc := prep.NewRayCam(cam)
	return abi.RayCam{R: rc.R, RLo: rc.RLo, F: rc.F, FLo: rc.FLo, W: int32(rc.W), H: int32(rc.H)}
}

// rasterArgs is struct Raster.
func rasterArgs(cam *camera.Camera, set *engine.Settings, bg [3]float32) abi.Raster {
	ts := set.TileSize
	return abi.Raster{
		W:        int32(cam.Width),
		H:        int32(cam.Height),
		TileSize: int32(ts),
		TilesX:   int32((cam.Width + ts - 1) / ts),
		Model:    int32(set.Render),
		MaxSteps: int32(set.MaxSplatSteps),
		Bg:       bg,
		AlphaMin: float32(prep.AlphaMin), // the rasterizer's F(prep.AlphaMin)
	}
}
