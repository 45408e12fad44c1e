#include "snn/encoders/encoders.h"

#include <ATen/Dispatch.h>

#include <cmath>
#include <sstream>

#include "kernels.h"
#include "snn/core/error.h"

#if SNN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace snn {
namespace functional {
namespace {

std::string index_string(const torch::Tensor& x, int64_t flat) {
  std::ostringstream os;
  os << "[";
  int64_t rest = flat;
  std::vector<int64_t> idx(x.dim());
  for (int64_t d = x.dim() - 1; d >= 0; --d) {
    idx[d] = rest % x.size(d);
    rest /= x.size(d);
  }
  for (size_t d = 0; d < idx.size(); ++d) os << (d ? ", " : "") << idx[d];
  os << "]";
  return os.str();
}

void check_float(const torch::Tensor& x, const std::string& what) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble, what,
              " input must be float32 or float64, got ", x.scalar_type());
}

}  // namespace

torch::Tensor check_unit_interval(const torch::Tensor& x, const std::string& what, bool clamp, double lo, double hi) {
  const torch::Tensor nan = torch::isnan(x);
  const torch::Tensor bad = clamp ? nan : (nan | (x < lo) | (x > hi));
  const int64_t count = bad.sum().item<int64_t>();
  if (count > 0) {
    const int64_t first = bad.flatten().nonzero()[0][0].item<int64_t>();
    std::ostringstream os;
    os << what << ": " << count << " input value" << (count == 1 ? " is " : "s are ");
    if (clamp) {
      os << "NaN";
    } else {
      os << "outside [" << lo << ", " << hi << "] or NaN";
    }
    os << "; the first is x" << index_string(x, first) << " = " << x.flatten()[first].item<double>();
    throw Error(os.str());
  }
  return clamp ? x.clamp(lo, hi) : x;
}

namespace {

// p: [S, B, ...] with S = 1 (the same input every step) or S = steps.
// `validate` false skips the checks of the values and sample indices (the
// module's inputs it has checked already): each reads a result back to the
// host, which on a GPU waits for the device.
torch::Tensor poisson_impl(const torch::Tensor& p_in, const torch::Tensor& sample_index, int64_t first_step,
                           int64_t steps, const PoissonEncoderOptions& o, bool validate = true) {
  check_float(p_in, "poisson encoder");
  TORCH_CHECK(p_in.dim() >= 2, "poisson encoder input must be [B, ...], got a 0-dim tensor");
  TORCH_CHECK(steps >= 0 && first_step >= 0 && first_step + steps <= (int64_t{1} << 32),
              "poisson encoder steps must lie in [0, 2^32), got first_step ", first_step, " and steps ", steps);
  const int64_t batch = p_in.size(1);
  TORCH_CHECK(sample_index.dim() == 1 && sample_index.size(0) == batch, "poisson encoder needs one sample index per ",
              "sample: got sample_index of shape ", sample_index.sizes(), " for a batch of ", batch);
  TORCH_CHECK(o.dt_ms() > 0 && std::isfinite(o.dt_ms()), "poisson encoder dt_ms must be positive, got ", o.dt_ms());
  const bool hz = o.unit() == RateUnit::kHertz;
  const double hi = hz ? 1000.0 / o.dt_ms() : 1.0;
  const bool per_step = p_in.size(0) > 1;
  // Checked once per call on the distinct values, not per step.
  const torch::Tensor distinct = per_step ? p_in : p_in[0];
  const torch::Tensor p =
      (validate ? check_unit_interval(distinct, hz ? "poisson encoder (rates in Hz)" : "poisson encoder", o.clamp(), 0.0, hi)
                : (o.clamp() ? distinct.clamp(0.0, hi) : distinct))
          .contiguous();
  const torch::Tensor samples = sample_index.to(p.device(), torch::kLong).contiguous();
  TORCH_CHECK(!validate || samples.numel() == 0 || samples.min().item<int64_t>() >= 0, "sample indices must be >= 0");
  const torch::ScalarType sdt = o.spike_dtype().value_or(p.scalar_type());
  TORCH_CHECK(sdt == p.scalar_type() || sdt == torch::kBool, "spike dtype must be the input's or bool, got ", sdt);
  std::vector<int64_t> out_shape{steps};
  for (int64_t d = 1; d < p_in.dim(); ++d) out_shape.push_back(p_in.size(d));
  torch::Tensor out = torch::empty(out_shape, p.options().dtype(sdt));
  const int64_t features = batch ? p_in[0].numel() / batch : 0;
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "snn_poisson", [&] {
    auto launch = [&](auto spike_tag) {
      using S = decltype(spike_tag);
      encoders::detail::PoissonArgs<scalar_t, S> a;
      a.p = p.data_ptr<scalar_t>();
      a.p_step_stride = per_step ? batch * features : 0;
      a.sample = samples.data_ptr<int64_t>();
      a.out = static_cast<S*>(out.data_ptr());  // bool tensors as uint8_t (vectorisable stores)
      a.batch = batch;
      a.features = features;
      a.steps = steps;
      a.first_step = first_step;
      a.seed = o.seed();
      a.scale = static_cast<scalar_t>(hz ? o.dt_ms() / 1000.0 : 1.0);
      if (p.is_cuda()) {
#if SNN_WITH_CUDA
        const c10::cuda::CUDAGuard guard(p.device());
        encoders::detail::poisson_cuda(a, at::cuda::getCurrentCUDAStream().stream());
#else
        throw Error("a CUDA tensor reached the Poisson encoder, but snnsim was built without CUDA support");
#endif
      } else {
        encoders::detail::poisson_cpu(a);
      }
    };
    if (sdt == torch::kBool) {
      launch(uint8_t{});
    } else {
      launch(scalar_t{});
    }
  });
  return out;
}

}  // namespace

