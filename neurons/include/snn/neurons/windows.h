#pragma once
/// Window operations of spiking CNNs that LibTorch runs slowly on the CPU,
/// as one-pass kernels with LibTorch's exact values and gradients:
/// max pooling with a one-byte index, and im2col straight into the row
/// layout snn::Linear multiplies (no unfold, then transposed copy).

#include <torch/types.h>

#include <array>
#include <cstdint>

namespace snn::functional {

/// y [N, C, OH, OW] = the maximum of each KH x KW window of x [N, C, H, W],
/// windows `stride` apart, the input padded with `padding` (y, x) of -inf:
/// torch::max_pool2d without dilation or ceil mode, OH = (H + 2 pH - KH) /
/// sH + 1. The first maximum in scan order wins, a NaN over any number, as
/// in LibTorch; the gradient goes to that element, summed in output order
/// where windows overlap, as LibTorch sums it. So values and gradients are
/// LibTorch's bit for bit. Differentiable. On the CPU for float32 and
/// float64 a one-pass kernel that keeps the window position (one byte per
/// output, not LibTorch's eight); other devices and dtypes, and windows of
/// more than 256 elements, go to torch::max_pool2d. Throws snn::Error
/// naming the numbers for a kernel or stride below 1, a padding above half
/// the kernel, or a window larger than the padded input.
torch::Tensor max_pool2d(const torch::Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                         std::array<int64_t, 2> padding);

/// y [..., H / 2, W / 2]: max_pool2d of x [..., H, W] (at least 3 dims)
/// in 2 x 2 windows at stride 2 over its last two dims, as a graph's
/// MaxPool2d pools a neuron layer's spikes; bool spikes stay bool (the
/// same 0/1 values). Differentiable for real x.
torch::Tensor spike_max_pool2x2(const torch::Tensor& x);

/// rows [N OH OW, C KH KW] of x [N, C, H, W]: row (n, oy, ox) holds the
/// window of output (oy, ox), column (c KH + ky) KW + kx the input at (oy
/// sH - pH + ky dH, ox sW - pW + kx dW), zero outside the input. What
/// `unfold(x).transpose(1, 2).reshape({-1, C KH KW})` holds, in one pass.
/// Differentiable: the gradient of each pixel is its taps' summed in
/// ascending (ky, kx) from zero, the order of LibTorch's col2im, so it is
/// the unfold path's bit for bit. On the CPU for float32 and float64; other
/// devices and dtypes take the unfold path. The geometry must fit (the
/// graph checks it, as conv2d_event does).
torch::Tensor im2rows(const torch::Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                      std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation);

}  // namespace snn::functional
