package plot

import (
	"math"
	"strconv"
)

// maxTicks is about how many intervals an axis is divided into.
const maxTicks = 5

// niceStep is the smallest step of the form 1, 2 or 5 × 10^k that divides span into at most
// maxTicks intervals.
func niceStep(span float64) float64 {
	if !(span > 0) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / maxTicks
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// linearTicks are the ticks of an axis covering [lo, hi]: the multiples of niceStep from the
// one at or below lo to the one at or above hi. A single value gets the interval around it.
func linearTicks(lo, hi float64) []float64 {
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		d := math.Max(math.Abs(lo)*0.1, 0.5)
		lo, hi = lo-d, hi+d
	}
	step := niceStep(hi - lo)
	first := math.Floor(lo/step+1e-9) * step
	last := math.Ceil(hi/step-1e-9) * step
	var t []float64
	for i := 0; ; i++ {
		v := first + float64(i)*step
		if math.Abs(v) < step*1e-9 {
			v = 0 // no "-0" from rounding
		}
		t = append(t, v)
		if v >= last-step*1e-9 {
			return t
		}
	}
}

// logTicks are the ticks, in log10 space, of a log axis covering [lo, hi] (log10 values): at
// the decades when the range spans several, at 1, 2 and 5 × 10^k when it spans one or two,
// and at round linear values when it spans less than a decade, as a training loss that
// falls from 0.08 to 0.03 does.
func logTicks(lo, hi float64) []float64 {
	if hi-lo < 1 {
		lt := linearTicks(math.Pow(10, lo), math.Pow(10, hi))
		out := make([]float64, 0, len(lt))
		for _, v := range lt {
			if v > 0 {
				out = append(out, math.Log10(v))
			}
		}
		if len(out) >= 2 && out[0] <= lo+1e-9 && out[len(out)-1] >= hi-1e-9 {
			return out
		}
		// A linear tick at 0 or below, which a log axis cannot place: the decades instead.
	}
	d0, d1 := math.Floor(lo), math.Ceil(hi)
	if d1 == d0 {
		d1++
	}
	var out []float64
	mults := []float64{1, 2, 5}
	if hi-lo > 2 {
		mults = []float64{1}
	}
	// Only the ticks within the range, plus the round values just outside it at each end.
	for d := d0; d <= d1; d++ {
		for _, m := range mults {
			v := d + math.Log10(m)
			if v > d1 {
				break
			}
			out = append(out, v)
		}
	}
	i0, i1 := 0, len(out)-1
	for i0+1 < len(out) && out[i0+1] <= lo+1e-9 {
		i0++
	}
	for i1-1 >= 0 && out[i1-1] >= hi-1e-9 {
		i1--
	}
	return out[i0 : i1+1]
}

// tickLabel formats v with the decimals its axis's step needs (none for steps of 1 and up).
func tickLabel(v float64, ticks []float64) string {
	if len(ticks) < 2 {
		return short(v)
	}
	step := ticks[1] - ticks[0]
	dec := max(0, int(math.Ceil(-math.Log10(step)-1e-9)))
	if dec > 6 || math.Abs(v) >= 1e7 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// logTickLabel formats a log10-space tick as its value.
func logTickLabel(l float64) string {
	v := math.Pow(10, l)
	// Rounded to 3 significant digits, so that 10^log10(0.2) prints as 0.2.
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return strconv.FormatFloat(v, 'g', -1, 64)
}
