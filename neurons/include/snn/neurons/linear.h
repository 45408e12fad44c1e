#pragma once
/// A fully connected synapse layer whose results do not depend on how the
/// rows are batched: y = x W^T + b, each output summed over the inputs in
/// ascending order.
///
/// Two CPU kernels compute it, with identical results: a dense one
/// (register-tiled over 4 rows x 16 outputs, every input) and an
/// event-driven one, which lists each row's nonzero inputs (the spikes) and
/// adds only their weight rows. Skipping a zero input skips an addition of
/// +-0, which changes no value, so the choice is free to follow speed: by
/// default each call measures the fraction of nonzero inputs and takes the
/// event-driven kernel below a crossover measured on our CPUs
/// (bench/linear_bench.cpp); near that crossover a layer times both
/// kernels on its first calls and keeps the faster (KernelTrial).
///
/// Why not torch::nn::Linear: BLAS GEMMs choose their kernels and summation
/// order by matrix shape and thread count, so a sample's output changes in
/// the last bits with the batch size, the micro-batch split or the number of
/// time steps per block. Simulations must not: the pipeline's equivalence
/// (any partition, split size, steps per tick) and reproducibility across
/// thread counts rest on this layer.
///
/// Backward on the CPU is just as deterministic: the input gradient uses the
/// same fixed-order kernel, and the weight and bias gradients are summed in
/// double precision over the rows in backpropagation-through-time order
/// (steps descending, samples ascending). A layer module keeps those double
/// sums across the backward calls of one optimiser step (one call per block
/// of steps) when `carry_grad_sums` is set, and writes their float rounding
/// to `weight.grad()`, so a training step gives bit-identical gradients for
/// any number of steps per block, stage partition or thread count. On CUDA,
/// backward uses matmuls.

#include <ATen/core/ivalue.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace snn {

/// Which kernel snn::Linear's forward uses (and, on the CPU, its input
/// gradient). On the CPU all give the same values; only the speed differs.
/// On a GPU, kAuto and kEvent run one ordered kernel that lists each row's
/// nonzero inputs and gives the CPU's values bit for bit; kDense is cuBLAS
/// (its own summation order, so values may differ in the last bits).
enum class LinearPath {
  kAuto,   ///< event-driven below the crossover input density, else dense; near it the faster as timed (KernelTrial)
  kDense,  ///< every input, register-tiled
  kEvent,  ///< only the nonzero inputs (spikes) of each row
};

/// The default crossover of LinearPath::kAuto: the fraction of nonzero
/// inputs below which the event-driven kernel is faster, for wide layers
/// (narrower ones use less of it, see functional::choose_path). Measured
/// with bench/linear_bench on an AVX2 EPYC (Zen 3), 1 thread, in = 256..1024,
/// out = 10..1024: see the README's benchmark section.
inline constexpr double kLinearEventCrossover = 0.38;

/// Options of snn::Linear.
struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  /// Input size. Required.
  TORCH_ARG(int64_t, in_features);
  /// Output size. Required.
  TORCH_ARG(int64_t, out_features);
  /// Whether to add a learnable bias. Default true.
  TORCH_ARG(bool, bias) = true;
  /// Carry double-precision gradient sums across backward calls and write
  /// weight.grad() / bias.grad() directly (see the file comment). Makes
  /// gradients independent of how the steps were blocked, but the weights'
  /// gradients then bypass autograd: torch::autograd::grad() does not see
  /// them, only .grad does. Default false (gradients through autograd,
  /// summed in double within each call).
  TORCH_ARG(bool, carry_grad_sums) = false;
  /// CPU kernel of the forward product. Default kAuto.
  TORCH_ARG(LinearPath, path) = LinearPath::kAuto;
  /// kAuto's crossover: input density (fraction of nonzero inputs, in
  /// [0, 1]) below which the event-driven kernel runs (near it, with
  /// time_kernels, the faster of the two as timed). Default
  /// kLinearEventCrossover.
  TORCH_ARG(double, event_crossover) = kLinearEventCrossover;
  /// kAuto near the crossover: time both kernels on the layer's first
  /// calls and keep the faster (see KernelTrial). Default true; false
  /// leaves the choice to the formula of functional::choose_path alone.
  TORCH_ARG(bool, time_kernels) = true;
};

