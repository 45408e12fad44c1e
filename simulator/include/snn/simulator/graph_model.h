#pragma once
/// The modules of a network graph that is not a plain chain (skip
/// connections, recurrence through a Delay, convolution and pooling), and the
/// pipeline stages that run it. SpikingNetwork uses this for such graphs;
/// chains keep their fused Linear+neuron path.
///
/// Execution, per block of K steps [K, B, ...] (the pipeline's tick):
///   - nodes run in an order where every edge points forward (the graph's
///     step order, strongly connected parts collapsed); a node's input is
///     the sum of its sources in edge order;
///   - a node outside any cycle computes the whole block at once;
///   - a cycle (it passes through a Delay) runs step by step inside the
///     block: at step k the Delay gives its input of step k - d, then the
///     cycle's nodes compute step k. Results do not depend on K;
///   - Conv2d is im2col (exact copies) followed by snn::Linear's fixed-order
///     sums, so a sample's result never depends on the batch it is in; the
///     pools are LibTorch's (each output is its own window's sum or max).
/// Stages are contiguous cuts of that order, holding `balance[s]` neuron
/// nodes each (a 2 x 2 max pool that alone reads a stage's last neuron
/// layer stays in its stage); a cut inside a cycle is refused. What
/// crosses a cut (every value used on both sides) travels as one
/// [K, B, F] float tensor.

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "snn/graph/graph.h"
#include "snn/neurons/lif.h"
#include "snn/neurons/linear.h"

namespace snn {

class GraphModel {
 public:
  /// Builds the modules of a validated graph; weights the graph lacks come
  /// from LibTorch's generator (the caller seeds it). Throws snn::Error
  /// naming a node whose parameters a layer refuses, or an Output that is
  /// not fed by the last neuron layer alone.
  /// `seed`: the network's, from which each Dropout node draws its masks.
  explicit GraphModel(const graph::Graph& graph, uint64_t seed = 0);
  GraphModel(const GraphModel&) = delete;  // the units point into graph_
  GraphModel& operator=(const GraphModel&) = delete;

  /// The graph with the current weights (for export and checkpoints).
  graph::Graph graph_with_weights() const;
  const graph::GraphShapes& shapes() const { return shapes_; }
  /// Parameters as "<node>.weight", "<node>.bias" (synapses, BatchNorm),
  /// "<node>.w" (PLIF), in execution order.
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;
  /// State that is not trained but saved: "<node>.running_mean" and
  /// "<node>.running_var" of each BatchNorm, in execution order.
  std::vector<std::pair<std::string, torch::Tensor>> named_buffers() const;
  /// Every synapse module (Affine, Linear, Conv2d and its groups), in execution order.
  std::vector<Linear> linear_layers() const;
  /// The BatchNorm nodes' names, in execution order.
  std::vector<std::string> batch_norm_nodes() const;
  /// The training epoch, which keys the Dropout nodes' masks.
  void set_epoch(int64_t epoch);
  /// The neuron layers in execution order, their node names, and the sizes
  /// of the input and of each neuron layer (NetworkConfig::layers).
  const std::vector<std::shared_ptr<NeuronLayer>>& neuron_layers() const { return neurons_; }
  const std::vector<std::string>& neuron_names() const { return neuron_names_; }
  std::vector<int64_t> layer_sizes() const;
  /// The even split into `stages` stages that cuts no cycle (neuron layers
  /// per stage), and a check that `balance` cuts none (throws snn::Error
  /// naming the cycle otherwise).
  std::vector<int64_t> even_balance(int64_t stages) const;
  void check_balance(const std::vector<int64_t>& balance) const;
  /// Neuron layers per cycle-free group, in order: the units a balance can
  /// split between (1 for a layer outside cycles, the cycle's layers for one).
  std::vector<int64_t> atomic_groups() const;
  /// One module per stage; stage s takes what crosses the cut before it (the
  /// first: the encoded input [K, B, numel]) and returns what crosses the
  /// next one (the last: the Output's value [K, B, classes]).
  std::vector<torch::nn::AnyModule> make_stages(const std::vector<int64_t>& balance) const;
  /// Seconds each atomic group takes on `spikes` [T, B, input numel] (one
  /// stage, from reset, no gradient; a group's synapses and the nodes
  /// before it count with it, as make_stages assigns them): the costs that
  /// --balance auto splits.
  std::vector<double> time_groups(const torch::Tensor& spikes) const;
  /// Neuron layers per stage from atomic groups per stage.
  std::vector<int64_t> layers_of_groups(const std::vector<int64_t>& groups_per_stage) const;

  struct Unit;     // a node, or a cycle run step by step
  struct Modules;  // the nodes' modules, shared with the stages

 private:
  graph::Graph graph_;
  graph::GraphShapes shapes_;
  std::vector<std::shared_ptr<Unit>> units_;  // execution order
  std::vector<std::shared_ptr<NeuronLayer>> neurons_;
  std::vector<std::string> neuron_names_;
  std::shared_ptr<Modules> modules_;
};

/// The neuron layers' node names in execution order (recordings' population
/// names), without building the modules.
std::vector<std::string> graph_neuron_names(const graph::Graph& graph);

}  // namespace snn
