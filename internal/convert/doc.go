// Package convert turns a folder of photos into a capture that the trainer
// loads as is, by driving COLMAP's command-line tools in the order the
// original 3DGS preparation uses: feature extraction (one shared camera,
// OPENCV by default), matching (exhaustive for small sets, sequential for
// video frames), incremental mapping, undistortion to PINHOLE cameras, then
// half-, quarter- and eighth-size copies of the undistorted images.
//
// The result follows the layout every 3DGS trainer reads:
//
//	CAPTURE/input/                 the photos (hard links, or copies)
//	CAPTURE/distorted/database.db  COLMAP's features and matches
//	CAPTURE/distorted/sparse/N/    COLMAP's models (N = 0, 1, ... when it splits the scene)
//	CAPTURE/images/                undistorted photos
//	CAPTURE/sparse/0/              the undistorted model (PINHOLE)
//	CAPTURE/images_2, _4, _8/      the undistorted photos at 1/2, 1/4, 1/8 size
//	CAPTURE/colmap.log             COLMAP's own output, stage by stage, with each command line
//
// COLMAP runs as a child process bound to the caller's context: cancelling
// it interrupts COLMAP (and kills it if it does not stop). Progress travels
// as Events; the package never prints.
//
// Non-goals: video input (extract frames first), masks, dense
// reconstruction, COLMAP options beyond the ones a 3DGS capture needs, and
// resuming a conversion half-way.
package convert
