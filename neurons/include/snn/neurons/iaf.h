#pragma once
/// NEST's integrate-and-fire neurons with current-based synapses, in
/// biological units (ms, mV, pA, pF), integrated exactly on a grid of dt as
/// NEST 3.10 does (detail/iaf_step.h):
///
///   iaf_psc_delta:  C_m dV/dt = -(V - E_L) C_m / tau_m + I_e + I(t); an input
///                   spike of weight w (mV) makes V jump by w.
///   iaf_psc_exp:    C_m dV/dt = -(V - E_L) C_m / tau_m + I_syn,ex + I_syn,in
///                   + I_e + I(t); an input spike of weight w (pA) makes its
///                   synaptic current jump by w, which then decays with
///                   tau_syn_ex (w > 0) or tau_syn_in (w < 0).
///
/// A spike when V >= V_th; V is then clamped at V_reset for t_ref. Spikes
/// arriving in that time are lost (psc_delta) or still charge the synaptic
/// currents (psc_exp), as in NEST. An external current I(t) takes effect
/// one step after the step it is given for (NEST's current generators).
/// validated by neurons_nest_test against NEST itself: the same spike steps,
/// potentials within 1e-9 relative in float64.
///
/// Forward only: these are simulation models (no surrogate gradient).

#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "snn/neurons/detail/iaf_step.h"
#include "snn/neurons/lif.h"

namespace snn {

/// Which NEST model.
enum class IafModel {
  kPscDelta,  ///< iaf_psc_delta
  kPscExp,    ///< iaf_psc_exp
};

/// "iaf_psc_delta" or "iaf_psc_exp" (NEST's names), and back (throws snn::Error).
std::string to_string(IafModel model);
IafModel parse_iaf_model(const std::string& name);

/// Parameters of an Iaf layer; NEST's names and defaults.
struct IafOptions {
  explicit IafOptions(IafModel model = IafModel::kPscDelta) : model_(model) {}
  /// The model. Default iaf_psc_delta.
  TORCH_ARG(IafModel, model);
  /// Grid step in ms, > 0. Default 0.1.
  TORCH_ARG(double, dt) = 0.1;
  /// Membrane capacitance in pF, > 0. Default 250.
  TORCH_ARG(double, C_m) = 250.0;
  /// Membrane time constant in ms, > 0. Default 10.
  TORCH_ARG(double, tau_m) = 10.0;
  /// Absolute refractory period in ms, a whole number of steps, >= 0. Default 2.
  TORCH_ARG(double, t_ref) = 2.0;
  /// Resting potential in mV. Default -70.
  TORCH_ARG(double, E_L) = -70.0;
  /// Threshold in mV, above V_reset. Default -55.
  TORCH_ARG(double, V_th) = -55.0;
  /// Reset potential in mV. Default -70.
  TORCH_ARG(double, V_reset) = -70.0;
  /// Lower bound of V in mV (iaf_psc_delta). Default none (-infinity).
  TORCH_ARG(double, V_min) = -std::numeric_limits<double>::infinity();
  /// Constant input current of every neuron in pA. Default 0.
  TORCH_ARG(double, I_e) = 0.0;
  /// Each neuron's own constant current in pA, added to I_e: a float64
  /// tensor of one sample's neuron shape (the input's [...] after [T, B]),
  /// the same for every sample. Default undefined (none).
  TORCH_ARG(torch::Tensor, I_e_neurons);
  /// Excitatory synaptic time constant in ms, > 0 (iaf_psc_exp). Default 2.
  TORCH_ARG(double, tau_syn_ex) = 2.0;
  /// Inhibitory synaptic time constant in ms, > 0 (iaf_psc_exp). Default 2.
  TORCH_ARG(double, tau_syn_in) = 2.0;
  /// Meaning of forward(x). Default multi-step.
  TORCH_ARG(StepMode, step_mode) = StepMode::kMulti;

 public:
  /// Throws snn::Error naming the first invalid value.
  void validate() const;
  /// t_ref in steps of dt.
  int64_t refractory_steps() const;
};

/// Sets one parameter by its NEST name (C_m, tau_m, t_ref, E_L, V_th,
/// V_reset, I_e; V_min for iaf_psc_delta; tau_syn_ex, tau_syn_in for
/// iaf_psc_exp) or dt; throws snn::Error naming an unknown one and the names
/// the model has. Values are checked by IafOptions::validate().
void set_iaf_parameter(IafOptions& options, const std::string& name, double value);
/// The names set_iaf_parameter takes for a model, in NEST's order.
std::vector<std::string> iaf_parameter_names(IafModel model);
/// Throws snn::Error "unknown parameter 'x' of iaf_psc_delta; it has ..."
/// unless set_iaf_parameter takes `name` for `model`.
void check_iaf_parameter_name(IafModel model, const std::string& name);

/// The per-step constants of the options (NEST's propagators) in float64,
/// for loops that call detail::iaf_step themselves (populations/).
neurons::detail::IafCoeffs<double> iaf_coefficients(const IafOptions& options);

/// An Iaf layer's state between calls; undefined tensors mean "reset"
/// (V = E_L, no synaptic current, not refractory).
struct IafState {
  torch::Tensor v;           ///< [B, ...] membrane potential relative to E_L (mV), as NEST keeps it
  torch::Tensor i_ex, i_in;  ///< [B, ...] synaptic currents (pA; iaf_psc_exp)
  torch::Tensor i0;          ///< [B, ...] the external current in effect (pA)
  torch::Tensor refractory;  ///< [B, ...] int32, refractory steps left
  bool defined() const { return v.defined(); }
};

namespace functional {

/// T steps of an Iaf layer. ex, in: [T, B, ...] float32 or float64 weights
/// of the spikes arriving at the end of each step, excitatory and
/// inhibitory (mV for psc_delta, pA for psc_exp; `in` may be undefined);
/// current: [T, B, ...] external current (pA) given for each step, or
/// undefined. Returns the spikes [T, B, ...] in ex's dtype; v_trace, when
/// given, receives V after each step (absolute mV, as NEST records V_m),
/// h_trace V before the threshold test.
torch::Tensor iaf_multistep(const torch::Tensor& ex, const torch::Tensor& in, const torch::Tensor& current,
                            IafState& state, const IafOptions& options, torch::Tensor* v_trace = nullptr,
                            torch::Tensor* h_trace = nullptr);

}  // namespace functional

/// An Iaf layer as a neuron layer of snnsim: forward(x) takes the summed
/// synaptic input of each step, its positive values to the excitatory
/// synapses and its negative ones to the inhibitory (exact for
/// iaf_psc_delta, and for iaf_psc_exp when a neuron's input of one step has
/// one sign or tau_syn_ex = tau_syn_in; otherwise use the functional form).
class IafImpl : public torch::nn::Cloneable<IafImpl>, public NeuronLayer {
 public:
  explicit IafImpl(IafOptions options = IafOptions());
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x) { return forward_by_mode(x, options.step_mode()); }
  void reset_state() override;
  std::vector<torch::Tensor> save_state() const override;
  void load_state(const std::vector<torch::Tensor>& state) override;
  void pretty_print(std::ostream& stream) const override;
  IafOptions options;

 protected:
  torch::Tensor pass(const torch::Tensor& x_seq, NeuronState& state, NeuronTrace* trace,
                     std::optional<torch::ScalarType> spike_dtype) override;
  bool fusable() const override { return false; }

 private:
  IafState state_;
};
TORCH_MODULE(Iaf);

}  // namespace snn
