// Package spz writes and reads Gaussian-splat scenes in Niantic's SPZ
// format ("Splat Zip"), the compact file many web viewers load.
//
// An SPZ file is a gzip stream holding a 16-byte little-endian header
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
// SPZ stores the RUB axes (x right, y up, z back: OpenGL, three.js); the
// scene, like the INRIA PLY and COLMAP, is RDF (x right, y down, z forward).
// The two differ by a half turn about x, so Write maps positions to
// (x, −y, −z), quaternions (w,x,y,z) to (w, x, −y, −z) and negates the SH
// coefficients whose basis function is odd in y and z together (see
// shSign); Read applies the same map back, since it is its own inverse.
//
// Every field is quantised; the bounds are stated beside each encoder and
// asserted by the tests. Write refuses what the format cannot hold instead
// of wrapping it (positions beyond ±2²³ units, zero quaternions). Read
// accepts versions 2 and 3 and refuses, with the byte offset, anything
// malformed.
//
// Non-goals: version 1 (float16 positions, never released), SH degree 4,
// the extension records of newer files (flag 0x2) and the min/max SH
// scaling they carry, and choosing SH bit depths other than the format's
// defaults (5 bits for degree 1, 4 bits above).
package spz
