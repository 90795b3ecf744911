package ply

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/rlxsplat/rlxsplat/internal/io/finite"
)

// maxASCIILine bounds one line of an ASCII body (a long face list is the
// only legitimate reason for a long line).
const maxASCIILine = 1 << 20

// plan says which properties of one element the caller wants: slot[k] is
// the row index that property k goes to, or −1 when it is skipped. Only
// scalar properties can be wanted.
type plan struct {
	slot  []int
	width int
	// raw, when set (len width), receives the decoded values unconverted
	// instead of row: the packed uint32 fields of a compressed PLY do not
	// survive float32, and NaN or Inf cannot occur in them.
	raw []float64
	// infBound, when set (len width), lets an infinite value in slot s
	// through as ±infBound[s] where that is > 0 (other tools write ±Inf
	// logits and log scales); inf counts them.
	infBound []float32
	inf      finite.Counter
}

// emitFunc receives record i of the planned element; row is reused for the
// next record.
type emitFunc func(i int64, row []float32) error

// bodyReader walks the body of a PLY file element by element, keeping the
// byte offset (binary) or line number (ASCII) for its error messages.
type bodyReader struct {
	name  string
	h     *header
	br    *bufio.Reader
	order binary.ByteOrder
	off   int64 // binary: absolute offset of the next unread byte
	sized bool  // the input's size was known and the counts checked against it

	line int    // ASCII: number of the line cur belongs to
	cur  []byte // ASCII: unread rest of the current line
	long []byte // ASCII: assembly buffer for lines longer than br's buffer
}

// open parses the header of r and checks that the declared element counts
// fit in what is left of the input (when its size can be known), so that an
// absurd count is refused before anything is allocated for it.
func open(r io.Reader, name string) (*bodyReader, error) {
	size, err := inputSize(r)
	if err != nil {
		return nil, fmt.Errorf("ply: %s: %w", name, err)
	}
	br := bufio.NewReaderSize(r, maxLineBytes)
	h, err := readHeader(br, name)
	if err != nil {
		return nil, err
	}
	b := &bodyReader{name: name, h: h, br: br, order: h.format.byteOrder(), off: h.size, line: h.lines}
	if size < 0 {
		return b, nil
	}
	b.sized = true
	left := size - h.size
	if h.format == formatASCII {
		left++ // the file's last token needs no separator after it
	}
	for _, e := range h.elements {
		m := e.minBytes(h.format)
		if m == 0 || e.count == 0 {
			continue
		}
		if e.count > left/m {
			return nil, fmt.Errorf("ply: %s: header line %d: element %s has count %d, which needs at least %d×%d bytes, but only %d bytes follow the header (the file ends at byte %d): %w",
				name, e.line, e.name, e.count, e.count, m, size-h.size, size, io.ErrUnexpectedEOF)
		}
		left -= e.count * m
	}
	return b, nil
}

// inputSize returns the number of bytes left in r, or −1 when r cannot say.
func inputSize(r io.Reader) (int64, error) {
	switch v := r.(type) {
	case interface{ Len() int }:
		return int64(v.Len()), nil
	case io.Seeker:
		cur, err := v.Seek(0, io.SeekCurrent)
		if err != nil {
			return -1, nil // a pipe or similar: not seekable, size unknown
		}
		end, err := v.Seek(0, io.SeekEnd)
		if err != nil {
			return -1, nil
		}
		if _, err := v.Seek(cur, io.SeekStart); err != nil {
			return 0, fmt.Errorf("seeking back to byte %d after measuring the input: %w", cur, err)
		}
		return end - cur, nil
	}
	return -1, nil
}

// target is an element a caller wants, with its plan and the function that
// receives its records.
type target struct {
	e    *element
	pl   *plan
	emit emitFunc
}

// readAll reads every element in file order, handing the records of the
// wanted elements to their emit and checking that the others are complete.
func (b *bodyReader) readAll(want ...target) error {
	for k := range b.h.elements {
		e := &b.h.elements[k]
		var pl *plan
		var emit emitFunc
		for _, t := range want {
			if t.e == e {
				pl, emit = t.pl, t.emit
			}
		}
		if err := b.readElement(e, pl, emit); err != nil {
			return err
		}
	}
	return nil
}

// store puts decoded value v of property prop into slot s of the record:
// unconverted into pl.raw when the plan asks for raw values, else through
// toFloat32, with an infinity clamped where the plan allows it. where
// describes the value's place for the clamp warning.
func (pl *plan) store(row []float32, s int, v float64, where func() string) error {
	if pl.raw != nil {
		pl.raw[s] = v
		return nil
	}
	if pl.infBound != nil && pl.infBound[s] > 0 {
		var clamped bool
		if v, clamped = finite.Clamp(v, pl.infBound[s]); clamped {
			pl.inf.Add(where)
		}
	}
	f, err := toFloat32(v)
	if err != nil {
		return err
	}
	row[s] = f
	return nil
}

