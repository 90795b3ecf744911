package fused

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// mcmcNoise launches mcmc.cu's mcmc_noise: the MCMC position noise after Adam
// (engine.PerturbMeans). Nothing is launched when it is off.
func (e *Engine) mcmcNoise(m engine.MCMCStep) error {
	if m.NoiseScale == 0 {
		return nil
	}
	if err := e.k.McmcNoise(gpu.BlocksFor(uint32(e.n), 256), gpu.Dim3{256}, abi.McmcNoiseArgs{
		Params: abi.B(e.params), N: uint32(e.n), Scale: m.NoiseScale, SeedLo: uint32(m.NoiseSeed),
		SeedHi: uint32(m.NoiseSeed >> 32), Step: m.NoiseStep, Base: m.Base, Readout: e.ro}); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	return nil
}

// Relocate performs one MCMC relocation or growth (engine.Relocation) on the device: a
// gather_rows of the parameters and of both moments by the plan "row j takes row src[j]"
// (destinations their sources, appended rows theirs, every other row itself; appended moments
// zero), then scatter_shapes writes the corrected opacity logits and log-scales into the
// corrected rows and every copy of them, and zero_rows clears the moments of the rows the
// move rewrote. Only indices and the corrected values travel from the host.
func (e *Engine) Relocate(r engine.Relocation) error {
	if err := e.idle("relocate"); err != nil {
		return err
	}
	oldN := e.n
	if err := r.Validate(oldN); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	newN := oldN + len(r.Append)
	if err := checkSplats("relocation", newN); err != nil {
		return err
	}
	src := make([]int32, newN)
	for j := range oldN {
		src[j] = int32(j)
	}
	for j, d := range r.Dst {
		src[d] = r.Src[j]
	}
	copy(src[oldN:], r.Append)
	// Every row holding a corrected row's values after the gather: the row itself and its
	// copies (a copy of an uncorrected row keeps what the gather gave it).
	at := make(map[int32]int, len(r.Rows))
	for k, i := range r.Rows {
		at[i] = k
	}
	var rows []int32
	var logits, logScales []float32
	put := func(row int32, k int) {
		rows = append(rows, row)
		logits = append(logits, r.OpacityLogits[k])
		logScales = append(logScales, r.LogScales[3*k:3*k+3]...)
	}
	for k, i := range r.Rows {
		put(i, k)
	}
	// Only destinations and appended rows differ from themselves in src: visiting them alone
	// keeps the host's share proportional to the move, not to the scene.
	for j, d := range r.Dst {
		if k, ok := at[r.Src[j]]; ok {
			put(d, k)
		}
	}
	for j, a := range r.Append {
		if k, ok := at[a]; ok {
			put(int32(oldN+j), k)
		}
	}
	zero := append(append([]int32(nil), r.Rows...), r.Dst...)
	// One upload buffer, in 4-byte words: src [newN] | rows [c] | logits [c] | logScales [3c] |
	// zero [z].
	c := len(rows)
	offRows, offLogits, offScales, offZero := newN, newN+c, newN+2*c, newN+5*c
	if err := e.ensure(&e.editSrc, (offZero+len(zero))*4); err != nil {
		return fmt.Errorf("fused: relocation of %d Gaussians: %w", newN, err)
	}
	for _, up := range []error{
		gpu.UploadSlice(e.dev, e.editSrc, 0, src),
		gpu.UploadSlice(e.dev, e.editSrc, offRows, rows),
		gpu.UploadSlice(e.dev, e.editSrc, offLogits, logits),
		gpu.UploadSlice(e.dev, e.editSrc, offScales, logScales),
		gpu.UploadSlice(e.dev, e.editSrc, offZero, zero),
	} {
		if up != nil {
			return fmt.Errorf("fused: relocation: %w", up)
		}
	}
	if err := e.gatherRows(oldN, newN, oldN, "relocation"); err != nil {
		return err
	}
	e.n = newN
	if c > 0 {
		if err := e.k.ScatterShapes(gpu.BlocksFor(uint32(c), 256), gpu.Dim3{256}, abi.ScatterShapesArgs{
			Params: abi.B(e.params), N: uint32(newN), Rows: abi.At(e.editSrc, 4*offRows),
			Logits: abi.At(e.editSrc, 4*offLogits), LogScales: abi.At(e.editSrc, 4*offScales), Count: uint32(c)}); err != nil {
			return fmt.Errorf("fused: relocation: %w", err)
		}
	}
	if z := len(zero); z > 0 {
		for _, b := range []gpu.Buffer{e.adamM, e.adamV} {
			if err := e.k.ZeroRows(gpu.BlocksFor(uint32(z*paramFloats), 256), gpu.Dim3{256}, abi.ZeroRowsArgs{
				Buf: abi.B(b), N: uint32(newN), Rows: abi.At(e.editSrc, 4*offZero), Count: uint32(z)}); err != nil {
				return fmt.Errorf("fused: relocation: %w", err)
			}
		}
	}
	return e.ResetStats()
}
