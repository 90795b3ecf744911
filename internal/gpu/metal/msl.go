package metal

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// The backend vocabulary: units include the backend-neutral unitPrelude; Metal compiles
// metalPrelude in its place, whatever text a source's header map holds under the neutral name
// (gpu.SourceFor maps it to this very file for a Metal device).
const (
	unitPrelude  = driver.PreludeInclude
	metalPrelude = "prelude_metal.h"
)

// preludeInclude matches an include of the units' prelude, keeping what precedes the name.
var preludeInclude = regexp.MustCompile(`(?m)^(\s*#\s*include\s+)"` + regexp.QuoteMeta(unitPrelude) + `"`)

// withMetalPrelude returns src with every include of the units' prelude turned into one of
// prelude_metal.h (on the same line, so line numbers and #line markers stay right and
// compiler messages name the file that is compiled). The prelude's text comes from src's own
// headers when they carry it (a shader directory given at run time), else from the embedded
// shaders. A unit that includes no prelude is returned unchanged.
func withMetalPrelude(src driver.Source) (driver.Source, error) {
	if _, ok := src.Headers[unitPrelude]; !ok {
		return src, nil
	}
	text, ok := src.Headers[metalPrelude]
	if !ok {
		b, err := fs.ReadFile(shaders.Sources(), metalPrelude)
		if err != nil {
			return driver.Source{}, fmt.Errorf("metal: compile %s: %w", src.Name, err)
		}
		text = string(b)
	}
	swap := func(code string) string { return preludeInclude.ReplaceAllString(code, `${1}"`+metalPrelude+`"`) }
	out := src
	out.Code = swap(src.Code)
	out.Headers = make(map[string]string, len(src.Headers))
	for name, h := range src.Headers {
		if name != unitPrelude {
			out.Headers[name] = swap(h)
		}
	}
	out.Headers[metalPrelude] = text
	return out, nil
}

// MSL is the exact text the backend hands to Metal's compiler for src, taken with prelude_metal.h
// in place of the unit's CUDA prelude (withMetalPrelude): a banner naming the unit and the hash
// of that source, `#pragma METAL fp contract(off)` (the CPU engine rounds every product and sum
// on its own, and Metal contracts a*b+c into an FMA even in safe math mode unless told not to), one
// #define per -D option (MTLCompileOptions' macro dictionary is left empty, so that the text
// alone decides the result), then the unit with its headers inlined by driver.Flatten.
//
// Options other than -D have no meaning for Metal and are an error naming them.
func MSL(src driver.Source) (string, error) {
	src, err := withMetalPrelude(src)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// %s for Metal (source %s)\n", src.Name, src.Hash())
	b.WriteString("#pragma METAL fp contract(off)\n")
	for _, o := range src.Options {
		def, ok := strings.CutPrefix(o, "-D")
		if !ok {
			return "", fmt.Errorf("metal: compile %s: option %q: Metal takes only -D options", src.Name, o)
		}
		name, value, hasValue := strings.Cut(def, "=")
		if !isIdent(name) {
			return "", fmt.Errorf("metal: compile %s: option %q: %q is not a macro name", src.Name, o, name)
		}
		if !hasValue {
			value = "1"
		}
		if strings.ContainsAny(value, "\r\n") {
			return "", fmt.Errorf("metal: compile %s: option %q: a macro value cannot span lines", src.Name, o)
		}
		fmt.Fprintf(&b, "#define %s %s\n", name, value)
	}
	flat, err := driver.Flatten(src)
	if err != nil {
		return "", fmt.Errorf("metal: %w", err)
	}
	b.WriteString(flat)
	return b.String(), nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}
