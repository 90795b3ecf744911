package main

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

// readScene reads the splats of a trained PLY or of a checkpoint (exactly one of the two
// paths is set) and checks them. deg is the PLY's SH degree, or ckptDeg for a checkpoint,
// whose degree lives in its config rather than beside the splats.
func readScene(plyPath, ckptPath string, ckptDeg int) (g *splat.Gaussians, deg int, err error) {
	in := plyPath
	if plyPath != "" {
		var info ply.Info
		if g, info, err = ply.ReadFile(plyPath); err != nil {
			return nil, 0, err
		}
		deg = info.SHDegree
	} else {
		in = ckptPath
		st, _, err := train.LoadCheckpoint(ckptPath)
		if err != nil {
			return nil, 0, err
		}
		g, deg = st.Params, ckptDeg
	}
	if err := g.Validate(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", in, err)
	}
	return g, deg, nil
}
