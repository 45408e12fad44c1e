// NEST's iaf_psc_delta and iaf_psc_exp: options, propagators, the CPU loop
// around detail::iaf_step, and the one place that picks the CPU or the CUDA
// kernel.

#include "snn/neurons/iaf.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "iaf_kernels.h"
#include "snn/core/error.h"
#include "snn/core/message_number.h"

#if SNN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace snn {

using neurons::detail::IafArgs;
using neurons::detail::IafCoeffs;
using neurons::detail::IafKind;

std::string to_string(IafModel model) { return model == IafModel::kPscDelta ? "iaf_psc_delta" : "iaf_psc_exp"; }

IafModel parse_iaf_model(const std::string& name) {
  if (name == "iaf_psc_delta") return IafModel::kPscDelta;
  if (name == "iaf_psc_exp") return IafModel::kPscExp;
  throw Error("unknown NEST model '" + name + "': expected iaf_psc_delta or iaf_psc_exp");
}

namespace {

void positive(const char* name, double v, const char* unit) {
  if (!(v > 0) || !std::isfinite(v)) throw Error(std::string(name) + " must be a positive number of " + unit + ", got " + message_number(v));
}

// NEST's propagator from a synaptic current (decaying with tau_syn) to the
// membrane (tau_m, C_m) over a step h (libnestutil/iaf_propagator.cpp,
// IAFPropagatorExp): the closed form, or its limit where tau_syn = tau_m
// (or the closed form loses its precision).
double propagator_syn_to_membrane(double tau_syn, double tau_m, double c_m, double h) {
  const double beta = tau_syn * tau_m / (tau_m - tau_syn);  // infinite when tau_m == tau_syn
  const double gamma = beta / c_m;
  const double inv_beta = (tau_m - tau_syn) / (tau_syn * tau_m);
  const double p32 = gamma * std::exp(-h * (1 / tau_syn)) * std::expm1(h * inv_beta);
  if (std::isnormal(p32) && p32 > 0) return p32;
  return h * (1 / c_m) * std::exp(-h * (1 / tau_m));
}

template <typename T>
IafCoeffs<T> coeffs_of(const IafOptions& o) {
  IafCoeffs<T> c;
  const double h = o.dt();
  c.kind = o.model() == IafModel::kPscDelta ? IafKind::kPscDelta : IafKind::kPscExp;
  if (o.model() == IafModel::kPscDelta) {
    const double p33 = std::exp(-h / o.tau_m());
    c.p22 = static_cast<T>(p33);
    c.p20 = static_cast<T>(1 / o.C_m() * (1 - p33) * o.tau_m());
  } else {
    const double p22 = std::exp(-h / o.tau_m());
    c.p22 = static_cast<T>(p22);
    c.p20 = static_cast<T>(o.tau_m() / o.C_m() * (1.0 - p22));
    c.p11ex = static_cast<T>(std::exp(-h / o.tau_syn_ex()));
    c.p11in = static_cast<T>(std::exp(-h / o.tau_syn_in()));
    c.p21ex = static_cast<T>(propagator_syn_to_membrane(o.tau_syn_ex(), o.tau_m(), o.C_m(), h));
    c.p21in = static_cast<T>(propagator_syn_to_membrane(o.tau_syn_in(), o.tau_m(), o.C_m(), h));
  }
  c.v_th = static_cast<T>(o.V_th() - o.E_L());
  c.v_reset = static_cast<T>(o.V_reset() - o.E_L());
  c.v_min = std::isinf(o.V_min()) ? std::numeric_limits<T>::lowest() : static_cast<T>(o.V_min() - o.E_L());
  c.i_e = static_cast<T>(o.I_e());
  c.refractory_steps = static_cast<int32_t>(o.refractory_steps());
  return c;
}

}  // namespace

IafCoeffs<double> iaf_coefficients(const IafOptions& options) {
  options.validate();
  return coeffs_of<double>(options);
}

