package nccl_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/cuda"
	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/gpu/nccl"
)

// Tests below need a CUDA device and libnccl.so.2; they skip, naming what is missing, where
// either is absent, and the multi-GPU ones skip on a one-GPU machine. Build with
// `CGO_ENABLED=0 go test -c -o /tmp/nccl.test ./internal/gpu/nccl` and run the binary on the
// GPU machine with -test.timeout set: a collective whose ranks do not all arrive hangs rather
// than fails.

// count is odd and not a multiple of any block size, so that a tail is exercised.
const count = 1<<20 + 3

func openNCCL(t *testing.T) *nccl.Lib {
	t.Helper()
	lib, err := nccl.Open(os.Getenv)
	if err != nil {
		if errors.Is(err, nccl.ErrUnavailable) {
			t.Skip("no NCCL: " + err.Error())
		}
		t.Fatal(err)
	}
	if v := os.Getenv("NCCL_NVLS_ENABLE"); v != "0" {
		t.Logf("NCCL_NVLS_ENABLE=%q was set before Open and is kept", v)
	}
	t.Logf("NCCL %s from %s", nccl.VersionString(lib.Version()), lib.Path())
	return lib
}

// openDevices opens every CUDA device (at most max, 0 for all); none skips the test. The
// devices close when the test ends, after the communicators registered later.
func openDevices(t *testing.T, max int) []*cuda.Device {
	t.Helper()
	var devs []*cuda.Device
	for ord := 0; max == 0 || ord < max; ord++ {
		d, err := cuda.Open(driver.Options{Ordinal: ord, CacheDir: "off", NoCompiler: true})
		if err != nil {
			if errors.Is(err, driver.ErrNoDevice) {
				if ord == 0 {
					t.Skip("no CUDA device: " + err.Error())
				}
				break
			}
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Errorf("device %d: Close: %v", ord, err)
			}
		})
		devs = append(devs, d)
	}
	return devs
}

