#pragma once
// snn::Linear's parameter gradients as its backward pass forms them, for
// the layers that compute their output another way but sum their weight
// gradient as Linear does (the graph model's stride-1 Conv2d, through
// conv2d.cpp). Defined in linear.cpp.

#include <torch/types.h>

#include <cstdint>
#include <utility>

#include "snn/neurons/linear.h"

namespace snn::functional {

/// gy [steps * batch, out] (float or double, rows step-major) as the
/// gradient kernels read it: double, [tiles, rows, 16] zero-padded like the
/// packed weights, row p being step steps - 1 - p / batch and sample p %
/// batch (BPTT order, so that every sum reads its rows in ascending order).
torch::Tensor pack_grad(const torch::Tensor& gy, int64_t steps);

/// gy [N, out, L] (a convolution's output gradient as planes, L = OH OW)
/// packed as pack_grad packs its rows [N L, out] with steps = 1 (row n L +
/// l), without forming those rows: the same tensor.
torch::Tensor pack_grad_planes(const torch::Tensor& gy);

/// The weight and bias gradients of Linear(x2) for x2 [rows, in] (float,
/// double or bool) and its output's gradient packed by pack_grad (the same
/// `steps`): each entry a double sum over the rows in BPTT order, zero
/// inputs skipped. Without `sums`, each is rounded to the weight's dtype and
/// returned (undefined where not needed); with them, the sums carry across
/// calls and their rounding is written to weight_param.grad() and
/// bias_param.grad() (carry_grad_sums), and both returned tensors are
/// undefined.
std::pair<torch::Tensor, torch::Tensor> parameter_grads(const torch::Tensor& x2, const torch::Tensor& gd,
                                                        int64_t steps, const torch::Tensor& weight, bool need_w,
                                                        bool need_b, const c10::intrusive_ptr<LinearGradSums>& sums,
                                                        torch::Tensor weight_param, torch::Tensor bias_param);

}  // namespace snn::functional
