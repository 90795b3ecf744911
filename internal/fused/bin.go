package fused

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// depthSortPasses is the radix passes of the splats' depth sort: 32-bit keys, 8 bits a pass.
const depthSortPasses = 4

// bin launches bin.cu (design.md §5 step 2): count the tiles of every splat (small boxes a
// thread each, large ones a warp each), sort the visible splats by depth, scan the counts in depth
// order into offsets, publish the total (and the overflow flag), and emit the entries (again
// small and large apart) in depth order, ready for sort's stable pass over the tiles. n is the
// splats of the forward: the engine's own, or a renderer's records (RenderRecords), of which
// there may be none: the grids over the splats have a block at least (CUDA refuses an empty
// grid).
func (e *Engine) bin(cam *camera.Camera, shDegree, n int) error {
	conic := uint32(1)
	if e.set.BinMode == engine.BinGPURadiusAABB {
		conic = 0
	}
	cb := camArgs(cam, &e.set, shDegree, n)
	ro := e.ro
	if err := e.k.BinCount(gpu.BlocksFor(uint32(n+1), 256), gpu.Dim3{256}, abi.BinCountArgs{
		Cam: cb, Valid: abi.B(e.valid), BoundCenter: abi.B(e.boundCenter), BoundQ: abi.B(e.boundQ), Rect: abi.B(e.rect),
		RayHalf: abi.B(e.or(e.rayHalf)), Conic: conic, BigArea: int32(e.bigArea), Counts: abi.B(e.counts), Readout: ro, BigList: abi.B(e.bigList),
		HitMask: abi.B(e.hitMask), Flags: abi.B(e.visFlags), BigOff: abi.B(e.bigOff), BitsCap: uint32(e.bitsCap())}); err != nil {
		return err
	}
	big := bigGrid(n)
	if err := e.k.BinCountBig(big, gpu.Dim3{256}, abi.BinCountBigArgs{
		Cam: cb, BoundCenter: abi.B(e.boundCenter), BoundQ: abi.B(e.boundQ), Rect: abi.B(e.rect), RayHalf: abi.B(e.or(e.rayHalf)), Conic: conic,
		Readout: ro, BigList: abi.B(e.bigList), Counts: abi.B(e.counts), BigOff: abi.B(e.bigOff), BigBits: abi.B(e.bigBits)}); err != nil {
		return err
	}
	// The visible splats, in id order, then sorted by depth.
	if err := e.scan(e.visFlags, n+1); err != nil {
		return err
	}
	if err := e.k.BinCompact(gpu.BlocksFor(uint32(max(n, 1)), 256), gpu.Dim3{256}, abi.BinCompactArgs{
		Valid: abi.B(e.valid), Depth: abi.B(e.depth), Flags: abi.B(e.visFlags), N: uint32(n), Dkeys: abi.B(e.depthKeys),
		Order: abi.B(e.order), Vis: abi.B(e.vis)}); err != nil {
		return err
	}
	order, err := e.radixSort(sortPair{e.depthKeys, e.order}, sortPair{e.depthKeysTmp, e.orderTmp},
		n, abi.At(e.visFlags, 4*n), depthSortPasses)
	if err != nil {
		return err
	}
	if err := e.k.BinRank(gpu.BlocksFor(uint32(n+1), 256), gpu.Dim3{256}, abi.BinRankArgs{
		Counts: abi.B(e.counts), Order: abi.B(order.vals), Flags: abi.B(e.visFlags), N: uint32(n), Ranked: abi.B(e.ranked),
		RankOf: abi.B(e.rankOf)}); err != nil {
		return err
	}
	if err := e.scan(e.ranked, n+1); err != nil {
		return err
	}
	if err := e.k.BinTotal(gpu.Dim3{1}, gpu.Dim3{32}, abi.BinTotalArgs{
		Offsets: abi.B(e.ranked), N: uint32(n), Cap: uint32(e.listCap), Prev: e.prevRo, Readout: ro}); err != nil {
		return err
	}
	if err := e.k.BinEmit(gpu.BlocksFor(uint32(max(n, 1)), 256), gpu.Dim3{256}, abi.BinEmitArgs{
		Cam: cb, Valid: abi.B(e.valid), Rect: abi.B(e.rect), HitMask: abi.B(e.hitMask), Ranked: abi.B(e.ranked),
		RankOf: abi.B(e.rankOf), BigArea: int32(e.bigArea), Readout: ro, Keys: abi.B(e.keys), Ids: abi.B(e.ids)}); err != nil {
		return err
	}
	return e.k.BinEmitBig(big, gpu.Dim3{256}, abi.BinEmitBigArgs{
		Cam: cb, BoundCenter: abi.B(e.boundCenter), BoundQ: abi.B(e.boundQ), Rect: abi.B(e.rect), RayHalf: abi.B(e.or(e.rayHalf)), Conic: conic,
		Ranked: abi.B(e.ranked), RankOf: abi.B(e.rankOf), Readout: ro, BigList: abi.B(e.bigList), Keys: abi.B(e.keys),
		Ids: abi.B(e.ids), BigOff: abi.B(e.bigOff), BigBits: abi.B(e.bigBits)})
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
