package adam

import "math"

// ExpDecay is the exponential learning-rate schedule of the original 3DGS
// (used for the means): the rate moves from init to final log-linearly as
// step goes from 0 to maxSteps, and stays at final after that,
//
//	exp((1−t)·ln init + t·ln final),  t = clamp(step/maxSteps, 0, 1).
//
// maxSteps ≤ 0 gives final. The log-linear path needs positive rates; when
// init or final is ≤ 0 the rate is interpolated linearly instead, so that a
// zero (frozen) rate stays well-defined.
func ExpDecay(init, final float64, step, maxSteps int) float64 {
	t := 1.0
	if maxSteps > 0 {
		t = min(max(float64(step)/float64(maxSteps), 0), 1)
	}
	if init <= 0 || final <= 0 {
		return (1-t)*init + t*final
	}
	return math.Exp((1-t)*math.Log(init) + t*math.Log(final))
}

// ExpDecayDelayed is ExpDecay with a warm-up: during the first delaySteps
// steps the rate is scaled by a factor that rises from delayMult to 1 along a
// quarter sine, delayMult + (1−delayMult)·sin(π/2·min(step/delaySteps, 1)).
// delaySteps ≤ 0 means no warm-up.
func ExpDecayDelayed(init, final float64, step, maxSteps, delaySteps int, delayMult float64) float64 {
	f := 1.0
	if delaySteps > 0 {
		u := min(max(float64(step)/float64(delaySteps), 0), 1)
		f = delayMult + (1-delayMult)*math.Sin(math.Pi/2*u)
	}
	return f * ExpDecay(init, final, step, maxSteps)
}
