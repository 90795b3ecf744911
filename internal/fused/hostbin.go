package fused

import (
	"fmt"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// hostBin is the cpu-conic bin mode (the seed's default; slow, useful for parity): the host
// projects, bins and sorts a copy of the parameters with internal/prep and uploads the
// projection, the lists and the readout's counts; the device then rasterizes them. It
// records event 3 once the uploads are queued.
func (e *Engine) hostBin(cam *camera.Camera, shDegree int, p *pass) error {
	t0 := time.Now()
	g, err := e.Gaussians()
	if err != nil {
		return err
	}
	if e.hostProj == nil {
		e.hostProj = prep.NewProjected[float32](e.set.Render, 0)
	}
	ps := e.set.Prep(shDegree)
	workers := max(e.set.Workers, 1)
	prep.Project(prep.NewCam[float32](cam), &ps, g, e.hostProj, workers)
	t1 := time.Now()
	if err := prep.Emit(&e.binner, e.hostProj, cam.Width, cam.Height, e.set.TileSize, true, workers); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	t2 := time.Now()
	e.binner.SortInto(&e.hostLists)
	t3 := time.Now()
	p.hostTime = map[string]time.Duration{
		engine.StageProject: t1.Sub(t0), engine.StageBin: t2.Sub(t1), engine.StageSort: t3.Sub(t2),
	}
	if err := e.uploadProjected(e.hostProj); err != nil {
		return err
	}
	l := &e.hostLists
	if err := e.growLists(len(l.IDs)); err != nil {
		return err
	}
	// The device's lists hold the tile half of the CPU's tile<<32 | depth keys.
	e.hostTiles = e.hostTiles[:0]
	for _, k := range l.Keys {
		e.hostTiles = append(e.hostTiles, uint32(k>>32))
	}
	if err := gpu.UploadSlice(e.dev, e.keys, 0, e.hostTiles); err != nil {
		return fmt.Errorf("fused: upload tile lists: %w", err)
	}
	if err := gpu.UploadSlice(e.dev, e.ids, 0, l.IDs); err != nil {
		return fmt.Errorf("fused: upload tile lists: %w", err)
	}
	if err := gpu.UploadSlice(e.dev, e.tileOffsets, 0, l.Offsets); err != nil {
		return fmt.Errorf("fused: upload tile lists: %w", err)
	}
	e.sortedKeys, e.sortedIDs = e.keys, e.ids
	visible := uint32(0)
	for _, ok := range e.hostProj.Valid {
		if ok {
			visible++
		}
	}
	if err := gpu.UploadSlice(e.dev, e.ro.B, e.ro.Off/4, []uint32{visible, uint32(len(l.IDs))}); err != nil {
		return fmt.Errorf("fused: upload counts: %w", err)
	}
	return e.record(3)
}

// uploadProjected copies a host projection into the device's projected buffers.
func (e *Engine) uploadProjected(pr *prep.Projected) error {
	valid := make([]uint32, len(pr.Valid))
	for i, ok := range pr.Valid {
		if ok {
			valid[i] = 1
		}
	}
	if err := gpu.UploadU32(e.dev, e.valid, valid); err != nil {
		return fmt.Errorf("fused: upload projection: %w", err)
	}
	// bin_compact's list of the visible splats, which project_bwd walks.
	vis := make([]uint32, 0, len(valid))
	for i, ok := range pr.Valid {
		if ok {
			vis = append(vis, uint32(i))
		}
	}
	if len(vis) > 0 {
		if err := gpu.UploadU32(e.dev, e.vis, vis); err != nil {
			return fmt.Errorf("fused: upload projection: %w", err)
		}
	}
	fields := []struct {
		dst gpu.Buffer
		src []float32
	}{
		{e.depth, pr.Depth}, {e.opacity, pr.Opacity}, {e.color, pr.Color}, {e.mean2d, pr.Mean2D},
		{e.conic, pr.Conic}, {e.boundCenter, pr.BoundCenter}, {e.boundQ, pr.BoundQ}, {e.radius, pr.Radius},
	}
	if e.set.Render == prep.Ray {
		fields = append(fields, struct {
			dst gpu.Buffer
			src []float32
		}{e.rayU, pr.RayU}, struct {
			dst gpu.Buffer
			src []float32
		}{e.rayA, pr.RayA}, struct {
			dst gpu.Buffer
			src []float32
		}{e.rayHalf, pr.RayHalf})
	}
	for _, f := range fields {
		if err := gpu.UploadF32(e.dev, f.dst, f.src); err != nil {
			return fmt.Errorf("fused: upload projection: %w", err)
		}
	}
	if err := gpu.UploadSlice(e.dev, e.rect, 0, pr.Rect); err != nil {
		return fmt.Errorf("fused: upload projection: %w", err)
	}
	return nil
}
