package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi/spec"
)

var cScalar = map[string]string{spec.U16: "u16", spec.U32: "u32", spec.I32: "i32", spec.F32: "float", spec.U64: "u64"}

func cType(t string) string {
	if c, ok := cScalar[t]; ok {
		return c
	}
	return t
}

// abiHeader is shaders/abi.h.
func (d *decl) abiHeader() []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("// %s\n//\n", header)
	p("// abi.h — the kernels' side of the host–kernel interface: the layout constants the host also\n")
	p("// uses (internal/fused/abi, same names in CamelCase) and the structs passed by value, with\n")
	p("// their sizes asserted against the layout the host writes. Include after the\n")
	p("// prelude.\n#pragma once\n\n")
	for _, c := range spec.Consts {
		u := ""
		if c.Unsigned {
			u = "u"
		}
		p("// %s\n#define %s %d%s\n", c.Doc, c.C, c.Value, u)
	}
	for _, name := range d.order {
		l := d.structs[name]
		p("\n// %s: %s.\nstruct %s {\n", name, l.s.Doc, name)
		for _, f := range l.s.Fields {
			arr := ""
			if f.Len > 0 {
				arr = fmt.Sprintf("[%d]", f.Len)
			}
			p("    %s %s%s;\n", cType(f.Type), f.Name, arr)
		}
		p("};\n")
		p("static_assert(sizeof(%s) == %d, \"struct %s: %d bytes on the host\");\n", name, l.size, name, l.size)
		// Offsets are not asserted: NVRTC rejects __builtin_offsetof in constant expressions. With
		// every member at its natural alignment, the size check catches a wrong member type.
	}
	d.metalCopies(p)
	return b.Bytes()
}

// metalCopies writes, for the Metal backend, rlx_copy overloads that copy each struct out of
// the constant address space member by member. The entry wrappers receive by-value structs
// as constant references and copy them into the thread's argument struct; an implicit copy
// constructor across address spaces is a language extension that OpenCL C++ (the Linux
// check of the MSL text) lacks, whereas scalar member copies are plain C++ in both.
func (d *decl) metalCopies(p func(string, ...any)) {
	p("\n#if defined(%s)\n", macroMetal)
	p("// rlx_copy(s) is s copied out of the constant address space, member by member.\n")
	for _, name := range d.order {
		l := d.structs[name]
		p("DEVICE %s rlx_copy(constant %s& s)\n{\n    %s r;\n", name, name, name)
		for _, f := range l.s.Fields {
			v := "s." + f.Name
			if f.Len > 0 {
				v += "[i]"
			}
			if scalarSize(f.Type) == 0 {
				v = "rlx_copy(" + v + ")"
			}
			if f.Len > 0 {
				p("    for (int i = 0; i < %d; i++) r.%s[i] = %s;\n", f.Len, f.Name, v)
			} else {
				p("    r.%s = %s;\n", f.Name, v)
			}
		}
		p("    return r;\n}\n")
	}
	p("#endif\n")
}

// Backend macros: each prelude defines one.
const (
	macroCUDA  = "RLX_BACKEND_CUDA"
	macroMetal = "RLX_BACKEND_METAL"
	macroEmu   = "RLX_BACKEND_EMU"
)

