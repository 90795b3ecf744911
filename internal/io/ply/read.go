package ply

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/io/finite"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Info describes a splat file as read.
type Info struct {
	// Format is the body encoding: "binary_little_endian",
	// "binary_big_endian" or "ascii".
	Format string
	// SHDegree is the degree the file's f_rest properties hold (0..3).
	SHDegree int
	// Count is the number of splats (vertices).
	Count int
	// Extra lists, in file order, the vertex properties outside the INRIA
	// layout, which were read past and dropped. The layout's own nx ny nz
	// are dropped too but not listed.
	Extra []string
	// Compressed is true for a SuperSplat/PlayCanvas compressed PLY.
	Compressed bool
	// Warning, when not empty, reports values replaced on reading: the
	// ±Inf opacity logits and log scales other tools write, clamped to
	// finite bounds (internal/io/finite), with their count and where the
	// first was.
	Warning string
}

// Slots of a splat row: the layout's scalar properties in a fixed order,
// then f_rest_0.. from slotRest on.
const (
	slotX       = 0  // x y z
	slotDC      = 3  // f_dc_0..2
	slotOpacity = 6  // opacity
	slotScale   = 7  // scale_0..2
	slotRot     = 10 // rot_0..3
	slotRest    = 14 // f_rest_0..
)

// required lists the layout's required properties by slot. Read-only.
var required = [slotRest]string{
	"x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
	"scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3",
}

// restDegree maps a valid number of f_rest properties to its SH degree:
// 3·(K−1) for K = (degree+1)² coefficients per channel.
func restDegree(n int) (int, bool) {
	for d := 0; d <= splat.MaxSHDegree; d++ {
		if 3*(splat.NumCoeffs(d)-1) == n {
			return d, true
		}
	}
	return 0, false
}

// ReadFile reads a splat PLY file; see Read.
func ReadFile(path string) (*splat.Gaussians, Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Info{}, fmt.Errorf("ply: %w", err)
	}
	defer f.Close()
	return Read(f, path)
}

// Read reads a splat PLY in the INRIA layout from r; name (usually the path)
// is used in error messages. Coefficients above the file's SH degree are
// zero in the result. A file with zero vertices is valid and gives N = 0.
//
// A SuperSplat/PlayCanvas compressed PLY (element chunk, packed_*
// properties) is recognised by its header and decoded (see compressed.go).
//
// Missing required properties, an f_rest count that is not 0, 9, 24 or 45,
// NaN, infinite values other than in opacity and scale_* (which are clamped
// and reported in Info.Warning), and truncated input are errors naming
// where they are. When r can report its size (bytes.Reader, os.File, …) counts that do
// not fit are refused up front; otherwise memory grows only with the data
// actually read.
func Read(r io.Reader, name string) (*splat.Gaussians, Info, error) {
	b, err := open(r, name)
	if err != nil {
		return nil, Info{}, err
	}
	v := b.h.element("vertex")
	if v == nil {
		return nil, Info{}, fmt.Errorf("ply: %s: no element vertex in the header", name)
	}
	if isCompressed(b.h) {
		return readCompressed(b, name)
	}
	pl, degree, extra, err := splatPlan(b.h, v, name)
	if err != nil {
		return nil, Info{}, err
	}
	// Other tools write ±Inf logits and log scales where these saturate;
	// they are clamped and counted, while NaN stays an error.
	pl.infBound = make([]float32, pl.width)
	pl.infBound[slotOpacity] = finite.LogitBound
	for c := 0; c < 3; c++ {
		pl.infBound[slotScale+c] = finite.LogScaleBound
	}
	if v.count > math.MaxInt/(splat.SHCoeffs*3) {
		return nil, Info{}, fmt.Errorf("ply: %s: header line %d: vertex count %d is too large", name, v.line, v.count)
	}
	info := Info{Format: b.h.format.String(), SHDegree: degree, Count: int(v.count), Extra: extra}

	// Allocate everything at once when open has checked the count against
	// the input size; otherwise grow as records arrive.
	n := int(v.count)
	if !b.sized {
		n = min(n, 4096)
	}
	g := &splat.Gaussians{}
	grow(g, n)
	k := splat.NumCoeffs(degree)
	emit := func(i64 int64, row []float32) error {
		i := int(i64)
		if i >= g.Len() {
			grow(g, min(int(v.count), max(2*g.Len(), 4096)))
		}
		copy(g.Means[3*i:3*i+3], row[slotX:slotX+3])
		copy(g.LogScales[3*i:3*i+3], row[slotScale:slotScale+3])
		copy(g.Quats[4*i:4*i+4], row[slotRot:slotRot+4])
		g.OpacityLogits[i] = row[slotOpacity]
		sh := g.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		copy(sh[0:3], row[slotDC:slotDC+3])
		// The file is channel-major (f_rest index = c·(K−1) + k−1); the
		// splat arrays are coefficient-major ([k][c]).
		for c := 0; c < 3; c++ {
			for j := 1; j < k; j++ {
				sh[j*3+c] = row[slotRest+c*(k-1)+j-1]
			}
		}
		return nil
	}
	if err := b.readAll(target{v, pl, emit}); err != nil {
		return nil, Info{}, err
	}
	info.Warning = pl.inf.Warning("ply: " + name)
	return g, info, nil
}

