#pragma once
/// Encoders turn static intensities x in [0, 1] into spike trains.
///
/// - PoissonEncoder: Bernoulli spike per element per step, spike = u < p.
///   u comes from a counter-based Philox4x32-10 keyed by (seed, global sample
///   index, step, element): a sample's spike train is bit-identical whatever
///   the batch size or composition, thread count, device or pipeline layout.
/// - LatencyEncoder: one spike per element at t_f (SpikingJelly's linear and
///   log forms).
/// - RegularEncoder: deterministic, evenly spaced spikes at rate x.
///
/// Inputs outside [0, 1] or NaN are an error naming how many values are bad
/// and the first offending index, unless the clamp option is set.

#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "snn/core/temporal.h"

namespace snn {

/// How the Poisson encoder reads its input.
enum class RateUnit {
  kProbability,  ///< x is the spike probability per step, in [0, 1]
  kHertz,        ///< x is a rate in Hz; p = x * dt_ms / 1000 must be <= 1
};

/// Options of the Poisson (Bernoulli) rate encoder.
struct PoissonEncoderOptions {
  /// Seed of the counter-based generator. Default 0.
  TORCH_ARG(uint64_t, seed) = 0;
  /// Unit of the input. Default probability per step.
  TORCH_ARG(RateUnit, unit) = RateUnit::kProbability;
  /// Step length in milliseconds, used with RateUnit::kHertz. Default 1 ms.
  TORCH_ARG(double, dt_ms) = 1.0;
  /// Clamp out-of-range inputs into range instead of rejecting them (NaN is
  /// always rejected). Default false.
  TORCH_ARG(bool, clamp) = false;
  /// dtype of the spikes: the input's (default) or torch::kBool (the same
  /// 0/1 values in a quarter of float32's bytes, for a next layer that
  /// reads bool, as snn::Linear does, also when training: spikes from an
  /// encoder carry no gradient).
  TORCH_ARG(std::optional<torch::ScalarType>, spike_dtype) = std::nullopt;
  /// Meaning of forward(x): one step of [B, ...] (default) or a block [T, B, ...].
  TORCH_ARG(StepMode, step_mode) = StepMode::kSingle;
};

/// Options of SpikingJelly's latency encoder.
struct LatencyEncoderOptions {
  /// Number of steps T; t_f lies in [0, T - 1]. Default 8.
  TORCH_ARG(int64_t, steps) = 8;
  /// "linear": t_f = round((T - 1)(1 - x)); "log": t_f = round(T - 1 - ln(alpha x + 1)),
  /// alpha = e^(T-1) - 1. round is half to even, as torch.round. Default "linear".
  TORCH_ARG(std::string, form) = "linear";
  /// Clamp out-of-range inputs into [0, 1]. Default false.
  TORCH_ARG(bool, clamp) = false;
};

/// Options of the deterministic regular-rate encoder.
struct RegularEncoderOptions {
  /// Clamp out-of-range inputs into [0, 1]. Default false.
  TORCH_ARG(bool, clamp) = false;
};

namespace functional {

/// Checks that x holds values in [lo, hi] and no NaN; throws snn::Error
/// naming `what`, how many values are bad and the first offending index and
/// value. With clamp, out-of-range values are clamped (NaN still throws).
torch::Tensor check_unit_interval(const torch::Tensor& x, const std::string& what, bool clamp, double lo = 0.0,
                                  double hi = 1.0);

/// Poisson spikes for steps first_step .. first_step + steps - 1.
/// x: [B, ...] float32/float64 on CPU or CUDA; sample_index: [B] int64, the
/// global index of each sample (on any device). Returns [steps, B, ...].
torch::Tensor poisson_encode(const torch::Tensor& x, const torch::Tensor& sample_index, int64_t first_step,
                             int64_t steps, const PoissonEncoderOptions& options = {});

/// Poisson spikes [T, B, ...] for steps first_step .. first_step + T - 1 of a
/// time-varying input x_seq [T, B, ...] (step t uses x_seq[t]). A constant
/// input expanded over time (x.expand({T, ...}), stride 0) costs no copy.
torch::Tensor poisson_encode_sequence(const torch::Tensor& x_seq, const torch::Tensor& sample_index,
                                      int64_t first_step, const PoissonEncoderOptions& options = {});

/// Latency-coded spikes [T, B, ...] for x [B, ...].
torch::Tensor latency_encode(const torch::Tensor& x, const LatencyEncoderOptions& options = {});

/// Regular-rate spikes [steps, B, ...]: a spike at step t iff
/// floor((t + 1) x) > floor(t x), so T steps hold floor(T x) spikes.
torch::Tensor regular_encode(const torch::Tensor& x, int64_t first_step, int64_t steps,
                             const RegularEncoderOptions& options = {});

}  // namespace functional

/// Poisson encoder module. forward(x) encodes the next step ([B, ...]) or
/// the next block of steps ([T, B, ...], StepMode::kMulti) and advances its
/// step counter. Samples are numbered sample_offset + 0 .. B-1, unless a
/// driver (the model pipeline) says otherwise through set_time().
class PoissonEncoderImpl : public torch::nn::Cloneable<PoissonEncoderImpl>, public Temporal {
 public:
  explicit PoissonEncoderImpl(PoissonEncoderOptions options = {}) : options(std::move(options)) {}
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x);
  /// Spikes [steps, B, ...] of a constant input for explicit global sample indices [B].
  torch::Tensor encode(const torch::Tensor& x, const torch::Tensor& sample_index, int64_t first_step,
                       int64_t steps) const;
  /// Rewinds the step counter to 0 and forgets indices given by set_time().
  void reset_state() override {
    step_ = 0;
    sample_index_ = torch::Tensor();
    checked_.reset();
  }
  std::vector<torch::Tensor> save_state() const override;
  void load_state(const std::vector<torch::Tensor>& state) override;
  /// The next forward covers steps from first_step on, of these samples.
  void set_time(int64_t first_step, const torch::Tensor& sample_index) override {
    step_ = first_step;
    sample_index_ = sample_index;
  }
  /// Global index of the first sample of the batches given to forward(). Default 0.
  void set_sample_offset(int64_t offset) { sample_offset_ = offset; }
  int64_t step_count() const { return step_; }
  void pretty_print(std::ostream& stream) const override;
  PoissonEncoderOptions options;

