package gltfsplat

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Names the extension defines (KHR_gaussian_splatting README, sections
// "Attributes" and "Extension Properties").
const (
	// ExtensionName is the key of the primitive's extension object and the
	// entry in extensionsUsed.
	ExtensionName = "KHR_gaussian_splatting"

	AttrScale    = ExtensionName + ":SCALE"
	AttrRotation = ExtensionName + ":ROTATION"
	AttrOpacity  = ExtensionName + ":OPACITY"

	// KernelEllipse is the 3DGS kernel, the only one the base extension
	// defines.
	KernelEllipse = "ellipse"
	// ColorSpaceSRGB is display-referred BT.709 sRGB, what 3DGS trains in.
	ColorSpaceSRGB = "srgb_rec709_display"
	// ColorSpaceLinear is display-referred BT.709 linear, the other value
	// the base extension defines.
	ColorSpaceLinear = "lin_rec709_display"
	// ProjectionPerspective and SortingCameraDistance are the defaults of
	// the two optional properties.
	ProjectionPerspective = "perspective"
	SortingCameraDistance = "cameraDistance"
)

// shAttrPrefix begins the name of every SH attribute.
const shAttrPrefix = ExtensionName + ":SH_DEGREE_"

// SHAttr is the attribute holding SH coefficient n (0..2·deg) of degree deg:
// splat coefficient deg² + n in the 3DGS order.
func SHAttr(deg, n int) string { return fmt.Sprintf("%s%d_COEF_%d", shAttrPrefix, deg, n) }

// extension is the JSON object on the primitive. Kernel and colorSpace are
// required; projection and sortingMethod are optional and written with
// their default values so a reader need not know the defaults.
type extension struct {
	Kernel        string `json:"kernel"`
	ColorSpace    string `json:"colorSpace"`
	Projection    string `json:"projection,omitempty"`
	SortingMethod string `json:"sortingMethod,omitempty"`
}

// Info describes a file as read.
type Info struct {
	Count         int    // number of splats
	SHDegree      int    // 0..3, from the SH attributes present
	Kernel        string // always KernelEllipse (Read refuses others)
	ColorSpace    string // ColorSpaceSRGB or ColorSpaceLinear
	Projection    string // as written; empty when absent (perspective)
	SortingMethod string // as written; empty when absent (cameraDistance)
	Generator     string // asset.generator
	// Warning, when not empty, reports scales of 0 (log scale −Inf)
	// clamped to a finite log scale, with their count and the first.
	Warning string
}

// posSign maps a position component between RDF and LUF: the half turn
// about z, F = diag(−1, −1, 1).
var posSign = [3]float32{-1, -1, 1}

// shSign is the sign of SH basis function k under F:
// Y_k(−x,−y,z) = shSign[k]·Y_k(x,y,z). A function keeps its sign when its
// total power of x and y is even, which for the real SH is when its order m
// is even. Colour is Σ c_k·Y_k(d), so negating c_k where shSign is −1 gives
// the mapped splat the same colour in the mapped direction.
// TestConvertColour checks these against splat.SHBasis.
var shSign = [splat.SHCoeffs]float32{
	1,         // 1
	-1, 1, -1, // y, z, x
	1, -1, 1, -1, 1, // xy, yz, 2z² − x² − y², xz, x² − y²
	-1, 1, // y(3x² − y²), xyz
	-1, 1, // y(4z² − x² − y²), z(2z² − 3x² − 3y²)
	-1, 1, -1, // x(4z² − x² − y²), z(x² − y²), x(x² − 3y²)
}

// toGLTF maps splat quaternion (w,x,y,z), RDF, to glTF's order (x, y, z, w)
// in LUF, normalised. F·R·F for the half turn F about z is R with its axis
// turned half way round z: (w, −x, −y, z). ok is false for a zero or
// non-finite quaternion, which has no rotation to write.
func toGLTF(w, x, y, z float32) (q [4]float32, ok bool) {
	n := math.Sqrt(float64(w)*float64(w) + float64(x)*float64(x) + float64(y)*float64(y) + float64(z)*float64(z))
	if n == 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return q, false
	}
	return [4]float32{float32(-float64(x) / n), float32(-float64(y) / n), float32(float64(z) / n), float32(float64(w) / n)}, true
}

// fromGLTF is the inverse of toGLTF (without the normalisation): (x,y,z,w)
// in LUF to the splat's (w,x,y,z) in RDF.
func fromGLTF(q [4]float32) [4]float32 { return [4]float32{q[3], -q[0], -q[1], q[2]} }

// fallbackColour is COLOR_0's value for a DC coefficient: the 3DGS diffuse
// colour SHC0·dc + 0.5, clamped to [0, 1], which is display-referred sRGB
// (the colorSpace written), decoded to linear because glTF's COLOR_0 holds
// linear values (the extension's "Fallback Behavior" note says so).
func fallbackColour(dc float32) float32 {
	return float32(srgbToLinear(min(max(splat.SHC0*float64(dc)+0.5, 0), 1)))
}

// srgbToLinear is the sRGB transfer function's inverse (IEC 61966-2-1).
func srgbToLinear(c float64) float64 {
	if c <= 0.04045 {
		return c / 12.92
	}
	return math.Pow((c+0.055)/1.055, 2.4)
}

// toLogScale is the log scale of a stored linear scale, which the extension
// says must not be negative; 0 gives −Inf, which the caller clamps.
func toLogScale(s float32) float64 { return math.Log(float64(s)) }

// opacityFloor keeps a stored opacity of 0 or 1 (float32 sigmoid saturates
// to 1 above a logit of about 17) at a finite logit: ±16.6.
const opacityFloor = 6e-8

// toLogit is the inverse of the opacity written: opacity in [0, 1] to a
// finite logit.
func toLogit(a float32) float32 {
	p := min(max(float64(a), opacityFloor), 1-opacityFloor)
	return float32(math.Log(p / (1 - p)))
}
