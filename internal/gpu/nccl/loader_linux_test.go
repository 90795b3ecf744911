package nccl

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// These run on any Linux machine: libc stands in for NCCL where only the loader is tested.

func openLibc(t *testing.T) uintptr {
	t.Helper()
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Skip("no libc.so.6 to test the loader with: " + err.Error())
	}
	return h
}

func TestBind(t *testing.T) {
	libc := openLibc(t)
	var abs, missingOpt func(int32) int32
	if err := bind(libc, "libc.so.6", []symbol{
		{fptr: &abs, name: "abs"},
		{fptr: &missingOpt, name: "ncclRlxNoSuchCall", optional: true},
	}); err != nil {
		t.Fatal(err)
	}
	if abs(-7) != 7 {
		t.Fatal("bound function does not work")
	}
	if missingOpt != nil {
		t.Fatal("an optional symbol that is missing was bound")
	}

	var first, missing func(int32) int32
	err := bind(libc, "libc.so.6", []symbol{{fptr: &first, name: "abs"}, {fptr: &missing, name: "ncclRlxNoSuchCall"}})
	if err == nil || !strings.Contains(err.Error(), "ncclRlxNoSuchCall") || !strings.Contains(err.Error(), "libc.so.6") ||
		!errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want one naming the symbol and the library, wrapping ErrUnavailable", err)
	}
	if first != nil {
		t.Fatal("a symbol was registered although a required one is missing")
	}
}

// The binding table must register without panicking: purego checks each function type (the
// by-value struct of ncclCommInitRank included) when it registers it. libc's abs stands in
// for every entry point; nothing is called.
func TestSymbolTypesRegister(t *testing.T) {
	libc := openLibc(t)
	absAddr, err := purego.Dlsym(libc, "abs")
	if err != nil {
		t.Fatal(err)
	}
	var a api
	for _, s := range a.symbols() {
		purego.RegisterFunc(s.fptr, absAddr)
	}
	if structArgsByValue && a.ncclCommInitRank == nil {
		t.Fatal("ncclCommInitRank not in the table on an architecture that can pass it")
	}
}

func TestUniqueIDLayout(t *testing.T) {
	if unsafe.Sizeof(uniqueIDArg{}) != 128 || unsafe.Sizeof(UniqueID{}) != 128 || unsafe.Alignof(uniqueIDArg{}) != 1 {
		t.Fatalf("ncclUniqueId is 128 chars; got size %d align %d", unsafe.Sizeof(uniqueIDArg{}), unsafe.Alignof(uniqueIDArg{}))
	}
}

// Open's NVLS switch relies on os.Setenv reaching the C environment NCCL reads with getenv,
// also in CGO_ENABLED=0 builds. A variable of this test's own stands in for it.
func TestSetenvReachesLibc(t *testing.T) {
	libc := openLibc(t)
	var getenv func(name string) *byte
	addr, err := purego.Dlsym(libc, "getenv")
	if err != nil {
		t.Fatal(err)
	}
	purego.RegisterFunc(&getenv, addr)
	const name, value = "RLXSPLAT_NCCL_ENV_PROBE", "probe-7"
	t.Setenv(name, value)
	p := getenv(name + "\x00")
	if p == nil {
		t.Fatal("libc's getenv does not see a variable set with os.Setenv")
	}
	if got := unsafe.String(p, len(value)); got != value || *(*byte)(unsafe.Add(unsafe.Pointer(p), len(value))) != 0 {
		t.Fatalf("libc's getenv(%s) = %q, want %q", name, got, value)
	}
}

// openFirst tells an absent bare name from a broken one by glibc's words; pin them.
func TestDlopenAbsentMessage(t *testing.T) {
	const name = "librlxsplat-absent.so.9"
	_, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err == nil {
		t.Fatalf("%s loaded", name)
	}
	if !strings.Contains(err.Error(), name+absentSuffix) {
		t.Fatalf("dlerror %q lacks %q", err, name+absentSuffix)
	}
}

// Where NCCL is not installed (CI, development machines), Open must fail with the not-found
// error, not panic.
func TestOpenAbsent(t *testing.T) {
	t.Setenv(nvlsVar, "0") // restored afterwards: Open would otherwise set it for the process
	empty := t.TempDir()
	lib, err := Open(func(k string) string {
		if k == "HOME" || k == "NCCL_HOME" {
			return empty
		}
		return ""
	})
	if err == nil {
		t.Skipf("NCCL %s is installed here (%s)", VersionString(lib.Version()), lib.Path())
	}
	var nf *NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want a *NotFoundError wrapping ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), empty+"/lib/libnccl.so.2") {
		t.Fatalf("message does not list NCCL_HOME's lib:\n%v", err)
	}
}