void IafOptions::validate() const {
  positive("dt", dt(), "ms");
  positive("C_m", C_m(), "pF");
  positive("tau_m", tau_m(), "ms");
  if (model() == IafModel::kPscExp) {
    positive("tau_syn_ex", tau_syn_ex(), "ms");
    positive("tau_syn_in", tau_syn_in(), "ms");
  }
  for (const auto& [name, v] : {std::pair<const char*, double>{"E_L", E_L()}, {"V_th", V_th()}, {"V_reset", V_reset()},
                                {"I_e", I_e()}}) {
    if (!std::isfinite(v)) throw Error(std::string(name) + " must be finite, got " + message_number(v));
  }
  if (!(V_reset() < V_th())) {
    throw Error("V_reset (" + message_number(V_reset()) + " mV) must be below V_th (" + message_number(V_th()) + " mV)");
  }
  if (std::isnan(V_min()) || V_min() == std::numeric_limits<double>::infinity()) {
    throw Error("V_min must be a number of mV or -infinity, got " + message_number(V_min()));
  }
  refractory_steps();
}

std::vector<std::string> iaf_parameter_names(IafModel model) {
  std::vector<std::string> names{"dt", "C_m", "tau_m", "t_ref", "E_L", "V_th", "V_reset", "I_e"};
  if (model == IafModel::kPscDelta) {
    names.push_back("V_min");
  } else {
    names.insert(names.end(), {"tau_syn_ex", "tau_syn_in"});
  }
  return names;
}

void set_iaf_parameter(IafOptions& o, const std::string& name, double value) {
  const bool delta = o.model() == IafModel::kPscDelta;
  if (name == "dt") {
    o.dt(value);
  } else if (name == "C_m") {
    o.C_m(value);
  } else if (name == "tau_m") {
    o.tau_m(value);
  } else if (name == "t_ref") {
    o.t_ref(value);
  } else if (name == "E_L") {
    o.E_L(value);
  } else if (name == "V_th") {
    o.V_th(value);
  } else if (name == "V_reset") {
    o.V_reset(value);
  } else if (name == "I_e") {
    o.I_e(value);
  } else if (name == "V_min" && delta) {
    o.V_min(value);
  } else if (name == "tau_syn_ex" && !delta) {
    o.tau_syn_ex(value);
  } else if (name == "tau_syn_in" && !delta) {
    o.tau_syn_in(value);
  } else {
    check_iaf_parameter_name(o.model(), name);
    throw Error("set_iaf_parameter: '" + name + "' is a parameter of " + to_string(o.model()) + " it does not set");
  }
}

void check_iaf_parameter_name(IafModel model, const std::string& name) {
  const auto names = iaf_parameter_names(model);
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw Error("unknown parameter '" + name + "' of " + to_string(model) + "; it has " + list);
}

int64_t IafOptions::refractory_steps() const {
  const double steps = t_ref() / dt();
  if (!(t_ref() >= 0) || !std::isfinite(t_ref()) || std::fabs(steps - std::round(steps)) > 1e-9 * std::max(1.0, steps) ||
      steps > double(1 << 30)) {
    throw Error("t_ref must be a whole number (>= 0) of steps of dt = " + message_number(dt()) + " ms, got " + message_number(t_ref()) + " ms");
  }
  return static_cast<int64_t>(std::round(steps));
}

