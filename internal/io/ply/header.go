package ply

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Limits on the header. A 3DGS header is about 1.5 KiB; these only stop a
// corrupt or hostile file from making the reader buffer without end.
const (
	maxHeaderBytes = 1 << 20
	maxLineBytes   = 64 << 10 // also the bufio buffer size, see readLine
)

// format is the body encoding named on the header's format line.
type format uint8

const (
	formatASCII format = iota + 1
	formatBinaryLE
	formatBinaryBE
)

// String returns the name the PLY header uses, which is also Info.Format.
func (f format) String() string {
	switch f {
	case formatASCII:
		return "ascii"
	case formatBinaryLE:
		return "binary_little_endian"
	case formatBinaryBE:
		return "binary_big_endian"
	}
	return "unknown"
}

func (f format) byteOrder() binary.ByteOrder {
	if f == formatBinaryBE {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// scalar is a PLY scalar type.
type scalar uint8

const (
	tNone scalar = iota
	tInt8
	tUint8
	tInt16
	tUint16
	tInt32
	tUint32
	tFloat32
	tFloat64
)

// parseScalar accepts the PLY 1.0 type names and the sized aliases that many
// writers (plyfile, Open3D) use instead.
func parseScalar(s string) (scalar, bool) {
	switch s {
	case "char", "int8":
		return tInt8, true
	case "uchar", "uint8":
		return tUint8, true
	case "short", "int16":
		return tInt16, true
	case "ushort", "uint16":
		return tUint16, true
	case "int", "int32":
		return tInt32, true
	case "uint", "uint32":
		return tUint32, true
	case "float", "float32":
		return tFloat32, true
	case "double", "float64":
		return tFloat64, true
	}
	return tNone, false
}

func (t scalar) String() string {
	return [...]string{"none", "char", "uchar", "short", "ushort", "int", "uint", "float", "double"}[t]
}

// size is the number of bytes the type takes in a binary body.
func (t scalar) size() int {
	return [...]int{0, 1, 1, 2, 2, 4, 4, 4, 8}[t]
}

func (t scalar) isInteger() bool { return t != tNone && t < tFloat32 }

// decode reads one value of type t from the start of b.
func (t scalar) decode(b []byte, o binary.ByteOrder) float64 {
	switch t {
	case tInt8:
		return float64(int8(b[0]))
	case tUint8:
		return float64(b[0])
	case tInt16:
		return float64(int16(o.Uint16(b)))
	case tUint16:
		return float64(o.Uint16(b))
	case tInt32:
		return float64(int32(o.Uint32(b)))
	case tUint32:
		return float64(o.Uint32(b))
	case tFloat32:
		return float64(math.Float32frombits(o.Uint32(b)))
	case tFloat64:
		return math.Float64frombits(o.Uint64(b))
	}
	return math.NaN()
}

// parseText parses one ASCII token as a value of type t. Float tokens are
// parsed at the property's own precision so that a value written with
// strconv's shortest float32 form reads back bit-exactly.
func (t scalar) parseText(tok string) (float64, error) {
	switch t {
	case tInt8, tInt16, tInt32:
		v, err := strconv.ParseInt(tok, 10, t.size()*8)
		return float64(v), err
	case tUint8, tUint16, tUint32:
		v, err := strconv.ParseUint(tok, 10, t.size()*8)
		return float64(v), err
	case tFloat32:
		return strconv.ParseFloat(tok, 32)
	case tFloat64:
		return strconv.ParseFloat(tok, 64)
	}
	return 0, fmt.Errorf("no type")
}

// property is one property line. For a list property, countType is the type
// of its length prefix and typ the type of its items; for a scalar property
// countType is tNone.
type property struct {
	name      string
	typ       scalar
	countType scalar
	line      int
}

func (p property) isList() bool { return p.countType != tNone }

// element is one element line with its properties.
type element struct {
	name  string
	count int64
	props []property
	line  int
}

// minBytes is the fewest body bytes one record of e can take: in binary its
// scalars plus the length prefixes of its lists (a list may be empty); in
// ASCII one character and one separator per token.
func (e *element) minBytes(f format) int64 {
	var n int64
	for _, p := range e.props {
		switch {
		case f == formatASCII:
			n += 2
		case p.isList():
			n += int64(p.countType.size())
		default:
			n += int64(p.typ.size())
		}
	}
	return n
}

// fixedSize reports the record size in a binary body when e has no list
// properties.
func (e *element) fixedSize() (int, bool) {
	n := 0
	for _, p := range e.props {
		if p.isList() {
			return 0, false
		}
		n += p.typ.size()
	}
	return n, true
}

// header is a parsed PLY header.
type header struct {
	format   format
	elements []element
	size     int64 // bytes up to and including the end_header line
	lines    int   // number of header lines, end_header included
}

func (h *header) element(name string) *element {
	for i := range h.elements {
		if h.elements[i].name == name {
			return &h.elements[i]
		}
	}
	return nil
}

// readHeader parses the header from br, which must be at the start of the
// file. On return br is positioned at the first body byte.
func readHeader(br *bufio.Reader, name string) (*header, error) {
	h := &header{}
	lineErr := func(n int, format string, args ...any) error {
		return fmt.Errorf("ply: %s: header line %d: %s", name, n, fmt.Sprintf(format, args...))
	}
	seenFormat := false
	for n := 1; ; n++ {
		raw, err := readLine(br)
		h.size += int64(len(raw))
		if h.size > maxHeaderBytes {
			return nil, fmt.Errorf("ply: %s: header longer than %d bytes without end_header", name, maxHeaderBytes)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if n == 1 {
				return nil, fmt.Errorf("ply: %s: not a PLY file: first line is %s…, longer than %d bytes", name, quoteShort(string(raw)), maxLineBytes)
			}
			return nil, lineErr(n, "line longer than %d bytes", maxLineBytes)
		}
		if err != nil {
			// io.EOF (or a read error) before end_header. A last line
			// without its newline cannot be end_header either, since the
			// body starts after end_header's newline.
			if n == 1 && strings.TrimSpace(string(raw)) != "ply" {
				return nil, fmt.Errorf("ply: %s: not a PLY file: first line is %s, want \"ply\"", name, quoteShort(string(raw)))
			}
			return nil, fmt.Errorf("ply: %s: header line %d: end of file before end_header: %w", name, n, eofToUnexpected(err))
		}
		line := strings.TrimRight(string(raw), "\r\n")
		if n == 1 {
			if strings.TrimSpace(line) != "ply" {
				return nil, fmt.Errorf("ply: %s: not a PLY file: first line is %s, want \"ply\"", name, quoteShort(line))
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue // tolerated: some writers leave blank lines
		}
		switch f[0] {
		case "comment", "obj_info":
			continue
		case "format":
			if seenFormat {
				return nil, lineErr(n, "second format line")
			}
			if len(f) != 3 {
				return nil, lineErr(n, "format line %s: want \"format <ascii|binary_little_endian|binary_big_endian> 1.0\"", quoteShort(line))
			}
			switch f[1] {
			case "ascii":
				h.format = formatASCII
			case "binary_little_endian":
				h.format = formatBinaryLE
			case "binary_big_endian":
				h.format = formatBinaryBE
			default:
				return nil, lineErr(n, "unknown format %s", quoteShort(f[1]))
			}
			if f[2] != "1.0" && f[2] != "1" {
				return nil, lineErr(n, "unsupported PLY version %s, want 1.0", quoteShort(f[2]))
			}
			seenFormat = true
		case "element":
			if len(f) != 3 {
				return nil, lineErr(n, "element line %s: want \"element <name> <count>\"", quoteShort(line))
			}
			count, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil || count < 0 {
				return nil, lineErr(n, "element %s: bad count %s", f[1], quoteShort(f[2]))
			}
			if h.element(f[1]) != nil {
				return nil, lineErr(n, "second element %s", quoteShort(f[1]))
			}
			h.elements = append(h.elements, element{name: f[1], count: count, line: n})
		case "property":
			if len(h.elements) == 0 {
				return nil, lineErr(n, "property before any element")
			}
			e := &h.elements[len(h.elements)-1]
			p := property{line: n}
			var ok bool
			if len(f) >= 2 && f[1] == "list" {
				if len(f) != 5 {
					return nil, lineErr(n, "list property line %s: want \"property list <count type> <item type> <name>\"", quoteShort(line))
				}
				if p.countType, ok = parseScalar(f[2]); !ok {
					return nil, lineErr(n, "property %s: unknown type %s", f[4], quoteShort(f[2]))
				}
				if !p.countType.isInteger() {
					return nil, lineErr(n, "property %s: list count type %s is not an integer type", f[4], f[2])
				}
				if p.typ, ok = parseScalar(f[3]); !ok {
					return nil, lineErr(n, "property %s: unknown type %s", f[4], quoteShort(f[3]))
				}
				p.name = f[4]
			} else {
				if len(f) != 3 {
					return nil, lineErr(n, "property line %s: want \"property <type> <name>\"", quoteShort(line))
				}
				if p.typ, ok = parseScalar(f[1]); !ok {
					return nil, lineErr(n, "property %s: unknown type %s", f[2], quoteShort(f[1]))
				}
				p.name = f[2]
			}
			for _, q := range e.props {
				if q.name == p.name {
					return nil, lineErr(n, "element %s: second property %s (first on line %d)", e.name, quoteShort(p.name), q.line)
				}
			}
			e.props = append(e.props, p)
		case "end_header":
			if len(f) != 1 {
				return nil, lineErr(n, "end_header line %s has extra words", quoteShort(line))
			}
			if !seenFormat {
				return nil, lineErr(n, "end_header before any format line")
			}
			h.lines = n
			return h, nil
		default:
			return nil, lineErr(n, "unknown keyword %s", quoteShort(f[0]))
		}
	}
}

// readLine returns the next line including its '\n'. The bufio.Reader's
// buffer (maxLineBytes) bounds the line length: a longer line returns
// bufio.ErrBufferFull.
func readLine(br *bufio.Reader) ([]byte, error) {
	return br.ReadSlice('\n')
}

// eofToUnexpected turns io.EOF into io.ErrUnexpectedEOF, the sentinel
// every truncation error of this package wraps.
func eofToUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// quoteShort quotes s for an error message, cut to a readable length so that
// a binary file mistaken for a header does not flood the message.
func quoteShort(s string) string {
	const limit = 48
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}
