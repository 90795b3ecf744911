package fused

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// depthSortPasses is the radix passes of the splats' depth sort: 32-bit keys, 8 bits a pass.
const depthSortPasses = 4

// bin launches bin.cu (design.md §5 step 2): count the tiles of every splat (small boxes a
// thread each, large ones a warp each), sort the visible splats by depth, scan the counts in depth
// order into offsets, publish the total (and the overflow flag), and emit the entries (again
// small and large apart) in depth order, ready for sort's stable pass over the tiles.
func (e *Engine) bin(cam *camera.Camera, shDegree int) error {
	n := e.n
	conic := uint32(1)
	if e.set.BinMode == engine.BinGPURadiusAABB {
		conic = 0
	}
	cb := gpu.Bytes(camBytes(cam, &e.set, shDegree, n))
	if err := e.dev.Launch(e.k.binCount, gpu.BlocksFor(uint32(n+1), 256), gpu.Dim3{256}, 0,
		cb, gpu.Ptr(e.valid), gpu.Ptr(e.boundCenter), gpu.Ptr(e.boundQ), gpu.Ptr(e.rect), gpu.U32(conic),
		gpu.I32(int32(e.bigArea)), gpu.Ptr(e.counts), gpu.Ptr(e.readoutBuf), gpu.Ptr(e.bigList),
		gpu.Ptr(e.hitMask), gpu.Ptr(e.visFlags), gpu.Ptr(e.bigOff), gpu.U32(uint32(e.bitsCap()))); err != nil {
		return err
	}
	big := bigGrid(n)
	if err := e.dev.Launch(e.k.binCountBig, big, gpu.Dim3{256}, 0,
		cb, gpu.Ptr(e.boundCenter), gpu.Ptr(e.boundQ), gpu.Ptr(e.rect), gpu.U32(conic),
		gpu.Ptr(e.readoutBuf), gpu.Ptr(e.bigList), gpu.Ptr(e.counts), gpu.Ptr(e.bigOff), gpu.Ptr(e.bigBits)); err != nil {
		return err
	}
	// The visible splats, in id order, then sorted by depth.
	if err := e.scan(e.visFlags, n+1); err != nil {
		return err
	}
	if err := e.dev.Launch(e.k.binCompact, gpu.BlocksFor(uint32(n), 256), gpu.Dim3{256}, 0,
		gpu.Ptr(e.valid), gpu.Ptr(e.depth), gpu.Ptr(e.visFlags), gpu.U32(uint32(n)), gpu.Ptr(e.depthKeys), gpu.Ptr(e.order)); err != nil {
		return err
	}
	order, err := e.radixSort(sortPair{e.depthKeys, e.order}, sortPair{e.depthKeysTmp, e.orderTmp},
		n, gpu.PtrAt(e.visFlags, 4*n), depthSortPasses)
	if err != nil {
		return err
	}
	if err := e.dev.Launch(e.k.binRank, gpu.BlocksFor(uint32(n+1), 256), gpu.Dim3{256}, 0,
		gpu.Ptr(e.counts), gpu.Ptr(order.vals), gpu.Ptr(e.visFlags), gpu.U32(uint32(n)), gpu.Ptr(e.ranked), gpu.Ptr(e.rankOf)); err != nil {
		return err
	}
	if err := e.scan(e.ranked, n+1); err != nil {
		return err
	}
	if err := e.dev.Launch(e.k.binTotal, gpu.Dim3{1}, gpu.Dim3{32}, 0,
		gpu.Ptr(e.ranked), gpu.U32(uint32(n)), gpu.U32(uint32(e.listCap)), gpu.Ptr(e.prevReadout), gpu.Ptr(e.readoutBuf)); err != nil {
		return err
	}
	if err := e.dev.Launch(e.k.binEmit, gpu.BlocksFor(uint32(n), 256), gpu.Dim3{256}, 0,
		cb, gpu.Ptr(e.valid), gpu.Ptr(e.rect), gpu.Ptr(e.hitMask), gpu.Ptr(e.ranked), gpu.Ptr(e.rankOf),
		gpu.I32(int32(e.bigArea)), gpu.Ptr(e.readoutBuf), gpu.Ptr(e.keys), gpu.Ptr(e.ids)); err != nil {
		return err
	}
	return e.dev.Launch(e.k.binEmitBig, big, gpu.Dim3{256}, 0,
		cb, gpu.Ptr(e.boundCenter), gpu.Ptr(e.boundQ), gpu.Ptr(e.rect), gpu.U32(conic),
		gpu.Ptr(e.ranked), gpu.Ptr(e.rankOf), gpu.Ptr(e.readoutBuf), gpu.Ptr(e.bigList), gpu.Ptr(e.keys), gpu.Ptr(e.ids),
		gpu.Ptr(e.bigOff), gpu.Ptr(e.bigBits))
}

// minBigBits is the hit-bit words bin.cu's queued splats start with: 4 KiB, grown to what a
// step asks for (growBigBits).
const minBigBits = 1024

// bitsCap is the hit-bit words bin_count may hand out: none when noBigBits (compare's check
// of the path that tests the queued splats' tiles twice).
func (e *Engine) bitsCap() int {
	if e.noBigBits {
		return 0
	}
	return e.bigBitsCap
}

// growBigBits makes room for the hit bits the last step's queued splats asked for (a quarter
// more), so that the next step keeps them all; called only with no step queued, since the
// buffer may be reallocated.
func (e *Engine) growBigBits() error {
	want := max(e.bigBitsWant, minBigBits)
	if want <= e.bigBitsCap && e.bigBits != nil {
		return nil
	}
	c := want + want/4
	if err := e.ensure(&e.bigBits, c*4); err != nil {
		return fmt.Errorf("fused: tile hit bits of %d words: %w", c, err)
	}
	e.bigBitsCap = c
	return nil
}

// bigGrid is the grid of the warp-per-splat bin kernels: they loop over however many splats
// bin_count queued (at most n, known only on the device), so the grid is sized for the worst
// case up to a bound that fills the device several times over.
func bigGrid(n int) gpu.Dim3 {
	const warpsPerBlock = 256 / 32
	return gpu.Dim3{uint32(min(max((n+warpsPerBlock-1)/warpsPerBlock, 1), 2048))}
}
