package cuda

import (
	"bytes"
	"errors"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// RunOnStream must hand fn the device's own stream and context, in order with the work
// queued before and after it: a memset posted before, one queued by fn on the stream it is
// given, and a download after must see each other's effects in that order.
func TestRunOnStream(t *testing.T) {
	d := openTest(t, driver.Options{CacheDir: "off"})
	lib, used, err := openFirst(driverCandidates())
	if err != nil {
		t.Fatal(err)
	}
	var ctxGetCurrent func(ctx *uintptr) int32
	if err := bind(lib, used, []symbol{sym(&ctxGetCurrent, "cuCtxGetCurrent")}); err != nil {
		t.Fatal(err)
	}

	const n = 4096
	buf, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Memset(buf, 0, n, 0x11); err != nil { // posted, not waited for
		t.Fatal(err)
	}
	var gotStream uintptr
	err = d.RunOnStream(func(stream uintptr, ptr func(driver.Buffer) (uint64, error)) error {
		gotStream = stream
		var cur uintptr
		if r := ctxGetCurrent(&cur); r != cudaSuccess || cur != d.ctx {
			t.Errorf("current context %#x (result %d), want the device's %#x", cur, r, d.ctx)
		}
		p, err := ptr(buf)
		if err != nil {
			return err
		}
		if p == 0 {
			t.Error("ptr returned 0 for a non-empty buffer")
		}
		// The upper half only, so that the download shows the posted memset ran first.
		return d.check(d.api.cuMemsetD8Async(p+n/2, 0x22, n/2, stream), "cuMemsetD8Async", "in RunOnStream")
	})
	if err != nil {
		t.Fatal(err)
	}
	if gotStream == 0 || gotStream != d.stream {
		t.Fatalf("stream %#x, want the device's %#x", gotStream, d.stream)
	}
	got := make([]byte, n)
	if err := d.Download(got, buf, 0); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Repeat([]byte{0x11}, n/2), bytes.Repeat([]byte{0x22}, n/2)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("buffer after RunOnStream: first bytes %x, middle %x; want 11.. then 22..", got[:4], got[n/2:n/2+4])
	}
}

func TestRunOnStreamErrors(t *testing.T) {
	d := openTest(t, driver.Options{CacheDir: "off"})
	other := openTest(t, driver.Options{CacheDir: "off"})
	foreign, err := other.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := d.Alloc(0)
	if err != nil {
		t.Fatal(err)
	}
	sentinel := errors.New("from fn")
	err = d.RunOnStream(func(_ uintptr, ptr func(driver.Buffer) (uint64, error)) error {
		if _, err := ptr(foreign); !errors.Is(err, driver.ErrForeignHandle) {
			t.Errorf("ptr(another device's buffer) = %v, want ErrForeignHandle", err)
		}
		if p, err := ptr(empty); p != 0 || err != nil {
			t.Errorf("ptr(zero-length buffer) = %#x, %v; want 0, nil", p, err)
		}
		return sentinel
	})
	if !errors.Is(err, sentinel) {
		t.Fatalf("RunOnStream returned %v, want fn's error", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	ran := false
	err = d.RunOnStream(func(uintptr, func(driver.Buffer) (uint64, error)) error { ran = true; return nil })
	if ran || !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("after Close: ran %v, err %v; want not run, ErrClosed", ran, err)
	}
}
