#pragma once
// snn::Linear's parameter gradients as its backward pass forms them, for
// the layers that compute their output another way but sum their weight
// gradient as Linear does (the graph model's stride-1 Conv2d,
// functional::conv2d_train in conv2d.cpp). Defined in linear.cpp.

#include <torch/autograd.h>
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <functional>
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

/// Adds a weight gradient to sum_t [in, out] (double): each entry a sum over
/// rows in ascending packed order, zero inputs skipped, bit-identical for
/// any thread count. With bias_sum (double [out], or null), adds the bias
/// gradient too: each column of the packed gradient over all rows in the
/// same order (what add_bias_grad adds, in the same pass).
using AddWeightGrad = std::function<void(torch::Tensor& sum_t, double* bias_sum)>;

/// Linear's: the rows x2 [steps * batch, in] (float, double or bool) with
/// gd from pack_grad (the same steps).
AddWeightGrad rows_weight_grad(const torch::Tensor& x2, const torch::Tensor& gd, int64_t steps);

/// Whether conv2d_weight_grad takes x [N, C, H, W] for this kernel and
/// padding (stride 1, no dilation): W, the output width and the kernel
/// width at most 64 (a row of pixels is one 64-bit mask).
bool conv2d_weight_grad_fits(const torch::Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> padding);

/// A stride-1 convolution's, x [N, C, H, W] (float or double) with gd from
/// pack_grad_planes: what rows_weight_grad(im2rows(x), gd, 1) adds, bit for
/// bit, without the rows (the nonzero masks built from x's planes).
AddWeightGrad conv2d_weight_grad(const torch::Tensor& x, std::array<int64_t, 2> kernel,
                                 std::array<int64_t, 2> padding, const torch::Tensor& gd);

/// A layer's carried gradient sums and the parameters whose .grad they
/// write, as an autograd node keeps them (null sums: none carried).
struct SavedGradSums {
  c10::intrusive_ptr<LinearGradSums> sums;
  torch::Tensor weight, bias;
};

/// In forward: keeps `sums` and the parameters themselves (not saved
/// copies) in ctx's saved data, where there are sums.
void save_grad_sums(torch::autograd::AutogradContext* ctx, const c10::intrusive_ptr<LinearGradSums>& sums,
                    const torch::Tensor& weight, const torch::Tensor& bias, bool has_bias);

/// In backward: what save_grad_sums kept.
SavedGradSums saved_grad_sums(torch::autograd::AutogradContext* ctx, bool has_bias);

/// The weight gradient (add_weight) and the bias gradient (the column sums
/// of gd in its row order) for a weight [out, in], in double. Without sums
/// each is rounded to the weight's dtype and returned (undefined where not
/// needed); with them the sums carry across calls and their rounding is
/// written to the parameters' .grad() (carry_grad_sums), and both returned
/// tensors are undefined.
std::pair<torch::Tensor, torch::Tensor> parameter_grads(const AddWeightGrad& add_weight, const torch::Tensor& gd,
                                                        const torch::Tensor& weight, bool need_w, bool need_b,
                                                        const SavedGradSums& saved);

}  // namespace snn::functional
