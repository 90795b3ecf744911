package fused

import (
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// scanBlock is the elements one scan_blocks block covers (shaders/scan.cu).
const scanBlock = abi.ScanBlock

// maxDirectSums is the most block sums scan_add_sums takes directly (Engine.scanDirect):
// each of its blocks reads the sums before its own, so the reads grow as the square of their
// number (2048 sums: 2M words, a few µs from L2), where scanning them takes a launch or more.
const maxDirectSums = 2048

// scan replaces the n u32 values of buf by their exclusive prefix sums, level by level: the
// blocks' sums are scanned recursively and folded back in (shaders/scan.cu); with few enough
// blocks, each block adds up the sums before its own instead. The level buffers must have
// been sized by ensureScan.
func (e *Engine) scan(buf gpu.Buffer, n int) error { return e.scanLevel(buf, n, 0) }

func (e *Engine) scanLevel(buf gpu.Buffer, n, level int) error {
	nb := (n + scanBlock - 1) / scanBlock
	sums := e.scanSums[level]
	if err := e.k.ScanBlocks(gpu.Dim3{uint32(max(nb, 1))}, gpu.Dim3{256}, abi.ScanBlocksArgs{
		In: abi.B(buf), Out: abi.B(buf), N: uint32(n), BlockSums: abi.B(sums)}); err != nil {
		return err
	}
	if nb <= 1 {
		return nil
	}
	if nb <= e.scanDirect {
		return e.k.ScanAddSums(gpu.Dim3{uint32(nb)}, gpu.Dim3{256}, abi.ScanAddSumsArgs{
			Out: abi.B(buf), N: uint32(n), BlockSums: abi.B(sums)})
	}
	if err := e.scanLevel(sums, nb, level+1); err != nil {
		return err
	}
	return e.k.ScanAdd(gpu.BlocksFor(uint32(n), 256), gpu.Dim3{256}, abi.ScanAddArgs{
		Out: abi.B(buf), N: uint32(n), BlockOffsets: abi.B(sums)})
}
