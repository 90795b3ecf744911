package fused

import (
	"errors"
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// Gaussian sharding's records (docs/sharding.md): an owner packs the splats of its share that
// a view sees (PackVisible), the words go to the view's renderer (multi.Exchanger), and the
// renderer draws them as the owner's own engine would have (RenderRecords). A record is a
// splat's global id and every projected value that binning and the forward rasterizer read,
// copied bit for bit (shaders/shard.cu; the layout is abi's Rec* constants).

// RecordWords is the 32-bit words of one record of render model m.
func RecordWords(m prep.Model) int {
	if m == prep.Ray {
		return abi.RecRayWords
	}
	return abi.RecEWAWords
}

// records is a renderer's input to a forward: count records in buf.
type records struct {
	buf   gpu.Buffer
	count int
}

// rayFlag is shard.cu's ray argument: which layout the records have.
func (e *Engine) rayFlag() uint32 {
	if e.set.Render == prep.Ray {
		return 1
	}
	return 0
}

// PackVisible projects the engine's splats for cam and writes a record for each one visible,
// in id order, local id i going out as global id base+i: an owner's share of a view for its
// renderer. It returns the engine's record buffer, which holds the records back to back
// (RecordWords each) until the next PackVisible or Close, and their count. The count is read
// back before the records are packed (the exchange sends the counts first, and the buffer is
// sized by it); the packing is queued on the device, in order with whatever reads the buffer
// next.
func (e *Engine) PackVisible(cam *camera.Camera, shDegree int, base uint32) (gpu.Buffer, int, error) {
	if err := e.idle("pack visible"); err != nil {
		return nil, 0, err
	}
	if err := e.checkView(cam, shDegree); err != nil {
		return nil, 0, err
	}
	n := e.n
	if uint64(base)+uint64(n) > 1<<32 {
		return nil, 0, fmt.Errorf("fused: pack visible: global ids from %d for %d Gaussians pass 2³²", base, n)
	}
	e.useView(0, 0, nil)
	e.timed = false
	if err := e.dev.Memset(e.ro.B, e.ro.Off, roWords*4, 0); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	if err := e.project(cam, shDegree); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: project: %w", err)
	}
	ro, err := e.readout()
	if err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	count := int(ro[roVisible])
	words := RecordWords(e.set.Render)
	if e.recs == nil || e.recs.Size() < count*words*4 {
		if err := e.ensure(&e.recs, (count+count/4)*words*4); err != nil {
			return nil, 0, fmt.Errorf("fused: pack visible: records of %d splats: %w", count, err)
		}
	}
	if err := e.k.PackFlags(gpu.BlocksFor(uint32(n+1), 256), gpu.Dim3{256}, abi.PackFlagsArgs{
		Valid: abi.B(e.valid), N: uint32(n), Flags: abi.B(e.visFlags)}); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	if err := e.scan(e.visFlags, n+1); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	if err := e.k.PackVisible(gpu.BlocksFor(uint32(n), 256), gpu.Dim3{256}, abi.PackVisibleArgs{
		Valid: abi.B(e.valid), Flags: abi.B(e.visFlags), N: uint32(n), Base: base, Ray: e.rayFlag(),
		Depth: abi.B(e.depth), Opacity: abi.B(e.opacity), Color: abi.B(e.color), Mean2d: abi.B(e.mean2d),
		Conic: abi.B(e.conic), RayU: abi.B(e.or(e.rayU)), RayA: abi.B(e.or(e.rayA)), RayHalf: abi.B(e.or(e.rayHalf)),
		BoundCenter: abi.B(e.boundCenter), BoundQ: abi.B(e.boundQ), Rect: abi.B(e.rect), Radius: abi.B(e.radius),
		Recs: abi.B(e.recs)}); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	return e.recs, count, nil
}

// RenderRecords draws count records (RecordWords each, back to back in recs, a buffer on the
// engine's device) for cam, as Render draws the engine's own splats: record k becomes local
// splat k (unpack), and bin, the depth sort and the forward rasterizer run on them. The depth
// sort breaks ties by local id; with the records in the order the exchange delivers (owners in
// rank order, each owner's in id order) and owners holding contiguous ranges of global ids,
// local ids follow global ids, so the image is the one an engine holding the whole scene
// renders, to the bit. The engine's own splats, parameters and state stay as they are; its
// per-view buffers grow to the count. Records are binned on the device: cpu-conic binning,
// which projects on the host, has nothing to bin them with.
func (e *Engine) RenderRecords(cam *camera.Camera, recs gpu.Buffer, count int, bg [3]float32) ([]float32, error) {
	if err := e.idle("render records"); err != nil {
		return nil, err
	}
	if err := e.checkView(cam, 0); err != nil {
		return nil, err
	}
	if e.set.BinMode == engine.BinCPUConic {
		return nil, errors.New("fused: render records: cpu-conic binning projects on the host and cannot bin records; use gpu-conic or gpu-radius-aabb")
	}
	words := RecordWords(e.set.Render)
	switch {
	case count < 0:
		return nil, fmt.Errorf("fused: render records: %d records", count)
	case count > 0 && recs == nil:
		return nil, fmt.Errorf("fused: render records: %d records and no buffer", count)
	case count > 0 && recs.Size() < count*words*4:
		return nil, fmt.Errorf("fused: render records: %d records of %d words, the buffer holds %d bytes", count, words, recs.Size())
	case uint64(count) >= 1<<32:
		return nil, fmt.Errorf("fused: render records: %d records pass the u32 splat ids", count)
	}
	if err := e.growView(count); err != nil {
		return nil, err
	}
	return e.render(cam, 0, bg, &records{buf: recs, count: count}, "render records")
}

// unpack launches shard.cu's unpack: r's records become the forward's splats 0 … count−1,
// valid, and the readout's visible count.
func (e *Engine) unpack(r *records) error {
	return e.k.Unpack(gpu.BlocksFor(uint32(max(r.count, 1)), 256), gpu.Dim3{256}, abi.UnpackArgs{
		Recs: abi.B(e.or(r.buf)), Count: uint32(r.count), Ray: e.rayFlag(), Valid: abi.B(e.valid), Depth: abi.B(e.depth),
		Opacity: abi.B(e.opacity), Color: abi.B(e.color), Mean2d: abi.B(e.mean2d), Conic: abi.B(e.conic),
		RayU: abi.B(e.or(e.rayU)), RayA: abi.B(e.or(e.rayA)), RayHalf: abi.B(e.or(e.rayHalf)),
		BoundCenter: abi.B(e.boundCenter), BoundQ: abi.B(e.boundQ), Rect: abi.B(e.rect), Radius: abi.B(e.radius),
		Readout: e.ro})
}