/// kAuto's measured choice for one layer and one way of calling it. Far
/// from the crossover the formula of functional::choose_path is safe, but
/// near it the kernels' relative speed depends on the CPU, on the layer's
/// size against its caches and on the rows per call (on an AVX-512 Xeon
/// the event-driven kernel stays faster up to 50% firing for wide layers,
/// where the formula takes the dense one from 38%: 1.6x slower). So where
/// the density lies within a factor 3 of the formula's crossover (and at
/// most 0.75), each kernel runs kRuns times, alternately, timed, on the
/// layer's first calls of about that density (a bin 25% wide) and about
/// that many rows (a factor 2), and later such calls take the faster. A
/// few bins are kept, so a density that moves back and forth (hidden
/// layers after a reset, one step at a time in a graph's cycle) keeps its
/// results. The kernels give the same values but for the sign of an
/// exactly zero output where the bias is -0 and for non-finite weights
/// (the dense kernel multiplies them by the zero inputs, the event-driven
/// one skips those), so only there does the result depend on timing
/// (LinearOptions::time_kernels(false) keeps the formula's choice). Not
/// synchronised: a layer is called from one thread at a time (a pipeline
/// stage owns its layers). A clone (Cloneable) starts with the same results.
class KernelTrial {
 public:
  static constexpr int kRuns = 2;
  /// The kernel for a call at `density` over `rows` rows, for a layer whose
  /// formula gives `crossover` (functional::crossover_for) and chose
  /// `guess`; sets `timed` when the call is one of a trial's, to be
  /// reported with record().
  LinearPath choose(double density, int64_t rows, double crossover, LinearPath guess, bool& timed);
  /// The timed call's kernel (kDense or kEvent) and its seconds per row.
  void record(LinearPath path, double seconds_per_row);
  /// The bins measured or being measured.
  size_t bins() const { return bins_.size(); }

 private:
  static constexpr size_t kMaxBins = 32;  // then all are measured anew
  struct Bin {
    int density = 0, rows = 0;         // log1.25(density), log2(rows)
    double best[2] = {1e300, 1e300};   // seconds per row, dense and event
    int runs[2] = {0, 0};
  };
  std::vector<Bin> bins_;
  size_t timed_ = 0;  // the bin of the call being timed
};

/// Data-parallel training's other way to a layer's gradient (what
/// snn::ShardedAdam gives a layer through LinearImpl::exchange_grad_rows).
/// Exchanging gradient sums moves 8 bytes per weight per rank and adds the
/// ranks' partial sums, which associates differently from one process's
/// sum. Instead the ranks exchange the layer's input rows (spikes: a bit
/// each) and output-gradient columns, and every rank sums the whole
/// batch's gradient for its own outputs, rows in one process's order: the
/// sums of one process, bit for bit, each computed once.
class GradRowsExchange {
 public:
  virtual ~GradRowsExchange() = default;
  /// In the layer's backward call on every rank, in the same order (a
  /// collective): x2 [rows, in] and gy [rows, out] are this rank's rows,
  /// `steps` steps of rows/steps samples each (step-major). Returns the
  /// whole batch's x2 rows and gy's columns() as [steps * batch, in] and
  /// [steps * batch, end - first] in one process's row order (each step's
  /// samples in rank order), or undefined tensors where this call's
  /// gradient goes the usual way (the layer then sums its own rows).
  virtual std::pair<torch::Tensor, torch::Tensor> gather(const torch::Tensor& x2, const torch::Tensor& gy,
                                                         int64_t steps) = 0;
  /// This rank's outputs [first, end): the columns whose sums it keeps.
  virtual std::pair<int64_t, int64_t> columns() const = 0;
};

