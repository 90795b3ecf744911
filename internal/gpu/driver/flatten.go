package driver

import (
	"fmt"
	"strconv"
	"strings"
)

// Flatten returns src as one text with every `#include "name"` replaced by that header's text
// from src.Headers, for compilers that take a single string and have no header map (Metal's
// newLibraryWithSource). Each header is inlined at its first include only, which is what the
// headers' `#pragma once` asks for; the pragma itself is dropped (in a single text it would
// apply to the whole unit and draw a warning). `#line` markers keep the compiler's messages
// pointing at the original file and line. Angle-bracket includes are left as they are.
//
// A header missing from src.Headers is an error naming the including file and line.
func Flatten(src Source) (string, error) {
	var b strings.Builder
	seen := map[string]bool{}
	if err := flattenInto(&b, src, src.Name, src.Code, seen, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func flattenInto(b *strings.Builder, src Source, file, code string, seen map[string]bool, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("gpu: flatten %s: includes nested deeper than %d", file, maxIncludeDepth)
	}
	fmt.Fprintf(b, "#line 1 %s\n", strconv.Quote(file))
	lines := strings.Split(code, "\n")
	// A final newline does not start another line.
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	for i, line := range lines {
		if isPragmaOnce(line) {
			b.WriteString("\n") // keeps the line numbering without a #line marker
			continue
		}
		m := includeRe.FindStringSubmatch(line)
		if m == nil {
			b.WriteString(line)
			b.WriteString("\n")
			continue
		}
		inc := m[1]
		if seen[inc] {
			b.WriteString("\n")
			continue
		}
		text, ok := src.Headers[inc]
		if !ok {
			return fmt.Errorf("gpu: flatten %s: %s:%d: include %q: not among the unit's headers", src.Name, file, i+1, inc)
		}
		seen[inc] = true
		if err := flattenInto(b, src, inc, text, seen, depth+1); err != nil {
			return err
		}
		// Back in the includer, on the line after the #include.
		fmt.Fprintf(b, "#line %d %s\n", i+2, strconv.Quote(file))
	}
	return nil
}

// isPragmaOnce reports whether line is `#pragma once` (any spacing, optional comment).
func isPragmaOnce(line string) bool {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(s, "#") {
		return false
	}
	f := strings.Fields(strings.TrimSpace(s[1:]))
	return len(f) >= 2 && f[0] == "pragma" && f[1] == "once" && (len(f) == 2 || strings.HasPrefix(f[2], "//"))
}
