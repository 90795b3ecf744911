package fused

import (
	"math/bits"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// sortChunk is the elements one sort block owns (shaders/sort.cu: 256 threads × 12 rounds).
const sortChunk = abi.SortChunk

func sortBlocks(elements int) int { return max((elements+sortChunk-1)/sortChunk, 1) }

// sortPair is a buffer of u32 keys and the buffer of their u32 values.
type sortPair struct{ keys, vals gpu.Buffer }

// tileSortPasses is the 8-bit passes that sort tile ids below tiles.
func tileSortPasses(tiles int) int { return max((bits.Len(uint(max(tiles-1, 0)))+7)/8, 1) }

// sort runs the second half of design.md §5 step 3 on the entries bin emitted in depth order:
// a stable radix sort of keys/ids by tile, after which sortedKeys/sortedIDs name the pair that
// holds the lists. The grids cover the lists' capacity; the kernels read the entry count
// from the readout.
func (e *Engine) sort(tiles int) error {
	p, err := e.radixSort(sortPair{e.keys, e.ids}, sortPair{e.keysTmp, e.idsTmp}, e.listCap,
		abi.At(e.ro.B, e.ro.Off+roEntries*4), tileSortPasses(tiles))
	if err != nil {
		return err
	}
	e.sortedKeys, e.sortedIDs = p.keys, p.vals
	return nil
}

// radixSort launches sort.cu's passes over the low 8·passes bits of src's keys, ping-ponging
// with tmp, and returns the pair that ends up sorted. count points at the element count on the
// device; capacity, the most it can be, sizes the grids.
func (e *Engine) radixSort(src, tmp sortPair, capacity int, count abi.Buf, passes int) (sortPair, error) {
	nb := sortBlocks(capacity)
	for pass := range passes {
		shift := uint32(8 * pass)
		if err := e.k.SortHist(gpu.Dim3{uint32(nb)}, gpu.Dim3{abi.SortThreads}, abi.SortHistArgs{
			Keys: abi.B(src.keys), Readout: e.ro, Count: count, Shift: shift, Nb: uint32(nb), Hist: abi.B(e.hist)}); err != nil {
			return sortPair{}, err
		}
		if err := e.scan(e.hist, 256*nb); err != nil {
			return sortPair{}, err
		}
		if err := e.k.SortScatter(gpu.Dim3{uint32(nb)}, gpu.Dim3{abi.SortThreads}, abi.SortScatterArgs{
			KeysIn: abi.B(src.keys), ValsIn: abi.B(src.vals), KeysOut: abi.B(tmp.keys), ValsOut: abi.B(tmp.vals),
			Readout: e.ro, Count: count, Shift: shift, Nb: uint32(nb), Offsets: abi.B(e.hist)}); err != nil {
			return sortPair{}, err
		}
		src, tmp = tmp, src
	}
	return src, nil
}
