package ply

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// ReadPointCloud reads a plain point-cloud PLY (as nerfstudio's
// ply_file_path names, or COLMAP's fused.ply): the vertex properties x y z
// in any numeric type and, optionally, red green blue as uchar. Other
// properties and elements are ignored. xyz is [N,3]; rgb is [N,3] or nil
// when the file has no colours.
func ReadPointCloud(path string) (xyz []float32, rgb []uint8, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("ply: %w", err)
	}
	defer f.Close()
	return readPointCloud(f, path)
}

func readPointCloud(r io.Reader, name string) ([]float32, []uint8, error) {
	b, err := open(r, name)
	if err != nil {
		return nil, nil, err
	}
	v := b.h.element("vertex")
	if v == nil {
		return nil, nil, fmt.Errorf("ply: %s: no element vertex in the header", name)
	}
	where := fmt.Sprintf("ply: %s: header line %d: element vertex", name, v.line)
	names := [6]string{"x", "y", "z", "red", "green", "blue"}
	pl := &plan{slot: make([]int, len(v.props)), width: len(names)}
	var have [6]bool
	for k, p := range v.props {
		pl.slot[k] = -1
		for s, n := range names {
			if p.name != n {
				continue
			}
			if p.isList() {
				return nil, nil, fmt.Errorf("%s: property %s (line %d) is a list, want a scalar", where, p.name, p.line)
			}
			// Colours of another type would need a guess at their scale
			// (0..1 floats, 16-bit, …); refusing is better than a wrong
			// initial colour.
			if s >= 3 && p.typ != tUint8 {
				return nil, nil, fmt.Errorf("%s: property %s (line %d) is %s, want uchar", where, p.name, p.line, p.typ)
			}
			pl.slot[k] = s
			have[s] = true
		}
	}
	var missing []string
	for s := 0; s < 3; s++ {
		if !have[s] {
			missing = append(missing, names[s])
		}
	}
	colours := have[3] || have[4] || have[5]
	for s := 3; s < 6 && colours; s++ {
		if !have[s] {
			missing = append(missing, names[s])
		}
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("%s: missing properties %s", where, strings.Join(missing, ", "))
	}
	if v.count > int64(maxPoints) {
		return nil, nil, fmt.Errorf("%s: vertex count %d is too large", where, v.count)
	}

	n := int(v.count)
	if !b.sized {
		n = min(n, 4096)
	}
	xyz := make([]float32, 0, 3*n)
	var rgb []uint8
	if colours {
		rgb = make([]uint8, 0, 3*n)
	}
	emit := func(_ int64, row []float32) error {
		xyz = append(xyz, row[0], row[1], row[2])
		if colours {
			// uchar values are exact in float32.
			rgb = append(rgb, uint8(row[3]), uint8(row[4]), uint8(row[5]))
		}
		return nil
	}
	if err := b.readAll(target{v, pl, emit}); err != nil {
		return nil, nil, err
	}
	return xyz, rgb, nil
}

// maxPoints keeps 3·N within an int on every platform.
const maxPoints = (1<<31 - 1) / 3
