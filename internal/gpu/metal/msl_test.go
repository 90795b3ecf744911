package metal

import (
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi/spec"
	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// TestMSLPrelude: MSL compiles prelude_metal.h wherever a unit or one of its headers includes
// the backend-neutral prelude, on the same line, and leaves units without it alone.
func TestMSLPrelude(t *testing.T) {
	// What a header map may hold under the neutral name: a CUDA prelude read for another backend.
	const cuda = "#pragma once\n#define RLX_BACKEND_CUDA 1\n"
	for _, c := range []struct {
		name    string
		src     driver.Source
		want    []string // in the text, in this order
		notWant []string
	}{
		{"unit includes it", driver.Source{Name: "u.cu", Code: "// u\n#include \"prelude.h\"\nint x;\n",
			Headers: map[string]string{"prelude.h": cuda}},
			[]string{"#line 1 \"u.cu\"\n// u\n", "#line 1 \"prelude_metal.h\"\n", "#include <metal_stdlib>", "#define RLX_BACKEND_METAL 1",
				"#line 3 \"u.cu\"\nint x;\n"},
			[]string{`"prelude.h"`, "RLX_BACKEND_CUDA"}},
		{"a header includes it", driver.Source{Name: "u.cu", Code: "#include \"h.h\"\nint y;\n",
			Headers: map[string]string{"h.h": "#pragma once\n  #  include \"prelude.h\"\nint x;\n", "prelude.h": cuda}},
			[]string{"#line 1 \"h.h\"\n", "#line 1 \"prelude_metal.h\"\n", "#define RLX_BACKEND_METAL 1", "#line 3 \"h.h\"\nint x;\n", "int y;"},
			[]string{`"prelude.h"`, "RLX_BACKEND_CUDA"}},
		{"the source carries its own Metal prelude", driver.Source{Name: "u.cu", Code: "#include \"prelude.h\"\n",
			Headers: map[string]string{"prelude.h": cuda, "prelude_metal.h": "#define FROM_DIR 1\n"}},
			[]string{"#line 1 \"prelude_metal.h\"\n#define FROM_DIR 1\n"},
			[]string{"metal_stdlib", "RLX_BACKEND_CUDA"}},
		{"no prelude", driver.Source{Name: "k.metal", Code: "kernel void k() {}\n"},
			[]string{"#pragma METAL fp contract(off)\n", "kernel void k() {}"},
			[]string{"prelude_metal.h", "metal_stdlib"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, err := MSL(c.src)
			if err != nil {
				t.Fatal(err)
			}
			rest := text
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("%q missing (or out of order) in:\n%s", w, text)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range c.notWant {
				if strings.Contains(text, n) {
					t.Errorf("%q in:\n%s", n, text)
				}
			}
		})
	}
}

// fastBuiltin matches a call of an MSL math function whose result depends on the math mode
// (fast by default; safe math makes it precise, but nothing should hang on that one option),
// unless it is written precise::NAME.
var fastBuiltin = regexp.MustCompile(`(?:^|[^\w:.])((?:\w+::)*)(sqrt|rsqrt|exp|exp2|exp10|log|log2|log10|pow|powr|sin|cos|tan|sinh|cosh|tanh|asin|acos|atan|atan2|cbrt|hypot|fmod|divide)\s*\(`)

// impreciseCalls lists the calls fastBuiltin finds in text outside prelude_metal.h (which
// defines sqrt_rn with precise::sqrt), as FILE:LINE: NAME, following the #line markers.
func impreciseCalls(text string) []string {
	var out []string
	file, line := "program_source", 0
	for _, l := range strings.Split(text, "\n") {
		line++
		if f := strings.Fields(l); len(f) == 3 && f[0] == "#line" {
			n, _ := strconv.Atoi(f[1])
			file, line = strings.Trim(f[2], `"`), n-1
			continue
		}
		if file == metalPrelude {
			continue
		}
		if i := strings.Index(l, "//"); i >= 0 {
			l = l[:i]
		}
		for _, m := range fastBuiltin.FindAllStringSubmatch(l, -1) {
			if !strings.HasSuffix(m[1], "precise::") {
				out = append(out, fmt.Sprintf("%s:%d: %s", file, line, m[1]+m[2]))
			}
		}
	}
	return out
}

// TestMSLPreciseBuiltins: kernel code reaches transcendental functions through the float32
// twins of internal/fmath (exp32, log32 in common.h) and square roots through sqrt_rn, so that
// the bits are the CPU engine's whatever Metal's math mode; a bare builtin in a wrapped unit
// fails. Units not yet wrapped are listed with what they still call.
func TestMSLPreciseBuiltins(t *testing.T) {
	if got := impreciseCalls("#line 1 \"u.cu\"\nfloat a = sqrt(x) + precise::sqrt(y) + exp32(z);\n// log(x)\nfloat b = metal::exp(x);\n"); !slices.Equal(got, []string{"u.cu:1: sqrt", "u.cu:3: metal::exp"}) {
		t.Errorf("planted calls: found %q, want u.cu:1 sqrt and u.cu:3 metal::exp", got)
	}
	for _, u := range spec.Units {
		calls := impreciseCalls(unitMSL(t, u.Name))
		switch {
		case len(calls) == 0:
		default:
			t.Errorf("%s.cu: math builtins that depend on the math mode: %s", u.Name, strings.Join(calls, ", "))
		}
	}
}

var (
	preludeMacro = regexp.MustCompile(`(?m)^#define\s+(\w+)`)
	preludeFunc  = regexp.MustCompile(`(?m)^DEVICE\s+[\w\s]+?\b(\w+)\s*\(`)
	preludeType  = regexp.MustCompile(`(?m)^(?:typedef\s+.*?\b(\w+)\s*;|struct\s+(\w+)\s*\{)`)
)

// metalOmits are the words of the CUDA prelude that the Metal one leaves out on purpose (see
// prelude_metal.h): thread indices are kernel parameters in MSL (bodies take Thr), MSL has
// no double, and the rasterizers' alpha keeps exp32 on Metal (RLX_HW_EXP: CUDA's hardware
// exponential was measured on CUDA only).
var metalOmits = map[string]bool{
	"RLX_BACKEND_CUDA": true, "TID": true, "BDIM": true, "BID": true, "NBLOCKS": true, "LANE": true, "WARP_ID": true,
	"dmul_rn": true, "bits_f64": true, "RLX_HW_EXP": true, "exp_alpha": true,
}

// preludeWords lists the macros, DEVICE functions and types a prelude defines.
func preludeWords(text string) map[string]bool {
	text = driver.StripComments(text)
	words := map[string]bool{}
	for _, re := range []*regexp.Regexp{preludeMacro, preludeFunc, preludeType} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			for _, w := range m[1:] {
				if w != "" {
					words[w] = true
				}
			}
		}
	}
	return words
}

