// Package scene reads a Gaussian-splat scene from any file format rlxsplat
// knows, choosing the reader by the file's content rather than its name:
//
//	PLY, INRIA layout     "ply" line; binary little/big endian or ASCII  (internal/io/ply)
//	PLY, compressed       "ply" line and an element chunk (SuperSplat)    (internal/io/ply)
//	SPZ version 2, 3      gzip magic 1f 8b                                (internal/io/spz)
//	SPZ version 4         "NGSP"                                          (internal/io/spz)
//	glTF binary (.glb)    "glTF", with KHR_gaussian_splatting             (internal/io/gltfsplat)
//	checkpoint            "RLXCKPT\x00"                                   (internal/io/ckpt)
//	antimatter15 .splat   no magic: a size that is a whole number of 32-byte records (internal/io/dotsplat)
//
// Every command that takes a scene (render, export, bench, train's
// init.mode scene, the viewer) reads it through ReadFile, so they all read
// the same formats and report the same errors and warnings.
//
// Non-goals: writing (each format package writes its own; export picks
// one), .gltf JSON files with separate buffers, and guessing a .splat from
// bytes that merely happen to be a multiple of 32 long when another magic
// matches first.
package scene