/// Double-precision running sums of one layer's parameter gradients across
/// backward calls (see the file comment). `weight_t` is [in, out] (rows
/// are inputs: the event-driven accumulation writes contiguous rows);
/// `written_*` are the gradient tensors last published and their versions,
/// so that a gradient reset or changed by someone else (zero_grad, a user)
/// restarts the sums from its value. Unless `sums_only`
/// (LinearImpl::keep_grad_sums_only): then .grad is neither written nor
/// read, and the sums restart from zero at the first backward call after
/// LinearImpl::restart_grad_sums() (`restart`).
struct LinearGradSums : torch::CustomClassHolder {
  torch::Tensor weight_t, bias;
  torch::Tensor written_weight, written_bias;
  uint32_t written_weight_version = 0, written_bias_version = 0;
  bool sums_only = false;
  bool restart_weight = true, restart_bias = true;
  /// With `rows` (sums-only mode only): the whole batch's sums for
  /// rows->columns(), [in, end - first] and [end - first] double, summed
  /// from the exchanged rows; `rows_current` while they hold this step's
  /// (restart_grad_sums clears it).
  std::shared_ptr<GradRowsExchange> rows;
  torch::Tensor rows_weight_t, rows_bias;
  bool rows_current = false;
};

/// A layer's weights as the kernels read them: on the CPU [tiles, in, 16]
/// output tiles, the bias zero-padded to match; on a GPU the weight
/// transposed ([in, out], contiguous). The module keeps them across
/// calls while a snn::FrozenWeights guard lives (a pipeline run), and packs
/// them anew on every call otherwise.
struct PackedLinear {
  torch::Tensor weight, bias;
  torch::Tensor source_weight, source_bias;
  uint32_t weight_version = 0, bias_version = 0;
  const void* weight_data = nullptr;  // set_data (module.to(dtype)) keeps the tensor, not its storage
  uint64_t epoch = 0;                 // FrozenWeights::epoch() when packed
};

namespace functional {
/// y[..., o] = b[o] + sum over f in ascending order, x[..., f] != 0, of x[..., f] W[o, f].
/// x: [..., in] of the weight's dtype (float32/float64), or bool spikes;
/// weight [out, in]; bias [out] or undefined. The output has the weight's
/// dtype, and bool spikes give exactly what their 0/1 reals give (the CPU
/// event-driven kernel reads the bytes: a quarter of float32's traffic).
/// Differentiable w.r.t. real x, weight and bias.
/// On the CPU, the weight and bias gradients of each call are summed in double
/// and rounded once per call; pass `sums` to carry the sums across calls
/// instead (the module does): the gradients then go straight to
/// weight.grad() / bias.grad(), not through autograd's accumulation.
/// `path` picks the kernel (see LinearPath); on the CPU kAuto compares the
/// density of x with `crossover`. On a GPU the gradients are cuBLAS
/// products, not summed in BPTT order.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {},
                     const c10::intrusive_ptr<LinearGradSums>& sums = {}, LinearPath path = LinearPath::kAuto,
                     double crossover = kLinearEventCrossover);

/// The fraction of nonzero entries of a CPU float/double/bool tensor (its
/// measured firing fraction, for spikes), estimated from about 16K
/// entries (whole rows of the last dimension, evenly spaced).
double density_of(const torch::Tensor& x);

/// The density below which kAuto's formula takes the event-driven kernel
/// for a layer of `out` outputs: crossover * (1 - c / ceil(out / 16)), with
/// c = 0.84 where the CPU loops run their AVX-512 build (snn/core/cpu_isa.h)
/// and 0.45 otherwise.
double crossover_for(double crossover, int64_t out);

/// kAuto's formula for an input of this density: event-driven below
/// crossover_for(crossover, out).
LinearPath choose_path(double density, double crossover, int64_t out);

/// g[o, i] = sum_t[i, o] rounded to g's dtype: a carried weight sum
/// (contiguous double [in, out]) into a gradient or any other buffer shaped
/// like the weight (contiguous [out, in], float or double; double is a
/// plain transposed copy), in one pass of register transposes per CPU
/// build, split over threads by inputs. Writes through g's pointer without
/// bumping its version.
void round_transposed(const torch::Tensor& sum_t, torch::Tensor& g);
}  // namespace functional

/// Batch-invariant fully connected layer (see the file comment); initialised
/// like torch::nn::Linear (Kaiming-uniform weight, uniform bias).
class LinearImpl : public torch::nn::Cloneable<LinearImpl> {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  void reset() override;
  /// x [..., in] -> [..., out]; any leading dimensions ([T, B] included).
  torch::Tensor forward(const torch::Tensor& x);

