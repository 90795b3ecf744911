package nccl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/ebitengine/purego"
)

// uniqueIDArg is ncclUniqueId as C lays it out (struct { char internal[128]; }), for passing
// by value: purego passes a struct argument by the platform's C rules on linux/amd64 (copied
// onto the stack, as an aggregate over 16 bytes) and linux/arm64 (copied to memory, its
// address in the next integer register), which a [128]byte argument would not get.
type uniqueIDArg struct{ internal [UniqueIDBytes]byte }

// structArgsByValue says whether ncclCommInitRank can be bound here: the architectures whose
// purego struct-argument code was checked against the C ABI for a 128-byte aggregate.
// purego panics at registration on architectures it has no struct support for.
var structArgsByValue = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"

// api is the part of NCCL this package calls. ncclResult_t, ncclDataType_t and ncclRedOp_t
// are C enums (int32); ncclComm_t and cudaStream_t are pointers (uintptr); size_t is uintptr.
type api struct {
	ncclGetVersion     func(version *int32) int32
	ncclGetUniqueId    func(id *UniqueID) int32
	ncclCommInitRank   func(comm *uintptr, nranks int32, id uniqueIDArg, rank int32) int32 // nil where structArgsByValue is false
	ncclCommInitAll    func(comms *uintptr, ndev int32, devlist *int32) int32
	ncclCommDestroy    func(comm uintptr) int32
	ncclCommAbort      func(comm uintptr) int32 // optional (2.4+)
	ncclCommCuDevice   func(comm uintptr, dev *int32) int32
	ncclGetErrorString func(r int32) string
	ncclGetLastError   func(comm uintptr) string // optional (2.13+)
	ncclAllReduce      func(send, recv, count uintptr, dt, op int32, comm, stream uintptr) int32
	ncclBroadcast      func(send, recv, count uintptr, dt, root int32, comm, stream uintptr) int32
	ncclGroupStart     func() int32
	ncclGroupEnd       func() int32
	ncclSend           func(send, count uintptr, dt, peer int32, comm, stream uintptr) int32 // optional (2.7+)
	ncclRecv           func(recv, count uintptr, dt, peer int32, comm, stream uintptr) int32 // optional (2.7+)
}

// symbol is one entry point to bind to a func variable.
type symbol struct {
	fptr     any // pointer to a func variable
	name     string
	optional bool // absent: the variable stays nil
}

func (a *api) symbols() []symbol {
	s := []symbol{
		{fptr: &a.ncclGetVersion, name: "ncclGetVersion"},
		{fptr: &a.ncclGetUniqueId, name: "ncclGetUniqueId"},
		{fptr: &a.ncclCommInitAll, name: "ncclCommInitAll"},
		{fptr: &a.ncclCommDestroy, name: "ncclCommDestroy"},
		{fptr: &a.ncclCommAbort, name: "ncclCommAbort", optional: true},
		{fptr: &a.ncclCommCuDevice, name: "ncclCommCuDevice"},
		{fptr: &a.ncclGetErrorString, name: "ncclGetErrorString"},
		{fptr: &a.ncclGetLastError, name: "ncclGetLastError", optional: true},
		{fptr: &a.ncclAllReduce, name: "ncclAllReduce"},
		{fptr: &a.ncclBroadcast, name: "ncclBroadcast"},
		{fptr: &a.ncclGroupStart, name: "ncclGroupStart"},
		{fptr: &a.ncclGroupEnd, name: "ncclGroupEnd"},
		{fptr: &a.ncclSend, name: "ncclSend", optional: true},
		{fptr: &a.ncclRecv, name: "ncclRecv", optional: true},
	}
	if structArgsByValue {
		s = append(s, symbol{fptr: &a.ncclCommInitRank, name: "ncclCommInitRank"})
	}
	return s
}

