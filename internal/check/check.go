// Package check holds the tolerance helpers that the gradient and parity
// checks share: relative errors between an analytic gradient and its central
// finite-difference estimate, and between two engines' outputs.
//
// It has no knowledge of splats; it compares float32 or float64 vectors in
// float64.
package check

import (
	"fmt"
	"math"
)

// Float is the element type the comparisons accept; they compute in float64.
type Float interface{ ~float32 | ~float64 }

// RelErr is ‖a − b‖/‖b‖ (or ‖a − b‖ when b is zero); a NaN anywhere gives
// +Inf, so that a comparison against any tolerance fails and prints plainly.
func RelErr[F Float](a, b []F) float64 {
	var num, den float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		if math.IsNaN(x) || math.IsNaN(y) {
			return math.Inf(1)
		}
		num += (x - y) * (x - y)
		den += y * y
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// Cosine is the cosine similarity of a and b (1 when both are zero).
func Cosine[F Float](a, b []F) float64 {
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab += x * y
		aa += x * x
		bb += y * y
	}
	if aa == 0 && bb == 0 {
		return 1
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// MaxAbs is the largest |a_i − b_i|; a NaN anywhere gives +Inf, like RelErr.
func MaxAbs[F Float](a, b []F) float64 {
	m := 0.0
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

// BitsDiffer counts the float32 values of a and b whose bits differ, and each value one has
// beyond the other's length: the measure of the comparisons that must hold to the bit.
func BitsDiffer(a, b []float32) int {
	d := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			d++
		}
	}
	return d
}

// Grad compares an analytic gradient with its finite-difference estimate.
// It fails when the relative error exceeds tol, when either holds a NaN, or
// when the reference is all zero while the analytic one is not (a check
// that compares zeros with zeros passes only when both are exactly zero).
func Grad(name string, analytic, fd []float64, tol float64) error {
	if len(analytic) != len(fd) {
		return fmt.Errorf("%s: %d analytic values vs %d finite differences", name, len(analytic), len(fd))
	}
	for i := range analytic {
		if math.IsNaN(analytic[i]) || math.IsNaN(fd[i]) {
			return fmt.Errorf("%s: NaN at %d (analytic %v, fd %v)", name, i, analytic[i], fd[i])
		}
	}
	if e := RelErr(analytic, fd); e > tol || math.IsNaN(e) {
		return fmt.Errorf("%s: relative error %.3g > %.3g (max abs diff %.3g)", name, e, tol, MaxAbs(analytic, fd))
	}
	return nil
}

// Central estimates df/dx_i for every i of x by central differences with
// step h, restoring x afterwards.
func Central(x []float64, h float64, f func() float64) []float64 {
	out := make([]float64, len(x))
	for i := range x {
		old := x[i]
		x[i] = old + h
		fp := f()
		x[i] = old - h
		fm := f()
		x[i] = old
		out[i] = (fp - fm) / (2 * h)
	}
	return out
}
