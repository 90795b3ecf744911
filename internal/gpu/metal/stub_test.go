//go:build !darwin

package metal

import (
	"errors"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

func TestOpenOffDarwin(t *testing.T) {
	d, err := Open(driver.Options{})
	if d != nil || !errors.Is(err, driver.ErrNoDevice) {
		t.Fatalf("Open = %v, %v; want nil and ErrNoDevice", d, err)
	}
}
