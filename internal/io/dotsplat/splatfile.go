package dotsplat

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
	"github.com/rlxsplat/rlxsplat/internal/io/quant"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// RecordSize is the size of one splat in the file.
const RecordSize = 32

// ImportanceOrder returns the indices of g's splats in the order Write
// stores them: descending exp(Σ log scale)·sigmoid(logit), ties by index.
// The key is compared as its logarithm, Σ log scale + log sigmoid(logit),
// which orders the same and cannot overflow.
func ImportanceOrder(g *splat.Gaussians) []int {
	n := g.Len()
	key := make([]float64, n)
	for i := range key {
		l := float64(g.OpacityLogits[i])
		// log sigmoid(l) = −log(1 + e^−l), computed stably for both signs.
		logSig := -math.Log1p(math.Exp(-math.Abs(l)))
		if l < 0 {
			logSig += l
		}
		key[i] = float64(g.LogScales[3*i]) + float64(g.LogScales[3*i+1]) + float64(g.LogScales[3*i+2]) + logSig
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return key[order[a]] > key[order[b]] })
	return order
}

// Write writes g as .splat records to w, in ImportanceOrder. g must pass
// g.Validate(); a scale whose exp overflows float32 and a zero quaternion
// are errors naming the splat.
//
// Quantisation: positions exact; scales exp(log scale) rounded to
// float32 (relative 6e−8); colour channels and opacity within 0.5/255
// (colours clamped to [0,1]); each component of the unit quaternion within
// 0.5/128, or 1/128 for a component above 127.5/128 (byte 255 is 127/128).
func Write(w io.Writer, g *splat.Gaussians) error {
	if err := encode(w, g); err != nil {
		return fmt.Errorf("dotsplat: write: %w", err)
	}
	return nil
}

// WriteFile writes g to path as Write does, atomically (atomicfile): a
// crash leaves the old file or the new one, never a partial one.
func WriteFile(path string, g *splat.Gaussians) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return encode(w, g) }, nil); err != nil {
		return fmt.Errorf("dotsplat: write %s: %w", path, err)
	}
	return nil
}

func encode(w io.Writer, g *splat.Gaussians) error {
	if err := g.Validate(); err != nil {
		return err
	}
	// Check everything first, so a bad scene leaves nothing written in w.
	for i := 0; i < g.Len(); i++ {
		for c := 0; c < 3; c++ {
			if s := float32(math.Exp(float64(g.LogScales[3*i+c]))); math.IsInf(float64(s), 0) {
				return fmt.Errorf("splat %d: log scale %g overflows a float32 scale", i, g.LogScales[3*i+c])
			}
		}
		if quatNorm(g.Quats[4*i:4*i+4]) == 0 {
			return fmt.Errorf("splat %d: zero quaternion", i)
		}
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	var rec [RecordSize]byte
	for _, i := range ImportanceOrder(g) {
		for c := 0; c < 3; c++ {
			binary.LittleEndian.PutUint32(rec[4*c:], math.Float32bits(g.Means[3*i+c]))
			binary.LittleEndian.PutUint32(rec[12+4*c:], math.Float32bits(float32(math.Exp(float64(g.LogScales[3*i+c])))))
			dc := g.SH[i*splat.SHCoeffs*3+c]
			rec[24+c] = quant.Byte((0.5 + splat.SHC0*float64(dc)) * 255)
		}
		rec[27] = quant.AlphaByte(g.OpacityLogits[i])
		q := g.Quats[4*i : 4*i+4]
		n := quatNorm(q)
		for c := 0; c < 4; c++ {
			rec[28+c] = quant.Byte(float64(q[c])/n*128 + 128)
		}
		bw.Write(rec[:]) // bufio keeps the first error; Flush reports it.
	}
	return bw.Flush()
}

func quatNorm(q []float32) float64 {
	s := 0.0
	for _, v := range q {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// ReadFile reads a .splat file; see Read.
func ReadFile(path string) (*splat.Gaussians, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dotsplat: %w", err)
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads .splat records from r, in file order; name (usually the path)
// is used in error messages, which give the byte offset and the splat.
// The colour becomes the DC coefficient (SH degree 0), the opacity a
// logit, the scales logs; quaternions are kept as stored, (b − 128)/128.
// A length that is not a multiple of 32, a non-finite position, a scale
// that is not finite and positive, and an all-zero quaternion are errors.
// Memory grows with the records actually read.
func Read(r io.Reader, name string) (*splat.Gaussians, error) {
	g, err := decode(r)
	if err != nil {
		return nil, fmt.Errorf("dotsplat: %s: %w", name, err)
	}
	return g, nil
}

func decode(r io.Reader) (*splat.Gaussians, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	g := splat.New(0)
	var rec [RecordSize]byte
	for i := 0; ; i++ {
		off := int64(i) * RecordSize
		n, err := io.ReadFull(br, rec[:])
		if errors.Is(err, io.EOF) {
			return g, nil
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("byte offset %d: splat %d: the file ends %d bytes into a %d-byte record", off, i, n, RecordSize)
		}
		if err != nil {
			return nil, fmt.Errorf("byte offset %d: splat %d: %w", off+int64(n), i, err)
		}
		if err := appendRecord(g, &rec); err != nil {
			return nil, fmt.Errorf("byte offset %d: splat %d: %w", off, i, err)
		}
	}
}

// appendRecord decodes one record onto the end of g.
func appendRecord(g *splat.Gaussians, rec *[RecordSize]byte) error {
	var mean, logS [3]float32
	for c := 0; c < 3; c++ {
		mean[c] = math.Float32frombits(binary.LittleEndian.Uint32(rec[4*c:]))
		if math.IsNaN(float64(mean[c])) || math.IsInf(float64(mean[c]), 0) {
			return fmt.Errorf("position %c is %g", "xyz"[c], mean[c])
		}
		s := math.Float32frombits(binary.LittleEndian.Uint32(rec[12+4*c:]))
		if !(s > 0) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("scale %d is %g, want a finite positive value", c, s)
		}
		logS[c] = float32(math.Log(float64(s)))
	}
	var q [4]float32
	for c := range q {
		q[c] = (float32(rec[28+c]) - 128) / 128
	}
	if q == [4]float32{} {
		return fmt.Errorf("rotation is the zero quaternion (bytes 128 128 128 128)")
	}
	g.Means = append(g.Means, mean[:]...)
	g.LogScales = append(g.LogScales, logS[:]...)
	g.Quats = append(g.Quats, q[:]...)
	g.OpacityLogits = append(g.OpacityLogits, quant.AlphaLogit(rec[27]))
	var sh [splat.SHCoeffs * 3]float32
	for c := 0; c < 3; c++ {
		sh[c] = float32((float64(rec[24+c])/255 - 0.5) / splat.SHC0)
	}
	g.SH = append(g.SH, sh[:]...)
	return nil
}
