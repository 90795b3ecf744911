package ply

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// sharedFile returns the path of a file under the shared data directory,
// ../shared next to the directory holding go.mod, and whether it exists.
func sharedFile(rel string) (string, bool) { return sharedtest.Find(rel) }

// needShared is sharedFile for tests: it skips, saying why, when the file
// is absent.
func needShared(t testing.TB, rel string) string {
	t.Helper()
	p, ok := sharedFile(rel)
	if !ok {
		t.Skipf("shared fixture %s is absent (expected at ../shared/%s from the repository root)", rel, rel)
	}
	return p
}

func readShared(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(needShared(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tprop is one property of a test element: typ is the header's type name;
// list, when set, is the count type of a list property.
type tprop struct {
	name, typ, list string
}

// telem is a test element. Each row holds the values of one record in
// property order; a list property takes its length followed by its items.
type telem struct {
	name  string
	props []tprop
	rows  [][]float64
}

// buildPLY is the tests' own, independent PLY writer: it writes elems in
// the given format ("ascii", "binary_little_endian", "binary_big_endian"),
// with the extra header lines (comments, obj_info) after the format line.
func buildPLY(t testing.TB, format string, elems []telem, extraHeader ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "ply\nformat %s 1.0\n", format)
	for _, l := range extraHeader {
		b.WriteString(l + "\n")
	}
	for _, e := range elems {
		fmt.Fprintf(&b, "element %s %d\n", e.name, len(e.rows))
		for _, p := range e.props {
			if p.list != "" {
				fmt.Fprintf(&b, "property list %s %s %s\n", p.list, p.typ, p.name)
			} else {
				fmt.Fprintf(&b, "property %s %s\n", p.typ, p.name)
			}
		}
	}
	b.WriteString("end_header\n")
	var order binary.ByteOrder = binary.LittleEndian
	if format == "binary_big_endian" {
		order = binary.BigEndian
	}
	for _, e := range elems {
		for _, row := range e.rows {
			j := 0
			next := func() float64 {
				if j >= len(row) {
					t.Fatalf("buildPLY: element %s: row %v too short", e.name, row)
				}
				j++
				return row[j-1]
			}
			var toks []string
			for _, p := range e.props {
				if p.list == "" {
					v := next()
					toks = append(toks, encodeValue(t, &b, format, order, p.typ, v))
					continue
				}
				c := next()
				toks = append(toks, encodeValue(t, &b, format, order, p.list, c))
				for k := 0; k < int(c); k++ {
					toks = append(toks, encodeValue(t, &b, format, order, p.typ, next()))
				}
			}
			if format == "ascii" {
				b.WriteString(strings.Join(toks, " ") + "\n")
			}
		}
	}
	return b.Bytes()
}

// encodeValue appends v as type typ to b for a binary format, or returns
// its text for ASCII (floats in the shortest form that reads back exactly).
func encodeValue(t testing.TB, b *bytes.Buffer, format string, o binary.ByteOrder, typ string, v float64) string {
	if format == "ascii" {
		switch typ {
		case "float", "float32":
			return strconv.FormatFloat(v, 'g', -1, 32)
		case "double", "float64":
			return strconv.FormatFloat(v, 'g', -1, 64)
		}
		return strconv.FormatInt(int64(v), 10)
	}
	var buf [8]byte
	switch typ {
	case "char", "int8", "uchar", "uint8":
		buf[0] = byte(int64(v))
		b.Write(buf[:1])
	case "short", "int16", "ushort", "uint16":
		o.PutUint16(buf[:], uint16(int64(v)))
		b.Write(buf[:2])
	case "int", "int32", "uint", "uint32":
		o.PutUint32(buf[:], uint32(int64(v)))
		b.Write(buf[:4])
	case "float", "float32":
		o.PutUint32(buf[:], math.Float32bits(float32(v)))
		b.Write(buf[:4])
	case "double", "float64":
		o.PutUint64(buf[:], math.Float64bits(v))
		b.Write(buf[:8])
	default:
		t.Fatalf("encodeValue: unknown type %q", typ)
	}
	return ""
}

// decodeFloatLE is a test-only reader for a binary little-endian file whose
// only element is vertex with float properties (the fixture's shape): it
// returns the property names and the raw rows.
func decodeFloatLE(t testing.TB, data []byte) ([]string, [][]float64) {
	t.Helper()
	end := bytes.Index(data, []byte("end_header\n"))
	if end < 0 {
		t.Fatal("decodeFloatLE: no end_header")
	}
	var names []string
	n := -1
	for _, l := range strings.Split(string(data[:end]), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "element" && f[1] == "vertex":
			n, _ = strconv.Atoi(f[2])
		case len(f) == 3 && f[0] == "property" && f[1] == "float":
			names = append(names, f[2])
		case len(f) > 0 && (f[0] == "property" || f[0] == "element"):
			t.Fatalf("decodeFloatLE: unsupported header line %q", l)
		}
	}
	body := data[end+len("end_header\n"):]
	if len(body) != n*4*len(names) {
		t.Fatalf("decodeFloatLE: body has %d bytes, want %d", len(body), n*4*len(names))
	}
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = make([]float64, len(names))
		for k := range names {
			rows[i][k] = float64(math.Float32frombits(binary.LittleEndian.Uint32(body[4*(i*len(names)+k):])))
		}
	}
	return names, rows
}

