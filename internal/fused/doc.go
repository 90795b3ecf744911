// Package fused is the fused GPU training engine (design.md §1, §5, §8; issue 3): it implements
// engine.Engine with the parameters, the Adam moments and every per-step buffer resident on
// the device, and enqueues a whole step — project, bin, sort, ranges, rasterize forward, loss,
// rasterize backward, projection backward, Adam — on the device's one queue, reading back only
// the step's small readout block (loss sums, visible and entry counts) and the image when it is
// asked for. The kernels are the shared bodies in shaders/; each has a launcher file here named
// like its kernel file (project.go ↔ project.cu, and so on), and a CPU twin in internal/prep,
// internal/raster, internal/loss or internal/adam that it matches stage by stage.
//
// Bin modes (raster.bin_mode): gpu-conic (default; the exact conic–tile test on the device),
// gpu-radius-aabb (every tile of the splat's box) and cpu-conic (the host projects, bins and
// sorts a copy of the parameters and uploads the projection and the lists; slow, for parity).
// Tile lists are never truncated: the entry count is computed before the entries are written,
// and when it exceeds the lists' capacity every later stage of the step does nothing, the host
// grows the lists and runs the step again.
//
// Steps can be pipelined (engine.Pipeliner): Submit queues a step behind one not yet collected,
// each step has its own readout block and end event, and Collect reads the oldest one's readout
// without waiting for the step behind it (gpu.Device.DownloadAfter), so the device does not idle
// while the host takes its turn. A step queued behind one whose lists overflowed does nothing
// either (bin_total reads the previous readout's abort flag), and Collect runs both again in
// order; the results are those of Step after Step.
//
// Densification edits (Apply) gather the kept, cloned and split rows on the device from a plan
// the host uploads; State and SetState download and upload everything. Lens distortion is not
// supported on the device (both render models need a pinhole camera here); tile sizes are
// limited to 32 (a tile is one thread block).
//
// Gaussian sharding's records (docs/sharding.md; shard.go ↔ shard.cu): PackVisible projects
// an owner's splats for a view and packs the visible ones, with their global ids, as records;
// RenderRecords draws records received from the owners, unpacked in place of project, to the
// image one engine holding the whole scene renders. For a training step,
// RenderRecordsBackward adds the loss and raster_bwd and packs the records' prepared-data
// gradients back in record order, and StepFromGradients scatters an owner's share to its
// splats and runs project_bwd and Adam, as Step does after its own raster_bwd: for a batch of
// views, BackwardFromGradients sums each view's and UpdateFromGradients runs Adam once.
//
// The CUDA and Metal backends (internal/gpu) run the same kernel bodies, each through its
// prelude.
//
// Non-goals: no training policy (internal/train decides what and when), no printing or
// logging, no global state.
package fused
