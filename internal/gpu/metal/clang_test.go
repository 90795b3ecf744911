package metal

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi/spec"
	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// The MSL check on Linux: the exact text MSL returns, compiled by clang in OpenCL C++ mode
// against testdata/clang/metal_stdlib, a stand-in for Metal's header that maps device,
// threadgroup, constant and thread onto OpenCL's address spaces, with fp64 switched off so that
// a double is an error. Metal's own compiler (only on a Mac) remains the authority: this
// catches what OpenCL C++ and MSL share.
//
// Unsuffixed floating literals count as errors too (see clangError).
//
// It takes two passes over the same text, because clang's OpenCL C++ needs the generic address
// space for ordinary C++: without it no struct can be passed by value or copied from a const
// object (the implicit copy constructor is not declared), which every body does with Thr.
//   - The full pass, generic address space on: every error counts.
//   - The address-space pass, generic address space off, so that an unqualified pointer or
//     reference is a thread (__private) one as in MSL: only the errors and notes that convert
//     a device, threadgroup or constant address to a thread one count (the copy failures
//     above are about __private objects and do not match).

const clangName = "clang-19"

func clangArgs(generic bool) []string {
	ext := "-cl-ext=-__opencl_c_pipes,-__opencl_c_device_enqueue,-cl_khr_fp64,-__opencl_c_fp64"
	if !generic {
		ext += ",-__opencl_c_generic_address_space"
	}
	return []string{
		"--target=spir64", "-x", "clcpp", "-cl-std=clc++2021", "-fsyntax-only", "-cl-no-stdinc",
		"-Xclang", ext,
		// MSL's [[buffer(i)]] and friends, and `#pragma METAL`, mean nothing to clang.
		"-Wno-unknown-attributes", "-Wno-unknown-pragmas",
		"-fno-color-diagnostics", "-ferror-limit=0",
	}
}

var (
	// Errors, and the warning for an unsuffixed floating literal: where CUDA and the emulator
	// evaluate x*0.5 in double and round once, Metal has no double and evaluates it in float,
	// so the bits could differ from the CPU engine's.
	clangError = regexp.MustCompile(`(?m)^.*: (?:error: .*|warning: double precision constant.*)$`)
	// An address in __global (device, constant) or __local (threadgroup) memory given to a
	// thread (__private) pointer or reference: an initialisation or argument conversion whose
	// target points to __private, a function's reference parameter refused (clang names the two
	// address spaces the other way round), or a reference binding that changes address space.
	// The failures of this pass that are not MSL's (aggregate initialisation, implicit copy
	// constructors: "candidate constructor") convert to other types and do not match.
	clangAddrSpace = regexp.MustCompile(`(?m)^.*: (?:error|note): .*(?:` +
		`of type '(?:const )?__private [^']*\*[^']*' with an [lr]value of type '(?:const )?__(?:global|local) [^']*[*[]` +
		`|from '(?:const )?__(?:global|local) [^']*' to '(?:const )?__private [^']*\*` +
		`|cannot pass pointer to address space '__(?:global|local)' as a pointer to address space '__private'` +
		`|candidate function(?: template)? not viable: cannot bind reference in address space '__(?:global|local)' to object in address space '__private'` +
		`|binding reference of type '(?:const )?__private [^']*' to value of type '(?:const )?__(?:global|local) [^']*' changes address space` +
		`).*$`)
)

// clangMSL checks text (one unit's MSL) in both passes and returns what counts as an error and
// clang's logs; err is set only when clang could not be run.
func clangMSL(t *testing.T, clang, name, text string) (errs []string, log string, err error) {
	t.Helper()
	stdlib, err := filepath.Abs(filepath.Join("testdata", "clang"))
	if err != nil {
		return nil, "", err
	}
	file := filepath.Join(t.TempDir(), name+".metal")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		return nil, "", err
	}
	for _, pass := range []struct {
		generic bool
		match   *regexp.Regexp
		what    string
	}{{true, clangError, "full pass"}, {false, clangAddrSpace, "address-space pass"}} {
		args := append(clangArgs(pass.generic), "-I", stdlib, file)
		out, runErr := exec.Command(clang, args...).CombinedOutput()
		log += "--- " + pass.what + "\n" + string(out)
		var exit *exec.ExitError
		if runErr != nil && !errors.As(runErr, &exit) {
			return nil, log, runErr
		}
		found := pass.match.FindAllString(string(out), -1)
		if pass.generic && runErr != nil && len(found) == 0 {
			found = []string{"clang failed without an error line: " + runErr.Error()}
		}
		for _, f := range found {
			errs = append(errs, pass.what+": "+f)
		}
	}
	return errs, log, nil
}

func needClang(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath(clangName)
	if err != nil {
		t.Skipf("%s not found (Debian package clang-19; .ci/run installs it): the MSL text is not checked here", clangName)
	}
	return p
}

