//go:build linux || darwin

package metal

import (
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi/spec"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mslhost"
)

// TestMSLBuildsForHost builds the exact MSL text of every unit for the host (mslhost), which the fake runtime's full-step tests run: a unit whose text the
// host cannot build would otherwise fail there with a less direct message.
func TestMSLBuildsForHost(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building every unit with g++ takes a minute")
	}
	c, err := mslhost.New(t.TempDir())
	if err != nil {
		t.Skipf("the host build of MSL needs a C++ compiler: %v", err)
	}
	for _, u := range spec.Units {
		t.Run(u.Name, func(t *testing.T) {
			lib, err := c.Compile(unitMSL(t, u.Name))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range u.Kernels {
				if _, err := lib.Function(k.Name); err != nil {
					t.Errorf("kernel %s: %v", k.Name, err)
				}
			}
		})
	}
}
