package prep

import (
	"github.com/rlxsplat/rlxsplat/internal/par"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// ProjectBackward maps the gradients of the projected data (dp, from the
// rasterizer backward) to gradients of every splat parameter (design.md §5
// step 7), overwriting grads (same length as g). Splats that were not valid
// get zero gradients. When grad2D is not nil it receives, per splat, the
// norm of the loss gradient with respect to the projected centre in
// normalised device units (pixel gradient × W/2, H/2), the statistic that
// densification thresholds (2e-4 in the original).
func ProjectBackward[F splat.Float](cam *Cam[F], set *Settings, g *splat.GaussiansOf[F], proj *ProjectedOf[F],
	dp *PrepGradsOf[F], grads *splat.GaussiansOf[F], grad2D []F, workers int) {
	n := g.Len()
	par.For(n, workers, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			zeroGrad(grads, i)
			if grad2D != nil {
				grad2D[i] = 0
			}
			if !proj.Valid[i] || zeroPrepGrad(set.Model, dp, i) {
				continue // no pixel saw it: every parameter gradient is exactly zero
			}
			var stat F
			if set.Model == Ray {
				stat = rayBackward(cam, set, g, i, dp, grads)
			} else {
				stat = ewaBackward(cam, set, g, i, dp, grads)
			}
			if grad2D != nil {
				grad2D[i] = stat
			}
		}
	})
}

func zeroGrad[F splat.Float](g *splat.GaussiansOf[F], i int) {
	clear(g.Means[i*3 : i*3+3])
	clear(g.LogScales[i*3 : i*3+3])
	clear(g.Quats[i*4 : i*4+4])
	g.OpacityLogits[i] = 0
	clear(g.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3])
}

// shBackward writes the SH coefficient gradients and returns dL/dμ through
// the view direction.
func shBackward[F splat.Float](cam *Cam[F], deg int, g *splat.GaussiansOf[F], i int, mean vec3[F], dColor []F, grads *splat.GaussiansOf[F]) vec3[F] {
	d := vec3[F]{mean[0] - cam.Center[0], mean[1] - cam.Center[1], mean[2] - cam.Center[2]}
	n := sqrt(dot3(d, d))
	x, y, z := d[0]/n, d[1]/n, d[2]/n
	var b, bx, by, bz [splat.SHCoeffs]F
	splat.SHBasisGrad(deg, x, y, z, &b, &bx, &by, &bz)
	sh := g.SH[i*splat.SHCoeffs*3:]
	gsh := grads.SH[i*splat.SHCoeffs*3:]
	nc := splat.NumCoeffs(deg)
	// Each channel's colour, its terms summed in k order.
	v := [3]F{0.5, 0.5, 0.5}
	for k := 0; k < nc; k++ {
		for c := range v {
			v[c] += b[k] * sh[k*3+c]
		}
	}
	// The direction's gradient sums its terms k by k, the channels within each k: the GPU
	// (shaders/project_bwd.cu) computes each basis term once for all three channels, and the
	// two engines sum in the same order.
	var ddir vec3[F]
	for k := 0; k < nc; k++ {
		for c := range v {
			if !(v[c] > 0) {
				continue // clamped at zero: no gradient (design.md §3)
			}
			gc := dColor[c]
			gsh[k*3+c] = b[k] * gc
			ddir[0] += bx[k] * sh[k*3+c] * gc
			ddir[1] += by[k] * sh[k*3+c] * gc
			ddir[2] += bz[k] * sh[k*3+c] * gc
		}
	}
	// Through the normalisation d̂ = d/‖d‖: dd = (dd̂ − d̂(d̂·dd̂))/‖d‖.
	u := vec3[F]{x, y, z}
	s := dot3(u, ddir)
	return vec3[F]{(ddir[0] - x*s) / n, (ddir[1] - y*s) / n, (ddir[2] - z*s) / n}
}

