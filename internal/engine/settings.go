package engine

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/adam"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// BinMode selects where and how splats are binned to tiles (design.md §5
// step 2). The CPU engine always bins on the host; the modes matter to the
// GPU engine and to parity.
type BinMode string

// The three bin modes.
const (
	BinGPUConic      BinMode = "gpu-conic"
	BinGPURadiusAABB BinMode = "gpu-radius-aabb"
	BinCPUConic      BinMode = "cpu-conic"
)

// Settings are the engine's fixed settings for a training run.
type Settings struct {
	Render        prep.Model
	RadiusScale   float64
	Near          float64
	Antialiased   bool
	TileSize      int
	BinMode       BinMode
	MaxSplatSteps int
	Loss          loss.Kind
	SSIMLambda    float32
	Adam          AdamSettings
	// AbsGrad makes the densification statistic AbsGS's (EWA only): the norm of the pixels'
	// contributions to the 2D mean's gradient summed by magnitude (gsplat's absgrad).
	AbsGrad bool
	Workers int
}

// AdamSettings are the optimizer's fixed settings (learning rates come per
// step in StepOptions).
type AdamSettings struct {
	Beta1, Beta2, Eps float32
	GradClip          float32 // elementwise |g| ≤ clip; 0 = off
	VisibleOnly       bool    // update only splats visible this step (sparse Adam)
	// VisibleOnlySH updates the SH rest coefficients (bands 1–3, 45 of a splat's 59 values)
	// only for the splats visible this step; the other groups stay dense. A band-1–3
	// coefficient of a splat out of view has no gradient, and its dense update only carries
	// on the view-dependent colour's momentum, at three quarters of Adam's memory traffic.
	VisibleOnlySH bool
}

// Optimizer returns the optimizer's configuration for these settings (learning rates 0: they
// come per step): every group visible-only with VisibleOnly, the SH rest with VisibleOnlySH.
func (a AdamSettings) Optimizer() adam.Config {
	c := adam.BaseConfig()
	c.Beta1, c.Beta2, c.Eps = float64(a.Beta1), float64(a.Beta2), float64(a.Eps)
	for g := range c.Groups {
		c.Groups[g].Clip = a.GradClip
		c.Groups[g].VisibleOnly = a.VisibleOnly || (a.VisibleOnlySH && adam.Group(g) == adam.SHRest)
	}
	return c
}

// SparseGroups is the groups that update only the splats in view, bit g for adam.Group g (the
// fused engine's adam_step takes it so).
func (a AdamSettings) SparseGroups() uint32 {
	var m uint32
	for g, gc := range a.Optimizer().Groups {
		if gc.VisibleOnly {
			m |= 1 << g
		}
	}
	return m
}

// ForBatch returns the settings for steps over batches of b views, by gsplat's rules for
// batches (after Malladi et al.'s square-root scaling of Adam): β 1 − b(1 − β) for both
// moments, so that a moment forgets as fast per view as it did per single-view step, and
// ε/√b, as the learning rates are scaled by √b (by the trainer, per step). One view keeps the
// settings as they are. β1 below 0 (b > 10 for 0.9) is an error.
func (a AdamSettings) ForBatch(b int) (AdamSettings, error) {
	if b <= 1 {
		return a, nil
	}
	fb := float64(b)
	b1 := 1 - fb*(1-float64(a.Beta1))
	b2 := 1 - fb*(1-float64(a.Beta2))
	const slack = 1e-6 // 1 − β of a float32 β is not exact
	if b1 < -slack || b2 < -slack {
		return a, fmt.Errorf("engine: a batch of %d views makes Adam's betas %.4g, %.4g: below 0", b, b1, b2)
	}
	a.Beta1, a.Beta2 = float32(max(b1, 0)), float32(max(b2, 0))
	a.Eps = float32(float64(a.Eps) / math.Sqrt(fb))
	return a, nil
}

// DefaultSettings are the 3DGS defaults (design.md §5, §6).
func DefaultSettings() Settings {
	return Settings{
		Render: prep.EWA, RadiusScale: 1, Near: 0.01, TileSize: 16, BinMode: BinGPUConic,
		Loss: loss.L1SSIM, SSIMLambda: 0.2,
		Adam:    AdamSettings{Beta1: 0.9, Beta2: 0.999, Eps: 1e-15},
		Workers: 1,
	}
}

// Validate reports settings no engine can run with.
func (s *Settings) Validate() error {
	switch s.BinMode {
	case BinGPUConic, BinGPURadiusAABB, BinCPUConic:
	default:
		return fmt.Errorf("engine: bin mode %q is not one of %s, %s, %s", s.BinMode, BinGPUConic, BinGPURadiusAABB, BinCPUConic)
	}
	if s.TileSize < 1 || s.TileSize > 64 {
		return fmt.Errorf("engine: tile size %d outside 1..64", s.TileSize)
	}
	if s.MaxSplatSteps < 0 {
		return fmt.Errorf("engine: max splat steps %d < 0", s.MaxSplatSteps)
	}
	if s.AbsGrad && s.Render == prep.Ray {
		return fmt.Errorf("engine: the absolute-gradient statistic needs the ewa model's 2D means; the ray model has none")
	}
	return nil
}

// Prep returns the projection settings for an SH degree.
func (s *Settings) Prep(shDegree int) prep.Settings {
	return prep.Settings{Model: s.Render, SHDegree: shDegree, Near: s.Near, RadiusScale: s.RadiusScale, Antialiased: s.Antialiased, TileSize: s.TileSize, AbsGrad: s.AbsGrad}
}
