#pragma once
/// Neuron layers with per-neuron parameters: NIR's six neuron kinds (LIF,
/// IF, LI, CubaLIF, CubaLI, Threshold) in snnsim's discrete time, for
/// networks read from NIR files or graph files that give a parameter per
/// neuron or one the SpikingJelly layers of lif.h cannot express (a leak
/// potential apart from the reset, an input gain r, a synaptic current).
///
/// NIR's equations (tau dv/dt = (v_leak - v) + r I, tau_syn dI/dt = -I +
/// w_in x, times in seconds) are taken by forward Euler with a step of dt;
/// here every time constant is already in steps (tau_steps = tau / dt; an
/// IF's r is NIR's r dt), converted once where a file is read. One step t,
/// input x (the summed synaptic input of the step):
///
///   CubaLIF, CubaLI:      i = i + (w_in x - i) / tau_syn;   u = i
///   otherwise:            u = x
///   LIF, LI, CubaLIF/LI:  h = v + ((v_leak - v) + r u) / tau
///   IF:                   h = v + r u
///   Threshold:            h = x                  (no state)
///   spiking kinds:        s = (h >= v_threshold); hard reset v = s ? v_reset : h,
///                         soft reset v = h - s v_threshold
///   LI, CubaLI:           v = h; the output is v (a potential, not spikes)
///
/// The synaptic current takes the step's input before the membrane does
/// (the input of step t reaches v at step t, as in the LIF of lif.h and
/// snnTorch's Synaptic). With r = 1 and v_leak = v_reset, the LIF charge is
/// bit for bit SpikingJelly's decay_input form (lif.h), because
/// (v_leak - v) + x rounds exactly as x - (v - v_reset). Spikes fire when h
/// reaches the threshold (>=, as SpikingJelly; NIR says >).
///
/// Initial state after a reset: v = v_reset (spiking kinds with a hard
/// reset), 0 (soft reset), v_leak (LI, CubaLI); i = 0.
///
/// Plain tensor ops with autograd through the surrogate spike: correct on
/// CPU and CUDA, deterministic and batch-invariant (every operation is
/// element-wise), not fused. The SpikingJelly layers keep their fused kernels.

#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <string>

#include "snn/neurons/lif.h"

namespace snn {

/// NIR's neuron kinds.
enum class GeneralNeuronKind {
  kLIF,        ///< leaky integrate-and-fire
  kIF,         ///< integrate-and-fire
  kLI,         ///< leaky integrator: no spikes, the output is v
  kCubaLIF,    ///< current-based LIF: a synaptic current i feeds v
  kCubaLI,     ///< current-based leaky integrator
  kThreshold,  ///< s = (x >= v_threshold), no state
};

/// "LIF", "IF", "LI", "CubaLIF", "CubaLI", "Threshold" (NIR's names).
std::string to_string(GeneralNeuronKind kind);
/// Whether the kind emits spikes (all but LI and CubaLI).
bool is_spiking(GeneralNeuronKind kind);

/// Options of a GeneralNeuron layer. Each parameter is a float64 (or
/// float32) tensor holding one value for every neuron (0-dim) or one per
/// neuron (the layer's per-sample shape, e.g. [C, H, W]); potentials are in
/// the input's units, times in steps.
struct GeneralNeuronOptions {
  explicit GeneralNeuronOptions(GeneralNeuronKind kind = GeneralNeuronKind::kLIF) : kind_(kind) {}
  /// The kind. Default LIF.
  TORCH_ARG(GeneralNeuronKind, kind);
  /// Membrane time constant in steps, > 0 (LIF, LI, CubaLIF, CubaLI). Default 2.
  TORCH_ARG(torch::Tensor, tau) = torch::tensor(2.0, torch::kDouble);
  /// Synaptic time constant in steps, > 0 (CubaLIF, CubaLI). Default 2.
  TORCH_ARG(torch::Tensor, tau_syn) = torch::tensor(2.0, torch::kDouble);
  /// Input gain (LIF, LI, Cuba*: NIR's r; IF: NIR's r dt). Default 1.
  TORCH_ARG(torch::Tensor, r) = torch::tensor(1.0, torch::kDouble);
  /// Resting potential the membrane leaks toward (LIF, LI, Cuba*). Default 0.
  TORCH_ARG(torch::Tensor, v_leak) = torch::tensor(0.0, torch::kDouble);
  /// Firing threshold (LIF, IF, CubaLIF, Threshold). Default 1.
  TORCH_ARG(torch::Tensor, v_threshold) = torch::tensor(1.0, torch::kDouble);
  /// Hard reset value (LIF, IF, CubaLIF). Default 0.
  TORCH_ARG(torch::Tensor, v_reset) = torch::tensor(0.0, torch::kDouble);
  /// Synaptic input weight (CubaLIF, CubaLI). Default 1.
  TORCH_ARG(torch::Tensor, w_in) = torch::tensor(1.0, torch::kDouble);
  /// Soft reset (v -= v_threshold) instead of v = v_reset. Default false.
  TORCH_ARG(bool, soft_reset) = false;
  /// Cut the reset out of the backward graph. Default false.
  TORCH_ARG(bool, detach_reset) = false;
  /// Surrogate gradient of the spike. Default sigmoid, alpha 4.
  TORCH_ARG(Surrogate, surrogate) = Surrogate::sigmoid();
  /// Absolute refractory period in steps after a spike (LIF, IF, CubaLIF). Default 0.
  TORCH_ARG(int64_t, refractory) = 0;
  /// Meaning of forward(x). Default multi-step.
  TORCH_ARG(StepMode, step_mode) = StepMode::kMulti;

 public:
  /// Throws snn::Error naming the first invalid value: a time constant <= 0,
  /// a NaN or infinity, parameters of different non-scalar shapes.
  void validate() const;
};

namespace functional {

/// T steps of a GeneralNeuron layer: x_seq [T, B, ...] float32 or float64;
/// state as in neuron_multistep (state.i holds the synaptic current).
/// Returns spikes [T, B, ...] in x's dtype (spike_dtype kBool for
/// inference), or the potentials v for LI and CubaLI.
torch::Tensor general_neuron_multistep(const torch::Tensor& x_seq, NeuronState& state,
                                       const GeneralNeuronOptions& options, NeuronTrace* trace = nullptr,
                                       std::optional<torch::ScalarType> spike_dtype = std::nullopt);

}  // namespace functional

/// A neuron layer of any of NIR's kinds with per-neuron parameters.
class GeneralNeuronImpl : public torch::nn::Cloneable<GeneralNeuronImpl>, public NeuronLayer {
 public:
  explicit GeneralNeuronImpl(GeneralNeuronOptions options = GeneralNeuronOptions());
  /// Registers the parameters as buffers (moved with the module, not trained).
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x) { return forward_by_mode(x, options.step_mode()); }
  bool spiking() const override { return is_spiking(options.kind()); }
  void pretty_print(std::ostream& stream) const override;
  GeneralNeuronOptions options;

 protected:
  torch::Tensor pass(const torch::Tensor& x_seq, NeuronState& state, NeuronTrace* trace,
                     std::optional<torch::ScalarType> spike_dtype) override;
  bool fusable() const override { return false; }
};
TORCH_MODULE(GeneralNeuron);

}  // namespace snn