func (b *bodyReader) readElement(e *element, pl *plan, emit emitFunc) error {
	if e.count == 0 || len(e.props) == 0 {
		return nil // records without properties take no bytes
	}
	var row []float32
	if pl != nil {
		row = make([]float32, pl.width)
	}
	if b.h.format == formatASCII {
		for i := int64(0); i < e.count; i++ {
			if err := b.asciiRecord(e, i, pl, row); err != nil {
				return err
			}
			if emit != nil {
				if err := emit(i, row); err != nil {
					return err
				}
			}
		}
		return nil
	}
	size, fixed := e.fixedSize()
	switch {
	case fixed && pl == nil:
		return b.skipFixed(e, int64(size))
	case fixed:
		return b.fixedRecords(e, size, pl, row, emit)
	}
	for i := int64(0); i < e.count; i++ {
		if err := b.binaryRecord(e, i, pl, row); err != nil {
			return err
		}
		if emit != nil {
			if err := emit(i, row); err != nil {
				return err
			}
		}
	}
	return nil
}

// skipFixed skips a whole element of fixed-size records at once.
func (b *bodyReader) skipFixed(e *element, size int64) error {
	total := int64(math.MaxInt64) // more than any input: the discard then fails at its end
	if e.count <= math.MaxInt64/size {
		total = e.count * size
	}
	var done int64
	for done < total {
		n, err := b.br.Discard(int(min(total-done, 1<<30)))
		done += int64(n)
		if err != nil {
			return b.fail(b.off+done, e, done/size, e.propAt(int(done%size)), readErr(err))
		}
	}
	b.off += total
	return nil
}

// propAt names the property at byte offset within a fixed-size record.
func (e *element) propAt(within int) string {
	for _, p := range e.props {
		if within < p.typ.size() {
			return p.name
		}
		within -= p.typ.size()
	}
	return e.props[len(e.props)-1].name
}

// fixedRecords is the fast path for the usual splat file: fixed-size
// records read whole and decoded in place.
func (b *bodyReader) fixedRecords(e *element, size int, pl *plan, row []float32, emit emitFunc) error {
	type field struct {
		k, slot, off int
		typ          scalar
	}
	var fields []field
	off := 0
	for k, p := range e.props {
		if pl.slot[k] >= 0 {
			fields = append(fields, field{k, pl.slot[k], off, p.typ})
		}
		off += p.typ.size()
	}
	buf := make([]byte, size)
	for i := int64(0); i < e.count; i++ {
		if n, err := io.ReadFull(b.br, buf); err != nil {
			return b.fail(b.off+int64(n), e, i, e.propAt(n), readErr(err))
		}
		for _, f := range fields {
			at := b.off + int64(f.off)
			where := func() string { return b.place(at, e, i, e.props[f.k].name) }
			if err := pl.store(row, f.slot, f.typ.decode(buf[f.off:], b.order), where); err != nil {
				return b.fail(at, e, i, e.props[f.k].name, err)
			}
		}
		b.off += int64(size)
		if err := emit(i, row); err != nil {
			return err
		}
	}
	return nil
}

// binaryRecord reads record i of an element with list properties, one
// property at a time.
func (b *bodyReader) binaryRecord(e *element, i int64, pl *plan, row []float32) error {
	var small [8]byte
	for k, p := range e.props {
		t := p.typ
		if p.isList() {
			t = p.countType
		}
		buf := small[:t.size()]
		if n, err := io.ReadFull(b.br, buf); err != nil {
			return b.fail(b.off+int64(n), e, i, p.name, readErr(err))
		}
		v := t.decode(buf, b.order)
		if !p.isList() {
			if pl != nil && pl.slot[k] >= 0 {
				at := b.off
				where := func() string { return b.place(at, e, i, p.name) }
				if err := pl.store(row, pl.slot[k], v, where); err != nil {
					return b.fail(at, e, i, p.name, err)
				}
			}
			b.off += int64(len(buf))
			continue
		}
		if v < 0 {
			return b.fail(b.off, e, i, p.name, fmt.Errorf("negative list length %v", v))
		}
		b.off += int64(len(buf))
		// v ≤ 2³²−1 and items are ≤ 8 bytes, so this cannot overflow.
		items := int64(v) * int64(p.typ.size())
		var done int64
		for done < items {
			n, err := b.br.Discard(int(min(items-done, 1<<30)))
			done += int64(n)
			if err != nil {
				return b.fail(b.off+done, e, i, p.name, readErr(err))
			}
		}
		b.off += items
	}
	return nil
}

