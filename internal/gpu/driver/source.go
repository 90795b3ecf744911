package driver

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Source is a kernel translation unit as the runtime compiler sees it.
type Source struct {
	// Name is the file name used in compiler messages, e.g. "raster_fwd.cu"; it also names the
	// prebuilt fallback image (raster_fwd.ptx).
	Name string
	// Code is the unit's text.
	Code string
	// Headers maps an include name (as written in `#include "name"`) to its text.
	Headers map[string]string
	// Options are extra compiler options (e.g. "-DFOO=1"); the backend adds its own.
	Options []string
}

// Hash is the hex SHA-256 of everything that defines the unit: name, code, headers (sorted by
// name) and options, each length-prefixed so that no two different sources collide by
// concatenation. It keys the kernel cache and is recorded in prebuilt PTX to detect staleness.
// Comments do not count (StripComments): editing one rebuilds nothing.
func (s Source) Hash() string {
	h := sha256.New()
	writeField(h, "rlxsplat-source-v2")
	writeField(h, s.Name)
	writeField(h, StripComments(s.Code))
	names := make([]string, 0, len(s.Headers))
	for n := range s.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	writeCount(h, len(names))
	for _, n := range names {
		writeField(h, n)
		writeField(h, StripComments(s.Headers[n]))
	}
	writeCount(h, len(s.Options))
	for _, o := range s.Options {
		writeField(h, o)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// StripComments returns C source without its // and /* */ comments (a block comment becomes
// one space, as the compiler sees it), trailing blanks and empty lines; string and character
// literals are kept whole. What it removes cannot change the compiled code.
func StripComments(code string) string {
	var b strings.Builder
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(code) && code[j] != c && code[j] != '\n' {
				if code[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(code))
			b.WriteString(code[i:j])
			i = j - 1
		case c == '/' && i+1 < len(code) && code[i+1] == '/':
			for i < len(code) && code[i] != '\n' {
				i++
			}
			i--
		case c == '/' && i+1 < len(code) && code[i+1] == '*':
			end := strings.Index(code[i+2:], "*/")
			if end < 0 {
				i = len(code)
			} else {
				i += 2 + end + 1
			}
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if line = strings.TrimRight(line, " \t\r"); line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

func writeField(h hash.Hash, s string) {
	writeCount(h, len(s))
	h.Write([]byte(s))
}

func writeCount(h hash.Hash, n int) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

var includeRe = regexp.MustCompile(`^\s*#\s*include\s+"([^"]+)"`)

// maxIncludeDepth bounds include recursion so that a cycle is reported instead of looping.
const maxIncludeDepth = 16

// PreludeInclude is the backend-neutral prelude that kernel units include. Each backend maps it
// to its own file (SourceFromFSFor): the kernel vocabulary (thread indices, barriers, warp
// operations, atomics) for its compiler.
const PreludeInclude = "prelude.h"

// SourceFromFS reads the unit name from fsys together with every header it includes with
// `#include "..."` (recursively, paths relative to the including file's directory). A missing
// header is an error naming the including file and line. Angle-bracket includes are left to
// the compiler.
func SourceFromFS(fsys fs.FS, name string) (Source, error) { return SourceFromFSFor(fsys, name, "") }

// SourceFromFSFor is SourceFromFS for one backend: an include of PreludeInclude reads the file
// prelude instead (when prelude is not ""), and the header keeps the included name. The
// source's Hash then covers the backend's prelude, so that compiled-kernel caches and prebuilt
// images are keyed on what the backend's compiler actually sees.
func SourceFromFSFor(fsys fs.FS, name, prelude string) (Source, error) {
	code, err := fs.ReadFile(fsys, name)
	if err != nil {
		return Source{}, fmt.Errorf("gpu: read kernel source %s: %w", name, err)
	}
	src := Source{Name: path.Base(name), Code: string(code), Headers: map[string]string{}}
	r := includeReader{fsys: fsys, prelude: prelude}
	if err := r.collect(name, string(code), src.Headers, 0); err != nil {
		return Source{}, err
	}
	if len(src.Headers) == 0 {
		src.Headers = nil
	}
	return src, nil
}

// includeReader reads included headers from fsys, the prelude from its mapped file.
type includeReader struct {
	fsys    fs.FS
	prelude string
}

func (r includeReader) collect(file, code string, out map[string]string, depth int) error {
	if depth > maxIncludeDepth {
		return fmt.Errorf("gpu: kernel source %s: includes nested deeper than %d (a cycle?)", file, maxIncludeDepth)
	}
	sc := bufio.NewScanner(strings.NewReader(code))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		m := includeRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		inc := m[1]
		if _, seen := out[inc]; seen {
			continue
		}
		p := path.Join(path.Dir(file), inc)
		if inc == PreludeInclude && r.prelude != "" {
			p = path.Join(path.Dir(file), r.prelude)
		}
		text, err := fs.ReadFile(r.fsys, p)
		if err != nil {
			return fmt.Errorf("gpu: kernel source %s:%d: include %q: %w", file, line, inc, err)
		}
		out[inc] = string(text)
		if err := r.collect(p, string(text), out, depth+1); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("gpu: kernel source %s: %w", file, err)
	}
	return nil
}