func closeComms(t *testing.T, comms []*nccl.Comm) {
	t.Cleanup(func() {
		for _, c := range comms {
			if err := c.Close(); err != nil {
				t.Errorf("rank %d: Close: %v", c.Rank(), err)
			}
		}
	})
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func upload(t *testing.T, d *cuda.Device, v []float32) driver.Buffer {
	t.Helper()
	b, err := d.Alloc(4 * len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(b, 0, f32Bytes(v)); err != nil {
		t.Fatal(err)
	}
	return b
}

func download(t *testing.T, d *cuda.Device, b driver.Buffer) []float32 {
	t.Helper()
	raw := make([]byte, b.Size())
	if err := d.Download(raw, b, 0); err != nil {
		t.Fatal(err)
	}
	v := make([]float32, len(raw)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return v
}

// checkValues compares exactly: every value in these tests is a small multiple of 1/4, so
// sums of a few of them are exact in float32 in any order.
func checkValues(t *testing.T, what string, got []float32, want func(i int) float32) {
	t.Helper()
	bad := 0
	for i, g := range got {
		if w := want(i); g != w {
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v", what, i, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values wrong", what, bad, len(got))
	}
}

// rankValue is what rank r puts at index i before an all-reduce.
func rankValue(r, i int) float32 { return float32(r+1) + float32(i%97)*0.25 - 3 }

// onStream runs fn on d's owner thread with device pointers for bufs.
func onStream(d *cuda.Device, bufs []driver.Buffer, fn func(stream uintptr, p []uintptr) error) error {
	return d.RunOnStream(func(stream uintptr, ptr func(driver.Buffer) (uint64, error)) error {
		ps := make([]uintptr, len(bufs))
		for i, b := range bufs {
			a, err := ptr(b)
			if err != nil {
				return err
			}
			ps[i] = uintptr(a)
		}
		return fn(stream, ps)
	})
}

// eachRank runs fn for every rank at once, as the ranks of a collective must be issued.
func eachRank(n int, fn func(r int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(r); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// oneRank opens NCCL, device 0 and a one-rank communicator on it, closed when the test ends.
func oneRank(t *testing.T) (*nccl.Lib, *cuda.Device, *nccl.Comm) {
	t.Helper()
	lib := openNCCL(t)
	d := openDevices(t, 1)[0]
	comms, err := lib.InitAll([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	closeComms(t, comms)
	return lib, d, comms[0]
}

func TestOneGPU(t *testing.T) {
	_, d, c := oneRank(t)
	if c.Rank() != 0 || c.Size() != 1 || c.Device() != 0 {
		t.Fatalf("rank %d of %d on device %d, want 0 of 1 on 0", c.Rank(), c.Size(), c.Device())
	}
	x := make([]float32, count)
	for i := range x {
		x[i] = rankValue(0, i)
	}
	inPlace, outMax, bcast := upload(t, d, x), upload(t, d, make([]float32, count)), upload(t, d, make([]float32, count))
	err := onStream(d, []driver.Buffer{inPlace, outMax, bcast}, func(s uintptr, p []uintptr) error {
		return errors.Join(
			c.AllReduce(p[0], p[0], count, nccl.Float32, nccl.Sum, s),
			c.AllReduce(p[0], p[1], count, nccl.Float32, nccl.Max, s),
			c.Broadcast(p[0], p[2], count, nccl.Float32, 0, s))
	})
	if err != nil {
		t.Fatal(err)
	}
	// One rank: the sum and the max of one value are that value.
	same := func(i int) float32 { return x[i] }
	checkValues(t, "in-place sum", download(t, d, inPlace), same)
	checkValues(t, "max into another buffer", download(t, d, outMax), same)
	checkValues(t, "broadcast", download(t, d, bcast), same)

	// NCCL's own rejection comes back as an *Error naming the call and the code.
	err = onStream(d, []driver.Buffer{inPlace}, func(s uintptr, p []uintptr) error {
		return c.AllReduce(p[0], p[0], count, nccl.DataType(99), nccl.Sum, s)
	})
	var ne *nccl.Error
	if !errors.As(err, &ne) || ne.Call != "ncclAllReduce" || ne.Code != nccl.InvalidArgument || ne.Message == "" {
		t.Fatalf("an all-reduce of an unknown type returned %v, want an *Error for ncclAllReduce, ncclInvalidArgument", err)
	}
	t.Logf("rejected as expected: %v", err)
}

// InitRank receives its 128-byte id by value: a wrongly passed id would not reach the
// bootstrap root that UniqueID started, so a working communicator shows the ABI is right.
func TestInitRankOneGPU(t *testing.T) {
	lib := openNCCL(t)
	d := openDevices(t, 1)[0]
	id, err := lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if id == (nccl.UniqueID{}) {
		t.Fatal("ncclGetUniqueId returned an all-zero id")
	}
	x := make([]float32, count)
	for i := range x {
		x[i] = rankValue(0, i)
	}
	buf := upload(t, d, x)
	var c *nccl.Comm
	err = onStream(d, []driver.Buffer{buf}, func(s uintptr, p []uintptr) error {
		var err error
		if c, err = lib.InitRank(1, id, 0); err != nil {
			return err
		}
		return c.AllReduce(p[0], p[0], count, nccl.Float32, nccl.Sum, s)
	})
	if c != nil {
		closeComms(t, []*nccl.Comm{c})
	}
	if err != nil {
		t.Fatal(err)
	}
	if c.Device() != 0 || c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("rank %d of %d on device %d, want 0 of 1 on 0", c.Rank(), c.Size(), c.Device())
	}
	checkValues(t, "sum", download(t, d, buf), func(i int) float32 { return x[i] })
}

// A rank's sends and receives in one group, itself its peer: the point-to-point path an
// all-to-all exchange takes on one GPU, and the argument order of ncclSend and ncclRecv (a
// count or a peer in the wrong place would move the wrong bytes or be refused).
func TestSendRecvOneGPU(t *testing.T) {
	lib, d, c := oneRank(t)
	x := make([]float32, count)
	for i := range x {
		x[i] = rankValue(0, i)
	}
	src, dst := upload(t, d, x), upload(t, d, make([]float32, count))
	const head = 1000 // a second pair moves the source's first elements to the far end
	err := onStream(d, []driver.Buffer{src, dst}, func(s uintptr, p []uintptr) error {
		return lib.Group(func() error {
			return errors.Join(
				c.Send(p[0]+4*head, count-head, nccl.Float32, 0, s),
				c.Recv(p[1], count-head, nccl.Float32, 0, s),
				c.Send(p[0], head, nccl.Float32, 0, s),
				c.Recv(p[1]+4*(count-head), head, nccl.Float32, 0, s))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	checkValues(t, "received", download(t, d, dst), func(i int) float32 { return x[(i+head)%count] })
	err = onStream(d, []driver.Buffer{src}, func(s uintptr, p []uintptr) error {
		return c.Send(p[0], 1, nccl.Float32, 1, s)
	})
	if err == nil {
		t.Fatal("a send to rank 1 of a one-rank communicator: no error")
	}
}

// multi opens every device, skipping below two.
func multi(t *testing.T) []*cuda.Device {
	t.Helper()
	devs := openDevices(t, 0)
	if len(devs) < 2 {
		t.Skipf("needs 2 or more GPUs for a cross-device all-reduce, this machine has %d", len(devs))
	}
	return devs
}

// perRank uploads rankValue into a buffer on every device.
func perRank(t *testing.T, devs []*cuda.Device) []driver.Buffer {
	bufs := make([]driver.Buffer, len(devs))
	for r, d := range devs {
		x := make([]float32, count)
		for i := range x {
			x[i] = rankValue(r, i)
		}
		bufs[r] = upload(t, d, x)
	}
	return bufs
}

func wantSum(n int) func(i int) float32 {
	return func(i int) float32 {
		var s float32
		for r := range n {
			s += rankValue(r, i)
		}
		return s
	}
}

// The trainer's path: one goroutine per device, each queuing its rank's all-reduce on its
// device's stream from the device's owner thread, all at once.
func TestAllGPUsPerDeviceThread(t *testing.T) {
	lib := openNCCL(t)
	devs := multi(t)
	n := len(devs)
	comms := initAll(t, lib, n)
	sums := perRank(t, devs)
	maxes := make([]driver.Buffer, n)
	bcast := make([]driver.Buffer, n)
	for r, d := range devs {
		maxes[r] = upload(t, d, make([]float32, count))
		x := make([]float32, count)
		for i := range x {
			x[i] = float32(-r - 1) // overwritten by the root's values everywhere
		}
		bcast[r] = upload(t, d, x)
	}
	root := n - 1
	err := eachRank(n, func(r int) error {
		c := comms[r]
		if c.Rank() != r || c.Size() != n || c.Device() != r {
			return fmt.Errorf("rank %d of %d on device %d", c.Rank(), c.Size(), c.Device())
		}
		return onStream(devs[r], []driver.Buffer{sums[r], maxes[r], bcast[r]}, func(s uintptr, p []uintptr) error {
			// The max reads the inputs before the in-place sum overwrites them.
			if err := c.AllReduce(p[0], p[1], count, nccl.Float32, nccl.Max, s); err != nil {
				return err
			}
			if err := c.AllReduce(p[0], p[0], count, nccl.Float32, nccl.Sum, s); err != nil {
				return err
			}
			return c.Broadcast(p[2], p[2], count, nccl.Float32, root, s)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for r, d := range devs {
		checkValues(t, fmt.Sprintf("rank %d sum", r), download(t, d, sums[r]), wantSum(n))
		checkValues(t, fmt.Sprintf("rank %d max", r), download(t, d, maxes[r]), func(i int) float32 { return rankValue(n-1, i) })
		checkValues(t, fmt.Sprintf("rank %d broadcast", r), download(t, d, bcast[r]), func(int) float32 { return float32(-root - 1) })
	}
}

// The other supported path: every rank's call from one goroutine, inside one group.
func TestAllGPUsOneGroup(t *testing.T) {
	lib := openNCCL(t)
	devs := multi(t)
	n := len(devs)
	comms := initAll(t, lib, n)
	bufs := perRank(t, devs)
	// Each device's stream and pointer, taken on its owner thread, which also waits until the
	// uploads queued before have reached the stream.
	streams := make([]uintptr, n)
	ptrs := make([]uintptr, n)
	for r, d := range devs {
		if err := onStream(d, bufs[r:r+1], func(s uintptr, p []uintptr) error {
			streams[r], ptrs[r] = s, p[0]
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	err := lib.Group(func() error {
		for r, c := range comms {
			if err := c.AllReduce(ptrs[r], ptrs[r], count, nccl.Float32, nccl.Sum, streams[r]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for r, d := range devs {
		checkValues(t, fmt.Sprintf("rank %d sum", r), download(t, d, bufs[r]), wantSum(n))
	}
}

// InitRank from every device's owner thread at once, with one id: the multi-threaded way to
// make a communicator, and a second check of the by-value id.
func TestAllGPUsInitRank(t *testing.T) {
	lib := openNCCL(t)
	devs := multi(t)
	n := len(devs)
	id, err := lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	bufs := perRank(t, devs)
	comms := make([]*nccl.Comm, n)
	err = eachRank(n, func(r int) error {
		return onStream(devs[r], bufs[r:r+1], func(s uintptr, p []uintptr) error {
			c, err := lib.InitRank(n, id, r)
			if err != nil {
				return err
			}
			comms[r] = c
			if c.Device() != r {
				return fmt.Errorf("communicator on device %d, want %d", c.Device(), r)
			}
			return c.AllReduce(p[0], p[0], count, nccl.Float32, nccl.Sum, s)
		})
	})
	var made []*nccl.Comm
	for _, c := range comms {
		if c != nil {
			made = append(made, c)
		}
	}
	closeComms(t, made)
	if err != nil {
		t.Fatal(err)
	}
	for r, d := range devs {
		checkValues(t, fmt.Sprintf("rank %d sum", r), download(t, d, bufs[r]), wantSum(n))
	}
}

// initAll makes communicators for devices 0..n-1 (closed when the test ends).
func initAll(t *testing.T, lib *nccl.Lib, n int) []*nccl.Comm {
	t.Helper()
	ords := make([]int, n)
	for i := range ords {
		ords[i] = i
	}
	comms, err := lib.InitAll(ords)
	if err != nil {
		t.Fatal(err)
	}
	closeComms(t, comms)
	return comms
}