// grow resizes g to n splats, keeping its contents; new splats are zero.
func grow(g *splat.Gaussians, n int) {
	re := func(s []float32, w int) []float32 {
		t := make([]float32, n*w)
		copy(t, s)
		return t
	}
	g.Means = re(g.Means, 3)
	g.LogScales = re(g.LogScales, 3)
	g.Quats = re(g.Quats, 4)
	g.OpacityLogits = re(g.OpacityLogits, 1)
	g.SH = re(g.SH, splat.SHCoeffs*3)
}

// splatPlan maps the vertex properties onto splat row slots and works out
// the SH degree, or says which properties are missing or malformed.
func splatPlan(h *header, v *element, name string) (*plan, int, []string, error) {
	where := fmt.Sprintf("ply: %s: header line %d: element vertex", name, v.line)
	pl := &plan{slot: make([]int, len(v.props))}
	var extra []string
	var have [slotRest]bool
	var rest []int // f_rest index of each f_rest property, by property
	for k, p := range v.props {
		pl.slot[k] = -1
		s := -1
		for j, r := range required {
			if p.name == r {
				s = j
			}
		}
		if s < 0 {
			if idx, ok := strings.CutPrefix(p.name, "f_rest_"); ok {
				j, err := strconv.Atoi(idx)
				if err != nil || j < 0 || strconv.Itoa(j) != idx {
					return nil, 0, nil, fmt.Errorf("%s: property %s (line %d): %q is not an f_rest index", where, p.name, p.line, idx)
				}
				rest = append(rest, j)
				s = slotRest + j
			}
		}
		switch {
		case s < 0 && (p.name == "nx" || p.name == "ny" || p.name == "nz"):
			continue
		case s < 0:
			extra = append(extra, p.name)
			continue
		case p.isList():
			return nil, 0, nil, fmt.Errorf("%s: property %s (line %d) is a list, want a scalar", where, p.name, p.line)
		}
		if s < slotRest {
			have[s] = true
		}
		pl.slot[k] = s
	}

	var missing []string
	for j, ok := range have {
		if !ok {
			missing = append(missing, required[j])
		}
	}
	if len(missing) > 0 {
		if v.hasProp("packed_position") || h.element("chunk") != nil {
			return nil, 0, nil, fmt.Errorf("%s: this is a compressed PLY (SuperSplat/PlayCanvas: element chunk, packed_* properties), which is not supported; decompress it to the INRIA layout first", where)
		}
		return nil, 0, nil, fmt.Errorf("%s: missing properties %s", where, strings.Join(missing, ", "))
	}

	degree, ok := restDegree(len(rest))
	if !ok {
		return nil, 0, nil, fmt.Errorf("%s: %d f_rest properties, want 0, 9, 24 or 45 (SH degree 0, 1, 2 or 3)", where, len(rest))
	}
	// Names are distinct (the header parser refuses duplicates), so indices
	// all below the count cover 0..count−1 exactly.
	for _, j := range rest {
		if j >= len(rest) {
			return nil, 0, nil, fmt.Errorf("%s: property f_rest_%d is out of range for %d f_rest properties (want f_rest_0..f_rest_%d)", where, j, len(rest), len(rest)-1)
		}
	}
	pl.width = slotRest + len(rest)
	return pl, degree, extra, nil
}

func (e *element) hasProp(name string) bool {
	for _, p := range e.props {
		if p.name == name {
			return true
		}
	}
	return false
}
