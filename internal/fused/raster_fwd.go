package fused

import (
	"errors"
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// tileThreads is a raster block: one thread per pixel of a tile, rounded up to whole warps.
func (e *Engine) tileThreads() gpu.Dim3 {
	ts := e.set.TileSize
	return gpu.Dim3{uint32((ts*ts + 31) / 32 * 32)}
}

// rasterFwd launches raster_fwd.cu (design.md §5 step 4) for the engine's render model, which
// the kernel takes as a compile-time constant: tile_order, then the first pass, a block per
// tile on its list's first segment, the second, a block per segment the first queued, and
// raster_fwd_join, which folds the queued lists (raster.h, segments). Besides the image it
// writes what raster_bwd's chunks start from: each tile's walk and the per-pixel states at the
// chunks' ends.
func (e *Engine) rasterFwd(cam *camera.Camera, bg [3]float32, tiles int) error {
	launch := e.k.RasterFwdEwa
	if e.set.Render == prep.Ray {
		launch = e.k.RasterFwdRay
	}
	if segs := maxSegments(e.listCap, tiles); segs > e.segCap {
		return fmt.Errorf("fused: raster forward: up to %d segments (%d list entries, %d tiles), the segment buffers hold %d", segs, e.listCap, tiles, e.segCap)
	}
	rp := rasterArgs(cam, &e.set, bg)
	// The longest lists first, so that the short ones fill the SMs behind them (ranges.cu).
	if err := e.k.TileOrder(gpu.Dim3{1}, gpu.Dim3{1024}, abi.TileOrderArgs{Offsets: abi.B(e.tileOffsets),
		Readout: e.ro, NumTiles: uint32(tiles), Order: abi.B(e.tileOrder)}); err != nil {
		return err
	}
	args := abi.RasterFwdArgs{
		Rp: rp, Readout: e.ro, TileOrder: abi.B(e.tileOrder), TileOffsets: abi.B(e.tileOffsets),
		Ids: abi.B(e.sortedIDs), Opacity: abi.B(e.opacity), Color: abi.B(e.color), Mean2d: abi.B(e.mean2d),
		Conic: abi.B(e.conic), RayU: abi.B(e.or(e.rayU)), RayA: abi.B(e.or(e.rayA)), Rays: abi.B(e.or(e.rays)),
		Image: abi.B(e.image), FinalT: abi.B(e.finalT), Count: abi.B(e.count), TileWalk: abi.B(e.tileWalk),
		ChunkState: abi.B(e.chunkState), SegState: abi.B(e.segState), SegCount: abi.B(e.segCount),
		SegCont: abi.B(e.segCont), SegItems: abi.B(e.segItems)}
	if err := launch(gpu.Dim3{uint32(tiles)}, e.tileThreads(), args); err != nil {
		return err
	}
	if rp.MaxSteps != 0 || e.listCap <= segmentEntries || e.set.Render == prep.Ray {
		return nil // every list is one segment (raster.h): the first pass wrote every tile
	}
	// The queued segments' count is on the device: a block for as many as the lists'
	// capacity allows, those past the count leaving at once.
	args.Pass = 1
	if err := launch(gpu.Dim3{uint32(maxQueued(e.listCap))}, e.tileThreads(), args); err != nil {
		return err
	}
	return e.k.RasterFwdJoin(gpu.Dim3{uint32(tiles)}, e.tileThreads(), abi.RasterFwdJoinArgs{
		Rp: rp, Readout: e.ro, TileOffsets: abi.B(e.tileOffsets), SegState: abi.B(e.segState),
		SegCount: abi.B(e.segCount), SegCont: abi.B(e.segCont), Image: abi.B(e.image), FinalT: abi.B(e.finalT),
		Count: abi.B(e.count), TileWalk: abi.B(e.tileWalk), ChunkState: abi.B(e.chunkState)})
}

// Walk is how far the raster passes had to walk the tile lists in one forward.
type Walk struct {
	Entries int64 // list entries the tiles read: each tile up to its longest pixel's count
	Pairs   int64 // (entry, pixel) pairs the pixels evaluated: the sum of their counts
	Splats  int64 // distinct splats those entries name: the splats whose data had to be read
	// Chunk boundaries (every chunkEntries entries of a list) strictly inside the pixels'
	// walks, Σ ⌈count/chunkEntries⌉ − 1: the chunk states raster_bwd needs (and reads), so
	// the fewest raster_fwd must store.
	Boundaries int64
	Spanning   int64 // pixels whose walk passes a chunk boundary: raster_bwd reads their image
	// Longest is the longest walk of one tile (its longest pixel's count), of Tiles tiles:
	// raster_fwd walks a list in segments of segmentEntries, a block each, so that a long
	// walk no longer holds the forward to one block's pace.
	Longest, Tiles int64
}

// RasterWalk measures the Walk of the last forward (of the last Step or Render) from
// raster_fwd's per-pixel counts, the entries of its tile's list a pixel walked up to and
// including the last one it blended: the forward walked at least that far and the backward
// exactly that far. The roofline's traffic model uses it in place of "every entry, every
// pixel of its tile", which views whose pixels saturate early never need. It downloads the
// counts and the walked lists' ids (4 bytes a pixel and an entry).
func (e *Engine) RasterWalk() (Walk, error) {
	w, h, ts := e.lastW, e.lastH, e.set.TileSize
	if w == 0 || h == 0 {
		return Walk{}, errors.New("fused: raster walk: nothing rendered yet")
	}
	tilesX := (w + ts - 1) / ts
	tiles := tilesX * ((h + ts - 1) / ts)
	count := make([]uint32, w*h)
	offs := make([]uint32, tiles+1)
	if err := gpu.DownloadU32(e.dev, count, e.count); err != nil {
		return Walk{}, fmt.Errorf("fused: raster walk: %w", err)
	}
	if err := gpu.DownloadU32(e.dev, offs, e.tileOffsets); err != nil {
		return Walk{}, fmt.Errorf("fused: raster walk: %w", err)
	}
	ids := make([]uint32, offs[tiles])
	if err := gpu.DownloadU32(e.dev, ids, e.sortedIDs); err != nil {
		return Walk{}, fmt.Errorf("fused: raster walk: %w", err)
	}
	wk := Walk{Tiles: int64(tiles)}
	longest := make([]uint32, tiles)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := count[y*w+x]
			wk.Pairs += int64(c)
			if c > chunkEntries {
				wk.Spanning++
				wk.Boundaries += int64((c - 1) / chunkEntries)
			}
			t := (y/ts)*tilesX + x/ts
			longest[t] = max(longest[t], c)
		}
	}
	seen := make([]uint64, (e.lastN+63)/64)
	for t, l := range longest {
		if offs[t] > offs[t+1] || l > offs[t+1]-offs[t] {
			return Walk{}, fmt.Errorf("fused: raster walk: tile %d walked %d entries of its list [%d, %d)", t, l, offs[t], offs[t+1])
		}
		wk.Entries += int64(l)
		wk.Longest = max(wk.Longest, int64(l))
		for _, id := range ids[offs[t] : offs[t]+l] {
			if int(id) >= e.lastN {
				return Walk{}, fmt.Errorf("fused: raster walk: tile %d lists splat %d of %d", t, id, e.lastN)
			}
			if seen[id/64]&(1<<(id%64)) == 0 {
				seen[id/64] |= 1 << (id % 64)
				wk.Splats++
			}
		}
	}
	return wk, nil
}
