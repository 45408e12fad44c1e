// Tensor-level entry of the fused neuron passes: argument checks, state
// initialisation, the autograd function, and the one place that picks the
// CPU or the CUDA kernels.

#include "snn/neurons/functional.h"

#include <ATen/Dispatch.h>
#include <torch/autograd.h>

#include <cmath>
#include <sstream>

#include "kernels.h"
#include "snn/core/error.h"
#include "snn/core/message_number.h"
#include "snn/neurons/linear.h"
#include "snn/neurons/windows.h"

#if SNN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace snn {

using neurons::detail::BackwardArgs;
using neurons::detail::ChargeForm;
using neurons::detail::Coeffs;
using neurons::detail::Form;
using neurons::detail::ForwardArgs;

namespace {

std::string fmt_double(double v) { return message_number(v); }

bool is_zero_reset(const NeuronParams& p) { return !p.v_reset || *p.v_reset == 0.0; }

Form form_of(const NeuronParams& p) {
  Form f;
  f.divide = p.model != NeuronModel::kParametricLIF;
  if (p.model == NeuronModel::kIF) {
    f.charge = ChargeForm::kIF;
  } else if (p.decay_input) {
    f.charge = is_zero_reset(p) ? ChargeForm::kDecayZero : ChargeForm::kDecay;
  } else {
    f.charge = is_zero_reset(p) ? ChargeForm::kLeakZero : ChargeForm::kLeak;
  }
  return f;
}

// The rate constants as SpikingJelly forms them: LIF's 1 - 1/tau is computed
// in double (Python floats) and rounded once to T; PLIF's k and 1 - k are
// computed in the dtype of w and then converted.
struct Rates {
  double k = 0.5;
  double leak = 0.5;
};

Rates rates_of(const NeuronParams& p, const torch::Tensor& rate) {
  Rates r;
  if (p.model == NeuronModel::kParametricLIF) {
    TORCH_CHECK(rate.defined() && rate.numel() == 1,
                "a parametric LIF needs its rate k = sigmoid(w) as a one-element tensor");
    const torch::Tensor k = rate.detach().reshape({});
    r.k = k.item<double>();
    r.leak = (1.0 - k).item<double>();
  } else {
    r.k = 1.0 / p.tau;
    r.leak = 1.0 - 1.0 / p.tau;
  }
  return r;
}

template <typename T>
Coeffs<T> coeffs_of(const NeuronParams& p, const Rates& r) {
  Coeffs<T> c;
  c.tau = static_cast<T>(p.tau);
  c.k = static_cast<T>(r.k);
  c.leak = static_cast<T>(r.leak);
  c.v_threshold = static_cast<T>(p.v_threshold);
  c.v_reset = static_cast<T>(p.v_reset.value_or(0.0));
  c.hard_reset = p.v_reset.has_value();
  c.refractory = static_cast<int32_t>(p.refractory);
  return c;
}

[[noreturn]] void no_cuda() {
  throw Error("a CUDA tensor reached the neuron kernels, but snnsim was built without CUDA support");
}

// Clears a state whose memory the kernels were to fill (prepare_state's
// kernel_fills) unless disarmed after they ran: an error in between (a
// check, memory) must not leave a defined state of uninitialised values,
// which the next call would read as the layer's potentials.
class FreshState {
 public:
  FreshState(NeuronState& state, bool fresh) : state_(state), armed_(fresh) {}
  FreshState(const FreshState&) = delete;
  FreshState& operator=(const FreshState&) = delete;
  ~FreshState() {
    if (armed_) state_ = NeuronState{};
  }
  void filled() { armed_ = false; }

