package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// ranges launches ranges.cu: per-tile offsets from the sorted keys.
func (e *Engine) ranges(tiles int) error {
	return e.k.TileRanges(gpu.BlocksFor(uint32(max(e.listCap, 1)), 256), gpu.Dim3{256}, abi.TileRangesArgs{
		Keys: abi.B(e.sortedKeys), Readout: e.ro, NumTiles: uint32(tiles), Offsets: abi.B(e.tileOffsets)})
}