// bind resolves every symbol before registering any, because purego.RegisterFunc panics on a
// missing one; the error names the first required entry point the library lacks.
func bind(lib uintptr, libPath string, syms []symbol) error {
	addrs := make([]uintptr, len(syms))
	for i, s := range syms {
		if a, err := purego.Dlsym(lib, s.name); err == nil && a != 0 {
			addrs[i] = a
		} else if !s.optional {
			return fmt.Errorf("nccl: %s has no %s (too old, or not NCCL): %w", libPath, s.name, ErrUnavailable)
		}
	}
	for i, s := range syms {
		if addrs[i] != 0 {
			purego.RegisterFunc(s.fptr, addrs[i])
		}
	}
	return nil
}

// Lib is a loaded NCCL. Its methods are safe for concurrent use; see the package comment for
// which thread each call must be made on.
type Lib struct {
	api     api
	path    string
	version int
}

// Open turns NVLink multicast off for this process (NCCL_NVLS_ENABLE=0 in the process
// environment, unless already set), then loads the first libnccl.so.2 found (through the
// loader's own search path, then $NCCL_HOME/lib, the CUDA toolkit, the distribution's
// directories, and where pip and conda install it; getenv, os.Getenv when nil, supplies the
// variables that say where to look) and binds it. When none loads, the error is a *NotFoundError; every load failure wraps
// ErrUnavailable.
func Open(getenv func(string) string) (*Lib, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	// os.Setenv reaches the C environment that NCCL reads also without cgo: purego's runtime
	// shim forwards it to libc's setenv.
	if err := disableNVLS(os.Getenv, os.Setenv); err != nil {
		return nil, err
	}
	cands := candidates(sysEnv{getenv: getenv, glob: filepath.Glob, goarch: runtime.GOARCH})
	dlopen := func(p string) (uintptr, error) { return purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL) }
	stat := func(p string) error { _, err := os.Stat(p); return err }
	h, path, err := openFirst(cands, dlopen, stat)
	if err != nil {
		return nil, err
	}
	l := &Lib{path: path}
	if err := bind(h, path, l.api.symbols()); err != nil {
		return nil, err
	}
	var v int32
	if err := l.check(l.api.ncclGetVersion(&v), "ncclGetVersion", 0); err != nil {
		return nil, err
	}
	l.version = int(v)
	return l, nil
}

// Path is the library file that was loaded (a bare name when the loader found it).
func (l *Lib) Path() string { return l.path }

// Version is the library's NCCL_VERSION_CODE (render it with VersionString).
func (l *Lib) Version() int { return l.version }

// check turns an ncclResult_t into an *Error with NCCL's text for it; comm (0 if none) is
// asked for the detail of what went wrong.
func (l *Lib) check(r int32, call string, comm uintptr) error {
	if r == int32(Success) {
		return nil
	}
	e := &Error{Call: call, Code: Result(r), Message: l.api.ncclGetErrorString(r)}
	if l.api.ncclGetLastError != nil {
		e.Detail = strings.TrimSpace(l.api.ncclGetLastError(comm))
	}
	return e
}

// Comm is one rank of a communicator, on one device. A Comm is used by one goroutine at a
// time (NCCL's calls are not thread-safe on one communicator).
type Comm struct {
	lib    *Lib
	h      uintptr // ncclComm_t; 0 once closed
	rank   int
	nranks int
	device int
}

// Rank is this communicator's rank, Size the number of ranks, Device its CUDA device ordinal.
func (c *Comm) Rank() int   { return c.rank }
func (c *Comm) Size() int   { return c.nranks }
func (c *Comm) Device() int { return c.device }

// onFreshThread runs fn on a new OS thread that is thrown away afterwards. NCCL's set-up and
// tear-down switch the calling thread's current CUDA device (and restore one, which on a
// thread that had none makes device 0's context current); this keeps that away from the
// threads Go schedules other goroutines on, and from the devices' owner threads.
func onFreshThread(fn func()) {
	done := make(chan struct{})
	go func() {
		// Never unlocked: the goroutine ends locked, so the runtime retires the thread.
		runtime.LockOSThread()
		defer close(done)
		fn()
	}()
	<-done
}

