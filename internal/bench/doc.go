// Package bench times an engine's training step: the median of each stage over steps that
// cycle through a dataset's views, on a GPU engine also the step replayed as one graph, the
// wall time per step of steps queued two deep as training queues them (launch by launch and as
// graphs), each kernel launch on its own (Options.Kernels) and every stage under the device's measured
// ceilings (Options.Roofline). It measures and returns numbers; `rlxsplat bench` prints them.
//
// Non-goals: densification (the steps keep the scene's size), comparing builds (run two
// binaries in one call and compare their results), and any timing of the CPU side but the
// whole step.
package bench