 private:
  NeuronState& state_;
  bool armed_;
};

// Checks x_seq and makes the state match it (initialising an undefined
// one). With `kernel_fills`, an undefined state gets uninitialised memory
// instead, for the CPU kernels to start from reset (ForwardArgs::fresh):
// returns whether it did.
bool prepare_state(const torch::Tensor& x_seq, NeuronState& state, const NeuronParams& p, bool kernel_fills = false) {
  TORCH_CHECK(x_seq.dim() >= 1, "neuron input must be [T, ...] with at least a time dimension, got a 0-dim tensor");
  TORCH_CHECK(x_seq.scalar_type() == torch::kFloat || x_seq.scalar_type() == torch::kDouble,
              "neuron input must be float32 or float64, got ", x_seq.scalar_type());
  const auto step_shape = x_seq.sizes().slice(1);
  if (!state.defined()) {
    if (kernel_fills && x_seq.is_cpu()) {
      state.v = torch::empty(step_shape, x_seq.options());
      state.refractory = torch::empty(step_shape, x_seq.options().dtype(torch::kInt));
      return true;
    }
    const double v0 = p.v_reset.value_or(0.0);
    state.v = torch::full(step_shape, v0, x_seq.options());
    state.refractory = torch::zeros(step_shape, x_seq.options().dtype(torch::kInt));
    return false;
  }
  TORCH_CHECK(state.v.sizes() == step_shape, "neuron state has shape ", state.v.sizes(),
              " but the input's step has shape ", step_shape,
              "; call reset_state() before feeding a different batch shape");
  TORCH_CHECK(state.v.scalar_type() == x_seq.scalar_type() && state.v.device() == x_seq.device(),
              "neuron state is ", state.v.scalar_type(), " on ", state.v.device(), " but the input is ",
              x_seq.scalar_type(), " on ", x_seq.device(), "; call reset_state() after changing dtype or device");
  if (!state.refractory.defined()) {
    state.refractory = torch::zeros(step_shape, x_seq.options().dtype(torch::kInt));
  }
  return false;
}

// Calls launch(S{}) with S the kernels' spike element: uint8_t for bool
// spikes (one byte, 0 or 1: GCC does not vectorise stores of bool), else
// the input's scalar_t.
template <typename scalar_t, typename Launch>
void with_spike_type(torch::ScalarType spike_dtype, Launch&& launch) {
  if (spike_dtype == torch::kBool) {
    launch(uint8_t{});
  } else {
    launch(scalar_t{});
  }
}

// Runs the fused forward kernels. v and ref are updated in place; traces are
// filled when h_trace is defined (then v_trace and active_trace are too).
// x is [steps, ...] as the spikes, or with x_constant one step's [...],
// the input of every step. With pool_w (the CPU, no traces) the 2 x 2 max
// pool is fused (ForwardArgs::pool_w): spikes is the pooled [steps, ...],
// and the return value the number of spikes the neurons fired; 0 otherwise.
int64_t run_forward(const NeuronParams& p, const Rates& rates, const torch::Tensor& x, const torch::Tensor& spikes,
                    const torch::Tensor& v, const torch::Tensor& ref, const torch::Tensor& h_trace,
                    const torch::Tensor& v_trace, const torch::Tensor& active_trace, bool x_constant = false,
                    bool fresh = false, int64_t pool_w = 0) {
  TORCH_CHECK(!(fresh || pool_w) || x.is_cpu(), "a fresh neuron state and the fused pool are the CPU kernels' only");
  const Form form = form_of(p);
  const int64_t steps = spikes.size(0);
  const int64_t n = v.numel();
  int64_t fired = 0;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_neuron_forward", [&] {
    auto launch = [&](auto spike_tag) {
      using S = decltype(spike_tag);
      ForwardArgs<scalar_t, S> a;
      a.x = x.data_ptr<scalar_t>();
      a.spikes = static_cast<S*>(spikes.data_ptr());
      a.v = v.data_ptr<scalar_t>();
      a.ref = ref.data_ptr<int32_t>();
      if (h_trace.defined()) {
        a.h_trace = h_trace.data_ptr<scalar_t>();
        a.v_trace = v_trace.data_ptr<scalar_t>();
        a.active_trace = active_trace.data_ptr<uint8_t>();
      }
      a.steps = steps;
      a.n = n;
      a.x_constant = x_constant;
      a.fresh = fresh;
      a.pool_w = pool_w;
      a.c = coeffs_of<scalar_t>(p, rates);
      if (pool_w > 0) {
        fired = neurons::detail::forward_pool_cpu(form, a);
      } else if (x.is_cuda()) {
#if SNN_WITH_CUDA
        const c10::cuda::CUDAGuard guard(x.device());
        neurons::detail::forward_cuda(form, a, at::cuda::getCurrentCUDAStream().stream());
#else
        no_cuda();
#endif
      } else {
        neurons::detail::forward_cpu(form, a);
      }
    };
    with_spike_type<scalar_t>(spikes.scalar_type(), launch);
  });
  return fired;
}