// InitAll makes one communicator over the given devices (ncclCommInitAll): comms[i] is rank
// i, on CUDA device devices[i]. It may be called from any goroutine. The devices must not
// repeat.
func (l *Lib) InitAll(devices []int) ([]*Comm, error) {
	if len(devices) == 0 {
		return nil, errors.New("nccl: InitAll: no devices")
	}
	devlist := make([]int32, len(devices))
	for i, d := range devices {
		if d < 0 {
			return nil, fmt.Errorf("nccl: InitAll: negative device %d", d)
		}
		devlist[i] = int32(d)
	}
	hs := make([]uintptr, len(devices))
	var err error
	onFreshThread(func() {
		err = l.check(l.api.ncclCommInitAll(&hs[0], int32(len(devlist)), &devlist[0]), "ncclCommInitAll", 0)
	})
	if err != nil {
		return nil, fmt.Errorf("%w (devices %v)", err, devices)
	}
	comms := make([]*Comm, len(devices))
	for i, h := range hs {
		comms[i] = &Comm{lib: l, h: h, rank: i, nranks: len(devices), device: devices[i]}
	}
	return comms, nil
}

// UniqueID makes the identifier that every rank passes to InitRank (ncclGetUniqueId). Make
// it once, on one rank, and give the same value to all.
func (l *Lib) UniqueID() (UniqueID, error) {
	var id UniqueID
	err := l.check(l.api.ncclGetUniqueId(&id), "ncclGetUniqueId", 0)
	return id, err
}

// InitRank joins rank of a communicator of nranks ranks identified by id (ncclCommInitRank).
// It runs on the calling OS thread, whose current CUDA context picks the device, so call it
// on the device's owner thread (cuda.Device.RunOnStream), and from one goroutine per rank at
// once: it returns only when every rank has joined.
func (l *Lib) InitRank(nranks int, id UniqueID, rank int) (*Comm, error) {
	if l.api.ncclCommInitRank == nil {
		return nil, fmt.Errorf("nccl: ncclCommInitRank takes its 128-byte id by value, which this package passes only on linux/amd64 and linux/arm64, not %s; use InitAll",
			runtime.GOARCH)
	}
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("nccl: InitRank: rank %d of %d", rank, nranks)
	}
	var h uintptr
	if err := l.check(l.api.ncclCommInitRank(&h, int32(nranks), uniqueIDArg{internal: id}, int32(rank)), "ncclCommInitRank", 0); err != nil {
		return nil, fmt.Errorf("%w (rank %d of %d)", err, rank, nranks)
	}
	var dev int32
	if err := l.check(l.api.ncclCommCuDevice(h, &dev), "ncclCommCuDevice", h); err != nil {
		return nil, err
	}
	return &Comm{lib: l, h: h, rank: rank, nranks: nranks, device: int(dev)}, nil
}

// Group runs fn between ncclGroupStart and ncclGroupEnd on one locked OS thread (NCCL keeps
// its group state per thread), so that the collectives fn issues are launched together:
// those of several ranks issued from one goroutine (without a group that deadlocks), or
// several of one rank fused into one launch. fn must issue its calls itself, not from other
// goroutines. ncclGroupEnd runs even when fn fails, as NCCL requires the pair to balance.
func (l *Lib) Group(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := l.check(l.api.ncclGroupStart(), "ncclGroupStart", 0); err != nil {
		return err
	}
	ferr := fn()
	return errors.Join(ferr, l.check(l.api.ncclGroupEnd(), "ncclGroupEnd", 0))
}

func (c *Comm) live(call string) error {
	if c == nil || c.h == 0 {
		return fmt.Errorf("nccl: %s on a closed communicator", call)
	}
	return nil
}

// AllReduce queues on stream the reduction with op of count elements of type dt from every
// rank's send into every rank's recv (device pointers; in place when equal). It returns once
// queued; the result is there for work queued after it on stream. Call it on the device's
// owner thread with stream the device's own (cuda.Device.RunOnStream), or inside Group.
func (c *Comm) AllReduce(send, recv uintptr, count int, dt DataType, op Op, stream uintptr) error {
	const call = "ncclAllReduce"
	if err := c.live(call); err != nil {
		return err
	}
	if err := checkCount(call, count); err != nil {
		return err
	}
	r := c.lib.api.ncclAllReduce(send, recv, uintptr(count), int32(dt), int32(op), c.h, stream)
	if err := c.lib.check(r, call, c.h); err != nil {
		return fmt.Errorf("%w (%d %s, %s, rank %d of %d)", err, count, dt, op, c.rank, c.nranks)
	}
	return nil
}