 private:
  /// The last input and sample indices that passed the checks. Holding the
  /// input keeps its memory from being reused by another tensor at the same
  /// address while it is remembered.
  struct CheckedInput {
    torch::Tensor x;
    uint32_t version;
    torch::Tensor samples;
    uint32_t samples_version;
    /// Whether (x, samples) are these, unchanged since: the same memory,
    /// view, dtype and device, and no write since (version counters).
    bool covers(const torch::Tensor& x2, const torch::Tensor& samples2) const {
      return x2.data_ptr() == x.data_ptr() && x2.sizes() == x.sizes() && x2.strides() == x.strides() &&
             x2.scalar_type() == x.scalar_type() && x2.device() == x.device() && x2._version() == version &&
             samples2.is_same(samples) && samples2._version() == samples_version;
    }
  };
  int64_t step_ = 0;
  int64_t sample_offset_ = 0;
  torch::Tensor sample_index_;
  std::optional<CheckedInput> checked_;
};
TORCH_MODULE(PoissonEncoder);

/// Latency encoder module (SpikingJelly's LatencyEncoder): forward(x) gives
/// step t of the code and advances t; encode(x) gives all T steps.
class LatencyEncoderImpl : public torch::nn::Cloneable<LatencyEncoderImpl> {
 public:
  explicit LatencyEncoderImpl(LatencyEncoderOptions options = {});
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor encode(const torch::Tensor& x) const { return functional::latency_encode(x, options); }
  void reset_state() { step_ = 0; }
  LatencyEncoderOptions options;

 private:
  int64_t step_ = 0;
};
TORCH_MODULE(LatencyEncoder);

/// Regular-rate encoder module: forward(x) gives the next step.
class RegularEncoderImpl : public torch::nn::Cloneable<RegularEncoderImpl> {
 public:
  explicit RegularEncoderImpl(RegularEncoderOptions options = {}) : options(std::move(options)) {}
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x);
  void reset_state() { step_ = 0; }
  RegularEncoderOptions options;

 private:
  int64_t step_ = 0;
};
TORCH_MODULE(RegularEncoder);

}  // namespace snn