// The fused pass as an autograd function of (x_seq, v0, rate).
struct FusedNeuron : torch::autograd::Function<FusedNeuron> {
  // params travel as a pointer: it outlives the call, and backward copies
  // what it needs into saved_data.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                const torch::Tensor& v0, const torch::Tensor& rate,
                                                const torch::Tensor& ref, const NeuronParams* params,
                                                NeuronTrace* trace) {
    const NeuronParams& p = *params;
    const Rates rates = rates_of(p, rate);
    const torch::Tensor xc = x.contiguous();
    torch::Tensor v = v0.contiguous().clone();
    torch::Tensor spikes = torch::empty_like(xc);
    torch::Tensor h_trace = torch::empty_like(xc);
    torch::Tensor v_trace = torch::empty_like(xc);
    torch::Tensor active = torch::empty(xc.sizes(), xc.options().dtype(torch::kByte));
    run_forward(p, rates, xc, spikes, v, ref, h_trace, v_trace, active);
    const bool learn_rate = p.model == NeuronModel::kParametricLIF && rate.defined() && rate.requires_grad();
    ctx->save_for_backward({h_trace, active, learn_rate ? xc : torch::Tensor(), learn_rate ? v_trace : torch::Tensor(),
                            learn_rate ? v0.contiguous() : torch::Tensor(), rate});
    ctx->saved_data["model"] = static_cast<int64_t>(p.model);
    ctx->saved_data["tau"] = p.tau;
    ctx->saved_data["decay_input"] = p.decay_input;
    ctx->saved_data["v_threshold"] = p.v_threshold;
    ctx->saved_data["hard"] = p.v_reset.has_value();
    ctx->saved_data["v_reset"] = p.v_reset.value_or(0.0);
    ctx->saved_data["detach_reset"] = p.detach_reset;
    ctx->saved_data["surrogate"] = static_cast<int64_t>(p.surrogate.kind);
    ctx->saved_data["alpha"] = p.surrogate.alpha;
    ctx->saved_data["refractory"] = p.refractory;
    ctx->saved_data["k"] = rates.k;
    ctx->saved_data["leak"] = rates.leak;
    ctx->saved_data["learn_rate"] = learn_rate;
    if (trace != nullptr) {
      trace->h = h_trace;
      trace->v = v_trace;
    }
    return {spikes, v};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& h_trace = saved[0];
    const torch::Tensor& active = saved[1];
    const bool learn_rate = ctx->saved_data["learn_rate"].toBool();
    NeuronParams p;
    p.model = static_cast<NeuronModel>(ctx->saved_data["model"].toInt());
    p.tau = ctx->saved_data["tau"].toDouble();
    p.decay_input = ctx->saved_data["decay_input"].toBool();
    p.v_threshold = ctx->saved_data["v_threshold"].toDouble();
    p.v_reset = ctx->saved_data["hard"].toBool() ? std::optional<double>(ctx->saved_data["v_reset"].toDouble())
                                                  : std::optional<double>();
    p.refractory = ctx->saved_data["refractory"].toInt();
    Rates rates;
    rates.k = ctx->saved_data["k"].toDouble();
    rates.leak = ctx->saved_data["leak"].toDouble();
    const Form form = form_of(p);

    const torch::Tensor gs = grads[0].defined() ? grads[0].contiguous() : torch::Tensor();
    const torch::Tensor gvT = grads[1].defined() ? grads[1].contiguous() : torch::Tensor();
    const int64_t steps = h_trace.size(0);
    const int64_t n = steps == 0 ? 0 : h_trace.numel() / steps;
    torch::Tensor grad_x = torch::empty_like(h_trace);
    torch::Tensor grad_v0 = torch::empty(h_trace.sizes().slice(1), h_trace.options());
    torch::Tensor grad_k_partial = learn_rate ? torch::empty({n}, h_trace.options()) : torch::Tensor();
    if (steps == 0) {
      grad_v0 = gvT.defined() ? gvT.clone() : torch::zeros_like(grad_v0);
    } else {
      AT_DISPATCH_FLOATING_TYPES(h_trace.scalar_type(), "snn_neuron_backward", [&] {
        BackwardArgs<scalar_t> a;
        a.h_trace = h_trace.data_ptr<scalar_t>();
        a.active_trace = active.data_ptr<uint8_t>();
        a.grad_spikes = gs.defined() ? gs.data_ptr<scalar_t>() : nullptr;
        a.grad_v_final = gvT.defined() ? gvT.data_ptr<scalar_t>() : nullptr;
        a.grad_x = grad_x.data_ptr<scalar_t>();
        a.grad_v0 = grad_v0.data_ptr<scalar_t>();
        if (learn_rate) {
          a.x = saved[2].data_ptr<scalar_t>();
          a.v_trace = saved[3].data_ptr<scalar_t>();
          a.v0 = saved[4].data_ptr<scalar_t>();
          a.grad_k_partial = grad_k_partial.data_ptr<scalar_t>();
        }
        a.steps = steps;
        a.n = n;
        a.c = coeffs_of<scalar_t>(p, rates);
        a.b.surrogate = static_cast<SurrogateKind>(ctx->saved_data["surrogate"].toInt());
        a.b.alpha = static_cast<scalar_t>(ctx->saved_data["alpha"].toDouble());
        a.b.detach_reset = ctx->saved_data["detach_reset"].toBool();
        if (h_trace.is_cuda()) {
#if SNN_WITH_CUDA
          const c10::cuda::CUDAGuard guard(h_trace.device());
          neurons::detail::backward_cuda(form, a, at::cuda::getCurrentCUDAStream().stream());
#else
          no_cuda();
#endif
        } else {
          neurons::detail::backward_cpu(form, a);
        }
      });
    }
    torch::Tensor grad_rate;
    if (learn_rate) {
      const torch::Tensor& rate = saved[5];
      grad_rate = grad_k_partial.sum().to(rate.scalar_type()).reshape(rate.sizes());
    }
    return {grad_x, grad_v0, grad_rate, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

void NeuronParams::validate() const {
  if (model != NeuronModel::kIF && model != NeuronModel::kParametricLIF && !(std::isfinite(tau) && tau >= 1.0)) {
    throw Error("tau must be a finite number >= 1 (steps), got " + fmt_double(tau));
  }
  if (model == NeuronModel::kParametricLIF && !(std::isfinite(tau) && tau > 1.0)) {
    throw Error("the parametric LIF's initial tau must be a finite number > 1 (w = -log(tau - 1)), got " +
                fmt_double(tau));
  }
  if (!std::isfinite(v_threshold)) throw Error("v_threshold must be finite, got " + fmt_double(v_threshold));
  if (v_reset && !std::isfinite(*v_reset)) throw Error("v_reset must be finite, got " + fmt_double(*v_reset));
  if (refractory < 0 || refractory > (int64_t{1} << 30)) {
    throw Error("refractory period must be between 0 and 2^30 steps, got " + std::to_string(refractory));
  }
  if (!(std::isfinite(surrogate.alpha) && surrogate.alpha > 0)) {
    throw Error("surrogate alpha must be a positive number, got " + fmt_double(surrogate.alpha));
  }
}

std::string to_string(NeuronModel model) {
  switch (model) {
    case NeuronModel::kIF:
      return "if";
    case NeuronModel::kLIF:
      return "lif";
    case NeuronModel::kParametricLIF:
      return "plif";
  }
  throw InternalError("unknown NeuronModel");
}

NeuronModel parse_neuron_model(const std::string& name) {
  if (name == "if") return NeuronModel::kIF;
  if (name == "lif") return NeuronModel::kLIF;
  if (name == "plif") return NeuronModel::kParametricLIF;
  throw Error("unknown neuron model '" + name + "': expected lif, if or plif");
}

namespace functional {

torch::Tensor neuron_multistep(const torch::Tensor& x_seq, NeuronState& state, const NeuronParams& params,
                               const torch::Tensor& rate, NeuronTrace* trace,
                               std::optional<torch::ScalarType> spike_dtype) {
  params.validate();
  // Without a gradient, a fresh state is the kernels' to start from reset.
  const bool kernel_fills = !state.defined() && !(torch::GradMode::is_enabled() &&
                                                  (x_seq.requires_grad() || (rate.defined() && rate.requires_grad())));
  const bool fresh = prepare_state(x_seq, state, params, kernel_fills);
  FreshState guard(state, fresh);
  const bool needs_grad = torch::GradMode::is_enabled() &&
                          (x_seq.requires_grad() || state.v.requires_grad() || (rate.defined() && rate.requires_grad()));
  const torch::ScalarType sdt = spike_dtype.value_or(x_seq.scalar_type());
  TORCH_CHECK(sdt == x_seq.scalar_type() || sdt == torch::kBool, "spike dtype must be the input's (",
              x_seq.scalar_type(), ") or bool, got ", sdt);
  if (needs_grad) {
    TORCH_CHECK(sdt == x_seq.scalar_type(), "bool spikes are not differentiable; use the input's dtype when training");
    // Autograd records every tensor input, so an absent rate travels as a
    // placeholder (its gradient is never asked for: it does not require grad).
    const torch::Tensor rate_arg = rate.defined() ? rate : torch::zeros({}, x_seq.options());
    state.refractory = state.refractory.contiguous();
    auto out = FusedNeuron::apply(x_seq, state.v, rate_arg, state.refractory, &params, trace);
    state.v = out[1];
    return out[0];
  }
  // An input the same at every step (stride 0 in time, as the graph model
  // expands a direct input's first layers) is read in place: copying it
  // out to [T, ...] took a tenth to a fifth of a CNN's evaluation. Traced
  // passes keep the copy (they are for training and recording).
  const bool x_constant = trace == nullptr && x_seq.size(0) > 1 && x_seq.stride(0) == 0 && x_seq[0].is_contiguous();
  const torch::Tensor x = x_constant ? x_seq[0] : x_seq.contiguous();
  torch::Tensor spikes = torch::empty(x_seq.sizes(), x_seq.options().dtype(sdt));
  // The state is the layer's own: update it in place (no copy per step),
  // unless it is part of an autograd graph that may still need its value.
  torch::Tensor v = state.v.requires_grad() || !state.v.is_contiguous() ? state.v.detach().contiguous().clone() : state.v;
  torch::Tensor ref = state.refractory.contiguous();
  torch::Tensor h_trace, v_trace, active;
  if (trace != nullptr) {
    h_trace = torch::empty_like(x);
    v_trace = torch::empty_like(x);
    active = torch::empty(x.sizes(), x.options().dtype(torch::kByte));
  }
  run_forward(params, rates_of(params, rate), x, spikes, v, ref, h_trace, v_trace, active, x_constant, fresh);
  guard.filled();
  state.v = v;
  state.refractory = ref;
  if (trace != nullptr) {
    trace->h = h_trace;
    trace->v = v_trace;
  }
  return spikes;
}

torch::Tensor linear_neuron_multistep(LinearImpl& fc, const torch::Tensor& x_seq, NeuronState& state,
                                      const NeuronParams& params, const torch::Tensor& rate,
                                      std::optional<torch::ScalarType> spike_dtype) {
  const torch::Tensor& w = fc.weight;
  const bool grad = torch::GradMode::is_enabled() &&
                    (x_seq.requires_grad() || w.requires_grad() || (fc.bias.defined() && fc.bias.requires_grad()) ||
                     (rate.defined() && rate.requires_grad()) || (state.v.defined() && state.v.requires_grad()));
  if (grad || x_seq.dim() != 3 || !x_seq.is_cpu() || !w.is_cpu() || x_seq.numel() == 0) {
    return neuron_multistep(fc.forward(x_seq), state, params, rate, nullptr, spike_dtype);
  }
  params.validate();
  const int64_t T = x_seq.size(0), B = x_seq.size(1), out = w.size(0);
  // The state is checked and made as for the currents [T, B, out] (none stored).
  const bool fresh = prepare_state(torch::empty({0, B, out}, w.options()), state, params, /*kernel_fills=*/true);
  FreshState guard(state, fresh);
  const torch::ScalarType sdt = spike_dtype.value_or(w.scalar_type());
  TORCH_CHECK(sdt == w.scalar_type() || sdt == torch::kBool, "spike dtype must be the input's (", w.scalar_type(),
              ") or bool, got ", sdt);
  torch::Tensor spikes = torch::empty({T, B, out}, w.options().dtype(sdt));
  // Updated in place, as in neuron_multistep, unless part of a graph.
  torch::Tensor v = state.v.requires_grad() || !state.v.is_contiguous() ? state.v.detach().contiguous().clone() : state.v;
  torch::Tensor ref = state.refractory.contiguous();
  const Rates rates = rates_of(params, rate);
  const Form form = form_of(params);
  AT_DISPATCH_FLOATING_TYPES(w.scalar_type(), "snn_linear_neuron", [&] {
    auto launch = [&](auto spike_tag) {
      using S = decltype(spike_tag);
      const Coeffs<scalar_t> c = coeffs_of<scalar_t>(params, rates);
      S* sp = static_cast<S*>(spikes.data_ptr());
      scalar_t* vp = v.data_ptr<scalar_t>();
      int32_t* rp = ref.data_ptr<int32_t>();
      fc.forward_steps(x_seq, [&](int64_t t, int64_t b0, int64_t b1, void* y) {
        // Step t of neurons [b0 * out, b1 * out): their own v and refractory
        // counts, on this thread (forward_cpu's split runs inline here).
        ForwardArgs<scalar_t, S> a;
        a.x = static_cast<const scalar_t*>(y);
        a.spikes = sp + (t * B + b0) * out;
        a.v = vp + b0 * out;
        a.ref = rp + b0 * out;
        a.steps = 1;
        a.n = (b1 - b0) * out;
        a.fresh = fresh && t == 0;  // the first step starts these neurons from reset
        a.c = c;
        neurons::detail::forward_cpu(form, a);
      });
    };
    with_spike_type<scalar_t>(sdt, launch);
  });
  guard.filled();
  state.v = v;
  state.refractory = ref;
  return spikes;
}

torch::Tensor neuron_max_pool_multistep(const torch::Tensor& x_seq, NeuronState& state, const NeuronParams& params,
                                        const torch::Tensor& rate, std::optional<torch::ScalarType> spike_dtype,
                                        int64_t* fired) {
  TORCH_CHECK(x_seq.dim() >= 3, "a pooled neuron pass needs x [T, ..., H, W], got ", x_seq.sizes());
  TORCH_CHECK(!spike_dtype || *spike_dtype == x_seq.scalar_type() || *spike_dtype == torch::kBool,
              "spike dtype must be the input's (", x_seq.scalar_type(), ") or bool, got ", *spike_dtype);
  const int64_t H = x_seq.size(-2), W = x_seq.size(-1), T = x_seq.size(0);
  const bool grad = torch::GradMode::is_enabled() &&
                    (x_seq.requires_grad() || (state.v.defined() && state.v.requires_grad()) ||
                     (rate.defined() && rate.requires_grad()));
  if (grad || !x_seq.is_cpu() || H % 2 != 0 || W % 2 != 0 || 2 * W > neurons::detail::kPoolRowsMax ||
      x_seq.numel() == 0) {
    // The two passes (spike_max_pool2x2 pools bool spikes as reals).
    const torch::Tensor s = neuron_multistep(x_seq, state, params, rate, nullptr, spike_dtype);
    if (fired) *fired = s.numel() == 0 ? 0 : s.detach().sum().item<int64_t>();
    return spike_max_pool2x2(s);
  }
  params.validate();
  const bool fresh = prepare_state(x_seq, state, params, /*kernel_fills=*/true);
  FreshState guard(state, fresh);
  const torch::ScalarType sdt = spike_dtype.value_or(x_seq.scalar_type());
  // As in neuron_multistep: a constant input read in place, the state updated in place.
  const bool x_constant = T > 1 && x_seq.stride(0) == 0 && x_seq[0].is_contiguous();
  const torch::Tensor x = x_constant ? x_seq[0] : x_seq.contiguous();
  std::vector<int64_t> sizes = x_seq.sizes().vec();
  sizes[sizes.size() - 2] = H / 2;
  sizes[sizes.size() - 1] = W / 2;
  torch::Tensor pooled = torch::empty(sizes, x_seq.options().dtype(sdt));
  torch::Tensor v = state.v.requires_grad() || !state.v.is_contiguous() ? state.v.detach().contiguous().clone() : state.v;
  torch::Tensor ref = state.refractory.contiguous();
  const int64_t count = run_forward(params, rates_of(params, rate), x, pooled, v, ref, {}, {}, {}, x_constant, fresh, W);
  guard.filled();
  state.v = v;
  state.refractory = ref;
  if (fired) *fired = count;
  return pooled;
}

torch::Tensor neuron_step(const torch::Tensor& x, NeuronState& state, const NeuronParams& params,
                          const torch::Tensor& rate) {
  return neuron_multistep(x.unsqueeze(0), state, params, rate).squeeze(0);
}

torch::Tensor neuron_multistep_reference(const torch::Tensor& x_seq, NeuronState& state, const NeuronParams& params,
                                         const torch::Tensor& rate, NeuronTrace* trace) {
  params.validate();
  prepare_state(x_seq, state, params);
  const NeuronParams& p = params;
  const double vr = p.v_reset.value_or(0.0);
  torch::Tensor k;
  torch::Tensor leak;
  if (p.model == NeuronModel::kParametricLIF) {
    TORCH_CHECK(rate.defined(), "a parametric LIF needs its rate k = sigmoid(w)");
    k = rate.reshape({});
    leak = 1.0 - k;
  }
  const bool plif = k.defined();
  torch::Tensor v = state.v;
  torch::Tensor ref = state.refractory;
  std::vector<torch::Tensor> spikes, hs, vs;
  for (int64_t t = 0; t < x_seq.size(0); ++t) {
    const torch::Tensor x = x_seq[t];
    torch::Tensor h;
    // SpikingJelly's charge equations, term for term.
    if (p.model == NeuronModel::kIF) {
      h = v + x;
    } else if (p.decay_input) {
      const torch::Tensor d = is_zero_reset(p) ? x - v : x - (v - vr);
      h = plif ? v + d * k : v + d / p.tau;
    } else if (is_zero_reset(p)) {
      h = plif ? v * leak + x : v * (1.0 - 1.0 / p.tau) + x;
    } else {
      h = plif ? v - (v - vr) * k + x : v - (v - vr) / p.tau + x;
    }
    const torch::Tensor active = ref <= 0;
    h = torch::where(active, h, v);
    torch::Tensor s = surrogate_spike(h - p.v_threshold, p.surrogate) * active.to(h.scalar_type());
    const torch::Tensor sd = p.detach_reset ? s.detach() : s;
    v = p.v_reset ? (1.0 - sd) * h + sd * vr : h - sd * p.v_threshold;
    const torch::Tensor fired = s.detach() > 0;
    ref = torch::where(fired, torch::full_like(ref, p.refractory), torch::where(active, torch::zeros_like(ref), ref - 1));
    spikes.push_back(s);
    hs.push_back(h);
    vs.push_back(v);
  }
  state.v = v;
  state.refractory = ref;
  if (trace != nullptr && !hs.empty()) {
    trace->h = torch::stack(hs);
    trace->v = torch::stack(vs);
  }
  return spikes.empty() ? torch::empty_like(x_seq) : torch::stack(spikes);
}

}  // namespace functional
}  // namespace snn
