#pragma once
/// Fully connected spiking networks for rate-coded image classification:
/// a Poisson encoder, then (snn::Linear, neuron layer) pairs, split into
/// model-pipeline stages over devices.

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "snn/encoders/encoders.h"
#include "snn/graph/graph.h"
#include "snn/neurons/functional.h"
#include "snn/neurons/lif.h"
#include "snn/neurons/linear.h"
#include "snn/neurons/linear_neuron.h"
#include "snn/pipeline/model_pipeline.h"

namespace snn {

/// What a network is: its layers or graph, how its weights are
/// initialised and how its input is encoded. Checkpoints store it and
/// export writes it; a run may not change it without building another
/// network (NetworkOverrides does, for --tau and friends).
struct NetworkSpec {
  std::vector<int64_t> layers{784, 256, 10};  ///< sizes, input first; default 784-256-10
  NeuronParams neuron;                        ///< every neuron layer's dynamics; default LIF tau 2
  uint64_t seed = 0;                          ///< weight initialisation and encoder seed; default 0
  /// Encoder gain: a pixel of intensity x spikes with probability
  /// min(1, input_gain * x) per step; default 1.
  double input_gain = 1.0;
  /// A network graph other than the chain `layers` describes (skip
  /// connections, recurrence, convolution: graph_model.h); null (default)
  /// for a chain. With a graph, `layers` is derived from it (the input size,
  /// then each neuron layer's size in execution order) and `neuron` is
  /// unused: every neuron node has its own.
  std::shared_ptr<const graph::Graph> graph;
  /// A chain's neuron layers by name (the nodes of the graph file or NIR
  /// file it came from), which name its recordings' populations; empty
  /// (default): hidden, hidden2, ..., output.
  std::vector<std::string> layer_names;

  /// Throws snn::Error naming the first bad value.
  void validate() const;
};

/// How a network is simulated: per run, never part of the network and
/// never changing its results (the pipeline is bit-identical for every T
/// split into blocks, partition and device). SpikingNetwork::set_simulation
/// changes it without building the network again.
struct SimulationConfig {
  int64_t steps = 8;                          ///< T, steps per sample; default 8
  int64_t steps_per_tick = 0;                 ///< K; 0 = T (layer by layer); default 0
  std::vector<std::string> devices{"cpu"};    ///< one per stage, e.g. {"cpu","cpu"} or {"cuda:0","cuda:1"}
  std::vector<int64_t> balance;               ///< synapse+neuron layers per stage; empty = even split

  /// Throws snn::Error naming the first bad value, for a network of
  /// `layer_count` neuron layers.
  void validate(int64_t layer_count) const;
};

/// A network and how it is simulated, as checkpoints and run summaries
/// store them (one flat JSON object, as before the split).
struct NetworkConfig : NetworkSpec, SimulationConfig {
  NetworkSpec& network() { return *this; }
  const NetworkSpec& network() const { return *this; }
  SimulationConfig& simulation() { return *this; }
  const SimulationConfig& simulation() const { return *this; }

  /// Both parts; throws snn::Error naming the first bad value.
  void validate() const;
  /// Parses "784-256-10"; throws snn::Error on anything else.
  static std::vector<int64_t> parse_layers(const std::string& text);
  /// The config as a JSON document (for checkpoints and run summaries), and back.
  std::string to_json() const;
  static NetworkConfig from_json(const std::string& json);
};

/// The modules of a network: encoder, then Linear and neuron layers.
class GraphModel;

class SpikingNetwork {
 public:
  explicit SpikingNetwork(const NetworkConfig& config);

