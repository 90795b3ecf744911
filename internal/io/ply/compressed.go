package ply

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/io/quant"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// The compressed PLY of SuperSplat and PlayCanvas' splat-transform keeps
// splats in chunks of compressedChunk. Each chunk record holds the float
// bounds of its splats' positions and log scales (min_x..max_z,
// min_scale_x..max_scale_z) and, in newer files, of their base colours
// (min_r..max_b). Each vertex holds four uint32:
//
//	packed_position  x, y, z as 11, 10, 11 bits (high to low) between the chunk bounds
//	packed_scale     log scales, the same way
//	packed_color     r, g, b, alpha as 8 bits each (high to low): colours between the chunk's
//	                 bounds (or 0..1 without them) as 0.5 + SHC0·dc, alpha the opacity
//	packed_rotation  "smallest three": the index of the largest of (rot_0..rot_3) in the top 2
//	                 bits, then the other three in order as 10 bits each of (v/√½ + 1)/2
//
// An optional element sh holds f_rest_0..f_rest_(M−1) as uchar, channel
// major as in the INRIA layout, each value b decoding to 8·(t − 0.5) with
// t = 0, 1 or (b + 0.5)/256 for b = 0, 255 or anything between.
const compressedChunk = 256

var (
	chunkBounds = []string{"min_x", "min_y", "min_z", "max_x", "max_y", "max_z",
		"min_scale_x", "min_scale_y", "min_scale_z", "max_scale_x", "max_scale_y", "max_scale_z"}
	chunkColors  = []string{"min_r", "min_g", "min_b", "max_r", "max_g", "max_b"}
	packedFields = []string{"packed_position", "packed_rotation", "packed_scale", "packed_color"}
)

// isCompressed tells a compressed PLY by its header: a chunk element and a
// vertex element with packed_position.
func isCompressed(h *header) bool {
	v := h.element("vertex")
	return v != nil && h.element("chunk") != nil && v.hasProp("packed_position")
}

// namedPlan maps the properties named in want onto slots 0..len(want)−1 of a
// raw plan, refusing a missing one, a list, or one whose type is not typ
// (tNone: any scalar). Other properties are skipped.
func namedPlan(e *element, want []string, optional bool, typ scalar, name string) (*plan, bool, error) {
	pl := &plan{slot: make([]int, len(e.props)), width: len(want), raw: make([]float64, len(want))}
	found := 0
	for k, p := range e.props {
		pl.slot[k] = -1
		for s, w := range want {
			if p.name != w {
				continue
			}
			if p.isList() || (typ != tNone && p.typ != typ) {
				return nil, false, fmt.Errorf("ply: %s: header line %d: compressed PLY: element %s, property %s must be a scalar %s", name, p.line, e.name, p.name, typ)
			}
			pl.slot[k] = s
			found++
		}
	}
	if found == len(want) {
		return pl, true, nil
	}
	if optional && found == 0 {
		return nil, false, nil
	}
	var missing []string
	for _, w := range want {
		if !e.hasProp(w) {
			missing = append(missing, w)
		}
	}
	return nil, false, fmt.Errorf("ply: %s: header line %d: compressed PLY: element %s lacks %s", name, e.line, e.name, strings.Join(missing, ", "))
}

