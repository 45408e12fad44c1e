#pragma once
/// Batch normalisation for spiking networks over blocks of steps [K, B, C,
/// ...] (C channels, then any spatial dims): y = (x - mean) / sqrt(var +
/// eps) * weight + bias, per channel.
///
/// Training (autograd recording): the statistics of each time step are its
/// own batch's (over B and the spatial dims), so a block of K steps gives
/// what K blocks of one step give, and the pipeline's K and partition never
/// change a result (SpikingJelly's SeqToANNContainer pools T and B instead,
/// which a pipeline working on blocks cannot). The running statistics move
/// once per step, in step order: running = (1 - momentum) running +
/// momentum stat, the variance's unbiased. Sums are in double, each value
/// rounded to float once; the weight and bias gradients are summed in
/// double across the backward calls of one optimiser step (as snn::Linear's
/// carry_grad_sums), so they too do not depend on K. A sample's result
/// depends on the batch it is trained in, as with any batch normalisation.
///
/// Inference (no autograd recording): the running statistics, an affine map
/// per channel. `snnsim run` and NIR export fold it into the synapse before
/// it (graph::fold_batch_norms).

#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>

namespace snn {

/// Options of a BatchNorm layer.
struct BatchNormOptions {
  explicit BatchNormOptions(int64_t features) : features_(features) {}
  /// Channels C (dim 2 of [K, B, C, ...]).
  TORCH_ARG(int64_t, features);
  /// Added to the variance. Default 1e-5 (PyTorch's).
  TORCH_ARG(double, eps) = 1e-5;
  /// Weight of each step's statistics in the running ones. Default 0.1 (PyTorch's).
  TORCH_ARG(double, momentum) = 0.1;
};

/// Double running sums of the weight and bias gradients across backward calls.
struct BatchNormGradSums : torch::CustomClassHolder {
  torch::Tensor weight, bias;
  torch::Tensor written_weight, written_bias;
  uint32_t written_weight_version = 0, written_bias_version = 0;
};

/// Batch normalisation through time (see the file comment). Parameters
/// weight (1) and bias (0); buffers running_mean (0) and running_var (1).
class BatchNormImpl : public torch::nn::Cloneable<BatchNormImpl> {
 public:
  explicit BatchNormImpl(BatchNormOptions options);
  void reset() override;
  /// x [K, B, C, ...] float32 -> the same shape.
  torch::Tensor forward(const torch::Tensor& x);
  /// The per-channel affine map of inference: y = x * scale + shift, in
  /// double (scale = weight / sqrt(running_var + eps)).
  std::pair<torch::Tensor, torch::Tensor> inference_affine() const;
  void pretty_print(std::ostream& stream) const override;

  BatchNormOptions options;
  torch::Tensor weight, bias, running_mean, running_var;

 private:
  c10::intrusive_ptr<BatchNormGradSums> sums_;
};
TORCH_MODULE(BatchNorm);

}  // namespace snn
