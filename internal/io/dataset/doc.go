// Package dataset assembles a training set from a capture directory: it
// detects the format (a COLMAP sparse model or NeRF-style transforms
// files), turns every registered image into a View (camera in design.md §3
// conventions, scaled to the loaded image, plus the decoded target image),
// splits the views into train and test, and gathers the initial point
// cloud and the scene extent the trainer's schedules use.
//
// Images are decoded in parallel; the result does not depend on the
// number of workers. Downscaling follows the original 3DGS: --downscale N
// divides both sides by N (taking <images>_N/ when the capture has it,
// else area-averaging on load), and with no setting images wider than
// MaxWidth are shrunk to it.
//
// Non-goals: undistorting images (COLMAP's image_undistorter does it, or
// the ray render model handles distorted cameras), masks and depth maps,
// re-centring or re-scaling the scene, and caching decoded images.
package dataset