namespace functional {

torch::Tensor iaf_multistep(const torch::Tensor& ex, const torch::Tensor& in, const torch::Tensor& current,
                            IafState& state, const IafOptions& o, torch::Tensor* v_trace, torch::Tensor* h_trace) {
  o.validate();
  TORCH_CHECK(ex.dim() >= 1, "Iaf input must be [T, ...], got a 0-dim tensor");
  TORCH_CHECK(ex.scalar_type() == torch::kFloat || ex.scalar_type() == torch::kDouble,
              "Iaf input must be float32 or float64, got ", ex.scalar_type());
  for (const auto* t : {&in, &current}) {
    if (!t->defined()) continue;
    TORCH_CHECK(t->sizes() == ex.sizes() && t->scalar_type() == ex.scalar_type() && t->device() == ex.device(),
                "Iaf inputs must agree: ", (t == &in ? "in" : "current"), " is ", t->sizes(), " ", t->scalar_type(),
                " on ", t->device(), ", ex is ", ex.sizes(), " ", ex.scalar_type(), " on ", ex.device());
  }
  const auto step_shape = ex.sizes().slice(1);
  if (!state.defined()) {
    state.v = torch::zeros(step_shape, ex.options());
    state.i_ex = torch::zeros(step_shape, ex.options());
    state.i_in = torch::zeros(step_shape, ex.options());
    state.i0 = torch::zeros(step_shape, ex.options());
    state.refractory = torch::zeros(step_shape, ex.options().dtype(torch::kInt));
  }
  for (const auto* t : {&state.v, &state.i_ex, &state.i_in, &state.i0}) {
    TORCH_CHECK(t->sizes() == step_shape && t->scalar_type() == ex.scalar_type() && t->device() == ex.device(),
                "Iaf state is ", t->sizes(), " ", t->scalar_type(), " on ", t->device(), " but a step of the input is ",
                step_shape, " ", ex.scalar_type(), " on ", ex.device(), "; reset the state first");
  }
  const torch::Tensor exc = ex.contiguous();
  const torch::Tensor inc = in.defined() ? in.contiguous() : torch::Tensor();
  const torch::Tensor cur = current.defined() ? current.contiguous() : torch::Tensor();
  torch::Tensor spikes = torch::empty_like(exc);
  // The kernel updates the state in place: fresh contiguous copies, so that
  // tensors a caller kept (an earlier state) never change.
  state.v = state.v.contiguous().clone();
  state.i_ex = state.i_ex.contiguous().clone();
  state.i_in = state.i_in.contiguous().clone();
  state.i0 = state.i0.contiguous().clone();
  state.refractory = state.refractory.contiguous().clone();
  if (v_trace) *v_trace = torch::empty_like(exc);
  if (h_trace) *h_trace = torch::empty_like(exc);
  torch::Tensor i_e_neurons;
  if (o.I_e_neurons().defined()) {
    const auto sample_shape = ex.dim() >= 2 ? ex.sizes().slice(2) : c10::IntArrayRef{};
    TORCH_CHECK(ex.dim() >= 2 && o.I_e_neurons().sizes() == sample_shape,
                "I_e_neurons must have one sample's neuron shape ", sample_shape, " (the input is [T, B, ...] = ",
                ex.sizes(), "), got ", o.I_e_neurons().sizes());
    TORCH_CHECK(o.I_e_neurons().is_floating_point() && torch::isfinite(o.I_e_neurons()).all().item<bool>(),
                "I_e_neurons must be finite currents in pA");
    i_e_neurons = o.I_e_neurons().to(exc.options()).contiguous();
  }
  const int64_t steps = exc.size(0);
  AT_DISPATCH_FLOATING_TYPES(exc.scalar_type(), "snn_iaf_forward", [&] {
    IafArgs<scalar_t> a;
    a.ex = exc.data_ptr<scalar_t>();
    a.in = inc.defined() ? inc.data_ptr<scalar_t>() : nullptr;
    a.current = cur.defined() ? cur.data_ptr<scalar_t>() : nullptr;
    a.i_e = i_e_neurons.defined() ? i_e_neurons.data_ptr<scalar_t>() : nullptr;
    a.i_e_period = i_e_neurons.defined() ? std::max<int64_t>(1, i_e_neurons.numel()) : 1;
    a.spikes = spikes.data_ptr<scalar_t>();
    a.v = state.v.data_ptr<scalar_t>();
    a.i_ex = state.i_ex.data_ptr<scalar_t>();
    a.i_in = state.i_in.data_ptr<scalar_t>();
    a.i0 = state.i0.data_ptr<scalar_t>();
    a.ref = state.refractory.data_ptr<int32_t>();
    a.v_trace = v_trace ? v_trace->data_ptr<scalar_t>() : nullptr;
    a.h_trace = h_trace ? h_trace->data_ptr<scalar_t>() : nullptr;
    a.v_offset = static_cast<scalar_t>(o.E_L());
    a.steps = steps;
    a.n = steps == 0 ? state.v.numel() : exc.numel() / steps;
    a.c = coeffs_of<scalar_t>(o);
    if (exc.is_cuda()) {
#if SNN_WITH_CUDA
      const c10::cuda::CUDAGuard guard(exc.device());
      neurons::detail::iaf_forward_cuda(a, at::cuda::getCurrentCUDAStream().stream());
#else
      throw Error("a CUDA tensor reached the Iaf kernels, but snnsim was built without CUDA support");
#endif
    } else {
      neurons::detail::iaf_forward_cpu(a);
    }
  });
  return spikes;
}

}  // namespace functional

