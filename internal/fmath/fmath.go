// Package fmath holds the float32 elementary functions the kernels evaluate (shaders/common.h:
// exp32, log32, sigmoid32), computed in float32 arithmetic alone so that a GPU without float64
// (Metal has none) gives the very bits the CPU engine does. Every product is rounded on its own
// (float32(...)), so that no compiler fuses it into a multiply-add the GPU would not do.
package fmath

import "math"

// Exp returns e^x to within one float32 ulp. With x = n·ln2 + r, |r| ≤ ln2/2, e^x = 2ⁿ·e^r: n
// is rounded by adding 1.5·2²³ (whose float32 ulp is 1), r is reduced with ln2 split in two
// (Cody and Waite: n·ln2Hi is exact), and e^r = 1 + r + r²·P(r) with Cephes' degree-5 minimax
// P. Results below e^−87 (near float32's smallest normal) and NaN give 0; from 89 on, +Inf.
// Between 88 and 89, n may be 128, past float32's largest power of two: the scaling then
// doubles first (exact), so the product overflows to +Inf only where e^x does.
func Exp(x float32) float32 {
	const (
		log2e = float32(1.44269504088896341)
		round = float32(12582912) // 1.5·2²³
		ln2Hi = float32(0.693359375)
		ln2Lo = float32(-2.12194440e-4)
	)
	if !(x > -87) {
		return 0
	}
	if !(x < 89) {
		return float32(math.Inf(1))
	}
	j := float32(x*log2e) + round
	nf := j - round
	n := int32(math.Float32bits(j) - math.Float32bits(round)) // |n| ≤ 128
	r := (x - float32(nf*ln2Hi)) - float32(nf*ln2Lo)
	p := float32(float32(1.9875691500e-4)*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	y := (float32(p*float32(r*r)) + r) + 1
	if n > 127 {
		y = float32(y * 2)
		n--
	}
	return float32(y * math.Float32frombits(uint32(n+127)<<23))
}

// Log returns the natural logarithm of x to within about one float32 ulp: x = m·2ᵉ with m in
// [√½, √2), f = m − 1 (exact), log x = f − f²/2 + f³·P(f) + e·ln2, with Cephes' degree-8
// minimax P and ln2 split in two. Subnormals are scaled by 2²⁴ first. Log(0) = −Inf, Log of a
// negative number or NaN is NaN, Log(+Inf) = +Inf.
func Log(x float32) float32 {
	const (
		ln2Hi = float32(0.693359375)
		ln2Lo = float32(-2.12194440e-4)
		sqrt2 = float32(1.41421356)
	)
	if !(x > 0) {
		if x == 0 {
			return float32(math.Inf(-1))
		}
		return math.Float32frombits(0x7fc00000)
	}
	if x > math.MaxFloat32 {
		return x
	}
	e := int32(0)
	b := math.Float32bits(x)
	if b < 0x00800000 {
		x = float32(x * 16777216) // 2²⁴
		b = math.Float32bits(x)
		e = -24
	}
	e += int32(b>>23) - 127
	m := math.Float32frombits(b&0x007fffff | 0x3f800000)
	if m > sqrt2 {
		m = float32(m * 0.5)
		e++
	}
	f := m - 1
	z := float32(f * f)
	p := float32(float32(7.0376836292e-2)*f) + -1.1514610310e-1
	p = float32(p*f) + 1.1676998740e-1
	p = float32(p*f) + -1.2420140846e-1
	p = float32(p*f) + 1.4249322787e-1
	p = float32(p*f) + -1.6668057665e-1
	p = float32(p*f) + 2.0000714765e-1
	p = float32(p*f) + -2.4999993993e-1
	p = float32(p*f) + 3.3333331174e-1
	y := float32(float32(p*f) * z)
	ef := float32(e)
	y = y + float32(ef*ln2Lo)
	y = y - float32(0.5*z)
	r := f + y
	return r + float32(ef*ln2Hi)
}

// Sigmoid returns 1/(1 + e^−x) with Exp: 0 from x ≤ −89 on, 1 from x ≥ 87.
func Sigmoid(x float32) float32 { return 1 / (1 + Exp(-x)) }
