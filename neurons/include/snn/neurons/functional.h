#pragma once
/// Functional form of the neuron layers: one fused multi-step pass over
/// [T, ...] inputs, the twin of the modules in lif.h.

#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "snn/neurons/surrogate.h"

namespace snn {

/// The neuron model of a layer.
enum class NeuronModel {
  kIF,             ///< integrate-and-fire: h = v + x
  kLIF,            ///< leaky integrate-and-fire with a fixed tau
  kParametricLIF,  ///< LIF whose 1/tau = sigmoid(w) is learned (Fang et al. 2021)
};

/// Everything that defines a layer's dynamics. Potentials are in the units of
/// the input (SpikingJelly's convention); times are in steps.
struct NeuronParams {
  NeuronModel model = NeuronModel::kLIF;  ///< default LIF
  double tau = 2.0;              ///< membrane time constant in steps (LIF), >= 1; default 2
  bool decay_input = true;       ///< LIF/PLIF: whether the input also decays by 1/tau; default true
  double v_threshold = 1.0;      ///< threshold; reaching it exactly fires; default 1
  std::optional<double> v_reset = 0.0;  ///< hard reset value; nullopt = soft reset; default 0
  bool detach_reset = false;     ///< drop the reset's gradient path; default false
  Surrogate surrogate;           ///< backward of the spike; default sigmoid(alpha=4)
  int64_t refractory = 0;        ///< absolute refractory period in steps; default 0 (off)

  /// Throws snn::Error naming the first invalid value.
  void validate() const;
};

/// Name of a model as used on the command line: "if", "lif", "plif".
std::string to_string(NeuronModel model);
/// Parses "if", "lif" or "plif"; throws snn::Error otherwise.
NeuronModel parse_neuron_model(const std::string& name);

/// A layer's state between calls. Undefined tensors mean "reset": the next
/// call starts from v = v_reset (hard reset) or 0 (soft reset).
struct NeuronState {
  torch::Tensor v;           ///< [B, ...] membrane potential after the last step
  torch::Tensor refractory;  ///< [B, ...] int32, refractory steps left
  torch::Tensor i;           ///< [B, ...] synaptic current (CubaLIF, CubaLI); undefined otherwise
  bool defined() const { return v.defined(); }
};

/// Per-step potentials of one multi-step call, for inspection and recording.
struct NeuronTrace {
  torch::Tensor h;  ///< [T, B, ...] potential after charging, before fire/reset
  torch::Tensor v;  ///< [T, B, ...] potential after reset
};

class LinearImpl;

namespace functional {

/// Runs T steps of a neuron layer as one fused pass.
///
/// x_seq: [T, B, ...] float32 or float64 input (current) on CPU or CUDA.
/// state: updated in place; an undefined state starts from reset, a defined
///   one must have shape [B, ...] equal to x_seq's per-step shape.
/// rate: PLIF only, the 0-dim tensor k = sigmoid(w) (differentiable); unused
///   otherwise.
/// trace: when given, filled with the per-step h and v.
/// spike_dtype: dtype of the returned spikes, default x_seq's; kBool halves
///   memory traffic for inference (not differentiable).
/// Returns the spikes [T, B, ...]. With grad mode on and x, the state or the
/// rate requiring grad, the pass is differentiable w.r.t. all three through
/// the surrogate gradient (backpropagation through time, fused as well).
torch::Tensor neuron_multistep(const torch::Tensor& x_seq, NeuronState& state,
                               const NeuronParams& params, const torch::Tensor& rate = {},
                               NeuronTrace* trace = nullptr,
                               std::optional<torch::ScalarType> spike_dtype = std::nullopt);

/// neuron_multistep(fc->forward(x_seq), state, params, rate, nullptr,
/// spike_dtype), bit for bit, for x_seq [T, B, in] (real, or bool spikes)
/// on the CPU with no gradient recorded: fused, each block of fc's output
/// goes through the neurons while in cache (LinearImpl::forward_steps), so
/// the currents [T, B, out] are never stored. Elsewhere (a GPU, training)
/// it is the two passes one after the other.
torch::Tensor linear_neuron_multistep(LinearImpl& fc, const torch::Tensor& x_seq, NeuronState& state,
                                      const NeuronParams& params, const torch::Tensor& rate = {},
                                      std::optional<torch::ScalarType> spike_dtype = std::nullopt);

/// The spikes of neuron_multistep(x_seq, state, params, rate, nullptr,
/// spike_dtype) max pooled in 2 x 2 windows at stride 2 over the last two
/// dims (spike_max_pool2x2), bit for bit, for x_seq [T, ..., H, W]: fused
/// on the CPU with no gradient recorded and H, W even (W <= 1024), so that
/// each step's spikes are pooled while in cache and only the pooled ones
/// [T, ..., H / 2, W / 2] are stored; elsewhere the two passes one after
/// the other. `fired`, when given, receives the number of spikes the
/// neurons fired (not the pooled ones).
torch::Tensor neuron_max_pool_multistep(const torch::Tensor& x_seq, NeuronState& state, const NeuronParams& params,
                                        const torch::Tensor& rate = {},
                                        std::optional<torch::ScalarType> spike_dtype = std::nullopt,
                                        int64_t* fired = nullptr);

/// One step: x [B, ...] -> spikes [B, ...]; the T = 1 case of neuron_multistep.
torch::Tensor neuron_step(const torch::Tensor& x, NeuronState& state, const NeuronParams& params,
                          const torch::Tensor& rate = {});

/// Reference implementation with plain tensor ops (SpikingJelly's
/// single-step loop, autograd through surrogate_spike), for tests and
/// benchmarks: slow, but independent of the fused kernels.
torch::Tensor neuron_multistep_reference(const torch::Tensor& x_seq, NeuronState& state,
                                         const NeuronParams& params, const torch::Tensor& rate = {},
                                         NeuronTrace* trace = nullptr);

}  // namespace functional
}  // namespace snn
