package ckpt

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// PutGaussians stores g as one float32 section per field, named
// prefix/field (splat.Gaussians.Fields names them).
func (f *File) PutGaussians(prefix string, g *splat.Gaussians) {
	for _, fl := range g.Fields() {
		f.PutFloat32(prefix+"/"+fl.Name, fl.Data)
	}
}

// Gaussians reads back what PutGaussians stored under prefix; every field
// must be there and hold the same number of Gaussians.
func (f *File) Gaussians(prefix string) (*splat.Gaussians, error) {
	g := &splat.Gaussians{}
	n := -1
	for _, fl := range g.Fields() {
		v, err := f.Float32(prefix + "/" + fl.Name)
		if err != nil {
			return nil, err
		}
		if len(v)%fl.Width != 0 || (n >= 0 && len(v)/fl.Width != n) {
			return nil, fmt.Errorf("section %s/%s: %d values do not fit %d Gaussians × %d", prefix, fl.Name, len(v), n, fl.Width)
		}
		n = len(v) / fl.Width
		switch fl.Name {
		case "means":
			g.Means = v
		case "log_scales":
			g.LogScales = v
		case "quats":
			g.Quats = v
		case "opacity_logits":
			g.OpacityLogits = v
		case "sh":
			g.SH = v
		}
	}
	return g, nil
}
