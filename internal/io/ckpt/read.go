package ckpt

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"unicode/utf8"
)

// Smallest possible section and trailer, for the up-front count check.
const (
	minSection = 1 + 2 + 1 + 8 + 4
	trailerLen = 4
)

// ReadFile reads and verifies the checkpoint at path: magic, version, every
// length against the file size, every section CRC, the file CRC, and that
// nothing follows the end. Errors name the file, the section and the byte
// offset.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ckpt: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("ckpt: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("ckpt: %s: not a regular file", path)
	}
	return decode(fh, path, st.Size())
}

// reader tracks the offset and both CRCs while decoding.
type reader struct {
	r         *bufio.Reader
	name      string
	size, off int64
	file, sec hash.Hash32
	buf       [8]byte
}

// errAt locates an error in the file: "ckpt: NAME: byte OFF: ...".
func (d *reader) errAt(off int64, format string, args ...any) error {
	return fmt.Errorf("ckpt: %s: byte %d: %w", d.name, off, fmt.Errorf(format, args...))
}

// read fills p, feeding the file CRC and, when sec is set, the section CRC.
func (d *reader) read(p []byte, sec bool, what string) error {
	n, err := io.ReadFull(d.r, p)
	d.file.Write(p[:n])
	if sec {
		d.sec.Write(p[:n])
	}
	d.off += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return d.errAt(d.off, "%s: file is truncated: %w", what, io.ErrUnexpectedEOF)
		}
		return d.errAt(d.off, "%s: %w", what, err)
	}
	return nil
}

func (d *reader) left() int64 { return d.size - d.off }

// decode reads a checkpoint of size bytes from r; name is for messages.
func decode(r io.Reader, name string, size int64) (*File, error) {
	// Buffers no larger than the file: small files (and the fuzzer) should
	// not pay for megabyte buffers.
	bufSize := int(max(16, min(size, 1<<20)))
	d := &reader{r: bufio.NewReaderSize(r, bufSize), name: name, size: size,
		file: crc32.New(castagnoli), sec: crc32.New(castagnoli)}
	b := d.buf[:]
	if err := d.read(b[:8], false, "magic"); err != nil {
		return nil, err
	}
	if string(b[:8]) != magic {
		return nil, d.errAt(0, "not an rlxsplat checkpoint (magic % x, want % x)", b[:8], []byte(magic))
	}
	if err := d.read(b[:4], false, "version"); err != nil {
		return nil, err
	}
	if v := binary.LittleEndian.Uint32(b); v != Version {
		return nil, d.errAt(8, "unsupported version %d (this build reads version %d)", v, Version)
	}
	if err := d.read(b[:4], false, "section count"); err != nil {
		return nil, err
	}
	count := int64(binary.LittleEndian.Uint32(b))
	if count > (d.left()-trailerLen)/minSection {
		return nil, d.errAt(12, "section count %d cannot fit in the %d bytes that follow: %w", count, d.left(), io.ErrUnexpectedEOF)
	}
	f := &File{path: name}
	chunk := make([]byte, min(bufSize, 64<<10))
	for i := int64(0); i < count; i++ {
		if err := d.section(f, i, chunk); err != nil {
			return nil, err
		}
	}
	sum := d.file.Sum32()
	trailer := d.off
	if err := d.read(b[:4], false, "file CRC"); err != nil {
		return nil, err
	}
	if got := binary.LittleEndian.Uint32(b); got != sum {
		return nil, d.errAt(trailer, "file CRC mismatch: stored %08x, computed %08x", got, sum)
	}
	if n, _ := d.r.Read(b[:1]); n > 0 || d.off != d.size {
		return nil, d.errAt(d.off, "unexpected data after the end of the checkpoint (file size %d)", d.size)
	}
	return f, nil
}

// section reads section i into f.
func (d *reader) section(f *File, i int64, chunk []byte) error {
	start := d.off
	d.sec.Reset()
	b := d.buf[:]
	label := fmt.Sprintf("section #%d", i)
	if err := d.read(b[:3], true, label+" header"); err != nil {
		return err
	}
	kind := Kind(b[0])
	nameLen := int(binary.LittleEndian.Uint16(b[1:3]))
	if kind.elemSize() == 0 {
		return d.errAt(start, "%s: unknown kind %d", label, b[0])
	}
	if nameLen == 0 || nameLen > MaxNameLen {
		return d.errAt(start+1, "%s: name length %d, want 1..%d", label, nameLen, MaxNameLen)
	}
	if int64(nameLen) > d.left() {
		return d.errAt(d.off, "%s: name of %d bytes: file is truncated: %w", label, nameLen, io.ErrUnexpectedEOF)
	}
	nb := make([]byte, nameLen)
	if err := d.read(nb, true, label+" name"); err != nil {
		return err
	}
	name := string(nb)
	if !utf8.ValidString(name) {
		return d.errAt(start+3, "%s: name %q is not valid UTF-8", label, name)
	}
	if f.find(name) != nil {
		return d.errAt(start+3, "%s: second section named %q", label, name)
	}
	label = fmt.Sprintf("section %q (#%d)", name, i)
	if err := d.read(b[:8], true, label+" length"); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint64(b)
	es := uint64(kind.elemSize())
	// The payload, its CRC and the file CRC must all still fit: this keeps
	// a corrupt length from allocating more than the file holds.
	room := d.left() - 2*4
	if room < 0 || n > uint64(room)/es {
		return d.errAt(d.off-8, "%s: length %d (%d-byte elements) does not fit, with the section and file CRCs, in the %d bytes left: %w", label, n, es, d.left(), io.ErrUnexpectedEOF)
	}
	s := section{name: name, kind: kind}
	var err error
	switch kind {
	case KindFloat32:
		s.f32 = make([]float32, n)
		err = d.readChunked(chunk, int(n), 4, label, func(src []byte, j int) {
			s.f32[j] = math.Float32frombits(binary.LittleEndian.Uint32(src))
		})
	case KindUint64:
		s.u64 = make([]uint64, n)
		err = d.readChunked(chunk, int(n), 8, label, func(src []byte, j int) {
			s.u64[j] = binary.LittleEndian.Uint64(src)
		})
	default:
		s.b = make([]byte, n)
		err = d.read(s.b, true, label+" payload")
	}
	if err != nil {
		return err
	}
	sum := d.sec.Sum32()
	crcAt := d.off
	if err := d.read(b[:4], false, label+" CRC"); err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint32(b); got != sum {
		return d.errAt(crcAt, "%s (starting at byte %d): CRC mismatch: stored %08x, computed %08x", label, start, got, sum)
	}
	f.sections = append(f.sections, s)
	return nil
}

// readChunked reads n elements of size bytes through chunk.
func (d *reader) readChunked(chunk []byte, n, size int, label string, get func(src []byte, j int)) error {
	per := len(chunk) / size
	for j := 0; j < n; j += per {
		m := min(per, n-j)
		if err := d.read(chunk[:m*size], true, label+" payload"); err != nil {
			return err
		}
		for k := 0; k < m; k++ {
			get(chunk[k*size:], j+k)
		}
	}
	return nil
}
