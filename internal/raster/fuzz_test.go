package raster

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// FuzzRasterize feeds arbitrary prepared data — NaN, ±Inf, huge, negative
// and subnormal values in every field, including the ray model's footprint —
// through Render and Backward: they must never panic, and must fill outputs
// of the right shape.
func FuzzRasterize(f *testing.F) {
	seed := func(model byte, vals ...float32) []byte {
		b := []byte{model}
		for _, v := range vals {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	f.Add(seed(0, 4, 3, 0.5, 0.1, 0.1, 0.02, 0.9, 0.5, 0.5, 0.5))
	f.Add(seed(0, nan, inf, -inf, 0, 1e38, -1e-45, 2, 3, 4, 5, 6, 7))
	f.Add(seed(1, 0, 0, -5, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0.9, 4.5, 3.5, 0.1, 0, 0.1))
	f.Add(seed(1, nan, 1, 2, inf, 0, 0, 1e30, -1e30, 0, 1, 1, 0.5, -0.5, nan, 1e-40))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		model := prep.Model(data[0] & 1)
		data = data[1:]
		next := func() float32 {
			if len(data) < 4 {
				return 0.5
			}
			v := math.Float32frombits(binary.LittleEndian.Uint32(data))
			data = data[4:]
			return v
		}
		const w, h, ts, n = 9, 7, 4, 4
		p := prep.NewProjected[float32](model, n)
		rays := make([]float32, w*h*3)
		for i := range rays {
			rays[i] = 1
		}
		for i := 0; i < n; i++ {
			p.Valid[i] = true
			p.Depth[i] = float32(i)
			p.Mean2D[2*i], p.Mean2D[2*i+1] = next(), next()
			for k := 0; k < 3; k++ {
				p.Conic[3*i+k] = next()
			}
			p.Opacity[i] = next()
			for k := 0; k < 3; k++ {
				p.Color[3*i+k] = next()
			}
			if model == prep.Ray {
				for k := 0; k < 3; k++ {
					p.RayU[3*i+k] = next()
				}
				for k := 0; k < 9; k++ {
					p.RayA[9*i+k] = next()
				}
				p.BoundCenter[2*i], p.BoundCenter[2*i+1] = next(), next()
				for k := 0; k < 3; k++ {
					p.BoundQ[3*i+k] = next()
				}
			}
			p.Rect[4*i+2], p.Rect[4*i+3] = 3, 2
		}
		for i := range rays {
			if v := next(); v != 0.5 {
				rays[i] = v
			}
		}
		fr := &Frame[float32]{Width: w, Height: h, Background: [3]float32{next(), 0.5, 0}, Proj: p,
			Lists: binNaive(p, w, h, ts), Rays: rays, MaxSplatSteps: int(data0(data) % 4), Workers: 2}
		var fw Forward[float32]
		if err := Render(fr, &fw); err != nil {
			t.Fatalf("valid frame rejected: %v", err)
		}
		if len(fw.Image) != w*h*3 || len(fw.FinalT) != w*h || len(fw.Count) != w*h {
			t.Fatal("forward outputs of the wrong size")
		}
		dImage := make([]float32, w*h*3)
		for i := range dImage {
			dImage[i] = next()
		}
		g := prep.NewPrepGrads[float32](model, n)
		var st Stats[float32]
		if err := Backward(fr, &fw, dImage, g, &st); err != nil {
			t.Fatalf("backward rejected a valid frame: %v", err)
		}
		if len(st.Hits) != n {
			t.Fatal("stats of the wrong size")
		}
	})
}

func data0(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}
