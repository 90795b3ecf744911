package spz

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rlxsplat/rlxsplat/internal/io/quant"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// ReadFile reads an SPZ file; see Read.
func ReadFile(path string) (*splat.Gaussians, Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Info{}, fmt.Errorf("spz: %w", err)
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads an SPZ file of version 2, 3 (gzip) or 4 (NGSP container with
// zstd streams) from r and returns its splats in the scene's RDF axes;
// name (usually the path) is used in error messages, which also give the
// byte offset (in the decompressed stream for versions 2 and 3, in the
// file for 4). Coefficients above the file's SH degree are zero; a degree
// 4 file keeps degrees 0..3 (Info.SHDegree still says 4).
//
// Memory grows only with the data actually decompressed (versions 2 and 3)
// or is bounded by the file's size (version 4), so a header claiming more
// splats than the file holds costs nothing; trailing bytes and bad
// checksums are errors. Version 4's extension records are skipped.
func Read(r io.Reader, name string) (*splat.Gaussians, Info, error) {
	g, info, err := decode(r)
	if err != nil {
		return nil, Info{}, fmt.Errorf("spz: %s: %w", name, err)
	}
	return g, info, nil
}

// section reads the next n bytes of an attribute array.
type section struct {
	r   io.Reader
	off int64 // decompressed bytes consumed so far
}

func (s *section) read(n int64, what string) ([]byte, error) {
	var buf bytes.Buffer
	// CopyN grows buf with what arrives rather than trusting n.
	got, err := io.CopyN(&buf, s.r, n)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("byte offset %d: %s: stream ends after %d of %d bytes", s.off+got, what, got, n)
		}
		return nil, fmt.Errorf("byte offset %d: %s: %w", s.off+got, what, err)
	}
	s.off += n
	return buf.Bytes(), nil
}

// arrayNames names the attribute arrays in file order.
var arrayNames = [6]string{"positions", "alphas", "colors", "scales", "rotations", "spherical harmonics"}

// arraySizes is the byte size of each attribute array.
func arraySizes(count int64, deg, version int) [6]int64 {
	rot := int64(4)
	if version == 2 {
		rot = 3
	}
	return [6]int64{9 * count, count, 3 * count, 3 * count, rot * count, int64(3*shDims(deg)) * count}
}

// checkHeader checks the header fields the versions share.
func checkHeader(deg, fb int, flags byte, version int) error {
	if deg > maxFileDegree {
		return fmt.Errorf("byte offset 12: SH degree %d, want 0..%d", deg, maxFileDegree)
	}
	if fb > 23 {
		return fmt.Errorf("byte offset 13: %d fractional bits, want at most 23 of a 24-bit coordinate", fb)
	}
	if extra := flags &^ FlagAntialiased; extra != 0 {
		// Flag 0x2 of a gzipped file announces extension records inside
		// the payload, before the arrays; their layout is outside what this
		// package reads, so refuse rather than misread the arrays.
		return fmt.Errorf("byte offset 14: flags %#02x: unknown bits %#02x (extensions in a version %d file are not supported)", flags, extra, version)
	}
	return nil
}

// maxFileDegree is the highest SH degree a file may hold (version 4 allows
// 4); Read keeps the coefficients up to splat.MaxSHDegree.
const maxFileDegree = 4

func decode(r io.Reader) (*splat.Gaussians, Info, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(4)
	var p *packed
	var info Info
	var err error
	if len(head) == 4 && binary.LittleEndian.Uint32(head) == Magic {
		data, rerr := io.ReadAll(br)
		if rerr != nil {
			return nil, Info{}, rerr
		}
		p, info, err = readNGSP(data)
	} else {
		p, info, err = readGzip(br)
	}
	if err != nil {
		return nil, Info{}, err
	}
	return unpack(p, info), info, nil
}