// readCompressed decodes a compressed PLY whose header b has read.
func readCompressed(b *bodyReader, name string) (*splat.Gaussians, Info, error) {
	v, ch := b.h.element("vertex"), b.h.element("chunk")
	if b.h.format != formatBinaryLE {
		return nil, Info{}, fmt.Errorf("ply: %s: compressed PLY in %s, want binary_little_endian", name, b.h.format)
	}
	if v.count > math.MaxInt32 {
		return nil, Info{}, fmt.Errorf("ply: %s: header line %d: vertex count %d is too large", name, v.line, v.count)
	}
	if want := (v.count + compressedChunk - 1) / compressedChunk; ch.count != want {
		return nil, Info{}, fmt.Errorf("ply: %s: header line %d: compressed PLY: %d chunks for %d vertices, want %d (one per %d)", name, ch.line, ch.count, v.count, want, compressedChunk)
	}
	cpl, _, err := namedPlan(ch, chunkBounds, false, tFloat32, name)
	if err != nil {
		return nil, Info{}, err
	}
	colPl, hasColors, err := namedPlan(ch, chunkColors, true, tFloat32, name)
	if err != nil {
		return nil, Info{}, err
	}
	vpl, _, err := namedPlan(v, packedFields, false, tUint32, name)
	if err != nil {
		return nil, Info{}, err
	}
	var shPl *plan
	degree := 0
	sh := b.h.element("sh")
	if sh != nil {
		if sh.count != v.count {
			return nil, Info{}, fmt.Errorf("ply: %s: header line %d: compressed PLY: element sh has %d records for %d vertices", name, sh.line, sh.count, v.count)
		}
		d, ok := restDegree(len(sh.props))
		if !ok || d == 0 {
			return nil, Info{}, fmt.Errorf("ply: %s: header line %d: compressed PLY: element sh has %d properties, want 9, 24 or 45", name, sh.line, len(sh.props))
		}
		names := make([]string, len(sh.props))
		for j := range names {
			names[j] = "f_rest_" + strconv.Itoa(j)
		}
		if shPl, _, err = namedPlan(sh, names, false, tUint8, name); err != nil {
			return nil, Info{}, err
		}
		degree = d
	}

	// The chunk records' colours share the record with the bounds, so one
	// emit reads both plans' raw values from the same record.
	nc := int(ch.count)
	bounds := make([]float32, 0, 18*min(nc, 1<<16))
	colors := make([]float32, 0, 6*min(nc, 1<<16))
	if hasColors {
		// Both plans must see every property; merge them into one.
		merged := &plan{slot: make([]int, len(ch.props)), width: 18, raw: make([]float64, 18)}
		for k := range ch.props {
			merged.slot[k] = cpl.slot[k]
			if colPl.slot[k] >= 0 {
				merged.slot[k] = 12 + colPl.slot[k]
			}
		}
		cpl = merged
	}
	emitChunk := func(_ int64, _ []float32) error {
		for s, x := range cpl.raw {
			if s < 12 {
				bounds = append(bounds, float32(x))
			} else {
				colors = append(colors, float32(x))
			}
		}
		return nil
	}
	n := int(v.count)
	packed := make([]uint32, 0, 4*min(n, 1<<20))
	emitVertex := func(_ int64, _ []float32) error {
		for _, x := range vpl.raw {
			packed = append(packed, uint32(x))
		}
		return nil
	}
	var shBytes []byte
	targets := []target{{ch, cpl, emitChunk}, {v, vpl, emitVertex}}
	if shPl != nil {
		shBytes = make([]byte, 0, len(sh.props)*min(n, 1<<20))
		targets = append(targets, target{sh, shPl, func(_ int64, _ []float32) error {
			for _, x := range shPl.raw {
				shBytes = append(shBytes, byte(x))
			}
			return nil
		}})
	}
	if err := b.readAll(targets...); err != nil {
		return nil, Info{}, err
	}
	for j, x := range bounds {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, Info{}, fmt.Errorf("ply: %s: compressed PLY: chunk %d, property %s is %g", name, j/12, chunkBounds[j%12], x)
		}
	}

	g := splat.New(n)
	for i := 0; i < n; i++ {
		c := i / compressedChunk
		bd := bounds[12*c : 12*c+12]
		pos, rot, scl, col := packed[4*i], packed[4*i+1], packed[4*i+2], packed[4*i+3]
		p := unpack111011(pos)
		s := unpack111011(scl)
		for a := 0; a < 3; a++ {
			g.Means[3*i+a] = lerp(bd[a], bd[3+a], p[a])
			g.LogScales[3*i+a] = lerp(bd[6+a], bd[9+a], s[a])
		}
		q := unpackRotation(rot)
		copy(g.Quats[4*i:4*i+4], q[:])
		for a := 0; a < 3; a++ {
			t := float64(col>>(24-8*a)&0xff) / 255
			if hasColors {
				t = float64(lerp(colors[6*c+a], colors[6*c+3+a], t))
			}
			g.SH[i*splat.SHCoeffs*3+a] = float32((t - 0.5) / splat.SHC0)
		}
		g.OpacityLogits[i] = quant.AlphaLogit(byte(col))
		if shBytes != nil {
			k := splat.NumCoeffs(degree)
			src := shBytes[i*3*(k-1) : (i+1)*3*(k-1)]
			dst := g.SH[i*splat.SHCoeffs*3:]
			for a := 0; a < 3; a++ {
				for j := 1; j < k; j++ {
					dst[j*3+a] = decodeSHByte(src[a*(k-1)+j-1])
				}
			}
		}
	}
	info := Info{Format: b.h.format.String(), SHDegree: degree, Count: n, Compressed: true}
	return g, info, nil
}

func lerp(a, b float32, t float64) float32 { return float32(float64(a)*(1-t) + float64(b)*t) }

// unpack111011 splits a packed position or scale into its three fractions
// of the chunk's range.
func unpack111011(v uint32) [3]float64 {
	return [3]float64{float64(v>>21) / 2047, float64(v>>11&0x3ff) / 1023, float64(v&0x7ff) / 2047}
}

// unpackRotation decodes a packed_rotation into (rot_0..rot_3) = (w,x,y,z).
func unpackRotation(v uint32) [4]float32 {
	var q [4]float32
	big := int(v >> 30)
	sum := 0.0
	shift := 20
	for i := 0; i < 4; i++ {
		if i == big {
			continue
		}
		x := (float64(v>>shift&0x3ff)/1023 - 0.5) * math.Sqrt2
		shift -= 10
		q[i] = float32(x)
		sum += x * x
	}
	q[big] = float32(math.Sqrt(max(0, 1-sum)))
	return q
}

func decodeSHByte(b byte) float32 {
	t := (float64(b) + 0.5) / 256
	switch b {
	case 0:
		t = 0
	case 255:
		t = 1
	}
	return float32((t - 0.5) * 8)
}
