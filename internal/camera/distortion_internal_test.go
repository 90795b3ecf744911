package camera

import (
	"fmt"
	"math"
	"testing"
)

// TestCoreJacobian checks the analytic Jacobian that drives Newton's
// method against central differences, for every model that uses it, at
// points off the axes (so that every cross term is exercised).
func TestCoreJacobian(t *testing.T) {
	cases := []Distortion{
		{SimpleRadial, []float64{-0.23}},
		{Radial, []float64{-0.12, 0.05}},
		{OpenCV, []float64{0.22, 1.9, -0.056, -0.063}},
		{FullOpenCV, []float64{-0.3, 0.1, 0.004, -0.003, 0.02, 0.15, -0.05, 0.01}},
		{OpenCVFisheye, []float64{0.05, -0.02, 0.004, -0.001}},
		{SimpleRadialFisheye, []float64{0.07}},
		{RadialFisheye, []float64{0.07, -0.01}},
		{ThinPrismFisheye, []float64{0.03, -0.01, 0.002, -0.003, 0.001, -0.0005, 0.004, -0.002}},
		{RadTanThinPrismFisheye, []float64{0.4, -0.3, 0.1, 0.05, -0.02, 0.003, 0.002, -0.001, 0.003, -0.001, 0.002, 0.0005}},
		{SimpleFisheye, nil},
	}
	pts := [][2]float64{{0.31, -0.17}, {-0.6, 0.45}, {0.02, 0.9}, {-0.05, -0.03}}
	const h = 1e-6
	for _, d := range cases {
		for _, p := range pts {
			t.Run(fmt.Sprintf("%s/%v", d.Model, p), func(t *testing.T) {
				_, _, j := d.core(p[0], p[1])
				for c := 0; c < 2; c++ {
					q0, q1 := p, p
					q0[c] -= h
					q1[c] += h
					x0, y0, _ := d.core(q0[0], q0[1])
					x1, y1, _ := d.core(q1[0], q1[1])
					num := [2]float64{(x1 - x0) / (2 * h), (y1 - y0) / (2 * h)}
					for r := 0; r < 2; r++ {
						if math.Abs(num[r]-j[r][c]) > 1e-7*math.Max(1, math.Abs(num[r])) {
							t.Errorf("∂out%d/∂in%d = %.12g, finite difference %.12g", r, c, j[r][c], num[r])
						}
					}
				}
			})
		}
	}
}

func TestPolyEval(t *testing.T) {
	// 2 − 3ρ + 0.5ρ³ at ρ = 1.5, and its derivative −3 + 1.5ρ².
	v, d := polyEval(1.5, 2, -3, 0, 0.5)
	if math.Abs(v-(2-4.5+0.5*3.375)) > 1e-15 || math.Abs(d-(-3+1.5*2.25)) > 1e-15 {
		t.Errorf("polyEval = %v, %v", v, d)
	}
}