  const NetworkConfig& config() const { return config_; }
  /// Parameters named like named_parameters() of a Sequential over
  /// (encoder, fc0, lif0, fc1, lif1, ...): "fc0.weight", "fc0.bias", ...
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;
  std::vector<torch::Tensor> parameters() const;
  /// State saved with the parameters but not trained: a graph's BatchNorm
  /// running statistics ("<node>.running_mean", ...); empty for a chain.
  std::vector<std::pair<std::string, torch::Tensor>> named_buffers() const;
  /// The training epoch (0-based), which keys a graph's Dropout masks; the
  /// trainer sets it before each epoch.
  void set_training_epoch(int64_t epoch);
  /// A pipeline over config.devices with config.balance (built anew; the
  /// modules are shared, so training through it updates this network);
  /// only the part set_pipeline_part names, linked to the others.
  ModelPipeline make_pipeline() const;
  /// Makes later make_pipeline() calls build only the stages [first, first
  /// + count) of config.devices, joined to the processes that hold the
  /// others by `links` (a pipeline over ranks: dist::pipeline_links). The
  /// encoder is in stage 0. count 0: the whole pipeline again. Throws
  /// snn::Error naming the numbers when the part is not within the stages.
  void set_pipeline_part(int64_t first, int64_t count, PipelineLinks links);
  /// Whether make_pipeline() builds a part whose results another process
  /// receives (evaluate() then has no outputs to count on this one).
  bool pipeline_part_returns_results() const { return !part_links_.downstream || part_links_.results; }
  /// The stages make_pipeline() builds: [first, first + count) of config.devices.
  std::pair<int64_t, int64_t> pipeline_part() const {
    return part_count_ > 0 ? std::make_pair(part_first_, part_count_)
                           : std::make_pair(int64_t{0}, static_cast<int64_t>(config_.devices.size()));
  }
  /// Synapse+neuron layers per stage as make_pipeline() splits them:
  /// config.balance, or the even split when it is empty.
  std::vector<int64_t> stage_layers() const;
  /// The encoder, synapse layers and neuron layers' modules in order
  /// (for benchmarks that time them one by one).
  const PoissonEncoder& encoder() const { return encoder_; }
  /// Whether stage 0 rate-codes the images (the Poisson encoder): true but
  /// for a graph whose Input node says encoding = "direct", which takes the
  /// pixel values themselves at every step.
  bool poisson_input() const;
  /// The input as stage 0's first module receives it, [T, B, features]:
  /// the encoded spikes (samples 0 .. B-1), or the images at every step.
  torch::Tensor encode_input(const torch::Tensor& x) const;
  const std::vector<Linear>& synapses() const { return synapses_; }
  /// Every synapse module, a graph network's included, in execution order.
  std::vector<Linear> linear_layers() const;
  const std::vector<torch::nn::AnyModule>& neuron_modules() const { return neuron_modules_; }
  /// Neuron layers in order (for firing rates and state).
  const std::vector<std::shared_ptr<NeuronLayer>>& neuron_layers() const { return neurons_; }
  /// The auto-balancer: times each (synapse, neuron) layer on `images`
  /// (encoded for T steps, each layer fed the previous one's real spikes,
  /// best of `repeats`, on the CPU), then splits the layers into `stages`
  /// contiguous groups so that the slowest group is as fast as possible.
  /// Returns the layers per stage (for set_balance). The partition never
  /// changes results, only speed.
  std::vector<int64_t> measure_balance(const torch::Tensor& images, int64_t stages, int repeats = 3);
  /// Seconds per layer from the last measure_balance (empty before).
  const std::vector<double>& measured_layer_seconds() const { return measured_seconds_; }
  /// Sets config().balance (validated) for later make_pipeline() calls.
  void set_balance(std::vector<int64_t> balance);
  /// Changes how the network is simulated (T, K, devices, balance) for
  /// later make_pipeline() calls, keeping its modules and weights: nothing
  /// is built again. Throws snn::Error naming a bad value (a device count
  /// above the layers, a balance cutting a cycle, ...).
  void set_simulation(const SimulationConfig& simulation);
  /// Input images [B, ...] uint8 or float in [0, 1] -> [B, features] float32.
  torch::Tensor prepare_input(const torch::Tensor& images) const;
  /// The modules of a graph network (config().graph set); null for a chain.
  const GraphModel* graph_model() const { return graph_model_.get(); }

 private:
  std::shared_ptr<GraphModel> graph_model_;
  NetworkConfig config_;
  PoissonEncoder encoder_{nullptr};
  std::vector<Linear> synapses_;
  std::vector<torch::nn::AnyModule> neuron_modules_;
  std::vector<std::shared_ptr<NeuronLayer>> neurons_;
  std::vector<double> measured_seconds_;
  int64_t part_first_ = 0, part_count_ = 0;  // set_pipeline_part; count 0: whole
  PipelineLinks part_links_;
};

/// Splits items with the given costs, in order, into `groups` contiguous
/// non-empty groups minimising the largest group's total cost (ties: the
/// earliest groups take the most items). Returns the group sizes.
std::vector<int64_t> balanced_partition(const std::vector<double>& costs, int64_t groups);

}  // namespace snn
