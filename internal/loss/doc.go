// Package loss computes the photometric training losses of design.md §5
// step 5 (l1-ssim, mse, mse-ssim), their gradients with respect to the
// rendered image, and the evaluation metrics PSNR and SSIM.
//
// Images are interleaved RGB, row-major, [H*W*3] with pixel (x, y) channel c
// at (y*W+x)*3+c, values nominally in [0,1]. SSIM follows the definition the
// original 3DGS trains with: per channel, an 11×11 normalised Gaussian window
// (σ = 1.5), C1 = 0.01², C2 = 0.03², zero padding at the borders (a "same"
// convolution), the SSIM map averaged over every pixel and channel.
//
// The numeric core is generic over splat.Float: the engine runs it in
// float32, and the finite-difference checks run the very same code in
// float64. Sums that are reduced over the image are accumulated in float64
// and reduced row by row in a fixed order, so results do not depend on the
// number of worker goroutines.
//
// Non-goals: no image decoding, colour conversion, clamping or
// resizing (callers hand in images already in the training layout), no
// perceptual metrics (LPIPS), and no GPU code (the fused engine has its own
// loss kernel and is compared against this package by the parity checks).
package loss
