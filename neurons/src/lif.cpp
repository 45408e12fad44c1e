#include "snn/neurons/lif.h"

#include <cmath>

#include "snn/neurons/linear.h"

namespace snn {

torch::Tensor NeuronLayer::step(const torch::Tensor& x) {
  return counted(functional::neuron_multistep(x.unsqueeze(0), state_, params(), rate()).squeeze(0));
}

std::optional<torch::ScalarType> NeuronLayer::spike_dtype_for(std::optional<torch::ScalarType> spike_dtype) const {
  if (!spike_dtype && bool_without_grad_ && !torch::GradMode::is_enabled()) return torch::kBool;
  return spike_dtype;
}

torch::Tensor NeuronLayer::multi_step_after(LinearImpl& fc, const torch::Tensor& x_seq) {
  if (observer_ && observer_wants_v_) return multi_step(fc.forward(x_seq));  // v per step: the unfused pass
  torch::Tensor spikes =
      counted(functional::linear_neuron_multistep(fc, x_seq, state_, params(), rate(), spike_dtype_for({})));
  if (observer_) observer_(spikes.detach(), torch::Tensor());
  return spikes;
}

torch::Tensor NeuronLayer::multi_step(const torch::Tensor& x_seq, NeuronTrace* trace,
                                      std::optional<torch::ScalarType> spike_dtype) {
  spike_dtype = spike_dtype_for(spike_dtype);
  if (!observer_) return counted(functional::neuron_multistep(x_seq, state_, params(), rate(), trace, spike_dtype));
  NeuronTrace own;
  NeuronTrace* t = trace ? trace : (observer_wants_v_ ? &own : nullptr);
  torch::Tensor spikes = counted(functional::neuron_multistep(x_seq, state_, params(), rate(), t, spike_dtype));
  observer_(spikes.detach(), t ? t->v.detach() : torch::Tensor());
  return spikes;
}

std::vector<torch::Tensor> NeuronLayer::save_state() const {
  if (!state_.defined()) return {};
  return {state_.v, state_.refractory};
}

void NeuronLayer::load_state(const std::vector<torch::Tensor>& state) {
  TORCH_CHECK(state.empty() || state.size() == 2, "a neuron layer's state is {v, refractory}, got ", state.size(),
              " tensors");
  state_ = state.empty() ? NeuronState{} : NeuronState{state[0], state[1]};
}

namespace {
void print_common(std::ostream& os, double v_threshold, const std::optional<double>& v_reset, bool detach_reset,
                  const Surrogate& surrogate, int64_t refractory) {
  os << "v_threshold=" << v_threshold << ", v_reset=";
  if (v_reset) {
    os << *v_reset;
  } else {
    os << "none(soft)";
  }
  os << ", detach_reset=" << (detach_reset ? "true" : "false") << ", surrogate=" << surrogate.str();
  if (refractory > 0) os << ", refractory=" << refractory;
}
}  // namespace

LIFImpl::LIFImpl(LIFOptions options_) : options(std::move(options_)) { params().validate(); }

NeuronParams LIFImpl::params() const {
  NeuronParams p;
  p.model = NeuronModel::kLIF;
  p.tau = options.tau();
  p.decay_input = options.decay_input();
  p.v_threshold = options.v_threshold();
  p.v_reset = options.v_reset();
  p.detach_reset = options.detach_reset();
  p.surrogate = options.surrogate();
  p.refractory = options.refractory();
  return p;
}

void LIFImpl::pretty_print(std::ostream& os) const {
  os << "snn::LIF(tau=" << options.tau() << ", decay_input=" << (options.decay_input() ? "true" : "false") << ", ";
  print_common(os, options.v_threshold(), options.v_reset(), options.detach_reset(), options.surrogate(),
               options.refractory());
  os << ")";
}

IFImpl::IFImpl(IFOptions options_) : options(std::move(options_)) { params().validate(); }

NeuronParams IFImpl::params() const {
  NeuronParams p;
  p.model = NeuronModel::kIF;
  p.v_threshold = options.v_threshold();
  p.v_reset = options.v_reset();
  p.detach_reset = options.detach_reset();
  p.surrogate = options.surrogate();
  p.refractory = options.refractory();
  return p;
}

void IFImpl::pretty_print(std::ostream& os) const {
  os << "snn::IF(";
  print_common(os, options.v_threshold(), options.v_reset(), options.detach_reset(), options.surrogate(),
               options.refractory());
  os << ")";
}

ParametricLIFImpl::ParametricLIFImpl(ParametricLIFOptions options_) : options(std::move(options_)) {
  params().validate();
  reset();
}

void ParametricLIFImpl::reset() {
  // Float32 like SpikingJelly's torch.as_tensor(init_w); .to(kDouble) converts it.
  w = register_parameter("w", torch::tensor(-std::log(options.init_tau() - 1.0), torch::kFloat));
}

NeuronParams ParametricLIFImpl::params() const {
  NeuronParams p;
  p.model = NeuronModel::kParametricLIF;
  p.tau = options.init_tau();
  p.decay_input = options.decay_input();
  p.v_threshold = options.v_threshold();
  p.v_reset = options.v_reset();
  p.detach_reset = options.detach_reset();
  p.surrogate = options.surrogate();
  p.refractory = options.refractory();
  return p;
}

double ParametricLIFImpl::tau() const { return 1.0 / torch::sigmoid(w.detach()).item<double>(); }

void ParametricLIFImpl::pretty_print(std::ostream& os) const {
  os << "snn::ParametricLIF(tau=" << tau() << ", decay_input=" << (options.decay_input() ? "true" : "false") << ", ";
  print_common(os, options.v_threshold(), options.v_reset(), options.detach_reset(), options.surrogate(),
               options.refractory());
  os << ")";
}

}  // namespace snn