func ewaBackward[F splat.Float](cam *Cam[F], set *Settings, g *splat.GaussiansOf[F], i int, dp *PrepGradsOf[F], grads *splat.GaussiansOf[F]) F {
	st := loadGeom(cam, g, i, 1)
	sc, m := ewaCov(cam, &st)
	jac, tx, ty, clampX, clampY := ewaJacobian(cam, st.p)
	a0, b, c0 := cov2D(&jac, &sc)
	a, c := a0+Dilation, c0+Dilation
	det := a*c - b*b
	z := st.p[2]

	dMu := shBackward(cam, set.SHDegree, g, i, st.mean, dp.Color[i*3:i*3+3], grads)

	// Opacity (and the antialias compensation).
	gOpac := dp.Opacity[i]
	var ga, gb, gc F
	comp := F(1)
	if set.Antialiased {
		det0 := a0*c0 - b*b
		ratio := max(det0/det, 0)
		comp = sqrt(ratio)
		if comp > 0 {
			dRatio := gOpac * st.opac0 / (2 * comp)
			det2 := det * det
			ga += dRatio * (c0*det - det0*c) / det2
			gc += dRatio * (a0*det - det0*a) / det2
			gb += dRatio * (-2 * b * (det - det0)) / det2
		}
	}
	grads.OpacityLogits[i] = gOpac * comp * st.opac0 * (1 - st.opac0)

	// Conic (c/det, −b/det, a/det) back to the dilated covariance (a, b, c).
	gca, gcb, gcc := dp.Conic[i*3], dp.Conic[i*3+1], dp.Conic[i*3+2]
	d2 := det * det
	ga += gca*(-c*c/d2) + gcb*(b*c/d2) + gcc*(1/det-a*c/d2)
	gb += gca*(2*b*c/d2) + gcb*(-1/det-2*b*b/d2) + gcc*(2*a*b/d2)
	gc += gca*(1/det-a*c/d2) + gcb*(a*b/d2) + gcc*(-a*a/d2)

	// Σ' = J·Σc·Jᵀ: with G2 the symmetric gradient of Σ' (b shared by both
	// off-diagonal entries), dΣc = Jᵀ·G2·J and dJ = 2·G2·J·Σc.
	g2 := [2][2]F{{ga, gb / 2}, {gb / 2, gc}}
	var g2j [2][3]F
	for r := 0; r < 2; r++ {
		for k := 0; k < 3; k++ {
			g2j[r][k] = g2[r][0]*jac[0][k] + g2[r][1]*jac[1][k]
		}
	}
	var dSc mat3[F]
	for r := 0; r < 3; r++ {
		for k := 0; k < 3; k++ {
			dSc[r][k] = jac[0][r]*g2j[0][k] + jac[1][r]*g2j[1][k]
		}
	}
	var dJ [2][3]F
	for r := 0; r < 2; r++ {
		for k := 0; k < 3; k++ {
			dJ[r][k] = 2 * (g2j[r][0]*sc[0][k] + g2j[r][1]*sc[1][k] + g2j[r][2]*sc[2][k])
		}
	}

	// Mean2D and the Jacobian to the camera-space mean.
	gmx, gmy := dp.Mean2D[i*2], dp.Mean2D[i*2+1]
	var dP vec3[F]
	dP[0] += cam.Fx / z * gmx
	dP[1] += cam.Fy / z * gmy
	dP[2] += -cam.Fx*st.p[0]/(z*z)*gmx - cam.Fy*st.p[1]/(z*z)*gmy
	z2, z3 := z*z, z*z*z
	dP[2] += -cam.Fx/z2*dJ[0][0] - cam.Fy/z2*dJ[1][1]
	if clampX {
		dP[2] += cam.Fx * tx / z3 * dJ[0][2]
	} else {
		dP[0] += -cam.Fx / z2 * dJ[0][2]
		dP[2] += 2 * cam.Fx * tx / z3 * dJ[0][2]
	}
	if clampY {
		dP[2] += cam.Fy * ty / z3 * dJ[1][2]
	} else {
		dP[1] += -cam.Fy / z2 * dJ[1][2]
		dP[2] += 2 * cam.Fy * ty / z3 * dJ[1][2]
	}
	dW := mulMTV(&cam.R, dP)
	for k := 0; k < 3; k++ {
		grads.Means[i*3+k] = dMu[k] + dW[k]
	}

	// Σc = W·Σ·Wᵀ → dΣ = Wᵀ·dΣc·W; Σ = M·Mᵀ → dM = 2·dΣ·M.
	wt := transpose(&cam.R)
	t := mulMM(&wt, &dSc)
	dSigma := mulMM(&t, &cam.R)
	dM := mulMM(&dSigma, &m)
	var dR mat3[F]
	for r := 0; r < 3; r++ {
		for k := 0; k < 3; k++ {
			dM[r][k] *= 2
			dR[r][k] = dM[r][k] * st.s[k]
		}
	}
	for k := 0; k < 3; k++ {
		ds := dM[0][k]*st.rq[0][k] + dM[1][k]*st.rq[1][k] + dM[2][k]*st.rq[2][k]
		grads.LogScales[i*3+k] = ds * st.s[k]
	}
	dq := quatMatVJP(st.qh, st.qn, &dR)
	copy(grads.Quats[i*4:i*4+4], dq[:])

	if set.AbsGrad && dp.Mean2DAbs != nil {
		// AbsGS: the pixels' contributions summed by magnitude, so that opposite pulls on a
		// large splat (under-fit detail on both sides of its centre) no longer cancel.
		gmx, gmy = dp.Mean2DAbs[i*2], dp.Mean2DAbs[i*2+1]
	}
	nx, ny := gmx*F(cam.W)/2, gmy*F(cam.H)/2
	return sqrt(nx*nx + ny*ny)
}

