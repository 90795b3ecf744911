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

// Read reads an SPZ stream of version 2 or 3 from r and returns its splats
// in the scene's RDF axes; name (usually the path) is used in error
// messages, which also give the byte offset in the decompressed stream.
// Coefficients above the file's SH degree are zero.
//
// Memory grows only with the data actually decompressed, so a header
// claiming more splats than the stream holds costs nothing; trailing bytes
// after the SH array and a bad gzip checksum are errors.
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

func decode(r io.Reader) (*splat.Gaussians, Info, error) {
	zr, err := gzip.NewReader(bufio.NewReader(r))
	if err != nil {
		return nil, Info{}, fmt.Errorf("not a gzip stream (SPZ files are gzipped): %w", err)
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
		return nil, Info{}, fmt.Errorf("byte offset 4: version 1 (float16 positions) is not supported, only 2 and 3")
	case version != 2 && version != 3:
		return nil, Info{}, fmt.Errorf("byte offset 4: version %d, want 2 or 3", version)
	}
	count := int64(binary.LittleEndian.Uint32(hdr[8:]))
	deg := int(hdr[12])
	if deg > splat.MaxSHDegree {
		return nil, Info{}, fmt.Errorf("byte offset 12: SH degree %d, want 0..%d", deg, splat.MaxSHDegree)
	}
	fb := int(hdr[13])
	if fb > 23 {
		return nil, Info{}, fmt.Errorf("byte offset 13: %d fractional bits, want at most 23 of a 24-bit coordinate", fb)
	}
	flags := hdr[14]
	if extra := flags &^ FlagAntialiased; extra != 0 {
		// Flag 0x2 announces extension records before the arrays; their
		// layout is outside what this package reads, so refuse rather than
		// misread the arrays.
		return nil, Info{}, fmt.Errorf("byte offset 14: flags %#02x: unknown bits %#02x (extensions are not supported)", flags, extra)
	}
	if hdr[15] != 0 {
		return nil, Info{}, fmt.Errorf("byte offset 15: reserved byte is %d, want 0", hdr[15])
	}
	info := Info{Version: int(version), Count: int(count), SHDegree: deg, FractionalBits: fb, Antialiased: flags&FlagAntialiased != 0}

	rotBytes := int64(4)
	if version == 2 {
		rotBytes = 3
	}
	k := shDims(deg)
	pos, err := s.read(9*count, "positions")
	if err != nil {
		return nil, Info{}, err
	}
	alphas, err := s.read(count, "alphas")
	if err != nil {
		return nil, Info{}, err
	}
	colors, err := s.read(3*count, "colors")
	if err != nil {
		return nil, Info{}, err
	}
	scales, err := s.read(3*count, "scales")
	if err != nil {
		return nil, Info{}, err
	}
	rots, err := s.read(rotBytes*count, "rotations")
	if err != nil {
		return nil, Info{}, err
	}
	shs, err := s.read(int64(3*k)*count, "spherical harmonics")
	if err != nil {
		return nil, Info{}, err
	}
	// Reading to the end checks the gzip checksum as well as the length.
	if extra, err := io.Copy(io.Discard, zr); err != nil {
		return nil, Info{}, fmt.Errorf("byte offset %d: after the arrays: %w", s.off+extra, err)
	} else if extra > 0 {
		return nil, Info{}, fmt.Errorf("byte offset %d: %d bytes after the last array (%d splats, SH degree %d, version %d)", s.off, extra, count, deg, version)
	}

	n := int(count)
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
		if version == 3 {
			q = unpackSmallest3([4]byte(rots[4*i : 4*i+4]))
		} else {
			q = unpackFirst3([3]byte(rots[3*i : 3*i+3]))
		}
		wq := fromRUB(q)
		copy(g.Quats[4*i:4*i+4], wq[:])
	}
	for i := 0; i < n; i++ {
		src := shs[i*3*k : (i+1)*3*k]
		dst := g.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		for j := 1; j <= k; j++ {
			for c := 0; c < 3; c++ {
				dst[j*3+c] = shSign[j] * decodeSH(src[(j-1)*3+c])
			}
		}
	}
	return g, info, nil
}
