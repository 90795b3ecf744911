package fused

import (
	"fmt"
	"math"
	"slices"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// Whole splat rows moving between the engines of different ranks (docs/sharding.md): a rank
// rebalancing contiguous ranges after densification hands rows to its neighbour, and an MCMC
// relocation may take its source on one rank and its destination on another. The rows travel
// as a row block on the device: the parameters, then both Adam moments, each in the packed
// layout of the rows sent (shaders/common.h), so that the exchange moves one buffer and
// neither side unpacks on the host.

// RowWords is the 32-bit words one splat takes in a row block: its 59 packed parameters and
// both Adam moments' 59 each.
const RowWords = 3 * abi.ParamFloats

// maxRows is the most rows one packed buffer may hold: the kernels (gather_rows, adam_step,
// put_rows) index its 59 floats a row with u32 thread ids. So it is also the most splats one
// engine holds (about 72.8M).
const maxRows = math.MaxUint32 / paramFloats

// checkSplats refuses n splats past maxRows, for what (an edit, an upload, a relocation),
// before any device work: past it the kernels' element indices would wrap and write the wrong
// splats.
func checkSplats(what string, n int) error {
	if n > maxRows {
		return fmt.Errorf("fused: %s to %d Gaussians: one engine holds at most %d (its kernels index the 59 floats a Gaussian with 32-bit ids); shard the scene over several GPUs (train.shard)", what, n, maxRows)
	}
	return nil
}

// blockPart is the byte offset in a row block of count rows of its part k: 0 the parameters,
// 1 the first moments, 2 the second moments.
func blockPart(k, count int) int { return k * paramFloats * count * 4 }

// ExportRows gathers the rows idx (local ids, each < Len(), repeats allowed) into a row block
// on the engine's device: the parameters of the len(idx) rows in the packed layout of len(idx)
// splats (block row j is splat idx[j]), then the first moments, then the second moments, laid
// out the same way; RowWords·len(idx) words in all. The buffer is the engine's own scratch,
// as PackVisible's records are: it holds the block until the engine's next ExportRows or
// Close, and the rows' other changes (a step, an edit, TruncateRows) do not reach it, so a
// rank may drop the rows it hands on before the exchange has sent them. With no rows it returns
// that scratch buffer all the same (non-nil, with nothing to read), so that a caller passes the
// block on whatever its length. The gathers are queued on the device, in order with whatever
// reads the block next. The splats, PackVisible's projection and a batch's summed gradients
// stay as they are: only the index upload buffer and the block are written.
func (e *Engine) ExportRows(idx []int32) (gpu.Buffer, error) {
	const what = "export rows"
	if err := e.idle(what); err != nil {
		return nil, err
	}
	c := len(idx)
	if c > maxRows {
		return nil, fmt.Errorf("fused: %s: %d rows, more than the %d a packed buffer holds", what, c, maxRows)
	}
	if err := checkRowIDs(what, idx, e.n, false); err != nil {
		return nil, err
	}
	if bytes := c * RowWords * 4; e.rowBlock == nil || e.rowBlock.Size() < bytes {
		// A quarter's room, as PackVisible's records have: rebalancing sends about as many
		// rows each time.
		if err := e.ensure(&e.rowBlock, bytes+bytes/4); err != nil {
			return nil, fmt.Errorf("fused: %s: a block of %d rows: %w", what, c, err)
		}
	}
	if c == 0 {
		return e.rowBlock, nil
	}
	if err := e.uploadRowIDs(what, idx); err != nil {
		return nil, err
	}
	for k, src := range []gpu.Buffer{e.params, e.adamM, e.adamV} {
		if err := e.k.GatherRows(gpu.BlocksFor(uint32(c*paramFloats), 256), gpu.Dim3{256}, abi.GatherRowsArgs{
			Src: abi.B(src), Dst: abi.At(e.rowBlock, blockPart(k, c)), SrcIdx: abi.B(e.editSrc), OldN: uint32(e.n),
			NewN: uint32(c), Fresh: uint32(c)}); err != nil {
			return nil, fmt.Errorf("fused: %s: %w", what, err)
		}
	}
	return e.rowBlock, nil
}

// AppendRows adds count rows from a row block after the engine's splats: InsertRows at Len().
func (e *Engine) AppendRows(block gpu.Buffer, count int) error {
	return e.InsertRows(block, count, e.n)
}

// InsertRows puts count rows from a row block (a buffer on the engine's device, laid out as
// ExportRows makes it for count rows, at least count·RowWords words) before the engine's splat
// at (0 ≤ at ≤ Len(); Len() appends): their parameters and both moments as the block has them,
// their densification statistics zero; the other splats keep theirs and their order. The block
// may be this engine's own ExportRows block. count 0 changes nothing (block may then be nil).
// Sharding moves rows between neighbouring ranks this way: a rank's last rows become the first
// of the next rank's, so no splat's place in the global order changes.
//
// The packed layout of n splats places each field at an offset proportional to n, so the
// existing rows are gathered into the layout of the new count (gatherRows, which grows the
// buffers as an edit does) and put_rows writes the block's rows in the gap. Growing past the
// capacity reallocates the statistics' buffers empty, and a gap before existing rows shifts
// theirs, so then the statistics go through the host (12 bytes a splat, against the 708 a row
// the block brought). The inserted moments may be non-zero in SH bands no step of this engine
// has used, so adam_step updates every band from now on (shUsed).
func (e *Engine) InsertRows(block gpu.Buffer, count, at int) error {
	const what = "insert rows"
	if err := e.idle(what); err != nil {
		return err
	}
	if err := checkRowBlock(what, block, count); err != nil {
		return err
	}
	if at < 0 || at > e.n {
		return fmt.Errorf("fused: %s: at %d outside 0..%d", what, at, e.n)
	}
	if count == 0 {
		return nil
	}
	oldN, newN := e.n, e.n+count
	if err := checkSplats(what, newN); err != nil {
		return err
	}
	var kept *engine.Stats
	if newN > e.capN || at < oldN {
		kept = &engine.Stats{}
		if err := e.downloadStats(kept); err != nil {
			return fmt.Errorf("fused: %s: keep the statistics: %w", what, err)
		}
	}
	// The plan: the rows before at keep their place, the rows from at on move count places
	// up, and the gap takes row 0's values until put_rows writes the block's rows there. The
	// gap's ids follow the plan in the upload buffer, for put_rows.
	plan := make([]int32, newN+count)
	for j := range newN {
		switch {
		case j < at:
			plan[j] = int32(j)
		case j >= at+count:
			plan[j] = int32(j - count)
		}
	}
	for j := range count {
		plan[newN+j] = int32(at + j)
	}
	if err := e.uploadRowIDs(what, plan); err != nil {
		return err
	}
	if err := e.gatherRows(oldN, newN, newN, what); err != nil {
		return err
	}
	e.n = newN
	if err := e.putRows(what, block, count, newN, newN, true); err != nil {
		return err
	}
	e.shUsed = shAll
	if kept != nil {
		st := engine.Stats{
			GradAccum: slices.Concat(kept.GradAccum[:at], make([]float32, count), kept.GradAccum[at:]),
			Count:     slices.Concat(kept.Count[:at], make([]int32, count), kept.Count[at:]),
			MaxRadius: slices.Concat(kept.MaxRadius[:at], make([]float32, count), kept.MaxRadius[at:]),
		}
		if err := e.uploadStats(&st); err != nil {
			return fmt.Errorf("fused: %s: %w", what, err)
		}
		return nil
	}
	for _, b := range []gpu.Buffer{e.statAccum, e.statCount, e.statMaxRadius} {
		if err := e.dev.Memset(b, oldN*4, count*4, 0); err != nil {
			return fmt.Errorf("fused: %s: zero the appended rows' statistics: %w", what, err)
		}
	}
	return nil
}

// WriteRows overwrites rows dst (local ids, each < Len(), no repeats) with the parameters of
// the block's rows 0..len(dst)−1 (a block laid out as ExportRows makes it for len(dst) rows):
// row dst[j] takes block row j. With moments the rows take the block's Adam moments too;
// without, their moments are zeroed (an MCMC relocation's destination starts with zero
// moments, as engine.Relocation says). The statistics are left as they are. No rows changes
// nothing (block may then be nil).
func (e *Engine) WriteRows(block gpu.Buffer, dst []int32, moments bool) error {
	const what = "write rows"
	if err := e.idle(what); err != nil {
		return err
	}
	c := len(dst)
	if err := checkRowBlock(what, block, c); err != nil {
		return err
	}
	if err := checkRowIDs(what, dst, e.n, true); err != nil {
		return err
	}
	if c == 0 {
		return nil
	}
	e.packed, e.summed = nil, nil
	if err := e.uploadRowIDs(what, dst); err != nil {
		return err
	}
	if err := e.putRows(what, block, c, e.n, 0, moments); err != nil {
		return err
	}
	if moments {
		e.shUsed = shAll // as AppendRows: the block's moments may fill any band
		return nil
	}
	for _, b := range []gpu.Buffer{e.adamM, e.adamV} {
		if err := e.k.ZeroRows(gpu.BlocksFor(uint32(c*paramFloats), 256), gpu.Dim3{256}, abi.ZeroRowsArgs{
			Buf: abi.B(b), N: uint32(e.n), Rows: abi.B(e.editSrc), Count: uint32(c)}); err != nil {
			return fmt.Errorf("fused: %s: zero the moments: %w", what, err)
		}
	}
	return nil
}

// TruncateRows keeps rows [0,n) and drops the rest: KeepRows(0, n).
func (e *Engine) TruncateRows(n int) error { return e.KeepRows(0, n) }

// KeepRows keeps rows [lo,hi) and drops the rest: a rank that handed its first or last rows to
// a neighbour (ExportRows, then the receiver's InsertRows). The kept rows keep their order,
// parameters, moments and statistics (an edit, Apply, resets the statistics; this is no edit
// of theirs). At least one row must stay (an engine holds splats: engine.ErrEmpty), and
// 0 ≤ lo < hi ≤ Len(); keeping every row changes nothing. The capacity stays, for the rows a
// later rebalancing brings.
func (e *Engine) KeepRows(lo, hi int) error {
	const what = "keep rows"
	if err := e.idle(what); err != nil {
		return err
	}
	switch {
	case hi-lo < 1:
		return fmt.Errorf("fused: %s [%d, %d): %w", what, lo, hi, engine.ErrEmpty)
	case lo < 0 || hi > e.n:
		return fmt.Errorf("fused: %s [%d, %d): the engine holds %d Gaussians", what, lo, hi, e.n)
	case lo == 0 && hi == e.n:
		return nil
	}
	// Without growth gatherRows leaves the statistics' buffers: their first words are the
	// kept rows' when lo is 0; otherwise the kept rows' statistics move down through the host.
	var kept *engine.Stats
	if lo > 0 {
		kept = &engine.Stats{}
		if err := e.downloadStats(kept); err != nil {
			return fmt.Errorf("fused: %s: keep the statistics: %w", what, err)
		}
	}
	n := hi - lo
	plan := make([]int32, n)
	for j := range plan {
		plan[j] = int32(lo + j)
	}
	if err := e.uploadRowIDs(what, plan); err != nil {
		return err
	}
	if err := e.gatherRows(e.n, n, n, what); err != nil {
		return err
	}
	e.n = n
	if kept != nil {
		st := engine.Stats{GradAccum: kept.GradAccum[lo:hi], Count: kept.Count[lo:hi], MaxRadius: kept.MaxRadius[lo:hi]}
		if err := e.uploadStats(&st); err != nil {
			return fmt.Errorf("fused: %s: %w", what, err)
		}
	}
	return nil
}

// checkRowIDs reports the first id outside [0,n), by its position, and with unique the first
// id listed twice.
func checkRowIDs(what string, ids []int32, n int, unique bool) error {
	for p, i := range ids {
		if i < 0 || int(i) >= n {
			return fmt.Errorf("fused: %s: row %d at position %d outside the engine's %d Gaussians", what, i, p, n)
		}
	}
	if !unique {
		return nil
	}
	at := make(map[int32]int, len(ids))
	for p, i := range ids {
		if q, ok := at[i]; ok {
			return fmt.Errorf("fused: %s: row %d listed at positions %d and %d: a row is written once", what, i, q, p)
		}
		at[i] = p
	}
	return nil
}

// checkRowBlock checks that block holds count rows.
func checkRowBlock(what string, block gpu.Buffer, count int) error {
	switch {
	case count < 0:
		return fmt.Errorf("fused: %s: %d rows", what, count)
	case count > maxRows:
		return fmt.Errorf("fused: %s: %d rows, more than the %d a packed buffer holds", what, count, maxRows)
	case count > 0 && block == nil:
		return fmt.Errorf("fused: %s: no block for %d rows", what, count)
	case count > 0 && block.Size() < count*RowWords*4:
		return fmt.Errorf("fused: %s: %d rows of %d words, the block holds %d bytes", what, count, RowWords, block.Size())
	}
	return nil
}

// uploadRowIDs puts ids in the edit upload buffer (edit.cu's kernels read their row lists
// there), growing it as needed.
func (e *Engine) uploadRowIDs(what string, ids []int32) error {
	if err := e.ensure(&e.editSrc, len(ids)*4); err != nil {
		return fmt.Errorf("fused: %s: %d row ids: %w", what, len(ids), err)
	}
	if err := gpu.UploadSlice(e.dev, e.editSrc, 0, ids); err != nil {
		return fmt.Errorf("fused: %s: upload row ids: %w", what, err)
	}
	return nil
}

// putRows launches put_rows for the parameters and, with moments, both moments: the block's
// count rows go to the rows the edit upload buffer lists from word at on, in the layout of n
// splats.
func (e *Engine) putRows(what string, block gpu.Buffer, count, n, at int, moments bool) error {
	parts := []gpu.Buffer{e.params, e.adamM, e.adamV}
	if !moments {
		parts = parts[:1]
	}
	for k, dst := range parts {
		if err := e.k.PutRows(gpu.BlocksFor(uint32(count*paramFloats), 256), gpu.Dim3{256}, abi.PutRowsArgs{
			Src: abi.At(block, blockPart(k, count)), Dst: abi.B(dst), Rows: abi.At(e.editSrc, 4*at), N: uint32(n),
			Count: uint32(count)}); err != nil {
			return fmt.Errorf("fused: %s: %w", what, err)
		}
	}
	return nil
}
