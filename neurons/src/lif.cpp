#include "snn/neurons/lif.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "snn/core/error.h"
#include "snn/neurons/linear.h"
#include "snn/neurons/windows.h"

namespace snn {

NeuronParams NeuronLayer::params() const {
  throw InternalError("this neuron layer has per-neuron dynamics, not one NeuronParams");
}

torch::Tensor NeuronLayer::pass(const torch::Tensor& x_seq, NeuronState& state, NeuronTrace* trace,
                                std::optional<torch::ScalarType> spike_dtype) {
  return functional::neuron_multistep(x_seq, state, params(), rate(), trace, spike_dtype);
}

torch::Tensor NeuronLayer::step(const torch::Tensor& x) {
  return counted(pass(x.unsqueeze(0), state_, nullptr, std::nullopt).squeeze(0));
}

std::optional<torch::ScalarType> NeuronLayer::spike_dtype_for(std::optional<torch::ScalarType> spike_dtype) const {
  if (!spike_dtype && bool_without_grad_ && spiking() && !torch::GradMode::is_enabled()) return torch::kBool;
  return spike_dtype;
}

double NeuronLayer::spike_total(const torch::Tensor& spikes) {
  if (spikes.scalar_type() != torch::kBool || !spikes.is_cpu()) return spikes.detach().sum().item<double>();
  const torch::Tensor c = spikes.contiguous();
  const uint8_t* p = reinterpret_cast<const uint8_t*>(c.data_ptr<bool>());
  const int64_t n = c.numel();
  int64_t total = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    std::memcpy(&x, p + i, 8);
    // Eight 0/1 bytes: their sum (at most 8) lands in the top byte.
    total += static_cast<int64_t>((x * 0x0101010101010101ULL) >> 56);
  }
  for (; i < n; ++i) total += p[i];
  return static_cast<double>(total);
}

void NeuronLayer::observe(const torch::Tensor& out, const torch::Tensor& v) {
  observer_(spiking() ? out.detach() : torch::zeros(out.sizes(), out.options().dtype(torch::kBool)), v);
}

torch::Tensor NeuronLayer::multi_step_after(LinearImpl& fc, const torch::Tensor& x_seq) {
  // v per step, or dynamics the fused Linear+neuron pass does not know: the unfused pass.
  if ((observer_ && observer_wants_v_) || !fusable()) return multi_step(fc.forward(x_seq));
  torch::Tensor spikes =
      counted(functional::linear_neuron_multistep(fc, x_seq, state_, params(), rate(), spike_dtype_for({})));
  if (observer_) observe(spikes, torch::Tensor());
  return spikes;
}

torch::Tensor NeuronLayer::multi_step_max_pooled(const torch::Tensor& x_seq) {
  // An observer sees every spike; other dynamics have their own pass.
  if (observer_ || !fusable()) return functional::spike_max_pool2x2(multi_step(x_seq));
  int64_t fired = 0;
  torch::Tensor pooled =
      functional::neuron_max_pool_multistep(x_seq, state_, params(), rate(), spike_dtype_for({}), &fired);
  if (count_spikes_ && spiking()) spikes_counted_ += static_cast<double>(fired);
  return pooled;
}

torch::Tensor NeuronLayer::multi_step(const torch::Tensor& x_seq, NeuronTrace* trace,
                                      std::optional<torch::ScalarType> spike_dtype) {
  spike_dtype = spike_dtype_for(spike_dtype);
  if (!observer_) return counted(pass(x_seq, state_, trace, spike_dtype));
  NeuronTrace own;
  NeuronTrace* t = trace ? trace : (observer_wants_v_ ? &own : nullptr);
  torch::Tensor out = counted(pass(x_seq, state_, t, spike_dtype));
  observe(out, t ? t->v.detach() : torch::Tensor());
  return out;
}

std::vector<torch::Tensor> NeuronLayer::save_state() const {
  if (!state_.defined()) return {};
  if (state_.i.defined()) return {state_.v, state_.refractory, state_.i};
  return {state_.v, state_.refractory};
}

void NeuronLayer::load_state(const std::vector<torch::Tensor>& state) {
  TORCH_CHECK(state.empty() || state.size() == 2 || state.size() == 3,
              "a neuron layer's state is {v, refractory} or {v, refractory, i}, got ", state.size(), " tensors");
  state_ = NeuronState{};
  if (state.empty()) return;
  state_.v = state[0];
  state_.refractory = state[1];
  if (state.size() == 3) state_.i = state[2];
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
