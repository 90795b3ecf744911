package loss

import (
	"fmt"
	"strings"
)

// Kind selects the training loss.
type Kind int

const (
	// L1SSIM is (1−λ)·L1 + λ·(1−SSIM), the original 3DGS loss (the default).
	L1SSIM Kind = iota
	// MSE is the mean squared error; λ is ignored.
	MSE
	// MSESSIM is (1−λ)·MSE + λ·(1−SSIM), the seed's blend.
	MSESSIM
)

// DefaultKind is the loss a 3DGS user expects.
const DefaultKind = L1SSIM

// DefaultLambda is the SSIM weight λ of the original 3DGS.
const DefaultLambda = 0.2

// KindNames lists the accepted names of ParseKind, in Kind order.
func KindNames() []string { return []string{"l1-ssim", "mse", "mse-ssim"} }

// String returns the config name of k.
func (k Kind) String() string {
	if k.valid() {
		return KindNames()[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// UsesSSIM reports whether the loss has an SSIM term (and so whether Loss
// fills Result.SSIM).
func (k Kind) UsesSSIM() bool { return k == L1SSIM || k == MSESSIM }

func (k Kind) valid() bool { return k >= L1SSIM && k <= MSESSIM }

// ParseKind parses a loss name as written in the config (key loss.kind).
func ParseKind(s string) (Kind, error) {
	for i, n := range KindNames() {
		if s == n {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("loss: unknown loss kind %q (allowed: %s)", s, strings.Join(KindNames(), ", "))
}
