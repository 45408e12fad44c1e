#include "snn/neurons/general_neuron.h"

#include <sstream>

#include <torch/autograd.h>

#include "snn/core/error.h"

namespace snn {

std::string to_string(GeneralNeuronKind kind) {
  switch (kind) {
    case GeneralNeuronKind::kLIF:
      return "LIF";
    case GeneralNeuronKind::kIF:
      return "IF";
    case GeneralNeuronKind::kLI:
      return "LI";
    case GeneralNeuronKind::kCubaLIF:
      return "CubaLIF";
    case GeneralNeuronKind::kCubaLI:
      return "CubaLI";
    case GeneralNeuronKind::kThreshold:
      return "Threshold";
  }
  throw InternalError("unknown GeneralNeuronKind");
}

bool is_spiking(GeneralNeuronKind kind) { return kind != GeneralNeuronKind::kLI && kind != GeneralNeuronKind::kCubaLI; }

namespace {

using K = GeneralNeuronKind;

bool has_membrane_tau(K k) { return k == K::kLIF || k == K::kLI || k == K::kCubaLIF || k == K::kCubaLI; }
bool has_synapse(K k) { return k == K::kCubaLIF || k == K::kCubaLI; }
bool has_reset(K k) { return k == K::kLIF || k == K::kIF || k == K::kCubaLIF; }

// The parameters a kind reads, by name, for validation and printing.
std::vector<std::pair<const char*, const torch::Tensor*>> used(const GeneralNeuronOptions& o) {
  std::vector<std::pair<const char*, const torch::Tensor*>> out;
  const K k = o.kind();
  if (has_membrane_tau(k)) out.emplace_back("tau", &o.tau());
  if (has_synapse(k)) {
    out.emplace_back("tau_syn", &o.tau_syn());
    out.emplace_back("w_in", &o.w_in());
  }
  if (k != K::kThreshold) out.emplace_back("r", &o.r());
  if (has_membrane_tau(k)) out.emplace_back("v_leak", &o.v_leak());
  if (is_spiking(k)) out.emplace_back("v_threshold", &o.v_threshold());
  if (has_reset(k) && !o.soft_reset()) out.emplace_back("v_reset", &o.v_reset());
  return out;
}

}  // namespace

void GeneralNeuronOptions::validate() const {
  std::vector<int64_t> shape;
  const char* shaped = nullptr;
  for (const auto& [name, t] : used(*this)) {
    if (!t->defined()) throw Error(std::string(to_string(kind())) + " parameter " + name + " is not given");
    if (!t->is_floating_point()) throw Error(std::string(name) + " must be a floating-point tensor");
    if (!torch::isfinite(*t).all().item<bool>()) throw Error(std::string(name) + " holds NaN or infinity");
    if ((std::string(name) == "tau" || std::string(name) == "tau_syn") && !(*t > 0).all().item<bool>()) {
      throw Error(std::string(name) + " must be > 0 steps, got a minimum of " + std::to_string(t->min().item<double>()));
    }
    if (t->dim() == 0) continue;
    if (shaped && t->sizes().vec() != shape) {
      std::ostringstream os;
      os << name << " has shape " << t->sizes() << " but " << shaped << " has " << torch::IntArrayRef(shape);
      throw Error(os.str());
    }
    shaped = name;
    shape = t->sizes().vec();
  }
  if (refractory() < 0 || refractory() > (int64_t{1} << 30)) {
    throw Error("refractory period must be between 0 and 2^30 steps, got " + std::to_string(refractory()));
  }
  if (!(std::isfinite(surrogate().alpha) && surrogate().alpha > 0)) {
    throw Error("surrogate alpha must be a positive number, got " + std::to_string(surrogate().alpha));
  }
}

namespace functional {
namespace {

// The per-call constants of a pass: parameters in the input's dtype and
// device (rounded to float32 as the fused kernels round their double
// coefficients) and the options.
struct Pass {
  K kind = K::kLIF;
  torch::Tensor tau, tau_syn, r, v_leak, v_th, v_reset, w_in;
  bool soft = false, detach = false, refractory = false;
  Surrogate surrogate;
  int64_t refractory_steps = 0;

