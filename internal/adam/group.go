package adam

import (
	"fmt"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Group is one parameter group with its own learning rate and settings.
type Group int

// The parameter groups, in the order of splat.Gaussians.Fields (the SH field
// split into its DC and rest coefficients, which train at different rates).
const (
	Means Group = iota
	LogScales
	Quats
	OpacityLogits
	SHDC   // SH coefficient 0 of each splat: the first 3 of its 48 values
	SHRest // SH coefficients 1..15: the other 45 values
)

// NumGroups is the number of parameter groups.
const NumGroups = 6

// GroupNames lists the config names of the groups, in Group order.
func GroupNames() []string {
	return []string{"means", "log_scales", "quats", "opacity_logits", "sh_dc", "sh_rest"}
}

// String returns the config name of g.
func (g Group) String() string {
	if g >= 0 && g < NumGroups {
		return GroupNames()[g]
	}
	return fmt.Sprintf("Group(%d)", int(g))
}

// ParseGroup parses a group name as written in the config.
func ParseGroup(s string) (Group, error) {
	for i, n := range GroupNames() {
		if s == n {
			return Group(i), nil
		}
	}
	return 0, fmt.Errorf("adam: unknown parameter group %q (allowed: %s)", s, strings.Join(GroupNames(), ", "))
}

// layout says where group g lives in a splat.Gaussians: splat i's values
// are data[i*stride+offset : i*stride+offset+width].
func layout(g *splat.Gaussians, grp Group) (data []float32, stride, offset, width int) {
	const shStride = splat.SHCoeffs * 3
	switch grp {
	case Means:
		return g.Means, 3, 0, 3
	case LogScales:
		return g.LogScales, 3, 0, 3
	case Quats:
		return g.Quats, 4, 0, 4
	case OpacityLogits:
		return g.OpacityLogits, 1, 0, 1
	case SHDC:
		return g.SH, shStride, 0, 3
	default: // SHRest
		return g.SH, shStride, 3, shStride - 3
	}
}
