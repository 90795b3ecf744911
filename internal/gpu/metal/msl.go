package metal

import (
	"fmt"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// MSL is the exact text the backend hands to Metal's compiler for src: a banner naming the
// unit, `#pragma METAL fp contract(off)` (the CPU engine rounds every product and sum on its
// own, and Metal contracts a*b+c into an FMA even in safe math mode unless told not to), one
// #define per -D option (MTLCompileOptions' macro dictionary is left empty, so that the text
// alone decides the result), then the unit with its headers inlined by driver.Flatten.
//
// Options other than -D have no meaning for Metal and are an error naming them.
func MSL(src driver.Source) (string, error) {
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
