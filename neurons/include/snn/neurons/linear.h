#pragma once
/// A fully connected synapse layer whose results do not depend on how the
/// rows are batched: y = x W^T + b, each output summed over the inputs in
/// ascending order, skipping zero inputs (an event-driven pass for spikes).
///
/// Why not torch::nn::Linear: BLAS GEMMs choose their kernels and summation
/// order by matrix shape and thread count, so a sample's output changes in
/// the last bits with the batch size, the micro-batch split or the number of
/// time steps per block. Simulations must not: the pipeline's equivalence
/// (any partition, split size, steps per tick) and reproducibility across
/// thread counts rest on this layer. Backward uses LibTorch's matmuls.

#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace snn {

/// Options of snn::Linear.
struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  /// Input size. Required.
  TORCH_ARG(int64_t, in_features);
  /// Output size. Required.
  TORCH_ARG(int64_t, out_features);
  /// Whether to add a learnable bias. Default true.
  TORCH_ARG(bool, bias) = true;
};

namespace functional {
/// y[..., o] = b[o] + sum over f in ascending order, x[..., f] != 0, of x[..., f] W[o, f].
/// x: [..., in] float32/float64; weight [out, in]; bias [out] or undefined.
/// Differentiable w.r.t. x, weight and bias.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
}  // namespace functional

/// Batch-invariant fully connected layer (see the file comment); initialised
/// like torch::nn::Linear (Kaiming-uniform weight, uniform bias).
class LinearImpl : public torch::nn::Cloneable<LinearImpl> {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  void reset() override;
  /// x [..., in] -> [..., out]; any leading dimensions ([T, B] included).
  torch::Tensor forward(const torch::Tensor& x);
  void pretty_print(std::ostream& stream) const override;
  LinearOptions options;
  torch::Tensor weight;
  torch::Tensor bias;
};
TORCH_MODULE(Linear);

}  // namespace snn
