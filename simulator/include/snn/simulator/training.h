#pragma once
/// Surrogate-gradient training (BPTT through the pipeline's
/// constant_forward) and evaluation of a SpikingNetwork on labelled images.

#include <torch/optim/adam.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "snn/datasets/idx.h"
#include "snn/simulator/network.h"

namespace snn::dist {
class World;
}

namespace snn {

class ShardedAdam;

/// The training loss.
enum class Loss {
  kMse,           ///< MSE between firing rates (counts / T) and one-hot labels (SpikingJelly's)
  kCrossEntropy,  ///< cross-entropy on the output spike counts
};
Loss parse_loss(const std::string& name);  ///< "mse" or "ce"
std::string to_string(Loss loss);          ///< "mse" or "ce"

/// How the learning rate changes over the epochs.
enum class LrSchedule {
  kConstant,  ///< lr throughout
  kCosine,    ///< lr * (1 + cos(pi * e / epochs)) / 2 in epoch e (0-based): from lr towards 0
};
LrSchedule parse_lr_schedule(const std::string& name);  ///< "constant" or "cosine"
std::string to_string(LrSchedule schedule);             ///< "constant" or "cosine"

/// Options of train_epoch.
struct TrainOptions {
  int64_t batch_size = 64;   ///< samples per optimiser step; default 64
  double lr = 1e-3;          ///< Adam learning rate (peak, for a schedule); default 1e-3
  Loss loss = Loss::kMse;    ///< default MSE on rates
  uint64_t shuffle_seed = 0; ///< batch order of epoch e is a function of (shuffle_seed, e)
  int64_t limit = -1;        ///< use only the first `limit` samples (-1: all)
  double weight_decay = 0;   ///< Adam's L2 penalty on every parameter; default 0
  LrSchedule lr_schedule = LrSchedule::kConstant;  ///< default constant
  int64_t epochs = 1;        ///< the run's total epochs: the length of the cosine schedule
  /// Random image translation by up to this many pixels per axis, drawn per
  /// (shuffle_seed, epoch, sample); 0 (default) = none. Images must be [N, H, W].
  int64_t augment_shift = 0;
};

/// How a training epoch or a simulation actually ran, measured from the
/// pipeline's calls (not copied from the options), so that summaries and
/// tests can show that --devices, --balance, --steps-per-tick, --batch-size
/// and --threads took effect.
struct ExecutionInfo {
  std::vector<std::string> devices;  ///< one per stage that ran
  std::vector<int64_t> stage_layers;  ///< synapse+neuron layers per stage
  int64_t steps_per_tick = 0;         ///< the most steps in one block (K; T when K >= T)
  int64_t batch_size = 0;             ///< the most samples in one batch
  int threads = 0;                    ///< the caller's intra-op threads
  std::vector<int> stage_threads;     ///< intra-op threads each stage ran with
  /// Folds in one pipeline call (the largest block and batch are kept).
  void add(const PipelineRunInfo& call);
  /// "3 stages (layers 1,1,1 on cpu,cpu,cpu), K = 1, batch size 7, 3 threads (1,1,1 per stage)"
  std::string describe() const;
  /// As a JSON object (for run summaries).
  std::string to_json() const;
};
/// The devices and layers per stage of a network's pipeline, with nothing run yet.
ExecutionInfo execution_of(const SpikingNetwork& network);

/// What one epoch of training measured.
struct EpochStats {
  int64_t epoch = 0;
  double loss = 0;            ///< mean over samples
  double train_accuracy = 0;  ///< on the batches as trained (before each step)
  int64_t samples = 0;
  double seconds = 0;
  ExecutionInfo execution;  ///< how the epoch's batches ran
  /// Data-parallel (ShardedAdam) only: the optimizer steps taken, their
  /// wall time and the part of it inside the exchanges, in seconds. The
  /// rest is a rank's fixed work per step whatever its share of the batch
  /// (the gradient into the exchange, its slice of Adam, the new weights
  /// into the parameters): what bounds scaling to many ranks besides the
  /// link.
  int64_t optimizer_steps = 0;
  double optimizer_seconds = 0;
  double optimizer_exchange_seconds = 0;
  /// Data-parallel: of the Linear layers that can (row_layers), those whose
  /// gradient the epoch's last step summed from exchanged rows.
  int64_t row_layers = 0, last_row_layers = 0;
};

/// Adam's state for one parameter (what a resumed run needs to continue
/// exactly where it stopped).
struct AdamMoments {
  int64_t step = 0;
  torch::Tensor exp_avg;     ///< first moment, the parameter's shape
  torch::Tensor exp_avg_sq;  ///< second moment
};

/// Adam over a network's parameters, one epoch at a time.
class Trainer {
 public:
  Trainer(SpikingNetwork& network, TrainOptions options);
  /// One pass over data (shuffled by (shuffle_seed, epoch)), at the epoch's
  /// learning rate (learning_rate(epoch)); progress(done,
  /// total, running loss) is called after every batch when given.
  EpochStats train_epoch(const LabeledImages& data, int64_t epoch,
                         const std::function<void(int64_t, int64_t, double)>& progress = {});
  /// Adam's state per parameter, in the order of network.named_parameters()
  /// (empty moments for parameters not stepped yet).
  std::vector<AdamMoments> optimizer_state() const;
  /// Restores what optimizer_state() returned (e.g. from a checkpoint).
  void load_optimizer_state(const std::vector<AdamMoments>& state);
  const TrainOptions& options() const { return options_; }
  /// The learning rate of epoch e (0-based) under the schedule.
  double learning_rate(int64_t epoch) const;
  /// Data-parallel training over `world`'s ranks (every rank calls it and
  /// then train_epoch with the same data): each global batch is split into
  /// the ranks' contiguous shares (batch_share), each rank simulates and
  /// backpropagates its share, the loss and accuracy come from the gathered
  /// output counts (one process's values bit for bit: every sample's loss
  /// gradient is computed on the whole batch's counts), and the gradients
  /// are added in rank order and Adam steps, each rank on its slice of the
  /// parameters (ShardedAdam; where the parameters' dtypes differ, every
  /// rank adds all gradients (reduce_gradients) and takes the whole step).
  /// After each epoch every rank holds the whole optimizer state again
  /// (optimizer_state() is the checkpoint's). Call it after
  /// load_optimizer_state. Throws snn::Error for a network with BatchNorm
  /// (its batch statistics would be a share's).
  void distribute(dist::World& world);

