#include "snn/simulator/training.h"

#include "snn/simulator/graph_model.h"

#include <ATen/Parallel.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "snn/core/detail/json_difference.h"
#include "snn/core/error.h"
#include "snn/core/frozen_weights.h"
#include "snn/core/memory_limit.h"
#include "snn/pipeline/bounded_queue.h"
#include "snn/recording/events.h"
#include "snn/recording/recording_file.h"
#include "snn/simulator/checkpoint.h"
#include "snn/simulator/distributed.h"
#include "snn/simulator/fused_adam.h"
#include "snn/simulator/run_recording.h"

namespace snn {

Loss parse_loss(const std::string& name) {
  if (name == "mse") return Loss::kMse;
  if (name == "ce") return Loss::kCrossEntropy;
  throw Error("unknown loss '" + name + "': expected mse or ce");
}

std::string to_string(Loss loss) { return loss == Loss::kMse ? "mse" : "ce"; }

LrSchedule parse_lr_schedule(const std::string& name) {
  if (name == "constant") return LrSchedule::kConstant;
  if (name == "cosine") return LrSchedule::kCosine;
  throw Error("unknown learning-rate schedule '" + name + "': expected constant or cosine");
}

std::string to_string(LrSchedule schedule) { return schedule == LrSchedule::kConstant ? "constant" : "cosine"; }

double Trainer::learning_rate(int64_t epoch) const {
  if (options_.lr_schedule == LrSchedule::kConstant) return options_.lr;
  const double progress = std::min(1.0, static_cast<double>(epoch) / static_cast<double>(options_.epochs));
  return options_.lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

std::vector<AdamMoments> Trainer::optimizer_state() const {
  std::vector<AdamMoments> out;
  for (const auto& p : net_.parameters()) {
    AdamMoments m;
    const auto it = adam_->state().find(p.unsafeGetTensorImpl());
    if (it != adam_->state().end()) {
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
      m.step = s.step();
      m.exp_avg = s.exp_avg();
      m.exp_avg_sq = s.exp_avg_sq();
    }
    out.push_back(m);
  }
  return out;
}

void Trainer::load_optimizer_state(const std::vector<AdamMoments>& state) {
  const auto params = net_.parameters();
  if (state.size() != params.size()) {
    throw Error("optimizer state holds " + std::to_string(state.size()) + " parameters, the network " +
                std::to_string(params.size()));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (!state[i].exp_avg.defined()) continue;
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(state[i].step);
    s->exp_avg(state[i].exp_avg.to(params[i].options()).clone());
    s->exp_avg_sq(state[i].exp_avg_sq.to(params[i].options()).clone());
    adam_->state()[params[i].unsafeGetTensorImpl()] = std::move(s);
  }
}

void ExecutionInfo::add(const PipelineRunInfo& call) {
  steps_per_tick = std::max(steps_per_tick, call.largest_block);
  batch_size = std::max(batch_size, call.batch);
  threads = at::get_num_threads();
  stage_threads = call.stage_threads;
  if (static_cast<int64_t>(devices.size()) != call.stages) {
    throw InternalError("the pipeline ran " + std::to_string(call.stages) + " stages, the network has " +
                        std::to_string(devices.size()));
  }
}

namespace {
template <typename T>
std::string joined(const std::vector<T>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + fmt::format("{}", i);
  return out;
}
}  // namespace

std::string ExecutionInfo::describe() const {
  return fmt::format("{} stage{} (layers {} on {}), K = {}, batch size {}, {} thread{} ({} per stage)", devices.size(),
                     devices.size() == 1 ? "" : "s", joined(stage_layers), joined(devices), steps_per_tick, batch_size,
                     threads, threads == 1 ? "" : "s", joined(stage_threads));
}

std::string ExecutionInfo::to_json() const {
  return nlohmann::json{{"stages", devices.size()},      {"devices", devices},
                        {"stage_layers", stage_layers},  {"steps_per_tick", steps_per_tick},
                        {"batch_size", batch_size},      {"threads", threads},
                        {"stage_threads", stage_threads}}
      .dump();
}

ExecutionInfo execution_of(const SpikingNetwork& network) {
  ExecutionInfo e;
  // The stages this process runs (a part of a pipeline over ranks: its own).
  const auto [first, count] = network.pipeline_part();
  const std::vector<int64_t> layers = network.stage_layers();
  e.devices.assign(network.config().devices.begin() + first, network.config().devices.begin() + first + count);
  e.stage_layers.assign(layers.begin() + first, layers.begin() + first + count);
  e.threads = at::get_num_threads();
  return e;
}

double memory_estimate(const NetworkConfig& c, int64_t batch_size, bool training) {
  const double B = static_cast<double>(batch_size), T = static_cast<double>(c.steps);
  const double K = c.steps_per_tick > 0 ? std::min(T, static_cast<double>(c.steps_per_tick)) : T;
  // A graph's other materialised outputs (synapses, pools, sums): one value
  // per element and step, and its gradient when training.
  double neurons = 0, delayed = 0, others = 0;
  if (c.graph) {
    // Its neuron nodes count as the chain's layers do, and a Delay of d
    // steps holds min(d, T) steps of its input per sample; Input, Output
    // and Flatten (views) hold nothing of their own.
    using graph::NodeKind;
    const graph::GraphShapes shapes = c.graph->validate();
    for (const auto& n : c.graph->nodes) {
      if (n.kind == NodeKind::kInput || n.kind == NodeKind::kOutput || n.kind == NodeKind::kFlatten) continue;
      double size = 1;
      for (const int64_t d : shapes.output.at(n.name)) size *= static_cast<double>(d);
      if (graph::is_neuron(n.kind)) {
        neurons += size;
      } else {
        others += size;
      }
      if (n.kind == NodeKind::kDelay) delayed += std::min(static_cast<double>(n.delay), T) * size;
    }
  } else {
    for (size_t i = 1; i < c.layers.size(); ++i) neurons += static_cast<double>(c.layers[i]);
  }
  const double inputs = static_cast<double>(c.layers.front()), classes = static_cast<double>(c.layers.back());
  if (training) {
    // BPTT keeps every step: currents, potentials, spikes and their
    // gradients (about 6 floats per neuron-step), and the input spikes.
    return B * T * (24.0 * neurons + 8.0 * others + inputs) + 8.0 * B * delayed;  // values and gradients
  }
  // Per block of K steps: input spikes (bool), currents and potentials
  // (float); per sample and step: the output, its running sum and the
  // predictions by step (int64).
  return B * K * (inputs + 12.0 * neurons + 4.0 * others) + B * T * (12.0 * classes + 16.0) + 4.0 * B * delayed;
}

void check_memory(const NetworkConfig& c, int64_t batch_size, bool training) {
  const double need = memory_estimate(c, batch_size, training);
  const std::string beyond = beyond_memory(need);
  if (!beyond.empty()) {
    std::string layers;
    for (auto l : c.layers) layers += (layers.empty() ? "" : "-") + std::to_string(l);
    if (c.graph) layers = "graph " + layers;
    throw Error(fmt::format("T = {} steps with batch size {} needs about {:.3g} GiB of memory to {} the {} network, "
                            "{}: lower T or the batch size{}",
                            c.steps, batch_size, need / double(int64_t{1} << 30), training ? "train" : "simulate",
                            layers, beyond, training ? "" : ", or set --steps-per-tick to bound a block's memory"));
  }
}

namespace {
int64_t used_samples(const LabeledImages& data, int64_t limit) {
  if (data.size() == 0) throw Error("the data split holds no samples");
  if (limit == 0 || limit < -1) {
    throw Error("limit: expected a number of samples >= 1, or -1 for all, got " + std::to_string(limit));
  }
  return limit < 0 ? data.size() : std::min(limit, data.size());
}
}  // namespace

Trainer::Trainer(SpikingNetwork& network, TrainOptions options)
    : net_(network), options_(options), pipe_(network.make_pipeline()) {
  if (options_.batch_size < 1) throw Error("batch size must be >= 1, got " + std::to_string(options_.batch_size));
  if (!(options_.lr > 0)) throw Error("learning rate must be positive, got " + std::to_string(options_.lr));
  if (!(options_.weight_decay >= 0)) {
    throw Error("weight decay must be >= 0, got " + std::to_string(options_.weight_decay));
  }
  if (options_.epochs < 1) throw Error("epochs must be >= 1, got " + std::to_string(options_.epochs));
  if (options_.augment_shift < 0) {
    throw Error("image shift must be >= 0 pixels, got " + std::to_string(options_.augment_shift));
  }
  check_memory(net_.config(), options_.batch_size, /*training=*/true);
  adam_ = std::make_unique<torch::optim::Adam>(
      net_.parameters(), torch::optim::AdamOptions(options_.lr).weight_decay(options_.weight_decay));
}

void Trainer::distribute(dist::World& world) {
  if (const GraphModel* g = net_.graph_model()) {
    const std::vector<std::string> norms = g->batch_norm_nodes();
    if (!norms.empty() && world.size() > 1) {
      throw Error("BatchNorm node '" + norms.front() + "' normalises over the whole batch, and over " +
                  std::to_string(world.size()) + " ranks each would see only its share: train networks with "
                  "BatchNorm in one process");
    }
  }
  world_ = &world;
  // The old optimizer first: its destructor gives the layers back their
  // .grad(), which the new one takes away again.
  sharded_.reset();
  if (ShardedAdam::can_shard(net_)) {
    sharded_ = std::make_shared<ShardedAdam>(
        world, net_, torch::optim::AdamOptions(options_.lr).weight_decay(options_.weight_decay), optimizer_state());
  }
}

namespace {
torch::Tensor loss_of(Loss kind, const torch::Tensor& counts, const torch::Tensor& y, int64_t T, int64_t classes) {
  if (kind == Loss::kMse) {
    const torch::Tensor target = torch::one_hot(y, classes).to(torch::kFloat);
    return torch::nn::functional::mse_loss(counts / static_cast<double>(T), target);
  }
  return torch::nn::functional::cross_entropy(counts, y);
}
}  // namespace

EpochStats Trainer::train_epoch(const LabeledImages& data, int64_t epoch,
                                const std::function<void(int64_t, int64_t, double)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = used_samples(data, options_.limit);
  const int64_t T = net_.config().steps;
  const int64_t classes = net_.config().layers.back();
  EpochStats stats;
  stats.epoch = epoch;
  stats.execution = execution_of(net_);
  double loss_sum = 0;
  int64_t correct = 0;
  for (auto& group : adam_->param_groups()) group.options().set_lr(learning_rate(epoch));
  if (sharded_) sharded_->set_lr(learning_rate(epoch));
  net_.set_training_epoch(epoch);
  for (const torch::Tensor& batch : epoch_batches(n, options_.batch_size, true, options_.shuffle_seed, epoch)) {
    const int64_t b = batch.size(0);
    // This process's samples of the batch: all, or its rank's share.
    const SampleRange share = world_ ? batch_share(b, world_->rank(), world_->size()) : SampleRange{0, b};
    const torch::Tensor idx = batch.narrow(0, share.begin, share.end - share.begin);
    const torch::Tensor y = data.labels.index_select(0, batch);
    adam_->zero_grad();
    torch::Tensor mine;  // [share, classes]
    if (idx.size(0) > 0) {
      const torch::Tensor images = random_shift(data.images.index_select(0, idx), idx, options_.augment_shift,
                                                options_.shuffle_seed, epoch);
      mine = pipe_.constant_forward(net_.prepare_input(images), T, true, idx).to(torch::kCPU);
      stats.execution.add(pipe_.last_run());
    } else {
      mine = torch::zeros({0, classes}, torch::kFloat);
    }
    torch::Tensor counts = mine, loss;
    if (!world_) {
      loss = loss_of(options_.loss, counts, y, T, classes);
      loss.backward();
    } else {
      // The whole batch's counts, so that the loss and each sample's loss
      // gradient are one process's; each rank backpropagates its rows.
      // Every rank's share is known: no message about sizes goes first.
      std::vector<int64_t> split;
      for (int64_t r = 0; r < world_->size(); ++r) {
        const SampleRange theirs = batch_share(b, r, world_->size());
        split.push_back((theirs.end - theirs.begin) * classes);
      }
      counts = world_->all_gather_parts(mine.detach().reshape({-1}), split).view({b, classes}).requires_grad_(true);
      loss = loss_of(options_.loss, counts, y, T, classes);
      loss.backward();
      if (sharded_) sharded_->begin_batch(b, T);
      if (idx.size(0) > 0) mine.backward(counts.grad().narrow(0, share.begin, idx.size(0)));
    }
    if (sharded_) {
      const auto s0 = std::chrono::steady_clock::now();
      const double e0 = world_->traffic().seconds;
      sharded_->step();
      stats.optimizer_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      stats.optimizer_exchange_seconds += world_->traffic().seconds - e0;
      ++stats.optimizer_steps;
      stats.row_layers = sharded_->row_layers();
      stats.last_row_layers = sharded_->last_row_layers();
    } else {
      if (world_) reduce_gradients(*world_, net_);
      fused_adam_step(*adam_);  // adam_->step()'s values, bit for bit, in fewer passes
    }
    loss_sum += loss.item<double>() * static_cast<double>(b);
    correct += counts.argmax(1).eq(y).sum().item<int64_t>();
    stats.samples += b;
    if (progress) progress(stats.samples, n, loss_sum / static_cast<double>(stats.samples));
  }
  // The whole optimizer state on every rank again, for checkpoints.
  if (sharded_) load_optimizer_state(sharded_->gather_state());
  stats.loss = loss_sum / static_cast<double>(stats.samples);
  stats.train_accuracy = static_cast<double>(correct) / static_cast<double>(stats.samples);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

std::string population_name(const NetworkConfig& config, int64_t layer) {
  const int64_t layers = static_cast<int64_t>(config.layers.size()) - 1;
  if (layer < 0 || layer >= layers) {
    throw Error("layer " + std::to_string(layer) + " does not exist: the network has " + std::to_string(layers) +
                " neuron layers");
  }
  if (config.graph) return graph_neuron_names(*config.graph).at(static_cast<size_t>(layer));  // node names
  if (!config.layer_names.empty()) return config.layer_names.at(static_cast<size_t>(layer));  // a chain's nodes
  if (layer == layers - 1) return "output";
  if (layers == 2) return "hidden";
  return "hidden" + std::to_string(layer + 1);
}

namespace {

int64_t tensor_bytes(const torch::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

int64_t batch_bytes(const recording::SampleBatch& b) {
  int64_t n = tensor_bytes(b.labels) + tensor_bytes(b.predicted) + tensor_bytes(b.output_counts) +
              tensor_bytes(b.layer_spikes) + tensor_bytes(b.prediction_by_step);
  for (const auto& e : b.spikes) n += tensor_bytes(e.sample) + tensor_bytes(e.step) + tensor_bytes(e.node);
  for (const auto& t : b.traces) n += tensor_bytes(t);
  return n;
}

// A config as JSON without its placement (devices, balance, steps per
// tick), which may change when a recording is resumed.
// "neuron.tau: 2.0 then, 3.0 now": the first JSON value that differs.
std::string first_difference(const std::string& then_text, const std::string& now_text) {
  const detail::JsonDifference d = detail::first_json_difference(then_text, now_text);
  if (!d.found) return "the configs differ";
  return d.key + ": " + d.first + " then, " + d.second + " now";
}

std::string network_json(NetworkConfig c) {
  c.devices = {"cpu"};
  c.balance.clear();
  c.steps_per_tick = 0;
  return c.to_json();
}

// Refuses to resume the recording at `path` with another network than the
// one it was started with: another config (T, neuron, seed, gain, layers)
// or other weights (a checkpoint replaced since). Reads only.
void check_same_network(const std::string& path, const NetworkConfig& c, const std::string& hash) {
  const std::string config = recording::read_meta_attribute(path, "config");
  std::string started;
  try {
    started = network_json(NetworkConfig::from_json(config));
  } catch (const Error& e) {
    throw Error("recording '" + path + "': its /meta config is unreadable: " + e.what());
  }
  if (started != network_json(c)) {
    throw Error("recording '" + path + "' was made with another network configuration (" +
                first_difference(started, network_json(c)) +
                "): resume it with the checkpoint and settings it was started with");
  }
  const std::string saved = recording::read_meta_attribute(path, "parameters_hash");
  // Recordings of snnsim 0.1 carry no hash: nothing to compare.
  if (!saved.empty() && saved != hash) {
    throw Error("recording '" + path + "' was made with other weights (parameters hash " + saved +
                ", this network's " + hash + "): its checkpoint was replaced since; resume it with the checkpoint it "
                "was started with");
  }
}

// Gathers one batch's recorded blocks from the stage threads, then hands
// the batch, in the file's order (sample, step, neuron id), to a writer
// thread through a bounded queue: the simulation goes on while HDF5 writes,
// memory holds at most kQueuedBatches batches of events, and one thread
// makes every HDF5 call (the library is not reentrant).
class BatchRecorder {
 public:
  // `first_sample`: the split's index of the first sample the file holds
  // (a rank's share starts later).
  BatchRecorder(SpikingNetwork& net, const RecordRequest& request, int64_t first_sample) : net_(net) {
    const NetworkConfig& c = net.config();
    if (!net.neuron_layers().back()->spiking()) {
      // output_counts holds integer spike counts; a potential summed over
      // the steps would be rounded into something else.
      throw Error("the output layer '" + population_name(c, static_cast<int64_t>(c.layers.size()) - 2) +
                  "' emits its potential (LI or CubaLI), not spikes: a recording holds the output's spike counts; "
                  "run without --output, or end the network in a spiking layer");
    }
    recording::RecordingLayout layout;
    layout.classes = c.layers.back();
    layout.steps = c.steps;
    layout.dt_ms = request.dt_ms;
    const int64_t layers = static_cast<int64_t>(c.layers.size()) - 1;
    layout.layers = layers;
    layout.prediction_by_step = true;
    layout.deflate_spikes = request.deflate_spikes;
    layout.first_sample = first_sample;
    layer_of_spikes_.assign(layers, -1);
    layer_of_trace_.assign(layers, -1);
    if (request.record_input && !net.poisson_input()) {
      throw Error("--record-input records the encoder's spikes, but this network's Input node takes the images "
                  "directly (encoding = \"direct\"): it has no input spikes");
    }
    if (request.record_input) {
      // The encoder's spikes are a function of (seed, sample, step, pixel):
      // encoding the batch again here gives exactly what the network saw.
      layout.spikes.push_back({"input", c.layers[0], 0, {}});
      spike_ids_.push_back(torch::Tensor());
      input_encoder_.seed(c.seed);
      record_input_ = true;
    }
    // RecordingFile validates the layout (names, ids) before it writes anything.
    for (const auto& [layer, ids] : request.spikes) {
      const std::string name = population_name(c, layer);
      if (!net.neuron_layers().at(static_cast<size_t>(layer))->spiking()) {
        throw Error("layer '" + name + "' is a leaky integrator (LI or CubaLI): it emits no spikes to record; record "
                    "its potential with --record-v " + name + ":IDS");
      }
      layer_of_spikes_[layer] = static_cast<int64_t>(layout.spikes.size());
      layout.spikes.push_back({name, c.layers[layer + 1], layer + 1, ids});
      spike_ids_.push_back(ids.empty() ? torch::Tensor() : torch::tensor(ids, torch::kLong));
    }
    for (const auto& [layer, ids] : request.traces) {
      const std::string name = population_name(c, layer);
      layer_of_trace_[layer] = static_cast<int64_t>(layout.traces.size());
      layout.traces.push_back({name, c.layers[layer + 1], layer + 1, ids});
      trace_ids_.push_back(torch::tensor(ids, torch::kLong));
    }
    const std::string hash = parameters_hash(net);
    if (request.resume) {
      // Everything that can refuse the resumption is checked before the file
      // is opened for writing: a refused resume leaves it as it was.
      check_same_network(request.path, c, hash);
      file_ = std::make_unique<recording::RecordingFile>(recording::RecordingFile::resume(request.path, layout));
      prior_ = file_->read_rows();
    } else {
      std::vector<std::pair<std::string, std::string>> meta = request.meta;
      meta.emplace_back("parameters_hash", hash);
      file_ = std::make_unique<recording::RecordingFile>(request.path, layout, meta, request.overwrite);
    }
    spike_blocks_.resize(layout.spikes.size());
    trace_blocks_.resize(layout.traces.size());
    layer_totals_.resize(layers);
    writer_ = std::thread([this] { write_loop(); });
    // Every layer is observed: its per-sample spike totals go to the file.
    for (int64_t i = 0; i < layers; ++i) {
      net_.neuron_layers()[i]->set_observer(
          [this, i](const torch::Tensor& spikes, const torch::Tensor& v) { observe(i, spikes, v); },
          layer_of_trace_[i] >= 0);
    }
  }

  ~BatchRecorder() {
    for (const auto& layer : net_.neuron_layers()) layer->set_observer({});
    if (writer_.joinable()) {  // unwinding: drop what is queued; the file keeps its commits and says aborted
      queue_.close();
      writer_.join();
    }
  }

  // The committed rows of a resumed recording (empty tensors otherwise).
  const recording::SampleRows& prior() const { return prior_; }
  int64_t samples_committed_before() const { return prior_.labels.defined() ? prior_.labels.size(0) : 0; }
  int64_t peak_bytes() const { return peak_bytes_.load(); }
  int64_t total_bytes() const { return total_bytes_; }

  // After each batch: assemble, queue for the writer (which appends and commits).
  void write_batch(const torch::Tensor& x, const torch::Tensor& idx, const torch::Tensor& labels,
                   const torch::Tensor& counts, const torch::Tensor& predicted,
                   const torch::Tensor& prediction_by_step) {
    recording::SampleBatch b;
    b.labels = labels;
    b.predicted = predicted;
    b.output_counts = counts;
    b.prediction_by_step = prediction_by_step;
    size_t p = 0;
    if (record_input_) {
      const torch::Tensor spikes =
          functional::poisson_encode(x, idx, 0, net_.config().steps, input_encoder_).to(torch::kCPU);
      b.spikes.push_back(recording::compact_spikes(spikes.reshape({spikes.size(0), spikes.size(1), -1})));
      ++p;
    }
    std::vector<torch::Tensor> totals;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (; p < spike_blocks_.size(); ++p) {
        b.spikes.push_back(merge(spike_blocks_[p]));
        spike_blocks_[p].clear();
      }
      for (auto& blocks : trace_blocks_) {
        b.traces.push_back(torch::cat(blocks, 0).permute({1, 0, 2}).contiguous());  // [T, B, n] -> [B, T, n]
        blocks.clear();
      }
      for (auto& t : layer_totals_) {
        totals.push_back(t);
        t = torch::Tensor();
      }
    }
    b.layer_spikes = torch::stack(totals, 1);  // [B, layers]
    const int64_t bytes = batch_bytes(b);
    total_bytes_ += bytes;
    const int64_t held = queued_bytes_.fetch_add(bytes) + bytes;
    int64_t peak = peak_bytes_.load();
    while (held > peak && !peak_bytes_.compare_exchange_weak(peak, held)) {
    }
    if (!queue_.push(std::pair<recording::SampleBatch, int64_t>{std::move(b), bytes})) rethrow_writer_error();
  }

  // Drains the queue and closes the file with `status` ("complete" or "aborted").
  void finish(const std::string& status, const std::vector<std::pair<std::string, std::string>>& final_meta) {
    queue_.push(std::nullopt);  // the end marker: the writer drains the queue, then stops
    writer_.join();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (writer_error_) std::rethrow_exception(writer_error_);
    }
    file_->finish(status, final_meta);
  }

  const recording::RecordingFile& file() const { return *file_; }

 private:
  // Runs in the stage thread that produced the block; each layer belongs to
  // one stage, so its blocks arrive in time order.
  void observe(int64_t layer, const torch::Tensor& spikes, const torch::Tensor& v) {
    const int64_t sp = layer_of_spikes_[layer], tr = layer_of_trace_[layer];
    const torch::Tensor flat = spikes.reshape({spikes.size(0), spikes.size(1), -1});
    recording::SpikeEvents e;
    if (sp >= 0) e = recording::compact_spikes(flat, spike_ids_[sp]);
    // Spikes per sample: the events count them when the whole layer is recorded.
    const torch::Tensor total = (sp >= 0 && !spike_ids_[sp].defined())
                                    ? e.per_sample.to(torch::kDouble)
                                    : flat.sum(std::vector<int64_t>{0, 2}, false, torch::kDouble).cpu();  // [B]
    torch::Tensor vs;
    if (tr >= 0) vs = v.reshape({v.size(0), v.size(1), -1}).index_select(2, trace_ids_[tr].to(v.device())).cpu();
    std::lock_guard<std::mutex> lock(mutex_);
    layer_totals_[layer] = layer_totals_[layer].defined() ? layer_totals_[layer] + total : total;
    if (sp >= 0) spike_blocks_[sp].push_back({std::move(e), spikes.size(0)});
    if (tr >= 0) trace_blocks_[tr].push_back(vs);
  }

  void write_loop() {
    try {
      while (auto item = queue_.pop()) {
        if (!item->has_value()) return;
        file_->append((*item)->first);
        file_->commit();
        queued_bytes_ -= (*item)->second;
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        writer_error_ = std::current_exception();
      }
      queue_.close();  // the next push fails and rethrows
    }
  }

  // After a failed push: the writer closed the queue because it failed.
  void rethrow_writer_error() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (writer_error_) std::rethrow_exception(writer_error_);
    throw InternalError("the recording queue closed without a writer error");
  }

  struct Block {
    recording::SpikeEvents events;
    int64_t steps;
  };

  // Blocks in time order, each sample-major: shift steps to the sample's
  // time axis, then a stable sort by sample gives (sample, step, id) order.
  static recording::SpikeEvents merge(const std::vector<Block>& blocks) {
    if (blocks.size() == 1) return blocks[0].events;  // K = T: already in file order
    std::vector<torch::Tensor> sample, step, node;
    int64_t offset = 0;
    for (const auto& b : blocks) {
      sample.push_back(b.events.sample);
      step.push_back(b.events.step + offset);
      node.push_back(b.events.node);
      offset += b.steps;
    }
    recording::SpikeEvents out;
    const torch::Tensor s = torch::cat(sample);
    const torch::Tensor order = std::get<1>(s.sort(/*stable=*/std::optional<bool>(true), /*dim=*/0));
    out.sample = s.index_select(0, order);
    out.step = torch::cat(step).index_select(0, order);
    out.node = torch::cat(node).index_select(0, order);
    return out;
  }

  SpikingNetwork& net_;
  std::unique_ptr<recording::RecordingFile> file_;
  recording::SampleRows prior_;
  bool record_input_ = false;
  PoissonEncoderOptions input_encoder_;
  std::vector<int64_t> layer_of_spikes_, layer_of_trace_;
  std::vector<torch::Tensor> spike_ids_, trace_ids_;
  std::mutex mutex_;
  std::vector<std::vector<Block>> spike_blocks_;
  std::vector<std::vector<torch::Tensor>> trace_blocks_;
  std::vector<torch::Tensor> layer_totals_;  // per layer: [B] spikes of the current batch
  std::atomic<int64_t> queued_bytes_{0}, peak_bytes_{0};
  int64_t total_bytes_ = 0;
  static constexpr size_t kQueuedBatches = 4;
  BoundedQueue<std::optional<std::pair<recording::SampleBatch, int64_t>>> queue_{kQueuedBatches};
  std::exception_ptr writer_error_;
  std::thread writer_;
};

}  // namespace

void finish_result(EvalResult& r, const NetworkConfig& config) {
  const int64_t n = r.samples, T = config.steps;
  r.predictions = r.counts.argmax(1);
  r.accuracy = r.predictions.eq(r.labels).sum().item<double>() / static_cast<double>(n);
  r.accuracy_by_step.clear();
  for (int64_t t = 0; t < T; ++t) {
    r.accuracy_by_step.push_back(r.correct_by_step[t].item<double>() / static_cast<double>(n));
  }
  r.firing_rate.clear();
  for (size_t i = 0; i < r.layer_spikes.size(); ++i) {
    const double slots = static_cast<double>(n) * static_cast<double>(T) * static_cast<double>(config.layers[i + 1]);
    r.firing_rate.push_back(r.layer_spikes[i] / slots);
  }
}

EvalResult evaluate(SpikingNetwork& net, const LabeledImages& data, int64_t batch_size, int64_t limit,
                    const RecordRequest* record, const std::function<void(int64_t, int64_t)>& progress,
                    SampleRange range) {
  if (batch_size < 1) throw Error("batch size must be >= 1, got " + std::to_string(batch_size));
  const int64_t used = used_samples(data, limit);
  const int64_t begin = range.begin, end = range.end < 0 ? used : range.end;
  if (begin < 0 || begin >= end || end > used) {
    throw Error("samples " + std::to_string(begin) + ".." + std::to_string(end - 1) + " are not a part of the " +
                std::to_string(used) + " samples to simulate");
  }
  const int64_t n = end - begin;
  check_memory(net.config(), std::min(batch_size, n), /*training=*/false);
  const int64_t T = net.config().steps;
  const auto t0 = std::chrono::steady_clock::now();
  // Taken now: a resume's start, written when the file is finished.
  const auto resumed_by =
      record && record->resume ? resume_provenance() : std::vector<std::pair<std::string, std::string>>();
  torch::NoGradGuard no_grad;
  // The weights stay as they are for the whole evaluation: layers pack
  // theirs once, not once per batch.
  const FrozenWeights frozen;
  std::unique_ptr<BatchRecorder> recorder = record ? std::make_unique<BatchRecorder>(net, *record, begin) : nullptr;
  if (recorder && record->on_open) record->on_open();
  // A resumed recording's committed samples are read back, not simulated.
  const int64_t committed = recorder ? recorder->samples_committed_before() : 0;
  if (committed > n) {
    throw Error("the recording to resume holds " + std::to_string(committed) + " samples, more than the " +
                std::to_string(n) + " this run simulates");
  }
  const int64_t first = begin + committed;
  ModelPipeline pipe = net.make_pipeline();
  ExecutionInfo execution = execution_of(net);
  for (const auto& layer : net.neuron_layers()) layer->set_count_spikes(true);
  std::vector<torch::Tensor> counts;
  torch::Tensor correct_by_step = torch::zeros({T}, torch::kLong);
  std::vector<double> prior_spikes(net.neuron_layers().size(), 0.0);
  if (committed > 0) {
    const recording::SampleRows& p = recorder->prior();
    const torch::Tensor y = data.labels.narrow(0, begin, committed);
    if (!p.labels.equal(y)) throw Error("the recording to resume was made on other samples (labels differ)");
    counts.push_back(p.output_counts.to(torch::kFloat));
    correct_by_step += p.prediction_by_step.eq(y.unsqueeze(1)).sum(0);
    const torch::Tensor per_layer = p.layer_spikes.sum(0);
    for (size_t i = 0; i < prior_spikes.size(); ++i) prior_spikes[i] = per_layer[i].item<double>();
  }
  if (progress) progress(committed, n);
  // Batches go through a pipeline of several stages (threads or ranks)
  // several at a time, so that its stages overlap across batches
  // (constant_forward_batches); one stage has nothing to overlap, and a
  // recording writes (and may stop) after every batch: one at a time.
  const bool overlaps = pipe.size() > 1 || pipe.links().any();
  const int64_t group = recorder || !overlaps ? 1 : std::max<int64_t>(1, kSamplesPerPipelineCall / batch_size);
  for (int64_t group_start = first; group_start < end; group_start += group * batch_size) {
    std::vector<torch::Tensor> idxs, xs;
    for (int64_t start = group_start; start < std::min(end, group_start + group * batch_size); start += batch_size) {
      idxs.push_back(torch::arange(start, std::min(start + batch_size, end), torch::kLong));
      xs.push_back(net.prepare_input(data.images.index_select(0, idxs.back())));
    }
    const std::vector<torch::Tensor> outs = pipe.constant_forward_batches(xs, T, false, idxs);
    execution.add(pipe.last_run());
    const int64_t group_end = std::min(end, group_start + group * batch_size);
    if (outs.empty()) {  // a pipeline part whose outputs another process counts
      if (progress) progress(group_end - begin, n);
      continue;
    }
    for (size_t b = 0; b < outs.size(); ++b) {
      const torch::Tensor& idx = idxs[b];
      const torch::Tensor y = data.labels.index_select(0, idx);
      const torch::Tensor per_step = outs[b].to(torch::kCPU);  // [T, B, C]
      // Counts up to each step in time order: exact integers in float32.
      // torch::argmax returns the first maximal index: ties go to the lowest class.
      const torch::Tensor cumulative = per_step.cumsum(0);
      const torch::Tensor by_step = cumulative.argmax(2);  // [T, B]
      correct_by_step += by_step.eq(y.unsqueeze(0)).sum(1);
      counts.push_back(cumulative[T - 1]);
      if (recorder) {
        recorder->write_batch(xs[b], idx, y, counts.back(), by_step[T - 1], by_step.t().contiguous());
        const int64_t done = idx[-1].item<int64_t>() + 1 - begin;
        if (record->stop_requested && record->stop_requested() && begin + done < end) {
          recorder->finish("aborted", {});
          throw Interrupted("interrupted: stopped after " + std::to_string(done) + " of " + std::to_string(n) +
                            " samples; the recording '" + recorder->file().partial_path() +
                            "' holds them all (status aborted): continue it with --resume, or make it a normal "
                            "file with 'snnsim recover'");
        }
      }
    }
    if (progress) progress(group_end - begin, n);
  }
  EvalResult r;
  r.samples = n;
  r.resumed_at = committed;
  r.first_sample = begin;
  r.execution = std::move(execution);
  // A pipeline part without the results counts none of the samples (the
  // process holding them does); its layers' spikes are its own.
  const bool holds_results = net.pipeline_part_returns_results();
  r.counts = holds_results ? torch::cat(counts) : torch::zeros({0, net.config().layers.back()});
  r.labels = holds_results ? data.labels.narrow(0, begin, n) : torch::zeros({0}, data.labels.options());
  r.correct_by_step = correct_by_step;
  for (size_t i = 0; i < net.neuron_layers().size(); ++i) {
    r.layer_spikes.push_back(prior_spikes[i] + net.neuron_layers()[i]->spikes_counted());
    net.neuron_layers()[i]->set_count_spikes(false);
  }
  finish_result(r, net.config());
  if (recorder) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<std::pair<std::string, std::string>> end{{"wall_time_s", std::to_string(wall)},
                                                         {"accuracy", std::to_string(r.accuracy)}};
    end.insert(end.end(), resumed_by.begin(), resumed_by.end());
    recorder->finish("complete", end);
    r.record_peak_bytes = recorder->peak_bytes();
    r.record_total_bytes = recorder->total_bytes();
  }
  return r;
}

}  // namespace snn