torch::Tensor poisson_encode(const torch::Tensor& x, const torch::Tensor& sample_index, int64_t first_step,
                             int64_t steps, const PoissonEncoderOptions& o) {
  TORCH_CHECK(x.dim() >= 1, "poisson encoder input must be [B, ...], got a 0-dim tensor");
  return poisson_impl(x.unsqueeze(0), sample_index, first_step, steps, o);
}

namespace {
torch::Tensor sequence_impl(const torch::Tensor& x_seq, const torch::Tensor& sample_index, int64_t first_step,
                            const PoissonEncoderOptions& o, bool validate) {
  TORCH_CHECK(x_seq.dim() >= 2, "poisson encoder sequence input must be [T, B, ...], got shape ", x_seq.sizes());
  const int64_t steps = x_seq.size(0);
  // A constant input expanded over time (stride 0) is encoded from its one copy.
  if (steps > 1 && x_seq.stride(0) == 0) {
    return poisson_impl(x_seq.narrow(0, 0, 1), sample_index, first_step, steps, o, validate);
  }
  return poisson_impl(x_seq, sample_index, first_step, steps, o, validate);
}
}  // namespace

torch::Tensor poisson_encode_sequence(const torch::Tensor& x_seq, const torch::Tensor& sample_index,
                                      int64_t first_step, const PoissonEncoderOptions& o) {
  return sequence_impl(x_seq, sample_index, first_step, o, true);
}

torch::Tensor latency_encode(const torch::Tensor& x_in, const LatencyEncoderOptions& o) {
  check_float(x_in, "latency encoder");
  TORCH_CHECK(o.steps() >= 1, "latency encoder needs steps >= 1, got ", o.steps());
  const torch::Tensor x = check_unit_interval(x_in, "latency encoder", o.clamp());
  const double last = static_cast<double>(o.steps()) - 1.0;
  // SpikingJelly's expressions and operation order (encoding.py).
  torch::Tensor t_f;
  if (o.form() == "linear") {
    t_f = (last * (1.0 - x)).round().to(torch::kLong);
  } else if (o.form() == "log") {
    const double alpha = std::exp(last) - 1.0;
    t_f = (last - torch::log(alpha * x + 1.0)).round().to(torch::kLong);
  } else {
    throw Error("latency encoder form must be 'linear' or 'log', got '" + o.form() + "'");
  }
  const torch::Tensor steps = torch::arange(o.steps(), t_f.options());
  std::vector<int64_t> view(static_cast<size_t>(x.dim()) + 1, 1);
  view[0] = o.steps();
  return (steps.view(view) == t_f.unsqueeze(0)).to(x.scalar_type());
}

torch::Tensor regular_encode(const torch::Tensor& x_in, int64_t first_step, int64_t steps,
                             const RegularEncoderOptions& o) {
  check_float(x_in, "regular encoder");
  TORCH_CHECK(first_step >= 0 && steps >= 0, "regular encoder steps must be >= 0, got first_step ", first_step,
              " and steps ", steps);
  const torch::Tensor x = check_unit_interval(x_in, "regular encoder", o.clamp()).to(torch::kDouble);
  std::vector<int64_t> view(static_cast<size_t>(x.dim()) + 1, 1);
  view[0] = steps;
  const torch::Tensor t = torch::arange(first_step, first_step + steps, x.options()).view(view);
  const torch::Tensor fire = torch::floor((t + 1.0) * x) > torch::floor(t * x);
  return fire.to(x_in.scalar_type());
}

}  // namespace functional