func unitMSL(t *testing.T, unit string) string {
	t.Helper()
	src, err := driver.SourceFromFSFor(shaders.Sources(), unit+".cu", metalPrelude)
	if err != nil {
		t.Fatal(err)
	}
	text, err := MSL(src)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestMSLClang compiles the MSL of every kernel unit; any error fails it.
func TestMSLClang(t *testing.T) {
	clang := needClang(t)
	for _, u := range spec.Units {
		t.Run(u.Name, func(t *testing.T) {
			errs, log, err := clangMSL(t, clang, u.Name, unitMSL(t, u.Name))
			if err != nil {
				t.Fatalf("run %s: %v", clangName, err)
			}
			if len(errs) > 0 {
				t.Errorf("%s.cu: %d errors in its MSL:\n%s\n\nclang's output:\n%s", u.Name, len(errs), strings.Join(errs, "\n"), log)
			}
		})
	}
}

// plantedUnit is a unit written against the CUDA prelude, as the real ones are, so that it
// reaches clang through MSL with prelude_metal.h: one kernel with a threadgroup array and a
// by-value struct, built like a generated wrapper, that calls planted, whose body (after
// `out`, a device pointer) plant fills.
func plantedUnit(t *testing.T, plant string) driver.Source {
	t.Helper()
	prelude, err := fs.ReadFile(shaders.Sources(), metalPrelude)
	if err != nil {
		t.Fatal(err)
	}
	code := `#include "prelude.h"

// A by-value struct and an argument struct, as the generated entry wrappers copy them.
struct PlantedP {
    float R[9];
    i32 W;
};
struct planted_args {
    PlantedP p;
    GPTR float* out;
    u32 n;
};

DEVICE float first(const PlantedP& q) { return q.R[0]; }

DEVICE float planted(Thr th, planted_args a, SPTR float* tg)
{
    GPTR float* out = a.out;
` + plant + `
}

kernel void planted_kernel(device float* out [[buffer(0)]],
    constant u32& n [[buffer(1)]],
    constant PlantedP& p [[buffer(2)]],
    uint rlx_tid [[thread_position_in_threadgroup]],
    uint rlx_lane [[thread_index_in_simdgroup]])
{
    threadgroup float tg[64];
    const Thr th = {rlx_tid, 0u, 64u, 1u, rlx_lane, rlx_tid >> 5};
    const planted_args a = {p, out, n};
    tg[th.tid] = a.p.R[0];
    BARRIER();
    if (th.tid < a.n) out[th.tid] = planted(th, a, tg);
}
`
	return driver.Source{Name: "planted.cu", Code: code, Headers: map[string]string{unitPrelude: string(prelude)}}
}

// TestMSLClangPlanted shows the check failing on what MSL rejects and the CUDA and emulator
// preludes accept: a double, a threadgroup array taken by an unqualified (thread) pointer, and
// a float atomic on threadgroup memory. The clean plant shows that the failures come from the
// plants, not from the unit around them.
func TestMSLClangPlanted(t *testing.T) {
	clang := needClang(t)
	for _, c := range []struct {
		name  string
		plant string
		want  string // in an error the check reports or a note clang attaches to one; "" for none
	}{
		{"clean", `    shared_add_f32(&tg[0], 1.0f);
    return tg[th.tid] + out[0];`, ""},
		{"double", `    double d = (double)out[th.tid];
    return (float)(d * 0.5);`, "use of type 'double'"},
		{"double literal", `    return out[th.tid] * 0.5;`, "double precision constant"},
		{"unqualified threadgroup pointer", `    float* p = tg + th.lane;
    return *p;`, "__local"},
		{"unqualified device pointer", `    float* p = out + th.tid;
    return *p;`, "__global"},
		{"unqualified threadgroup reference", `    float& r = tg[th.lane];
    return r;`, "__local"},
		{"threadgroup struct as a thread reference argument", `    return first(*(SPTR PlantedP*)tg);`,
			"cannot bind reference in address space '__local' to object in address space '__private'"},
		{"threadgroup array as a thread pointer argument", `    return sqrt_rn(*tg) + warp_sum16_spread(th, tg);`,
			"cannot pass pointer to address space '__local' as a pointer to address space '__private'"},
		{"threadgroup float atomic", `    return atomic_fetch_add_explicit((SPTR atomic_float*)&tg[0], 1.0f, memory_order_relaxed);`,
			"no matching function for call to 'atomic_fetch_add_explicit'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, err := MSL(plantedUnit(t, c.plant))
			if err != nil {
				t.Fatal(err)
			}
			errs, log, err := clangMSL(t, clang, "planted", text)
			if err != nil {
				t.Fatalf("run %s: %v", clangName, err)
			}
			if c.want == "" {
				if len(errs) > 0 {
					t.Errorf("clean plant: %d errors:\n%s\n%s", len(errs), strings.Join(errs, "\n"), log)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatalf("the check passed a planted %s:\n%s", c.name, log)
			}
			named := strings.Contains(log, c.want)
			for _, e := range errs {
				named = named || strings.Contains(e, c.want)
			}
			if !named {
				t.Errorf("no error names the planted %s (want %q):\n%s\n%s", c.name, c.want, strings.Join(errs, "\n"), log)
			}
			t.Logf("planted %s: %d errors, first: %s", c.name, len(errs), errs[0])
		})
	}
}
