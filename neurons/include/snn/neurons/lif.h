#pragma once
/// LIF, IF and parametric LIF layers as LibTorch modules with SpikingJelly's
/// semantics (activation_based/neuron.py, tag 0.0.0.0.14):
///
///   charge  LIF decay_input:  h = v + (x - (v - v_reset)) / tau
///           LIF !decay_input: h = v - (v - v_reset) / tau + x
///           IF:               h = v + x          (soft reset: v_reset = 0 here)
///   fire    s = (h - v_threshold >= 0)           (reaching the threshold fires)
///   reset   hard: v = (1 - s) h + s v_reset;  soft: v = h - s v_threshold
///
/// Beyond SpikingJelly: an absolute refractory period (off by default).
/// The state v lives in the module between calls; reset_state() clears it.
/// A multi-step call over [T, B, ...] is one fused pass; a single step is its
/// T = 1 case.

#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <optional>

#include "snn/core/temporal.h"
#include "snn/neurons/functional.h"

namespace snn {

/// Options of a LIF layer.
struct LIFOptions {
  /// Membrane time constant in steps, >= 1. Default 2.
  TORCH_ARG(double, tau) = 2.0;
  /// Whether the input is divided by tau too. Default true.
  TORCH_ARG(bool, decay_input) = true;
  /// Firing threshold (input units). Default 1.
  TORCH_ARG(double, v_threshold) = 1.0;
  /// Hard reset value, or std::nullopt for a soft reset (v -= v_threshold). Default 0.
  TORCH_ARG(std::optional<double>, v_reset) = 0.0;
  /// Cut the reset out of the backward graph. Default false.
  TORCH_ARG(bool, detach_reset) = false;
  /// Surrogate gradient of the spike. Default sigmoid, alpha 4.
  TORCH_ARG(Surrogate, surrogate) = Surrogate::sigmoid();
  /// Absolute refractory period in steps after a spike. Default 0 (off).
  TORCH_ARG(int64_t, refractory) = 0;
  /// Meaning of forward(x). Default single step.
  TORCH_ARG(StepMode, step_mode) = StepMode::kSingle;
};

/// Options of an IF layer (no leak).
struct IFOptions {
  TORCH_ARG(double, v_threshold) = 1.0;                     ///< default 1
  TORCH_ARG(std::optional<double>, v_reset) = 0.0;          ///< default 0; nullopt = soft
  TORCH_ARG(bool, detach_reset) = false;                    ///< default false
  TORCH_ARG(Surrogate, surrogate) = Surrogate::sigmoid();   ///< default sigmoid(4)
  TORCH_ARG(int64_t, refractory) = 0;                       ///< steps; default 0
  TORCH_ARG(StepMode, step_mode) = StepMode::kSingle;       ///< default single step
};

/// Options of a parametric LIF layer: 1/tau = sigmoid(w) is learned, with
/// w initialised to -log(init_tau - 1) (SpikingJelly's ParametricLIFNode).
struct ParametricLIFOptions {
  TORCH_ARG(double, init_tau) = 2.0;                        ///< steps, > 1; default 2
  TORCH_ARG(bool, decay_input) = true;                      ///< default true
  TORCH_ARG(double, v_threshold) = 1.0;                     ///< default 1
  TORCH_ARG(std::optional<double>, v_reset) = 0.0;          ///< default 0; nullopt = soft
  TORCH_ARG(bool, detach_reset) = false;                    ///< default false
  TORCH_ARG(Surrogate, surrogate) = Surrogate::sigmoid();   ///< default sigmoid(4)
  TORCH_ARG(int64_t, refractory) = 0;                       ///< steps; default 0
  TORCH_ARG(StepMode, step_mode) = StepMode::kSingle;       ///< default single step
};

/// Behaviour shared by the neuron modules: state handling and the single-
/// and multi-step passes over the fused kernels.
class NeuronLayer : public Temporal {
 public:

  /// One step: x [B, ...] -> spikes [B, ...] in x's dtype.
  torch::Tensor step(const torch::Tensor& x);
  /// T steps: x_seq [T, B, ...] -> spikes [T, B, ...]; trace, when given,
  /// receives the per-step h and v; spike_dtype kBool for inference
  /// (default: x's dtype, or see set_bool_spikes_without_grad).
  torch::Tensor multi_step(const torch::Tensor& x_seq, NeuronTrace* trace = nullptr,
                           std::optional<torch::ScalarType> spike_dtype = std::nullopt);
  /// multi_step(fc->forward(x_seq)), the same spikes, with the two passes
  /// fused where they can be (functional::linear_neuron_multistep: the CPU,
  /// no gradient recorded, no observer asking for v).
  torch::Tensor multi_step_after(LinearImpl& fc, const torch::Tensor& x_seq);
  /// spike_max_pool2x2(multi_step(x_seq)) for x_seq [T, ..., H, W]: the
  /// spikes max pooled in 2 x 2 windows at stride 2, the same values,
  /// fused where they can be (functional::neuron_max_pool_multistep: the
  /// CPU, no gradient recorded, no observer). Spike counting counts the
  /// neurons' spikes, not the pooled ones.
  torch::Tensor multi_step_max_pooled(const torch::Tensor& x_seq);
  /// Forgets v and the refractory counts; the next call may use any shape.
  void reset_state() override { state_ = NeuronState{}; }
  /// {v, refractory counts}, or {} after a reset.
  std::vector<torch::Tensor> save_state() const override;
  void load_state(const std::vector<torch::Tensor>& state) override;
  /// The state after the last step (undefined tensors after a reset).
  const NeuronState& state() const { return state_; }
  /// The layer's dynamics as the fused functional API takes them (LIF, IF,
  /// parametric LIF); a GeneralNeuron has none and throws InternalError.
  virtual NeuronParams params() const;
  /// Whether the layer emits spikes. LI and CubaLI layers (general_neuron.h)
  /// emit their potential instead: not counted as spikes, and observers see
  /// no spikes from them.
  virtual bool spiking() const { return true; }