// readGzip reads the arrays of a version 2 or 3 file: one gzip stream of
// the 16-byte header and the arrays.
func readGzip(r io.Reader) (*packed, Info, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, Info{}, fmt.Errorf("neither an NGSP header (version 4) nor a gzip stream (versions 2 and 3): %w", err)
	}
	s := &section{r: zr}
	hdr, err := s.read(HeaderSize, "header")
	if err != nil {
		return nil, Info{}, err
	}
	if m := binary.LittleEndian.Uint32(hdr[0:]); m != Magic {
		return nil, Info{}, fmt.Errorf("byte offset 0: magic %#08x, want %#08x (NGSP)", m, uint32(Magic))
	}
	version := binary.LittleEndian.Uint32(hdr[4:])
	switch {
	case version == 1:
		return nil, Info{}, fmt.Errorf("byte offset 4: version 1 (float16 positions) is not supported, only 2, 3 and 4")
	case version != 2 && version != 3:
		return nil, Info{}, fmt.Errorf("byte offset 4: version %d in a gzipped file, want 2 or 3", version)
	}
	count := int64(binary.LittleEndian.Uint32(hdr[8:]))
	deg, fb, flags := int(hdr[12]), int(hdr[13]), hdr[14]
	if err := checkHeader(deg, fb, flags, int(version)); err != nil {
		return nil, Info{}, err
	}
	if hdr[15] != 0 {
		return nil, Info{}, fmt.Errorf("byte offset 15: reserved byte is %d, want 0", hdr[15])
	}
	info := Info{Version: int(version), Count: int(count), SHDegree: deg, FractionalBits: fb, Antialiased: flags&FlagAntialiased != 0}

	p := &packed{}
	copy(p.hdr[:], hdr)
	sizes := arraySizes(count, deg, int(version))
	dst := []*[]byte{&p.pos, &p.alphas, &p.colors, &p.scales, &p.rots, &p.sh}
	for a, n := range sizes {
		if *dst[a], err = s.read(n, arrayNames[a]); err != nil {
			return nil, Info{}, err
		}
	}
	// Reading to the end checks the gzip checksum as well as the length.
	if extra, err := io.Copy(io.Discard, zr); err != nil {
		return nil, Info{}, fmt.Errorf("byte offset %d: after the arrays: %w", s.off+extra, err)
	} else if extra > 0 {
		return nil, Info{}, fmt.Errorf("byte offset %d: %d bytes after the last array (%d splats, SH degree %d, version %d)", s.off, extra, count, deg, version)
	}
	return p, info, nil
}

// unpack turns the arrays back into splats in the scene's axes; SH above
// splat.MaxSHDegree (a degree-4 file) is dropped.
func unpack(p *packed, info Info) *splat.Gaussians {
	n, fb, deg := info.Count, info.FractionalBits, info.SHDegree
	pos, alphas, colors, scales, rots, shs := p.pos, p.alphas, p.colors, p.scales, p.rots, p.sh
	g := splat.New(n)
	step := 1 / float32(int(1)<<fb)
	for j := 0; j < 3*n; j++ {
		b := pos[3*j : 3*j+3]
		// Sign-extend the 24-bit value through the top byte of an int32.
		f := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
		g.Means[j] = posSign[j%3] * float32(f) * step
	}
	for i := 0; i < n; i++ {
		g.OpacityLogits[i] = quant.AlphaLogit(alphas[i])
	}
	for i := 0; i < n; i++ {
		for c := 0; c < 3; c++ {
			g.SH[i*splat.SHCoeffs*3+c] = decodeColor(colors[3*i+c])
		}
	}
	for j := 0; j < 3*n; j++ {
		g.LogScales[j] = decodeScale(scales[j])
	}
	for i := 0; i < n; i++ {
		var q [4]float64
		if info.Version >= 3 {
			q = unpackSmallest3([4]byte(rots[4*i : 4*i+4]))
		} else {
			q = unpackFirst3([3]byte(rots[3*i : 3*i+3]))
		}
		wq := fromRUB(q)
		copy(g.Quats[4*i:4*i+4], wq[:])
	}
	k := shDims(deg)
	keep := shDims(min(deg, splat.MaxSHDegree))
	for i := 0; i < n; i++ {
		src := shs[i*3*k : (i+1)*3*k]
		dst := g.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		for j := 1; j <= keep; j++ {
			for c := 0; c < 3; c++ {
				dst[j*3+c] = shSign[j] * decodeSH(src[(j-1)*3+c])
			}
		}
	}
	return g
}
