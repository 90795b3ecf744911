package fmath

import "math"

// The MCMC densifier perturbs every splat's position with standard-normal noise at every step
// (Kheradmand et al. 2024), on the CPU and GPU engines alike. Drawing the samples from a
// sequential generator would tie them to the order threads run in; instead each sample is a
// pure function of its coordinates (seed, step, splat, axis), computed with integer mixing and
// float32 operations that a kernel evaluates to the same bits (shaders/common.h normal32).

// mix32 is MurmurHash3's 32-bit finaliser: every input bit flips each output bit with
// probability close to ½, and it is a bijection, so distinct keys never collide in one round.
func mix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// NormalAttempts bounds the polar method's tries: each is accepted with probability π/4, so
// 32 straight rejections (probability 0.2146³² ≈ 4e-22) never happen in practice; the sample
// is then 0 rather than an unbounded loop on the GPU.
const NormalAttempts = 32

// NormalKey folds a sample's coordinates into the key Normal draws from.
func NormalKey(seed uint64, step, splat, axis uint32) uint32 {
	h := mix32(uint32(seed) ^ 0x9e3779b9)
	h = mix32(h ^ uint32(seed>>32))
	h = mix32(h ^ step)
	h = mix32(h ^ splat)
	return mix32(h ^ (axis * 0x632be5ab))
}

// uniform11 maps a hash to [-1, 1) on a grid of 2⁻²³: the 24-bit integer converts exactly, the
// power-of-two product is exact, and so is the subtraction (the result needs at most 24 bits).
func uniform11(h uint32) float32 {
	return float32(float32(h>>8)*(1.0/8388608)) - 1
}

// Normal returns a standard-normal sample for a key by Marsaglia's polar method: draw (u, v)
// uniform in the square until s = u² + v² falls in (0, 1), then u·√(−2 ln s / s) is N(0, 1).
// Attempt k draws its pair from the key mixed with 2k+1 and 2k+2. Every product is rounded on
// its own, so that no compiler fuses it into a multiply-add; the logarithm is Log and the
// square root and division are IEEE's correctly rounded ones, as on the GPU.
func Normal(key uint32) float32 {
	for k := uint32(0); k < NormalAttempts; k++ {
		u := uniform11(mix32(key ^ (2*k + 1)))
		v := uniform11(mix32(key ^ (2*k + 2)))
		s := float32(u*u) + float32(v*v)
		if s > 0 && s < 1 {
			f := float32(-2*Log(s)) / s
			return float32(u * float32(math.Sqrt(float64(f))))
		}
	}
	return 0
}
