package spz

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// Version 4 ("NGSP" container) is not gzipped: a 32-byte plain header,
// optional extension records up to tocOffset, a table of contents of one
// (compressed size, uncompressed size) pair of u64 per stream, then the
// attribute arrays of the legacy payload, each compressed on its own as a
// zstd frame, in the order positions, alphas, colours, scales, rotations,
// SH, with the empty ones (SH at degree 0) left out.
const (
	ngspHeaderSize = 32
	// FlagExtensions marks extension records between the header and the
	// table of contents; Read skips them by the header's offset.
	FlagExtensions = 0x2
	// maxRatio bounds the point count a file of a given size may claim,
	// as the reference reader does: zstd cannot shrink a real attribute
	// stream a thousandfold, so a header claiming more is corrupt, and
	// nothing is allocated for it.
	maxRatio = 1024
)

// writeNGSP writes p as a version 4 file.
func writeNGSP(w io.Writer, p *packed) error {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	defer enc.Close()
	var streams, sizes [][]byte
	for _, a := range [][]byte{p.pos, p.alphas, p.colors, p.scales, p.rots, p.sh} {
		if len(a) == 0 {
			continue
		}
		streams = append(streams, enc.EncodeAll(a, nil))
		sizes = append(sizes, a)
	}
	hdr := make([]byte, ngspHeaderSize+16*len(streams))
	copy(hdr, p.hdr[:12]) // magic, version, count
	hdr[12], hdr[13], hdr[14] = p.hdr[12], p.hdr[13], p.hdr[14]
	hdr[15] = byte(len(streams))
	binary.LittleEndian.PutUint32(hdr[16:], ngspHeaderSize)
	for i, s := range streams {
		binary.LittleEndian.PutUint64(hdr[ngspHeaderSize+16*i:], uint64(len(s)))
		binary.LittleEndian.PutUint64(hdr[ngspHeaderSize+16*i+8:], uint64(len(sizes[i])))
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	for _, s := range streams {
		if _, err := w.Write(s); err != nil {
			return err
		}
	}
	return nil
}

// readNGSP reads the arrays of a version 4 file held whole in data.
func readNGSP(data []byte) (*packed, Info, error) {
	if len(data) < ngspHeaderSize {
		return nil, Info{}, fmt.Errorf("byte offset %d: file ends inside the %d-byte header", len(data), ngspHeaderSize)
	}
	version := binary.LittleEndian.Uint32(data[4:])
	if version != 4 {
		return nil, Info{}, fmt.Errorf("byte offset 4: version %d in an uncompressed NGSP header, want 4 (2 and 3 are gzipped)", version)
	}
	count := int64(binary.LittleEndian.Uint32(data[8:]))
	deg, fb, flags, nStreams := int(data[12]), int(data[13]), data[14], int(data[15])
	toc := int64(binary.LittleEndian.Uint32(data[16:]))
	if err := checkHeader(deg, fb, flags&^FlagExtensions, 4); err != nil {
		return nil, Info{}, err
	}
	for i := 20; i < ngspHeaderSize; i++ {
		if data[i] != 0 {
			return nil, Info{}, fmt.Errorf("byte offset %d: reserved byte is %d, want 0", i, data[i])
		}
	}
	if count > int64(len(data))*maxRatio/9 || count > math.MaxInt32 {
		return nil, Info{}, fmt.Errorf("byte offset 8: %d points cannot fit in a %d-byte file", count, len(data))
	}
	if toc < ngspHeaderSize || toc > int64(len(data)) || (flags&FlagExtensions == 0 && toc != ngspHeaderSize) {
		return nil, Info{}, fmt.Errorf("byte offset 16: table of contents at byte %d, want 32 (or more with extension records, flag 0x2) within the %d-byte file", toc, len(data))
	}
	info := Info{Version: 4, Count: int(count), SHDegree: deg, FractionalBits: fb, Antialiased: flags&FlagAntialiased != 0}

	p := &packed{}
	copy(p.hdr[:], data[:HeaderSize])
	want := arraySizes(count, deg, 4)
	dst := []*[]byte{&p.pos, &p.alphas, &p.colors, &p.scales, &p.rots, &p.sh}
	var present []int
	for i, n := range want {
		if n > 0 {
			present = append(present, i)
		}
	}
	if nStreams != len(present) {
		return nil, Info{}, fmt.Errorf("byte offset 15: %d streams, want %d for %d points at SH degree %d", nStreams, len(present), count, deg)
	}
	tocEnd := toc + 16*int64(nStreams)
	if tocEnd > int64(len(data)) {
		return nil, Info{}, fmt.Errorf("byte offset %d: file ends inside the table of contents", len(data))
	}
	// The decoder's memory cap is the largest stream's size (each is checked against want
	// below, and count against the file's size above), not the positions': at SH degree 3
	// the harmonics are five times the positions.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(max(slices.Max(want[:]), 8<<20))))
	if err != nil {
		return nil, Info{}, err
	}
	defer dec.Close()
	off := tocEnd
	for s, a := range present {
		e := toc + 16*int64(s)
		csize := binary.LittleEndian.Uint64(data[e:])
		usize := binary.LittleEndian.Uint64(data[e+8:])
		if usize != uint64(want[a]) {
			return nil, Info{}, fmt.Errorf("byte offset %d: stream %d (%s) holds %d bytes, want %d", e+8, s, arrayNames[a], usize, want[a])
		}
		if csize > uint64(int64(len(data))-off) {
			return nil, Info{}, fmt.Errorf("byte offset %d: stream %d (%s) of %d bytes runs past the end of the file", e, s, arrayNames[a], csize)
		}
		out, err := dec.DecodeAll(data[off:off+int64(csize)], make([]byte, 0, want[a]))
		if err != nil {
			return nil, Info{}, fmt.Errorf("byte offset %d: stream %d (%s): %w", off, s, arrayNames[a], err)
		}
		if int64(len(out)) != want[a] {
			return nil, Info{}, fmt.Errorf("byte offset %d: stream %d (%s) decompresses to %d bytes, want %d", off, s, arrayNames[a], len(out), want[a])
		}
		*dst[a] = out
		off += int64(csize)
	}
	if off != int64(len(data)) {
		return nil, Info{}, fmt.Errorf("byte offset %d: %d bytes after the last stream", off, int64(len(data))-off)
	}
	return p, info, nil
}
