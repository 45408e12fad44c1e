#include "snn/simulator/neuron_sim.h"

#include <fmt/format.h>

#include <iterator>

#include "snn/core/error.h"

namespace snn {

namespace {
template <typename Holder>
NeuronModule wrap(Holder holder) {
  return NeuronModule{torch::nn::AnyModule(holder), holder.ptr()};
}

// The options every neuron model shares.
template <typename Options>
Options with_common(Options o, const NeuronParams& p, StepMode mode) {
  return o.v_threshold(p.v_threshold)
      .v_reset(p.v_reset)
      .detach_reset(p.detach_reset)
      .surrogate(p.surrogate)
      .refractory(p.refractory)
      .step_mode(mode);
}
}  // namespace

NeuronModule make_neuron_layer(const NeuronParams& p, StepMode mode) {
  p.validate();
  switch (p.model) {
    case NeuronModel::kIF:
      return wrap(IF(with_common(IFOptions(), p, mode)));
    case NeuronModel::kLIF:
      return wrap(LIF(with_common(LIFOptions().tau(p.tau).decay_input(p.decay_input), p, mode)));
    case NeuronModel::kParametricLIF:
      return wrap(
          ParametricLIF(with_common(ParametricLIFOptions().init_tau(p.tau).decay_input(p.decay_input), p, mode)));
  }
  throw InternalError("unknown neuron model");
}

namespace {
void check_matrix(const torch::Tensor& currents) {
  if (currents.dim() != 2) {
    throw Error("input currents must be a [steps, neurons] matrix, got " + std::to_string(currents.dim()) +
                " dimensions");
  }
}
}  // namespace

NeuronSimResult simulate_iaf_layer(const torch::Tensor& currents, const IafOptions& options) {
  check_matrix(currents);
  options.validate();
  // [T, N] as [T, 1, N]: one sample of N neurons, no input spikes.
  const torch::Tensor current = currents.unsqueeze(1);
  IafState state;
  NeuronSimResult r;
  r.s = functional::iaf_multistep(torch::zeros_like(current), {}, current, state, options, &r.v, &r.h).squeeze(1);
  r.h = r.h.squeeze(1);
  r.v = r.v.squeeze(1);
  return r;
}

NeuronSimResult simulate_neuron_layer(const torch::Tensor& currents, const NeuronParams& params) {
  check_matrix(currents);
  const auto layer = make_neuron_layer(params).layer;
  torch::NoGradGuard no_grad;
  NeuronTrace trace;
  NeuronSimResult r;
  r.s = layer->multi_step(currents, &trace);
  r.h = trace.h;
  r.v = trace.v;
  return r;
}

namespace {
template <typename T>
void write_rows(std::ostream& out, const NeuronSimResult& r) {
  const torch::Tensor h = r.h.contiguous(), s = r.s.contiguous(), v = r.v.contiguous();
  const T* hp = h.data_ptr<T>();
  const T* sp = s.data_ptr<T>();
  const T* vp = v.data_ptr<T>();
  const int64_t steps = h.size(0), n = h.size(1);
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf), "t,neuron,h,s,v\n");
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = t * n + i;
      fmt::format_to(std::back_inserter(buf), "{},{},{},{},{}\n", t, i, hp[j], sp[j] != T(0) ? 1 : 0, vp[j]);
    }
    if (buf.size() > (1 << 20)) {
      out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
      buf.clear();
    }
  }
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
}
}  // namespace

void write_neuron_trace_csv(std::ostream& out, const NeuronSimResult& r) {
  if (r.h.scalar_type() == torch::kFloat) {
    write_rows<float>(out, r);
  } else {
    write_rows<double>(out, r);
  }
}

}  // namespace snn
