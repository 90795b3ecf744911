package ply

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Write writes g as a binary little-endian PLY in the INRIA layout with the
// f_rest properties of SH degree shDegree (0..3); coefficients above it are
// not written. nx ny nz are written as 0, as the original code does. g must
// pass g.Validate(): a NaN in a file would make it unreadable here and
// unrenderable elsewhere. Each of comments becomes a "comment" line of the header (a run's
// identity, say); one that holds a line break is an error.
func Write(w io.Writer, g *splat.Gaussians, shDegree int, comments ...string) error {
	if err := encode(w, g, shDegree, comments); err != nil {
		return fmt.Errorf("ply: write: %w", err)
	}
	return nil
}

// encode is Write without the package prefix on its errors.
func encode(w io.Writer, g *splat.Gaussians, shDegree int, comments []string) error {
	if shDegree < 0 || shDegree > splat.MaxSHDegree {
		return fmt.Errorf("SH degree %d, want 0..%d", shDegree, splat.MaxSHDegree)
	}
	for _, c := range comments {
		if strings.ContainsAny(c, "\r\n") {
			return fmt.Errorf("header comment %q holds a line break", c)
		}
	}
	if err := g.Validate(); err != nil {
		return err
	}
	k := splat.NumCoeffs(shDegree)
	nRest := 3 * (k - 1)

	var hb strings.Builder
	hb.WriteString("ply\nformat binary_little_endian 1.0\n")
	for _, c := range comments {
		fmt.Fprintf(&hb, "comment %s\n", c)
	}
	fmt.Fprintf(&hb, "element vertex %d\n", g.Len())
	for _, p := range []string{"x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"} {
		fmt.Fprintf(&hb, "property float %s\n", p)
	}
	for j := 0; j < nRest; j++ {
		fmt.Fprintf(&hb, "property float f_rest_%d\n", j)
	}
	for _, p := range []string{"opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"} {
		fmt.Fprintf(&hb, "property float %s\n", p)
	}
	hb.WriteString("end_header\n")

	bw := bufio.NewWriterSize(w, 1<<16)
	if _, err := bw.WriteString(hb.String()); err != nil {
		return err
	}
	vals := make([]float32, 0, 17+nRest)
	rec := make([]byte, 4*(17+nRest))
	for i := 0; i < g.Len(); i++ {
		sh := g.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		vals = append(vals[:0], g.Means[3*i:3*i+3]...)
		vals = append(vals, 0, 0, 0)
		vals = append(vals, sh[0:3]...)
		// Channel-major in the file: f_rest index = c·(K−1) + k−1.
		for c := 0; c < 3; c++ {
			for j := 1; j < k; j++ {
				vals = append(vals, sh[j*3+c])
			}
		}
		vals = append(vals, g.OpacityLogits[i])
		vals = append(vals, g.LogScales[3*i:3*i+3]...)
		vals = append(vals, g.Quats[4*i:4*i+4]...)
		for j, v := range vals {
			binary.LittleEndian.PutUint32(rec[4*j:], math.Float32bits(v))
		}
		if _, err := bw.Write(rec); err != nil {
			return fmt.Errorf("splat %d: %w", i, err)
		}
	}
	return bw.Flush()
}

// WriteFile writes g to path as Write does, atomically: the data goes to a
// temporary file in the same directory, which is synced and renamed over
// path, and the directory is synced, so that a crash leaves either the old
// file or the new one, never a partial one.
func WriteFile(path string, g *splat.Gaussians, shDegree int, comments ...string) error {
	err := writeAtomic(path, func(w io.Writer) error { return encode(w, g, shDegree, comments) }, nil)
	if err != nil {
		return fmt.Errorf("ply: write %s: %w", path, err)
	}
	return nil
}

// writeAtomic is atomicfile.Write; the tests pass a hook that stands for a
// crash before the rename.
func writeAtomic(path string, write func(io.Writer) error, beforeRename func(tmp string) error) error {
	return atomicfile.Write(path, write, beforeRename)
}
