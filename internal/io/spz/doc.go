// Package spz writes and reads Gaussian-splat scenes in Niantic's SPZ
// format ("Splat Zip"), the compact file many web viewers load.
//
// Versions 2 and 3: the file is a gzip stream holding a 16-byte little-endian header
// (magic 0x5053474e "NGSP", version, point count, SH degree, the number of
// fractional bits of the fixed-point positions, flags, a reserved byte)
// followed by one array per attribute, each covering every splat before the
// next begins: positions (3 × 24-bit signed fixed point), alphas (u8 of the
// opacity), colours (u8 of the SH DC term), scales (u8 of the log scale),
// rotations (version 3: the "smallest three" components of the unit
// quaternion in 4 bytes; version 2: x, y, z in 3 bytes) and the SH
// coefficients above DC (u8 each, coefficient-major with the channel
// fastest, as splat.Gaussians holds them).
//
// Version 4, what Niantic's reference library writes by default, keeps the
// same arrays and encodings but drops gzip: a plain 32-byte header (the
// legacy fields, the number of streams and the offset of a table of
// contents), optional extension records, the table of contents (compressed
// and uncompressed size of each stream) and each array as its own zstd
// frame (ngsp.go). zstd is not in the standard library; it comes from
// github.com/klauspost/compress, pure Go, so the binary stays CGO-free.
//
// SPZ stores the RUB axes (x right, y up, z back: OpenGL, three.js); the
// scene, like the INRIA PLY and COLMAP, is RDF (x right, y down, z forward).
// The two differ by a half turn about x, so Write maps positions to
// (x, −y, −z), quaternions (w,x,y,z) to (w, x, −y, −z) and negates the SH
// coefficients whose basis function is odd in y and z together (see
// shSign); Read applies the same map back, since it is its own inverse.
//
// Every field is quantised; the bounds are stated beside each encoder and
// asserted by the tests. Write refuses what the format cannot hold instead
// of wrapping it (positions beyond ±2²³ units, zero quaternions); log
// scales outside the byte's [−10, 5.9375] are clamped and reported once,
// with their count, through Options.Warn. Write writes version 4 unless
// told otherwise. Read tells the container by its first bytes, accepts
// versions 2, 3 and 4 and refuses, with the byte offset, anything
// malformed.
//
// Non-goals: version 1 (float16 positions, never released); writing SH
// degree 4 (a degree-4 file reads with degrees 0..3 kept); interpreting
// extension records (version 4's are skipped by the header's offset; a
// gzipped file announcing them is refused); choosing SH bit depths other
// than the format's defaults (5 bits for degree 1, 4 bits above).
package spz
