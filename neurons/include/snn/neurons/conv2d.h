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
///
/// For training, conv2d_input_grad computes the input's gradient of a
/// stride-1 convolution the same way, without im2col rows: what the im2col
/// path's backward gives, bit for bit, and conv2d_train trains a stride-1
/// convolution with the im2col path's gradients and outputs without
/// recording rows.

#include <torch/types.h>

#include <array>
#include <cstdint>

#include "snn/neurons/linear.h"

namespace snn::functional {

/// Whether the graph model's Conv2d runs conv2d_event rather than im2col
/// and snn::Linear for this input (inference on the CPU; training runs it
/// through conv2d_train where the convolution has stride 1, else the
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

/// Whether conv2d_input_grad takes the convolution of x [N, Cin, H, W] with
/// weight [Cout, Cin, KH, KW]: CPU tensors of one dtype (float32 or
/// float64), stride 1, no dilation, padding at most the kernel size - 1.
bool conv2d_input_grad_fits(const torch::Tensor& x, const torch::Tensor& weight, std::array<int64_t, 2> stride,
                            std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation);

/// gx [N, Cin, H, W]: the gradient of conv2d(x, weight) with respect to x
/// [N, Cin, H, W], for the output's gradient gy [N, Cout, OH, OW] (stride 1,
/// no dilation, padding at most kernel - 1; see conv2d_input_grad_fits),
/// computed without im2col rows. Bit for bit what the im2col path gives
/// (snn::Linear's backward on im2rows' rows, then im2rows' backward): each
/// pixel sums its taps from zero in ascending (ky, kx), each tap its
/// products over the output channels in ascending order, as a product then
/// an addition; on every instruction set, batch split and thread count.
/// Throws snn::Error naming the shapes when they do not fit.
torch::Tensor conv2d_input_grad(const torch::Tensor& gy, const torch::Tensor& weight, int64_t H, int64_t W,
                                std::array<int64_t, 2> padding);

/// y [N, Cout, OH, OW] = conv2d(x, weight, bias), differentiable, for a
/// stride-1, undilated convolution (conv2d_input_grad_fits) whose weight is
/// held as snn::Linear holds it over im2col rows: weight [Cout, Cin KH KW]
/// (column (c KH + ky) KW + kx), bias [Cout] or undefined. What Linear on
/// im2rows(x) gives, bit for bit (up to the sign of an exact zero output),
/// forward and backward, without keeping or (for images up to 64 wide)
/// forming those rows: the output from conv2d_event, straight into planes;
/// x's gradient from conv2d_input_grad; the weight and bias gradients as
/// Linear's backward sums them over the rows n OH OW + l in ascending
/// order, the rows' nonzero inputs read from x's planes (wider images:
/// from rows rebuilt in the backward pass) and the output's gradient from
/// its planes. x is kept for the backward pass as autograd keeps inputs
/// (changed in place meanwhile, backward throws). With `sums` (a Linear
/// module's, carry_grad_sums), the sums carry across calls and go to
/// weight.grad() and bias.grad() as Linear's do. Throws snn::Error naming
/// the shapes when they do not fit.
torch::Tensor conv2d_train(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           std::array<int64_t, 2> kernel, std::array<int64_t, 2> padding,
                           const c10::intrusive_ptr<LinearGradSums>& sums = {});

}  // namespace snn::functional