  bool spiking() const { return is_spiking(kind); }
};

Pass pass_of(const GeneralNeuronOptions& o, const torch::Tensor& x) {
  const auto p = [&](const torch::Tensor& t) { return t.to(x.device(), x.scalar_type()); };
  Pass c;
  c.kind = o.kind();
  c.tau = p(o.tau());
  c.tau_syn = p(o.tau_syn());
  c.r = p(o.r());
  c.v_leak = p(o.v_leak());
  c.v_th = p(o.v_threshold());
  c.v_reset = p(o.v_reset());
  c.w_in = p(o.w_in());
  c.soft = o.soft_reset();
  c.detach = o.detach_reset();
  c.surrogate = o.surrogate();
  c.refractory_steps = o.refractory();
  c.refractory = c.spiking() && c.kind != K::kThreshold && o.refractory() > 0;
  return c;
}

// What the backward pass needs of each step, and the trace.
struct Steps {
  std::vector<torch::Tensor> out, h, v, active;
};

// The forward loop: the equations of general_neuron.h, step by step. v, i
// and ref are the state, updated in place.
Steps forward_loop(const Pass& c, const torch::Tensor& x_seq, torch::Tensor& v, torch::Tensor& i, torch::Tensor& ref) {
  Steps st;
  for (int64_t t = 0; t < x_seq.size(0); ++t) {
    const torch::Tensor x = x_seq[t];
    torch::Tensor u = x;
    if (has_synapse(c.kind)) {
      i = i + (c.w_in * x - i) / c.tau_syn;
      u = i;
    }
    torch::Tensor h;
    if (c.kind == K::kThreshold) {
      h = x;
    } else if (c.kind == K::kIF) {
      h = v + c.r * u;
    } else {
      h = v + ((c.v_leak - v) + c.r * u) / c.tau;
    }
    torch::Tensor active;
    if (c.refractory) {
      active = ref <= 0;
      h = torch::where(active, h, v);
    }
    torch::Tensor out;
    if (!c.spiking()) {
      v = h;
      out = h;
    } else {
      out = (h >= c.v_th).to(h.scalar_type());
      if (c.refractory) out = out * active.to(h.scalar_type());
      if (c.kind == K::kThreshold) {
        v = h;
      } else {
        v = c.soft ? h - out * c.v_th : (1.0 - out) * h + out * c.v_reset;
      }
      if (c.refractory) {
        ref = torch::where(out > 0, torch::full_like(ref, c.refractory_steps),
                           torch::where(active, torch::zeros_like(ref), ref - 1));
      }
    }
    st.out.push_back(out);
    st.h.push_back(h);
    st.v.push_back(v);
    if (c.refractory) st.active.push_back(active);
  }
  return st;
}

// Backpropagation through time as one autograd node, in a fixed order of
// element-wise operations: the gradients do not depend on how the graph
// around it was built (blocks of K steps, stages), as autograd's own sums
// over several uses of one value (v, i and the spike are each used two or
// three times per step) would.
struct GeneralPassFunction : torch::autograd::Function<GeneralPassFunction> {
  // Returns {out [T, B, ...], v_T, i_T}; `ref` (refractory counts) is
  // updated in place.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_seq,
                                                const torch::Tensor& v0, const torch::Tensor& i0, const Pass& c,
                                                torch::Tensor* ref, NeuronTrace* trace) {
    torch::Tensor v = v0, i = i0;
    const Steps st = forward_loop(c, x_seq, v, i, *ref);
    const torch::Tensor out = torch::stack(st.out);
    if (trace != nullptr) {
      trace->h = torch::stack(st.h);
      trace->v = torch::stack(st.v);
    }
    ctx->save_for_backward({torch::stack(st.h), out, c.refractory ? torch::stack(st.active) : torch::Tensor(), c.tau,
                            c.tau_syn, c.r, c.v_th, c.v_reset, c.w_in});
    ctx->saved_data["kind"] = static_cast<int64_t>(c.kind);
    ctx->saved_data["soft"] = c.soft;
    ctx->saved_data["detach"] = c.detach;
    ctx->saved_data["surrogate"] = static_cast<int64_t>(c.surrogate.kind);
    ctx->saved_data["alpha"] = c.surrogate.alpha;
    // Fresh tensors where a state passed through unchanged (Threshold's v,
    // the i of kinds without a synapse): an input returned as an output
    // would alias it.
    return {out, v.is_same(v0) ? v0.clone() : v, i.is_same(i0) ? i0.clone() : i};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor h_seq = saved[0], out = saved[1], active = saved[2];
    Pass c;
    c.kind = static_cast<K>(ctx->saved_data["kind"].toInt());
    c.tau = saved[3];
    c.tau_syn = saved[4];
    c.r = saved[5];
    c.v_th = saved[6];
    c.v_reset = saved[7];
    c.w_in = saved[8];
    c.soft = ctx->saved_data["soft"].toBool();
    c.detach = ctx->saved_data["detach"].toBool();
    c.surrogate = Surrogate{static_cast<SurrogateKind>(ctx->saved_data["surrogate"].toInt()),
                            ctx->saved_data["alpha"].toDouble()};
    const int64_t T = h_seq.size(0);
    const auto zero_if_undef = [&](const torch::Tensor& g) { return g.defined() ? g : torch::zeros_like(h_seq[0]); };
    torch::Tensor gv = zero_if_undef(grad[1]);  // dL/dv after step t
    torch::Tensor gi = zero_if_undef(grad[2]);  // dL/di after step t
    const torch::Tensor gout = grad[0].defined() ? grad[0] : torch::zeros_like(h_seq);
    // dh/dv_{t-1} and dh/du of the charge (active steps).
    torch::Tensor dh_dv, dh_du;
    if (c.kind == K::kIF) {
      dh_dv = torch::ones_like(c.r);
      dh_du = c.r;
    } else if (c.kind != K::kThreshold) {
      dh_dv = 1.0 - 1.0 / c.tau;
      dh_du = c.r / c.tau;
    }
    std::vector<torch::Tensor> gx(static_cast<size_t>(T));
    for (int64_t t = T - 1; t >= 0; --t) {
      const torch::Tensor h = h_seq[t];
      torch::Tensor gh;
      if (!c.spiking()) {
        gh = gout[t] + gv;
      } else {
        torch::Tensor sg = surrogate_derivative(h - c.v_th, c.surrogate);
        if (active.defined()) sg = sg * active[t].to(h.scalar_type());
        gh = gout[t] * sg;
        if (c.kind != K::kThreshold) {
          const torch::Tensor s = out[t];
          torch::Tensor dv_dh;
          if (c.soft) {
            dv_dh = c.detach ? torch::ones_like(h) : 1.0 - c.v_th * sg;
          } else {
            dv_dh = c.detach ? 1.0 - s : (1.0 - s) + (c.v_reset - h) * sg;
          }
          gh = gh + gv * dv_dh;
        }
      }
      if (c.kind == K::kThreshold) {
        gx[static_cast<size_t>(t)] = gh;
        continue;
      }
      // A refractory step held v (h = v_{t-1}) and took no input.
      torch::Tensor gu = gh * dh_du;
      torch::Tensor gv_prev = gh * dh_dv;
      if (active.defined()) {
        gu = torch::where(active[t], gu, torch::zeros_like(gu));
        gv_prev = torch::where(active[t], gv_prev, gh);
      }
      gv = gv_prev;
      if (has_synapse(c.kind)) {
        const torch::Tensor g = gi + gu;  // i_t feeds the charge and the next step's i
        gx[static_cast<size_t>(t)] = g * (c.w_in / c.tau_syn);
        gi = g * (1.0 - 1.0 / c.tau_syn);
      } else {
        gx[static_cast<size_t>(t)] = gu;
      }
    }
    return {torch::stack(gx), c.kind == K::kThreshold ? torch::Tensor() : gv,
            has_synapse(c.kind) ? gi : torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace
torch::Tensor general_neuron_multistep(const torch::Tensor& x_seq, NeuronState& state, const GeneralNeuronOptions& o,
                                       NeuronTrace* trace, std::optional<torch::ScalarType> spike_dtype) {
  TORCH_CHECK(x_seq.dim() >= 1, "neuron input must be [T, ...] with at least a time dimension, got a 0-dim tensor");
  TORCH_CHECK(x_seq.scalar_type() == torch::kFloat || x_seq.scalar_type() == torch::kDouble,
              "neuron input must be float32 or float64, got ", x_seq.scalar_type());
  const Pass c = pass_of(o, x_seq);
  const auto step_shape = x_seq.sizes().slice(1);
  if (!state.defined()) {
    const torch::Tensor zero = torch::zeros(step_shape, x_seq.options());
    if (c.kind == K::kLI || c.kind == K::kCubaLI) {
      state.v = zero + c.v_leak;
    } else if (has_reset(c.kind) && !c.soft) {
      state.v = zero + c.v_reset;
    } else {
      state.v = zero;
    }
    state.refractory = torch::zeros(step_shape, x_seq.options().dtype(torch::kInt));
  } else {
    TORCH_CHECK(state.v.sizes() == step_shape, "neuron state has shape ", state.v.sizes(),
                " but the input's step has shape ", step_shape,
                "; call reset_state() before feeding a different batch shape");
    TORCH_CHECK(state.v.scalar_type() == x_seq.scalar_type() && state.v.device() == x_seq.device(),
                "neuron state is ", state.v.scalar_type(), " on ", state.v.device(), " but the input is ",
                x_seq.scalar_type(), " on ", x_seq.device(), "; call reset_state() after changing dtype or device");
    if (!state.refractory.defined()) state.refractory = torch::zeros(step_shape, x_seq.options().dtype(torch::kInt));
  }
  if (has_synapse(c.kind) && !state.i.defined()) state.i = torch::zeros(step_shape, x_seq.options());
  torch::Tensor out;
  if (x_seq.size(0) == 0) {
    out = torch::empty_like(x_seq);
  } else if (torch::GradMode::is_enabled() && (x_seq.requires_grad() || state.v.requires_grad() ||
                                               (state.i.defined() && state.i.requires_grad()))) {
    const auto r = GeneralPassFunction::apply(x_seq, state.v, has_synapse(c.kind) ? state.i : torch::zeros_like(state.v),
                                              c, &state.refractory, trace);
    out = r[0];
    if (c.kind != K::kThreshold) state.v = r[1];
    if (has_synapse(c.kind)) state.i = r[2];
  } else {
    torch::Tensor v = state.v, i = state.i;
    const Steps st = forward_loop(c, x_seq, v, i, state.refractory);
    out = torch::stack(st.out);
    if (c.kind != K::kThreshold) state.v = v;
    if (has_synapse(c.kind)) state.i = i;
    if (trace != nullptr) {
      trace->h = torch::stack(st.h);
      trace->v = torch::stack(st.v);
    }
  }
  if (c.spiking() && spike_dtype && *spike_dtype != out.scalar_type()) {
    TORCH_CHECK(*spike_dtype != torch::kBool || !out.requires_grad(),
                "bool spikes are for inference: they carry no gradient");
    out = out.to(*spike_dtype);
  }
  return out;
}

}  // namespace functional

GeneralNeuronImpl::GeneralNeuronImpl(GeneralNeuronOptions options_) : options(std::move(options_)) {
  options.validate();
  reset();
}

void GeneralNeuronImpl::reset() {
  // Buffers: they move with the module (to a stage's device) and are saved
  // with it, but are not trained.
  options.tau(register_buffer("tau", options.tau().to(torch::kDouble)));
  options.tau_syn(register_buffer("tau_syn", options.tau_syn().to(torch::kDouble)));
  options.r(register_buffer("r", options.r().to(torch::kDouble)));
  options.v_leak(register_buffer("v_leak", options.v_leak().to(torch::kDouble)));
  options.v_threshold(register_buffer("v_threshold", options.v_threshold().to(torch::kDouble)));
  options.v_reset(register_buffer("v_reset", options.v_reset().to(torch::kDouble)));
  options.w_in(register_buffer("w_in", options.w_in().to(torch::kDouble)));
}

torch::Tensor GeneralNeuronImpl::pass(const torch::Tensor& x_seq, NeuronState& state, NeuronTrace* trace,
                                      std::optional<torch::ScalarType> spike_dtype) {
  return functional::general_neuron_multistep(x_seq, state, options, trace, spike_dtype);
}

void GeneralNeuronImpl::pretty_print(std::ostream& os) const {
  os << "snn::GeneralNeuron(" << to_string(options.kind());
  for (const auto& [name, t] : used(options)) {
    os << ", " << name << "=";
    if (t->dim() == 0) {
      os << t->item<double>();
    } else {
      os << "[" << t->sizes() << " per neuron]";
    }
  }
  if (is_spiking(options.kind())) {
    os << ", " << (options.soft_reset() ? "soft reset" : "hard reset")
       << ", detach_reset=" << (options.detach_reset() ? "true" : "false") << ", surrogate=" << options.surrogate().str();
  }
  if (options.refractory() > 0) os << ", refractory=" << options.refractory();
  os << ")";
}

}  // namespace snn