// entries is shaders/entries/UNIT.h: the argument structs, the bodies' prototypes and each
// backend's entry wrapper.
func (d *decl) entries(u spec.Unit) []byte {
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("// %s\n//\n", header)
	p("// The entry points of %s.cu. Each backend's wrapper (picked by the prelude's backend macro)\n", u.Name)
	p("// builds the thread's Thr and the argument struct, declares the block-shared variables and\n")
	p("// calls NAME_body, which the unit defines. Include after the prelude, abi.h and the headers\n")
	p("// declaring the shared variables' types, before the bodies.\n")
	p("#pragma once\n")
	done := map[string]bool{}
	for _, k := range u.Kernels {
		an := argsName(k)
		if done[an] {
			continue
		}
		done[an] = true
		p("\nstruct %s_args {\n", an)
		for _, q := range k.Params {
			p("    %s %s;\n", cArgType(q), q.Name)
		}
		p("};\n")
	}
	p("\n")
	for _, k := range u.Kernels {
		p("DEVICE void %s_body(%s);\n", k.Name, bodyParams(k))
	}
	// The declared sizes of the shared C types, which the budgets are computed from.
	asserted := map[string]bool{}
	for _, k := range u.Kernels {
		for _, s := range k.Shared {
			if scalarSize(s.Type) > 0 || asserted[s.Type] {
				continue
			}
			if len(asserted) == 0 {
				p("\n")
			}
			asserted[s.Type] = true
			n := d.shared[s.Type]
			p("static_assert(sizeof(%s) == %d, \"entries/%s.h: shared %s is declared as %d bytes\");\n", s.Type, n, u.Name, s.Type, n)
		}
	}

	p("\n#if defined(%s)\n", macroCUDA)
	for _, k := range u.Kernels {
		bounds := ""
		if k.MaxThreads > 0 {
			bounds = fmt.Sprintf("__launch_bounds__(%d, %d) ", k.MaxThreads, k.MinBlocks)
		}
		var ps []string
		for _, q := range k.Params {
			ps = append(ps, cArgType(q)+" "+q.Name)
		}
		p("\nextern \"C\" __global__ void %s%s(%s)\n{\n", bounds, k.Name, strings.Join(ps, ", "))
		for _, s := range k.Shared {
			p("    __shared__ %s;\n", sharedDecl(s))
		}
		p("    const Thr th = {threadIdx.x, blockIdx.x, blockDim.x, gridDim.x, threadIdx.x & 31u, threadIdx.x >> 5};\n")
		p("    const %s_args a = {%s};\n", argsName(k), paramNames(k, ""))
		p("    %s_body(%s);\n}\n", k.Name, bodyArgs(k))
	}

	p("\n#elif defined(%s)\n", macroMetal)
	for _, k := range u.Kernels {
		var ps []string
		for i, q := range k.Params {
			var t string
			switch q.Kind {
			case spec.ByValue, spec.Scalar:
				t = "constant " + cType(q.Type) + "&"
			case spec.In:
				t = "device const " + cType(q.Type) + "*"
			case spec.Out:
				t = "device " + cType(q.Type) + "*"
			}
			ps = append(ps, fmt.Sprintf("%s %s [[buffer(%d)]]", t, q.Name, i))
		}
		ps = append(ps, "uint rlx_tid [[thread_position_in_threadgroup]]", "uint rlx_bid [[threadgroup_position_in_grid]]",
			"uint rlx_bdim [[threads_per_threadgroup]]", "uint rlx_nblocks [[threadgroups_per_grid]]",
			"uint rlx_lane [[thread_index_in_simdgroup]]", "uint rlx_warp [[simdgroup_index_in_threadgroup]]")
		attr := ""
		if k.MaxThreads > 0 {
			attr = fmt.Sprintf("[[max_total_threads_per_threadgroup(%d)]] ", k.MaxThreads)
		}
		p("\n%skernel void %s(%s)\n{\n", attr, k.Name, strings.Join(ps, ",\n    "))
		for _, s := range k.Shared {
			p("    SHARED %s;\n", sharedDecl(s))
		}
		p("    const Thr th = {rlx_tid, rlx_bid, rlx_bdim, rlx_nblocks, rlx_lane, rlx_warp};\n")
		p("    const %s_args a = {%s};\n", argsName(k), d.metalArgs(k))
		p("    %s_body(%s);\n}\n", k.Name, bodyArgs(k))
	}

	p("\n#elif defined(%s)\n", macroEmu)
	for _, k := range u.Kernels {
		p("\nextern \"C\" void emu_launch_%s(const u32* dims, void** args)\n{\n", k.Name)
		var vals []string
		for i, q := range k.Params {
			vals = append(vals, fmt.Sprintf("*(%s const*)args[%d]", cArgType(q), i))
		}
		p("    const %s_args a = {%s};\n", argsName(k), strings.Join(vals, ", "))
		p("    emu::launch_body(dims, [&](Thr th) {\n")
		for _, s := range k.Shared {
			p("        static %s;\n", sharedDecl(s))
		}
		p("        %s_body(%s);\n    });\n}\n", k.Name, bodyArgs(k))
	}
	p("\n#else\n#error \"entries/%s.h: no backend macro; include a prelude first\"\n#endif\n", u.Name)
	return b.Bytes()
}

// cArgType is a parameter's type as the argument struct holds it.
func cArgType(q spec.Param) string {
	switch q.Kind {
	case spec.In:
		return "const GPTR " + cType(q.Type) + "*"
	case spec.Out:
		return "GPTR " + cType(q.Type) + "*"
	}
	return cType(q.Type)
}

// bodyParams is NAME_body's parameter list. Thr and the arguments go by value: the body is
// inlined, and values need no address-space word on Metal.
func bodyParams(k spec.Kernel) string {
	ps := []string{"Thr th", argsName(k) + "_args a"}
	for _, s := range k.Shared {
		if s.Len > 0 {
			ps = append(ps, "SPTR "+cType(s.Type)+"* "+s.Name)
		} else {
			ps = append(ps, "SPTR "+cType(s.Type)+"& "+s.Name)
		}
	}
	return strings.Join(ps, ", ")
}

// sharedDecl declares a block-shared variable (without its address-space word).
func sharedDecl(s spec.Shared) string {
	if s.Len > 0 {
		return fmt.Sprintf("%s %s[%d]", cType(s.Type), s.Name, s.Len)
	}
	return cType(s.Type) + " " + s.Name
}

func bodyArgs(k spec.Kernel) string {
	as := []string{"th", "a"}
	for _, s := range k.Shared {
		as = append(as, s.Name)
	}
	return strings.Join(as, ", ")
}

func paramNames(k spec.Kernel, prefix string) string {
	var ns []string
	for _, q := range k.Params {
		ns = append(ns, prefix+q.Name)
	}
	return strings.Join(ns, ", ")
}

// metalArgs initialises the argument struct in a Metal wrapper: by-value structs through
// rlx_copy (abi.h), all else as it comes.
func (d *decl) metalArgs(k spec.Kernel) string {
	var vs []string
	for _, q := range k.Params {
		if q.Kind == spec.ByValue {
			vs = append(vs, "rlx_copy("+q.Name+")")
		} else {
			vs = append(vs, q.Name)
		}
	}
	return strings.Join(vs, ", ")
}