// Broadcast queues on stream the copy of count elements of type dt from rank root's send
// into every rank's recv (device pointers; send is read on root only). Threading as for
// AllReduce.
func (c *Comm) Broadcast(send, recv uintptr, count int, dt DataType, root int, stream uintptr) error {
	const call = "ncclBroadcast"
	if err := c.live(call); err != nil {
		return err
	}
	if err := checkCount(call, count); err != nil {
		return err
	}
	r := c.lib.api.ncclBroadcast(send, recv, uintptr(count), int32(dt), int32(root), c.h, stream)
	if err := c.lib.check(r, call, c.h); err != nil {
		return fmt.Errorf("%w (%d %s from rank %d, rank %d of %d)", err, count, dt, root, c.rank, c.nranks)
	}
	return nil
}

// Send queues on stream the sending of count elements of type dt from send (a device pointer)
// to rank peer, whose matching Recv takes them. A rank's sends and receives of one exchange go
// inside one Group, where NCCL pairs them with the peers' and none waits on another (a rank may
// be its own peer there); outside a group a Send does not complete before its Recv is
// issued. Threading as for AllReduce. NCCL 2.7 and later.
func (c *Comm) Send(send uintptr, count int, dt DataType, peer int, stream uintptr) error {
	return c.p2p("ncclSend", c.lib.api.ncclSend, send, count, dt, peer, stream)
}

// Recv queues on stream the receiving of count elements of type dt from rank peer into recv
// (a device pointer), sent by the peer's matching Send. As Send.
func (c *Comm) Recv(recv uintptr, count int, dt DataType, peer int, stream uintptr) error {
	return c.p2p("ncclRecv", c.lib.api.ncclRecv, recv, count, dt, peer, stream)
}

func (c *Comm) p2p(call string, fn func(buf, count uintptr, dt, peer int32, comm, stream uintptr) int32, buf uintptr, count int, dt DataType, peer int, stream uintptr) error {
	if err := c.live(call); err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("nccl: %s: %s is older than NCCL 2.7, which added point-to-point calls: %w", call, c.lib.path, ErrUnavailable)
	}
	if err := checkCount(call, count); err != nil {
		return err
	}
	if peer < 0 || peer >= c.nranks {
		return fmt.Errorf("nccl: %s: peer %d of %d ranks", call, peer, c.nranks)
	}
	if err := c.lib.check(fn(buf, uintptr(count), int32(dt), int32(peer), c.h, stream), call, c.h); err != nil {
		return fmt.Errorf("%w (%d %s, peer %d, rank %d of %d)", err, count, dt, peer, c.rank, c.nranks)
	}
	return nil
}

// Close frees the communicator (ncclCommDestroy) after the work queued on it has finished.
// Close every rank before closing the devices whose streams they used. Idempotent.
func (c *Comm) Close() error {
	if c == nil || c.h == 0 {
		return nil
	}
	var err error
	onFreshThread(func() { err = c.lib.check(c.lib.api.ncclCommDestroy(c.h), "ncclCommDestroy", 0) })
	c.h = 0
	return err
}

// Abort frees the communicator without waiting, cancelling what is queued on it
// (ncclCommAbort): the way out after an error on any rank, where Close could wait forever
// for a peer that will not come. Falls back to Close on a library without ncclCommAbort.
func (c *Comm) Abort() error {
	if c == nil || c.h == 0 {
		return nil
	}
	if c.lib.api.ncclCommAbort == nil {
		return c.Close()
	}
	var err error
	onFreshThread(func() { err = c.lib.check(c.lib.api.ncclCommAbort(c.h), "ncclCommAbort", 0) })
	c.h = 0
	return err
}
