// Package colmap reads COLMAP sparse reconstructions (cameras, images,
// points3D) in the binary and the text formats, every camera model included
// (COLMAP's "Output Format" documentation and its camera model list).
//
// The readers return the files' contents as they are (IDs, quaternions,
// keypoints, tracks), checked for structure: a truncated or corrupted file
// gives an error naming the file and the byte offset (binary) or the line
// (text), and a count that the remaining bytes cannot hold is rejected
// before anything is allocated. Conversion to rlxsplat's camera type lives
// in Camera.Intrinsics and ToCamera, the one place where COLMAP's
// conventions meet design.md §3 (they coincide: world-to-camera, x right,
// y down, z forward, pixel centres at +0.5).
//
// Non-goals: writing models (tests carry their own writer), the COLMAP
// database, rigs/frames, dense reconstructions, and checking the geometry
// itself (whether tracks point at existing keypoints, reprojection errors).
package colmap