// floatElem makes a vertex element of float properties.
func floatElem(names []string, rows [][]float64) telem {
	e := telem{name: "vertex", rows: rows}
	for _, n := range names {
		e.props = append(e.props, tprop{name: n, typ: "float"})
	}
	return e
}

// unsized hides Len and Seek so that the reader cannot know the input size
// and must rely on running out of data.
type unsized struct{ r io.Reader }

func (u unsized) Read(p []byte) (int, error) { return u.r.Read(p) }

// inriaNames lists the INRIA layout's properties for SH degree d.
func inriaNames(d int) []string {
	n := []string{"x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"}
	for j := 0; j < 3*((d+1)*(d+1)-1); j++ {
		n = append(n, fmt.Sprintf("f_rest_%d", j))
	}
	return append(n, "opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3")
}

// cutPLY keeps the first keep records of every element of a binary file
// whose elements have only scalar properties, rewriting the header counts:
// how the train-1000 fixture itself was cut from a larger file. The fuzzer
// gets the fixtures' layouts at a size it can mutate quickly.
func cutPLY(t testing.TB, data []byte, keep int) []byte {
	t.Helper()
	return cutPLYBy(t, data, func(string) int { return keep })
}

// cutPLYBy is cutPLY keeping keep(element name) records of each element.
func cutPLYBy(t testing.TB, data []byte, keepOf func(name string) int) []byte {
	t.Helper()
	end := bytes.Index(data, []byte("end_header\n"))
	if end < 0 {
		t.Fatal("cutPLY: no end_header")
	}
	sizes := map[string]int{"char": 1, "uchar": 1, "int8": 1, "uint8": 1, "short": 2, "ushort": 2, "int16": 2, "uint16": 2,
		"int": 4, "uint": 4, "int32": 4, "uint32": 4, "float": 4, "float32": 4, "double": 8, "float64": 8}
	var hdr bytes.Buffer
	type span struct{ count, size, keep int }
	var elems []span
	for _, l := range strings.SplitAfter(string(data[:end]), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "element":
			n, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("cutPLY: %q", l)
			}
			keep := min(n, keepOf(f[1]))
			elems = append(elems, span{count: n, keep: keep})
			l = fmt.Sprintf("element %s %d\n", f[1], keep)
		case len(f) == 3 && f[0] == "property":
			if len(elems) == 0 || sizes[f[1]] == 0 {
				t.Fatalf("cutPLY: unsupported line %q", l)
			}
			elems[len(elems)-1].size += sizes[f[1]]
		case len(f) > 0 && f[0] == "property":
			t.Fatalf("cutPLY: unsupported line %q", l)
		}
		hdr.WriteString(l)
	}
	hdr.WriteString("end_header\n")
	body := data[end+len("end_header\n"):]
	for _, e := range elems {
		hdr.Write(body[:e.keep*e.size])
		body = body[e.count*e.size:]
	}
	return hdr.Bytes()
}