func rayBackward[F splat.Float](cam *Cam[F], set *Settings, g *splat.GaussiansOf[F], i int, dp *PrepGradsOf[F], grads *splat.GaussiansOf[F]) F {
	st := loadGeom(cam, g, i, F(set.RadiusScale))
	dMu := shBackward(cam, set.SHDegree, g, i, st.mean, dp.Color[i*3:i*3+3], grads)
	grads.OpacityLogits[i] = dp.Opacity[i] * st.opac0 * (1 - st.opac0)

	var a mat3[F]
	for k := 0; k < 3; k++ {
		for j := 0; j < 3; j++ {
			a[k][j] = st.rq[j][k] / st.s[k]
		}
	}
	rel := vec3[F]{cam.Center[0] - st.mean[0], cam.Center[1] - st.mean[1], cam.Center[2] - st.mean[2]}
	dU := vec3[F]{dp.RayU[i*3], dp.RayU[i*3+1], dp.RayU[i*3+2]}
	var dA mat3[F]
	for k := 0; k < 3; k++ {
		for j := 0; j < 3; j++ {
			dA[k][j] = dp.RayA[i*9+k*3+j] + dU[k]*rel[j]
		}
	}
	// u = A·(c − μ): dμ = −Aᵀ·dU.
	du := mulMTV(&a, dU)
	for k := 0; k < 3; k++ {
		dMu[k] -= du[k]
	}
	// A[k][j] = R[j][k]/σ_k.
	var dR mat3[F]
	for k := 0; k < 3; k++ {
		var ds F
		for j := 0; j < 3; j++ {
			dR[j][k] = dA[k][j] / st.s[k]
			ds -= dA[k][j] * st.rq[j][k] / (st.s[k] * st.s[k])
		}
		grads.LogScales[i*3+k] = ds * st.s[k]
	}
	dq := quatMatVJP(st.qh, st.qn, &dR)
	copy(grads.Quats[i*4:i*4+4], dq[:])
	copy(grads.Means[i*3:i*3+3], dMu[:])

	// The position statistic: the gradient with respect to the projected
	// centre, realised by moving μ along the camera's x and y axes
	// (design.md §4.2): a shift δ moves the centre by f·δ/z pixels.
	z := st.p[2]
	gx := dot3(dMu, vec3[F](cam.R[0])) * z / cam.Fx
	gy := dot3(dMu, vec3[F](cam.R[1])) * z / cam.Fy
	nx, ny := gx*F(cam.W)/2, gy*F(cam.H)/2
	return sqrt(nx*nx + ny*ny)
}

// zeroPrepGrad reports whether splat i received no gradient at all from the
// rasterizer (occluded, or outside every pixel's footprint walk), so that the
// backward can skip it: all its parameter gradients are then exactly zero.
func zeroPrepGrad[F splat.Float](m Model, dp *PrepGradsOf[F], i int) bool {
	if dp.Opacity[i] != 0 || dp.Color[i*3] != 0 || dp.Color[i*3+1] != 0 || dp.Color[i*3+2] != 0 {
		return false
	}
	if m == Ray {
		for _, v := range dp.RayU[i*3 : i*3+3] {
			if v != 0 {
				return false
			}
		}
		for _, v := range dp.RayA[i*9 : i*9+9] {
			if v != 0 {
				return false
			}
		}
		return true
	}
	return dp.Mean2D[i*2] == 0 && dp.Mean2D[i*2+1] == 0 && dp.Conic[i*3] == 0 && dp.Conic[i*3+1] == 0 && dp.Conic[i*3+2] == 0
}
