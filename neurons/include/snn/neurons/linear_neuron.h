#pragma once
/// A synapse layer and the neuron layer it feeds, as one pipeline module,
/// so that simulation can fuse the two passes.

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <utility>

#include "snn/core/error.h"
#include "snn/neurons/lif.h"
#include "snn/neurons/linear.h"

namespace snn {

/// forward(x [T, B, in]) = the neuron layer's multi-step pass on fc(x): the
/// same spikes as the two modules one after the other, fused on the CPU
/// when no gradient is recorded (the currents [T, B, out] never leave the
/// cache; see functional::linear_neuron_multistep), and the two passes
/// otherwise (training, GPUs). The neuron layer always runs multi-step.
/// Both are registered as submodules ("fc", "neuron"), so moving this
/// module moves them, and a pipeline finds the neuron layer's state
/// (Temporal) among its modules; the parameters are theirs.
class LinearNeuronImpl : public torch::nn::Module {
 public:
  /// `neuron` is the NeuronLayer behind `neuron_module` (the same object).
  LinearNeuronImpl(Linear fc, torch::nn::AnyModule neuron_module, std::shared_ptr<NeuronLayer> neuron)
      : fc_(std::move(fc)), neuron_(std::move(neuron)) {
    if (fc_.is_empty() || neuron_module.is_empty() || !neuron_ ||
        dynamic_cast<NeuronLayer*>(neuron_module.ptr().get()) != neuron_.get()) {
      throw Error("LinearNeuron needs a Linear and a neuron module whose NeuronLayer is the one given");
    }
    register_module("fc", fc_);
    register_module("neuron", neuron_module.ptr());
  }
  torch::Tensor forward(const torch::Tensor& x) { return neuron_->multi_step_after(*fc_, x); }

 private:
  Linear fc_;
  std::shared_ptr<NeuronLayer> neuron_;
};
TORCH_MODULE(LinearNeuron);

}  // namespace snn