torch::Tensor PoissonEncoderImpl::forward(const torch::Tensor& x) {
  const bool multi = options.step_mode() == StepMode::kMulti;
  TORCH_CHECK(x.dim() >= (multi ? 2 : 1), "poisson encoder input must be ", multi ? "[T, B, ...]" : "[B, ...]",
              ", got shape ", x.sizes());
  const int64_t batch = multi ? x.size(1) : x.size(0);
  // A single-step encoder in a pipeline stage is handed [K, B, ...] blocks
  // with B sample indices: say so, rather than "a batch of K".
  const bool block_in_single_step = !multi && sample_index_.defined() && x.dim() >= 2 &&
                                    sample_index_.size(0) == x.size(1) && sample_index_.size(0) != batch;
  TORCH_CHECK(!block_in_single_step, "poisson encoder in single-step mode got input of shape ", x.sizes(), " with ",
              sample_index_.size(0), " sample indices: a [T, B, ...] block (as a pipeline stage passes) needs ",
              "PoissonEncoderOptions().step_mode(StepMode::kMulti)");
  const torch::Tensor samples = sample_index_.defined()
                                    ? sample_index_
                                    : torch::arange(sample_offset_, sample_offset_ + batch, torch::kLong);
  // The pipeline hands every block of a batch the same input and sample
  // indices: checked once, not per block (the checks read a result back to
  // the host, which on a GPU would wait for the device at every block).
  // Any change to either (another tensor, an in-place write) checks again;
  // inference tensors have no version counter and are always checked.
  const bool versioned = !x.is_inference() && !samples.is_inference();
  const bool known = versioned && checked_ && checked_->covers(x, samples);
  torch::Tensor out = multi ? functional::sequence_impl(x, samples, step_, options, !known)
                            : functional::poisson_impl(x.unsqueeze(0), samples, step_, 1, options, !known)[0];
  // Reached only when the checks passed.
  if (versioned) {
    checked_ = CheckedInput{x, x._version(), samples, samples._version()};
  } else {
    checked_.reset();
  }
  step_ += multi ? x.size(0) : 1;
  return out;
}

std::vector<torch::Tensor> PoissonEncoderImpl::save_state() const {
  return {torch::tensor(step_), sample_index_.defined() ? sample_index_ : torch::Tensor()};
}

void PoissonEncoderImpl::load_state(const std::vector<torch::Tensor>& state) {
  if (state.empty()) {
    reset_state();
    return;
  }
  TORCH_CHECK(state.size() == 2, "a Poisson encoder's state is {step, sample_index}, got ", state.size(), " tensors");
  step_ = state[0].item<int64_t>();
  sample_index_ = state[1];
}

torch::Tensor PoissonEncoderImpl::encode(const torch::Tensor& x, const torch::Tensor& sample_index, int64_t first_step,
                                         int64_t steps) const {
  return functional::poisson_encode(x, sample_index, first_step, steps, options);
}

void PoissonEncoderImpl::pretty_print(std::ostream& os) const {
  os << "snn::PoissonEncoder(seed=" << options.seed();
  if (options.unit() == RateUnit::kHertz) os << ", unit=Hz, dt_ms=" << options.dt_ms();
  os << ")";
}

LatencyEncoderImpl::LatencyEncoderImpl(LatencyEncoderOptions options_) : options(std::move(options_)) {
  if (options.steps() < 1) throw Error("latency encoder needs steps >= 1, got " + std::to_string(options.steps()));
  if (options.form() != "linear" && options.form() != "log") {
    throw Error("latency encoder form must be 'linear' or 'log', got '" + options.form() + "'");
  }
}

torch::Tensor LatencyEncoderImpl::forward(const torch::Tensor& x) {
  torch::Tensor out = encode(x)[step_ % options.steps()];
  step_ += 1;
  return out;
}

torch::Tensor RegularEncoderImpl::forward(const torch::Tensor& x) {
  torch::Tensor out = functional::regular_encode(x, step_, 1, options)[0];
  ++step_;
  return out;
}

}  // namespace snn
