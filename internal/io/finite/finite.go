// Package finite holds the finite values that stand in for the infinities
// other tools write into splat files, and the one warning that reports them.
//
// Other writers produce ±Inf where a quantity saturates: a decompressed
// SuperSplat PLY holds opacity logit +Inf for its 255 alpha byte, and a
// glTF or .splat scale of 0 is log scale −Inf. Training and rendering need
// finite numbers, so the readers replace such a value by the bound of the
// same sign below, which means the same thing once activated in float32:
// sigmoid(±LogitBound) is 1 or 2·10⁻⁹, exp(−LogScaleBound) is 2·10⁻⁹ of a
// unit. NaN has no such meaning and stays an error.
package finite

import (
	"fmt"
	"math"
)

const (
	// LogitBound replaces an infinite opacity logit: float32 sigmoid of
	// +20 is exactly 1, of −20 about 2.1e−9.
	LogitBound = 20
	// LogScaleBound replaces an infinite log scale: exp(−20) ≈ 2.1e−9
	// units is no thickness at all, exp(20) ≈ 4.9e8 units still squares to
	// a finite float32 covariance.
	LogScaleBound = 20
)

// Clamp returns v, or ±bound in place of ±Inf, and whether it replaced v.
func Clamp(v float64, bound float32) (float64, bool) {
	if math.IsInf(v, 0) {
		return math.Copysign(float64(bound), v), true
	}
	return v, false
}

// Counter counts clamped values and remembers where the first one was.
type Counter struct {
	N     int
	First string
}

// Add counts one clamped value; where (called only for the first) says
// where it was.
func (c *Counter) Add(where func() string) {
	if c.N == 0 {
		c.First = where()
	}
	c.N++
}

// Warning is the one message for the values c counted in file, or "" when
// there were none.
func (c Counter) Warning(file string) string {
	if c.N == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d infinite values (opacity logits or log scales) clamped to ±%d (the first at %s)", file, c.N, LogitBound, c.First)
}
