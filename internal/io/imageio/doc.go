// Package imageio decodes the training photos into float32 RGB (plus an
// optional alpha channel), resizes them by area averaging, and writes the
// 8-bit PNG previews the trainer produces.
//
// Decoding goes by content, not by file extension: PNG (8 and 16 bit, with
// or without alpha), JPEG, and the formats golang.org/x/image registers
// (BMP, TIFF, WebP). Values are the stored, sRGB-encoded samples scaled to
// [0,1] (design.md §3): no colour management and no linearisation. JPEG
// chroma is upsampled and converted as libjpeg-turbo does by default (the
// decoder behind Pillow, which the original 3DGS code and gsplat read photos
// with), so that a photo gives the pixels those trainers fit (ycc.go).
//
// Non-goals: colour profiles, EXIF orientation (COLMAP reads the stored
// pixel grid too, so honouring EXIF would break the poses), HDR formats,
// animation, and writing anything other than opaque 8-bit PNG.
package imageio
