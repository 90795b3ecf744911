package fused

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// adamBytes is struct AdamP (shaders/adam.cu) for Adam step t: the per-group step sizes and
// bias corrections in float64, rounded as internal/adam's stepGroup rounds them.
func adamBytes(s engine.AdamSettings, lr engine.LR, t int64, n int) ([]byte, error) {
	lrs := [6]float32{lr.Means, lr.LogScales, lr.Quats, lr.Opacity, lr.SHDC, lr.SHRest}
	b1, b2, eps := float64(s.Beta1), float64(s.Beta2), float64(s.Eps)
	bc1 := 1 - math.Pow(b1, float64(t))
	bc2 := 1 - math.Pow(b2, float64(t))
	var w words
	for g, r := range lrs {
		if !(r >= 0 && r <= math.MaxFloat32) {
			return nil, fmt.Errorf("fused: learning rate of group %d = %v, want a finite value ≥ 0", g, r)
		}
		w.f32(float32(float64(r) / bc1))
		w.f32(float32(1 / math.Sqrt(bc2)))
		w.f32(s.GradClip)
		w.f32(0)
	}
	w.f32(float32(b1))
	w.f32(float32(b2))
	w.f32(float32(1 - b1))
	w.f32(float32(1 - b2))
	w.f32(float32(eps))
	w.u32(uint32(n))
	vis := uint32(0)
	if s.VisibleOnly {
		vis = 1
	}
	w.u32(vis)
	w.u32(0)
	return w.b, nil
}

// adam launches adam.cu's adam_step over the 59·n packed elements, 4 a thread (design.md §5
// step 8).
func (e *Engine) adam(ap []byte) error {
	return e.dev.Launch(e.k.adamStep, gpu.BlocksFor(uint32((paramFloats*e.n+3)/4), 256), gpu.Dim3{256}, 0,
		gpu.Bytes(ap), gpu.Ptr(e.readoutBuf), gpu.Ptr(e.params), gpu.Ptr(e.grads), gpu.Ptr(e.adamM),
		gpu.Ptr(e.adamV), gpu.Ptr(e.valid))
}