namespace neurons::detail {

template <typename T>
void iaf_forward_cpu(const IafArgs<T>& a) {
  // Neurons are independent: any split over threads gives the same values.
  at::parallel_for(0, a.n, 1024, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) iaf_neuron_steps(a, i);
  });
}

template void iaf_forward_cpu<float>(const IafArgs<float>&);
template void iaf_forward_cpu<double>(const IafArgs<double>&);

}  // namespace neurons::detail

IafImpl::IafImpl(IafOptions options_) : options(std::move(options_)) { options.validate(); }

torch::Tensor IafImpl::pass(const torch::Tensor& x_seq, NeuronState& state, NeuronTrace* trace,
                            std::optional<torch::ScalarType> spike_dtype) {
  (void)state;  // the layer keeps its own (IafState)
  TORCH_CHECK(!torch::GradMode::is_enabled() || !x_seq.requires_grad(),
              "an Iaf layer (NEST's models) simulates; it has no gradient to train through");
  const torch::Tensor zero = torch::zeros({}, x_seq.options());
  const torch::Tensor ex = torch::where(x_seq > 0, x_seq, zero), in = torch::where(x_seq < 0, x_seq, zero);
  torch::Tensor v, h;
  torch::Tensor spikes = functional::iaf_multistep(ex, in, {}, state_, options, trace ? &v : nullptr,
                                                   trace ? &h : nullptr);
  if (trace) {
    trace->v = v;
    trace->h = h;
  }
  return spike_dtype ? spikes.to(*spike_dtype) : spikes;
}

void IafImpl::reset_state() { state_ = IafState{}; }

std::vector<torch::Tensor> IafImpl::save_state() const {
  if (!state_.defined()) return {};
  return {state_.v, state_.i_ex, state_.i_in, state_.i0, state_.refractory};
}

void IafImpl::load_state(const std::vector<torch::Tensor>& s) {
  TORCH_CHECK(s.empty() || s.size() == 5, "an Iaf layer's state is {v, i_ex, i_in, i0, refractory}, got ", s.size(),
              " tensors");
  state_ = s.empty() ? IafState{} : IafState{s[0], s[1], s[2], s[3], s[4]};
}

void IafImpl::pretty_print(std::ostream& os) const {
  os << "snn::Iaf(" << to_string(options.model()) << ", dt=" << options.dt() << " ms, C_m=" << options.C_m()
     << " pF, tau_m=" << options.tau_m() << " ms, t_ref=" << options.t_ref() << " ms, E_L=" << options.E_L()
     << " mV, V_th=" << options.V_th() << " mV, V_reset=" << options.V_reset() << " mV, I_e=" << options.I_e() << " pA";
  if (options.I_e_neurons().defined()) os << " + I_e_neurons " << options.I_e_neurons().sizes();
  if (options.model() == IafModel::kPscExp) {
    os << ", tau_syn_ex=" << options.tau_syn_ex() << " ms, tau_syn_in=" << options.tau_syn_in() << " ms";
  }
  os << ")";
}

}  // namespace snn