// TestMetalPreludeVocabulary: every word the CUDA prelude gives kernel bodies, the Metal one
// gives too, but for those it omits on purpose, so a helper added to the CUDA prelude fails
// here until Metal has it.
func TestMetalPreludeVocabulary(t *testing.T) {
	read := func(name string) string {
		b, err := fs.ReadFile(shaders.Sources(), name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cuda, metal := preludeWords(read("prelude_cuda.h")), preludeWords(read(metalPrelude))
	for _, w := range []string{"u32", "Thr", "f4", "GPTR", "BARRIER", "mul_rn", "warp_exscan_u32", "shared_add_f32"} {
		if !cuda[w] {
			t.Fatalf("%s not among the CUDA prelude's words %v", w, cuda)
		}
	}
	if planted := preludeWords(read("prelude_cuda.h") + "\nDEVICE u32 warp_planted(u32 x) { return x; }\n"); !planted["warp_planted"] {
		t.Error("a planted helper is not among the words")
	}
	for w := range cuda {
		switch {
		case metalOmits[w] && metal[w]:
			t.Errorf("%s: listed as omitted on Metal, but %s defines it", w, metalPrelude)
		case !metalOmits[w] && !metal[w]:
			t.Errorf("%s: in %s, missing from %s", w, "prelude_cuda.h", metalPrelude)
		}
	}
	if !metal["RLX_BACKEND_METAL"] {
		t.Errorf("%s does not define RLX_BACKEND_METAL", metalPrelude)
	}
}
