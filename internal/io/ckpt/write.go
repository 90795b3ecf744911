package ckpt

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"unicode/utf8"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
)

// WriteFile writes f to path atomically: the data goes to a temporary file
// in the same directory, which is synced and renamed over path, and the
// directory is synced; a crash at any point leaves either the old file or
// the complete new one at path.
func WriteFile(path string, f *File) error {
	if err := writeAtomic(path, func(w io.Writer) error { return encode(w, f) }, nil); err != nil {
		return fmt.Errorf("ckpt: write %s: %w", path, err)
	}
	return nil
}

// checkName says what is wrong with a section name, if anything.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty section name")
	case len(name) > MaxNameLen:
		return fmt.Errorf("section name %.32q… is %d bytes, more than %d", name, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("section name %q is not valid UTF-8", name)
	}
	return nil
}

// crcWriter passes writes on to w while feeding the file and section CRCs.
type crcWriter struct {
	w         io.Writer
	file, sec hash.Hash32
	buf       [8]byte
}

func (c *crcWriter) Write(p []byte) (int, error) {
	c.file.Write(p)
	c.sec.Write(p)
	return c.w.Write(p)
}

func (c *crcWriter) u8(v uint8) error { _, err := c.Write([]byte{v}); return err }
func (c *crcWriter) u16(v uint16) error {
	binary.LittleEndian.PutUint16(c.buf[:], v)
	_, err := c.Write(c.buf[:2])
	return err
}
func (c *crcWriter) u32(v uint32) error {
	binary.LittleEndian.PutUint32(c.buf[:], v)
	_, err := c.Write(c.buf[:4])
	return err
}
func (c *crcWriter) u64(v uint64) error {
	binary.LittleEndian.PutUint64(c.buf[:], v)
	_, err := c.Write(c.buf[:8])
	return err
}

// encode writes f in the layout described in the package comment.
func encode(w io.Writer, f *File) error {
	for i := range f.sections {
		if err := checkName(f.sections[i].name); err != nil {
			return err
		}
	}
	if uint64(len(f.sections)) > math.MaxUint32 {
		return fmt.Errorf("%d sections, more than the format's %d", len(f.sections), uint32(math.MaxUint32))
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	c := &crcWriter{w: bw, file: crc32.New(castagnoli), sec: crc32.New(castagnoli)}
	if _, err := c.Write([]byte(magic)); err != nil {
		return err
	}
	if err := c.u32(Version); err != nil {
		return err
	}
	if err := c.u32(uint32(len(f.sections))); err != nil {
		return err
	}
	chunk := make([]byte, 64<<10)
	for i := range f.sections {
		s := &f.sections[i]
		c.sec.Reset()
		if err := c.u8(uint8(s.kind)); err != nil {
			return err
		}
		if err := c.u16(uint16(len(s.name))); err != nil {
			return err
		}
		if _, err := io.WriteString(c, s.name); err != nil {
			return err
		}
		if err := c.u64(uint64(s.count())); err != nil {
			return err
		}
		var err error
		switch s.kind {
		case KindFloat32:
			err = writeChunked(c, chunk, len(s.f32), 4, func(dst []byte, j int) {
				binary.LittleEndian.PutUint32(dst, math.Float32bits(s.f32[j]))
			})
		case KindUint64:
			err = writeChunked(c, chunk, len(s.u64), 8, func(dst []byte, j int) {
				binary.LittleEndian.PutUint64(dst, s.u64[j])
			})
		default:
			_, err = c.Write(s.b)
		}
		if err != nil {
			return fmt.Errorf("section %q: %w", s.name, err)
		}
		// The section CRC is not part of itself, but is part of the file's.
		sum := c.sec.Sum32()
		if err := c.u32(sum); err != nil {
			return err
		}
	}
	binary.LittleEndian.PutUint32(c.buf[:], c.file.Sum32())
	if _, err := bw.Write(c.buf[:4]); err != nil {
		return err
	}
	return bw.Flush()
}

// writeChunked encodes n elements of size bytes through chunk.
func writeChunked(w io.Writer, chunk []byte, n, size int, put func(dst []byte, j int)) error {
	per := len(chunk) / size
	for j := 0; j < n; j += per {
		m := min(per, n-j)
		for k := 0; k < m; k++ {
			put(chunk[k*size:], j+k)
		}
		if _, err := w.Write(chunk[:m*size]); err != nil {
			return err
		}
	}
	return nil
}

// writeAtomic is atomicfile.Write; the tests pass a hook that stands for a
// crash before the rename.
func writeAtomic(path string, write func(io.Writer) error, beforeRename func(tmp string) error) error {
	return atomicfile.Write(path, write, beforeRename)
}