  /// Opt-in spike counting for firing rates (a reduction per call, so off by
  /// default): while on, every call adds its spikes to spikes_counted().
  void set_count_spikes(bool on) {
    count_spikes_ = on;
    spikes_counted_ = 0;
  }
  double spikes_counted() const { return spikes_counted_; }

  /// While on, multi-step passes that record no gradient (GradMode off)
  /// return bool spikes unless multi_step is given a dtype: the same 0/1
  /// values in a quarter of float32's bytes, for a next layer that reads
  /// bool (snn::Linear does). Off by default: spikes keep x's dtype.
  void set_bool_spikes_without_grad(bool on) { bool_without_grad_ = on; }
  bool bool_spikes_without_grad() const { return bool_without_grad_; }

  /// Receives every multi-step block as it is produced, in the thread that
  /// produced it (a pipeline stage): spikes [K, B, ...] and, when the
  /// observer asked for it, the potentials v after each step [K, B, ...]
  /// (else undefined). Recorders compact spikes here, where they live.
  using Observer = std::function<void(const torch::Tensor& spikes, const torch::Tensor& v)>;
  /// Sets (or, with an empty function, clears) the observer; with_v makes
  /// multi-step passes also compute the per-step potentials.
  void set_observer(Observer observer, bool with_v = false) {
    observer_ = std::move(observer);
    observer_wants_v_ = with_v;
  }

 protected:
  /// PLIF's k = sigmoid(w); undefined for the others.
  virtual torch::Tensor rate() const { return {}; }
  /// The multi-step pass over `state`: the fused kernels of
  /// functional::neuron_multistep unless a layer has other dynamics.
  virtual torch::Tensor pass(const torch::Tensor& x_seq, NeuronState& state, NeuronTrace* trace,
                             std::optional<torch::ScalarType> spike_dtype);
  /// Whether multi_step_after and multi_step_max_pooled may fuse the
  /// neuron pass with the Linear or the pool (the layer's dynamics are
  /// params()).
  virtual bool fusable() const { return true; }
  torch::Tensor forward_by_mode(const torch::Tensor& x, StepMode mode) {
    return mode == StepMode::kSingle ? step(x) : multi_step(x);
  }

 private:
  /// spike_dtype, or bool where set_bool_spikes_without_grad says so.
  std::optional<torch::ScalarType> spike_dtype_for(std::optional<torch::ScalarType> spike_dtype) const;
  torch::Tensor counted(torch::Tensor spikes) {
    if (count_spikes_ && spiking()) spikes_counted_ += spike_total(spikes);
    return spikes;
  }
  /// The spikes in a block: bool spikes on the CPU are counted as bytes in
  /// place (a sum() would first convert them all to int64).
  static double spike_total(const torch::Tensor& spikes);
  /// Hands a block to the observer: a non-spiking layer's output is its
  /// potential, so the observer sees no spikes from it.
  void observe(const torch::Tensor& out, const torch::Tensor& v);
  NeuronState state_;
  Observer observer_;
  bool observer_wants_v_ = false;
  bool count_spikes_ = false;
  bool bool_without_grad_ = false;
  double spikes_counted_ = 0;
};

/// Leaky integrate-and-fire layer.
class LIFImpl : public torch::nn::Cloneable<LIFImpl>, public NeuronLayer {
 public:
  explicit LIFImpl(LIFOptions options = {});
  void reset() override {}
  /// step(x) or multi_step(x) as options.step_mode() says.
  torch::Tensor forward(const torch::Tensor& x) { return forward_by_mode(x, options.step_mode()); }
  NeuronParams params() const override;
  void pretty_print(std::ostream& stream) const override;
  LIFOptions options;
};
TORCH_MODULE(LIF);

/// Integrate-and-fire layer.
class IFImpl : public torch::nn::Cloneable<IFImpl>, public NeuronLayer {
 public:
  explicit IFImpl(IFOptions options = {});
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x) { return forward_by_mode(x, options.step_mode()); }
  NeuronParams params() const override;
  void pretty_print(std::ostream& stream) const override;
  IFOptions options;
};
TORCH_MODULE(IF);

/// Parametric LIF layer with a learnable scalar w (1/tau = sigmoid(w)).
class ParametricLIFImpl : public torch::nn::Cloneable<ParametricLIFImpl>, public NeuronLayer {
 public:
  explicit ParametricLIFImpl(ParametricLIFOptions options = {});
  /// (Re)creates w = -log(init_tau - 1) as a float32 scalar parameter.
  void reset() override;
  torch::Tensor forward(const torch::Tensor& x) { return forward_by_mode(x, options.step_mode()); }
  NeuronParams params() const override;
  /// Current tau = 1 / sigmoid(w), in steps.
  double tau() const;
  void pretty_print(std::ostream& stream) const override;
  ParametricLIFOptions options;
  torch::Tensor w;

 protected:
  torch::Tensor rate() const override { return w.sigmoid(); }
};
TORCH_MODULE(ParametricLIF);

}  // namespace snn