// asciiRecord reads record i of e from an ASCII body. Values are read as a
// stream of whitespace-separated tokens, so a record may span lines. Tokens
// of properties nobody asked for are counted but not parsed, as their
// binary counterparts are skipped unread.
func (b *bodyReader) asciiRecord(e *element, i int64, pl *plan, row []float32) error {
	for k, p := range e.props {
		tok, err := b.token()
		if err != nil {
			return b.fail(0, e, i, p.name, err)
		}
		if p.isList() {
			c, err := p.countType.parseText(string(tok))
			if err != nil || c < 0 {
				return b.fail(0, e, i, p.name, fmt.Errorf("bad list length %s", quoteShort(string(tok))))
			}
			for j := int64(0); j < int64(c); j++ {
				if _, err := b.token(); err != nil {
					return b.fail(0, e, i, p.name, err)
				}
			}
			continue
		}
		if pl == nil || pl.slot[k] < 0 {
			continue
		}
		v, err := p.typ.parseText(string(tok))
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return b.fail(0, e, i, p.name, fmt.Errorf("value %s is out of range for %s", quoteShort(string(tok)), p.typ))
			}
			return b.fail(0, e, i, p.name, fmt.Errorf("value %s is not a valid %s", quoteShort(string(tok)), p.typ))
		}
		where := func() string { return b.place(0, e, i, p.name) }
		if err := pl.store(row, pl.slot[k], v, where); err != nil {
			return b.fail(0, e, i, p.name, err)
		}
	}
	return nil
}

// token returns the next whitespace-separated token of an ASCII body. The
// slice is valid until the next call.
func (b *bodyReader) token() ([]byte, error) {
	for {
		i := 0
		for i < len(b.cur) && isSpace(b.cur[i]) {
			i++
		}
		b.cur = b.cur[i:]
		if len(b.cur) > 0 {
			j := 0
			for j < len(b.cur) && !isSpace(b.cur[j]) {
				j++
			}
			t := b.cur[:j]
			b.cur = b.cur[j:]
			return t, nil
		}
		if err := b.nextLine(); err != nil {
			return nil, err
		}
	}
}

// nextLine loads the next line of an ASCII body into cur.
func (b *bodyReader) nextLine() error {
	b.long = b.long[:0]
	for {
		s, err := b.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(b.long)+len(s) > maxASCIILine {
				return fmt.Errorf("line %d is longer than %d bytes", b.line+1, maxASCIILine)
			}
			b.long = append(b.long, s...)
			continue
		}
		if len(b.long) > 0 {
			b.long = append(b.long, s...)
			s = b.long
		}
		if len(s) == 0 && err != nil {
			return readErr(err)
		}
		// A last line without '\n' (err == io.EOF) is still a line; the
		// next call reports the end of the file.
		b.line++
		b.cur = s
		return nil
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// fail builds the located error every body problem returns: the file, the
// byte offset (binary) or line (ASCII), the element index and the property.
func (b *bodyReader) fail(off int64, e *element, i int64, prop string, err error) error {
	return fmt.Errorf("ply: %s: %s: %w", b.name, b.place(off, e, i, prop), err)
}

// place says where a value is: the byte offset (binary) or line (ASCII),
// the element index and the property.
func (b *bodyReader) place(off int64, e *element, i int64, prop string) string {
	where := fmt.Sprintf("byte %d", off)
	if b.h.format == formatASCII {
		where = fmt.Sprintf("line %d", b.line)
	}
	return fmt.Sprintf("%s: %s %d, property %s", where, e.name, i, prop)
}

// readErr names a short read as truncation (wrapping io.ErrUnexpectedEOF)
// and passes any other I/O error through.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("file is truncated: %w", io.ErrUnexpectedEOF)
	}
	return err
}

// toFloat32 converts a decoded value to the float32 the splat arrays hold,
// refusing what training cannot use: NaN, infinities and doubles beyond
// float32's range.
func toFloat32(v float64) (float32, error) {
	if math.IsNaN(v) {
		return 0, errors.New("value is NaN")
	}
	if math.IsInf(v, 0) {
		return 0, fmt.Errorf("value is %v", v)
	}
	f := float32(v)
	if math.IsInf(float64(f), 0) {
		return 0, fmt.Errorf("value %g is out of float32 range", v)
	}
	return f, nil
}