  /// Receives y [b1 - b0, out] (contiguous, the weight's dtype): the
  /// layer's output at step t for the samples [b0, b1).
  using StepBlockFn = std::function<void(int64_t t, int64_t b0, int64_t b1, void* y)>;
  /// forward(x) for x [T, B, in] on the CPU with no gradient recorded,
  /// handed to `consume` a block of up to 32 samples at one step at a time
  /// while it is in cache, instead of stored whole: a next layer that is
  /// element-wise per sample (a neuron layer) then reads its input from L1/L2
  /// rather than from memory (bool spikes are computed for a few steps of a
  /// block at once, about 128 rows, which lets the event kernel take a
  /// sample's consecutive steps together). Each sample's blocks come in ascending t, on
  /// one thread; different samples may be consumed on different threads at
  /// once. The values are forward()'s, bit for bit. Throws snn::Error if x
  /// is not [T, B, in] on the CPU or a gradient is being recorded.
  void forward_steps(const torch::Tensor& x, const StepBlockFn& consume);
  void pretty_print(std::ostream& stream) const override;
  /// The kernel the last CPU forward used, and the input density it
  /// measured (kAuto only; -1 when it did not measure).
  LinearPath last_path() const { return last_path_; }
  double last_density() const { return last_density_; }
  /// The double sum behind `param`'s (weight or bias) gradient, shaped
  /// like the parameter, when the layer carries one (carry_grad_sums, CPU)
  /// and the gradient is still the one it wrote; else undefined. Adding
  /// such sums (data-parallel ranks' partial gradients) and rounding once
  /// loses less than adding their float roundings.
  torch::Tensor carried_grad_sum(const torch::Tensor& param) const;
  /// With `on` (carry_grad_sums only; CPU): the sums are the gradient's
  /// only record, .grad() is not written (data-parallel training, whose
  /// sharded step reads the sums: rounding them into .grad() every backward
  /// call was a pass over the weights per step on every rank, whatever its
  /// share of the batch). carried_grad_sum() then gives the sums since
  /// the last restart_grad_sums() (undefined before any backward call).
  void keep_grad_sums_only(bool on);
  /// In keep_grad_sums_only mode: the next backward call starts the sums
  /// from zero (what zero_grad() does to .grad() otherwise).
  void restart_grad_sums();
  /// In keep_grad_sums_only mode: backward calls on the CPU pass their rows
  /// through `rows` (GradRowsExchange; null: no more). Throws snn::Error
  /// without carried sums or outside sums-only mode.
  void exchange_grad_rows(std::shared_ptr<GradRowsExchange> rows);
  /// The whole batch's double sums for the exchange's columns() since the
  /// last restart_grad_sums(), where this step's gradient went through it:
  /// the weight's transposed ([in, end - first]) and the bias's (undefined
  /// without a bias); else both undefined.
  std::pair<torch::Tensor, torch::Tensor> exchanged_grad_sums() const;
  /// The layer's carried gradient sums (carry_grad_sums), or null: for
  /// functions that compute the layer's product another way but sum its
  /// gradients as it does (functional::conv2d_train).
  const c10::intrusive_ptr<LinearGradSums>& grad_sums() const { return grad_sums_; }
  LinearOptions options;
  torch::Tensor weight;
  torch::Tensor bias;

 private:
  /// Resolves kAuto on the CPU (measuring x; `trial` is the KernelTrial of
  /// the way of calling, and `timed` says whether to time the call for it)
  /// and returns the weights packed for x's device (the cache), or null
  /// where the kernel reads the weights as they are.
  const PackedLinear* prepare(const torch::Tensor& x, LinearPath& path, KernelTrial& trial, bool& timed);
  /// forward_steps' work once the kernel is chosen.
  void steps_with(const torch::Tensor& x, LinearPath path, const PackedLinear& packed, const StepBlockFn& consume);
  c10::intrusive_ptr<LinearGradSums> grad_sums_;
  PackedLinear packed_;
  // forward() and forward_steps() run the kernels differently (rows at once
  // or blocks of a few steps; with and without the next layer's pass), so
  // each has its own trial.
  KernelTrial forward_trial_, steps_trial_;
  LinearPath last_path_ = LinearPath::kAuto;
  double last_density_ = -1.0;
};
TORCH_MODULE(Linear);

}  // namespace snn
