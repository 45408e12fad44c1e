#pragma once
/// 2-D convolution with the sums of snn::Linear over im2col columns, from
/// the input's nonzero entries only (spikes): each input that fired adds
/// its kernel's weights to the outputs whose window holds it.
///
/// The result is what snn::Linear gives on the im2col columns of x (the
/// graph model's Conv2d path, `torch::nn::functional::unfold` then Linear):
/// every output is its bias plus x[f] * W[o, f] added one at a time with f
/// = (c KH + ky) KW + kx ascending, on every instruction set, for every
/// batching and thread count. Inputs are visited in ascending (c, y, x),
/// and for one output window that is ascending f. Padding and skipped zero
/// inputs add nothing (an addition of +-0 in the im2col path), so the two
/// agree bit for bit up to the sign of an exact zero.
///
/// CPU only, inference only (no autograd: call it where no gradient is
/// recorded); groups as one call per group, as the im2col path does.

#include <torch/types.h>

#include <array>
#include <cstdint>

namespace snn::functional {

/// Whether the graph model's Conv2d runs conv2d_event rather than im2col
/// and snn::Linear for this input (inference on the CPU; training keeps the
/// differentiable im2col path): a CPU tensor of float32, float64 or bool.
/// No density is measured: bench/conv_bench found the event-driven kernel
/// faster than im2col at every firing fraction from 0.5% to 100% (im2col's
/// copy of every input KH KW times costs more than the scatter of dense
/// inputs), so there is no crossover to choose by.
bool conv2d_event_pays(const torch::Tensor& x);

/// y [N, Cout, OH, OW] = conv2d(x, weight, bias) for x [N, Cin, H, W]
/// (float32/float64 of the weight's dtype, or bool spikes, read as bytes),
/// weight [Cout, Cin, KH, KW], bias [Cout] or undefined; stride and
/// dilation >= 1, padding >= 0 (zeros), per axis (y, x). OH = (H + 2 pH -
/// dH (KH - 1) - 1) / sH + 1, as torch::conv2d. Throws snn::Error naming
/// the shapes when they do not fit.
torch::Tensor conv2d_event(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                           std::array<int64_t, 2> dilation);

/// How many times conv2d_event has packed weights on the calling thread so
/// far (a diagnostic, for tests of its cache): while a snn::FrozenWeights
/// guard lives, it packs each weight once, however the weight is viewed at
/// each call.
uint64_t conv2d_event_packings();

}  // namespace snn::functional
