package fused

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// kernels holds every entry point the engine launches, one module per kernel file.
type kernels struct {
	mods []gpu.Module

	project, pixelRays               gpu.Kernel
	binCount, binCompact, binRank    gpu.Kernel
	binTotal, binEmit                gpu.Kernel
	binCountBig, binEmitBig          gpu.Kernel
	scanBlocks, scanAdd, scanAddSums gpu.Kernel
	sortHist, sortScatter            gpu.Kernel
	tileRanges                       gpu.Kernel
	rasterFwdEWA, rasterFwdRay       gpu.Kernel // one entry point per render model
	rasterBwdEWA, rasterBwdRay       gpu.Kernel
	rasterBwdChunks                  gpu.Kernel
	lossMap, lossGrad, lossFinish    gpu.Kernel
	projectBwd                       gpu.Kernel
	adamStep, opacityReset           gpu.Kernel
	gatherRows                       gpu.Kernel
}

// loadKernels compiles the engine's kernel files (from the disk cache, NVRTC or the embedded
// PTX, as the device layer decides) and looks up their entry points.
func loadKernels(dev gpu.Device) (*kernels, error) {
	k := &kernels{}
	units := []struct {
		file    string
		entries map[string]*gpu.Kernel
	}{
		{"project.cu", map[string]*gpu.Kernel{"project": &k.project, "pixel_rays": &k.pixelRays}},
		{"bin.cu", map[string]*gpu.Kernel{"bin_count": &k.binCount, "bin_compact": &k.binCompact, "bin_rank": &k.binRank, "bin_total": &k.binTotal, "bin_emit": &k.binEmit,
			"bin_count_big": &k.binCountBig, "bin_emit_big": &k.binEmitBig}},
		{"scan.cu", map[string]*gpu.Kernel{"scan_blocks": &k.scanBlocks, "scan_add": &k.scanAdd, "scan_add_sums": &k.scanAddSums}},
		{"sort.cu", map[string]*gpu.Kernel{"sort_hist": &k.sortHist, "sort_scatter": &k.sortScatter}},
		{"ranges.cu", map[string]*gpu.Kernel{"tile_ranges": &k.tileRanges}},
		{"raster_fwd.cu", map[string]*gpu.Kernel{"raster_fwd_ewa": &k.rasterFwdEWA, "raster_fwd_ray": &k.rasterFwdRay}},
		{"loss.cu", map[string]*gpu.Kernel{"loss_map": &k.lossMap, "loss_grad": &k.lossGrad, "loss_finish": &k.lossFinish}},
		{"raster_bwd.cu", map[string]*gpu.Kernel{"raster_bwd_ewa": &k.rasterBwdEWA, "raster_bwd_ray": &k.rasterBwdRay,
			"raster_bwd_chunks": &k.rasterBwdChunks}},
		{"project_bwd.cu", map[string]*gpu.Kernel{"project_bwd": &k.projectBwd}},
		{"adam.cu", map[string]*gpu.Kernel{"adam_step": &k.adamStep, "opacity_reset": &k.opacityReset}},
		{"edit.cu", map[string]*gpu.Kernel{"gather_rows": &k.gatherRows}},
	}
	for _, u := range units {
		m, err := loadUnit(dev, u.file, u.entries)
		if err != nil {
			k.close()
			return nil, err
		}
		k.mods = append(k.mods, m)
	}
	return k, nil
}

// loadUnit compiles one kernel file and looks up its entry points into entries.
func loadUnit(dev gpu.Device, file string, entries map[string]*gpu.Kernel) (gpu.Module, error) {
	m, err := gpu.CompileShader(dev, file)
	if err != nil {
		return nil, fmt.Errorf("fused: %w", err)
	}
	for name, dst := range entries {
		kern, err := m.Kernel(name)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("fused: %s: %w", file, err)
		}
		*dst = kern
	}
	return m, nil
}

// ceilingKernels are ceiling.cu's measuring kernels (see Ceilings). They are loaded on their
// own, when a measurement asks for them, rather than with the engine's kernels: no step needs
// them, and a device that can only use the embedded PTX must still train when that PTX lacks
// ceiling.ptx.
type ceilingKernels struct {
	mod       gpu.Module
	copy, fma gpu.Kernel
}

func loadCeilingKernels(dev gpu.Device) (*ceilingKernels, error) {
	c := &ceilingKernels{}
	m, err := loadUnit(dev, "ceiling.cu", map[string]*gpu.Kernel{"ceiling_copy": &c.copy, "ceiling_fma": &c.fma})
	if err != nil {
		return nil, err
	}
	c.mod = m
	return c, nil
}

func (c *ceilingKernels) close() error { return c.mod.Close() }

func (k *kernels) close() error {
	var first error
	for _, m := range k.mods {
		if err := m.Close(); err != nil && first == nil {
			first = err
		}
	}
	k.mods = nil
	return first
}