 private:
  SpikingNetwork& net_;
  TrainOptions options_;
  ModelPipeline pipe_;
  std::unique_ptr<torch::optim::Adam> adam_;
  dist::World* world_ = nullptr;
  std::shared_ptr<ShardedAdam> sharded_;
};

/// What a simulation of a data split measured.
struct EvalResult {
  int64_t samples = 0;
  double accuracy = 0;                    ///< prediction = argmax of the T-step counts
  std::vector<double> accuracy_by_step;   ///< [T]: using the counts up to step t (t = 1..T)
  std::vector<double> firing_rate;        ///< per neuron layer: spikes / (samples * T * neurons)
  torch::Tensor counts;                   ///< [samples, classes] output spike counts
  torch::Tensor predictions;              ///< [samples] int64
  torch::Tensor labels;                   ///< [samples] int64
  int64_t resumed_at = 0;                 ///< samples taken from a resumed recording (not simulated again)
  int64_t first_sample = 0;               ///< the split's index of counts' first row (SampleRange::begin)
  /// The integer totals the fractions above come from, so that parts
  /// simulated apart (ranks) add up to exactly one run's numbers:
  torch::Tensor correct_by_step;          ///< [T] int64: samples predicted right from the counts up to step t
  std::vector<double> layer_spikes;       ///< per neuron layer: spikes of all samples (whole numbers)
  /// The most bytes of spikes, potentials and rows the recorder held at
  /// once (queued and being assembled); 0 without a recording.
  int64_t record_peak_bytes = 0;
  int64_t record_total_bytes = 0;  ///< bytes of all batches handed to the recorder's writer
  ExecutionInfo execution;         ///< how the simulated batches ran (none when all were resumed)
};

/// A recording of an evaluation to an HDF5 file (docs: the recording layout).
struct RecordRequest {
  std::string path;        ///< the file; written as path.partial, renamed when complete
  bool overwrite = false;  ///< replace an existing complete file
  /// Spikes to record: (neuron layer index, 0-based; neuron ids, empty = all).
  std::vector<std::pair<int64_t, std::vector<int64_t>>> spikes;
  /// Membrane potentials to record: (neuron layer index; ids, non-empty).
  std::vector<std::pair<int64_t, std::vector<int64_t>>> traces;
  /// Extra /meta attributes (provenance): key, value.
  std::vector<std::pair<std::string, std::string>> meta;
  double dt_ms = 1.0;      ///< duration of a step in the file's time axis
  bool record_input = false;  ///< also record the encoder's spikes (population "input")
  bool deflate_spikes = false;  ///< RecordingLayout::deflate_spikes
  /// Continue the unfinished recording at `path` (RecordingFile::resume):
  /// samples it committed are read back, not simulated again. Its /meta
  /// "config" must equal this request's.
  bool resume = false;
  /// Asked after every batch; when it returns true the recording commits,
  /// is marked aborted and evaluate throws snn::Interrupted (e.g. on SIGINT).
  std::function<bool()> stop_requested;
  /// Called once the file is open, before the first sample (e.g. to print
  /// what will be recorded only once nothing can refuse the request).
  std::function<void()> on_open;
};

/// Bytes that simulating (training = false) or training a batch of
/// `batch_size` samples of the network needs at its peak, roughly (the
/// [T or K, B, N] blocks of spikes, potentials and, for BPTT, gradients; for
/// a graph, every node's output, and a Delay's d steps of its input).
double memory_estimate(const NetworkConfig& config, int64_t batch_size, bool training);
/// Throws snn::Error with the numbers when memory_estimate() exceeds 80% of
/// this machine's physical memory, instead of letting the allocator fail
/// (or the kernel kill the process) part-way through. evaluate() and
/// Trainer call it.
void check_memory(const NetworkConfig& config, int64_t batch_size, bool training);

/// The population name of neuron layer i in recordings: "output" for the
/// last, "hidden" for the only hidden layer, else "hidden1", "hidden2", ...
std::string population_name(const NetworkConfig& config, int64_t layer);

/// Fills r's predictions, accuracy, accuracy_by_step and firing_rate from
/// its counts, labels, correct_by_step and layer_spikes (evaluate() does;
/// so does putting the parts of a run over several processes together).
void finish_result(EvalResult& r, const NetworkConfig& config);

/// A contiguous part of a data split: samples [begin, end) of the first
/// `limit` (a rank's share of a run over several processes). The encoder's
/// spikes depend on the split's sample index, not on the part, so the parts'
/// results together equal one run's.
struct SampleRange {
  int64_t begin = 0;
  int64_t end = -1;  ///< -1: up to the limit
};

/// Samples evaluate() hands a pipeline of several stages in one call (in
/// whole batches, at least one) when it records nothing: its stages
/// (threads, or ranks) then overlap across batches, filling and draining
/// once per call rather than once per batch, for the memory of this many
/// prepared inputs.
constexpr int64_t kSamplesPerPipelineCall = 4096;

/// Simulates every sample of data (or the first `limit`) for T steps through
/// the network's pipeline, in batches of batch_size. Predictions take the
/// class with the most output spikes; ties go to the lowest class index (so
/// a sample with no output spike is predicted as class 0). With `record`,
/// the chosen spikes and potentials stream to an HDF5 file as they are
/// produced (compacted to events in the stage threads), one commit per batch;
/// besides the chosen populations the file gets each sample's spike total
/// per layer and its prediction after every step, so that a resumed
/// recording's totals cover every sample. `progress(done, total)`, when
/// given, is called once before the first batch (done = the samples a
/// resumed recording already holds) and after every batch (every
/// pipeline call, kSamplesPerPipelineCall, without a recording). With `range`,
/// only those samples are simulated (and recorded), and the result is theirs.
EvalResult evaluate(SpikingNetwork& network, const LabeledImages& data, int64_t batch_size, int64_t limit = -1,
                    const RecordRequest* record = nullptr,
                    const std::function<void(int64_t, int64_t)>& progress = {}, SampleRange range = {});

}  // namespace snn
