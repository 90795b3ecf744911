// Package raster is the CPU rasterizer of both render models (design.md §4):
// the forward pass (the rasterFwd stage) blends each tile's depth-sorted
// splats front to back into an image, and the backward pass (rasterBwd) walks
// them back to front to turn the loss gradient per pixel into gradients with
// respect to every splat's prepared data (prep.PrepGradsOf).
//
// The same generic code runs in float32 (the CPU engine, and the reference
// the GPU kernels are checked against) and in float64 (the finite-difference
// checks), so a check of one is a check of the other.
//
// Results are deterministic: the forward is per pixel and does not depend on
// the number of workers; the backward gives bit-identical gradients run to
// run for a given Frame.Workers (checkpoint resume relies on it), because
// tiles are assigned to workers statically and per-worker partial sums are
// added in worker order.
//
// Non-goals: projection, SH colour, binning and sorting (internal/prep
// produces the Projected data and TileLists this package consumes), the loss,
// and the projection backward. The package keeps no per-pixel list of hits
// (seed defect 11): the backward recomputes alpha from the prepared data.
package raster
