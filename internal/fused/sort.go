package fused

import (
	"math/bits"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// sortChunk is the elements one sort block owns (shaders/sort.cu: 256 threads × 16 rounds).
const sortChunk = 4096

func sortBlocks(entries int) int { return max((entries+sortChunk-1)/sortChunk, 1) }

// sort launches sort.cu's passes (design.md §5 step 3): a stable LSD radix sort over the depth
// bits and bits.Len(tiles) tile bits, 8 bits a pass, ping-ponging keys/ids with keysTmp/idsTmp;
// sortedKeys/sortedIDs name the pair that ends up sorted. The grids cover the lists' capacity;
// the kernels read the actual entry count from the readout.
func (e *Engine) sort(tiles int) error {
	nb := sortBlocks(e.listCap)
	keyBits := 32 + bits.Len(uint(tiles))
	srcK, srcV, dstK, dstV := e.keys, e.ids, e.keysTmp, e.idsTmp
	for shift := 0; shift < keyBits; shift += 8 {
		if err := e.dev.Launch(e.k.sortHist, gpu.Dim3{uint32(nb)}, gpu.Dim3{256}, 0,
			gpu.Ptr(srcK), gpu.Ptr(e.readoutBuf), gpu.U32(uint32(shift)), gpu.U32(uint32(nb)), gpu.Ptr(e.hist)); err != nil {
			return err
		}
		if err := e.scan(e.hist, 256*nb); err != nil {
			return err
		}
		if err := e.dev.Launch(e.k.sortScatter, gpu.Dim3{uint32(nb)}, gpu.Dim3{256}, 0,
			gpu.Ptr(srcK), gpu.Ptr(srcV), gpu.Ptr(dstK), gpu.Ptr(dstV), gpu.Ptr(e.readoutBuf),
			gpu.U32(uint32(shift)), gpu.U32(uint32(nb)), gpu.Ptr(e.hist)); err != nil {
			return err
		}
		srcK, dstK = dstK, srcK
		srcV, dstV = dstV, srcV
	}
	e.sortedKeys, e.sortedIDs = srcK, srcV
	return nil
}
