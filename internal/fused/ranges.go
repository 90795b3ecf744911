package fused

import "github.com/rlxsplat/rlxsplat/internal/gpu"

// ranges launches ranges.cu: per-tile offsets from the sorted keys.
func (e *Engine) ranges(tiles int) error {
	return e.dev.Launch(e.k.tileRanges, gpu.BlocksFor(uint32(max(e.listCap, 1)), 256), gpu.Dim3{256}, 0,
		gpu.Ptr(e.sortedKeys), gpu.Ptr(e.readoutBuf), gpu.U32(uint32(tiles)), gpu.Ptr(e.tileOffsets))
}
