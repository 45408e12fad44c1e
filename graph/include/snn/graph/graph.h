#pragma once
/// What a network is, as a graph: named nodes (inputs, synapses, neuron
/// layers, shape and time operators) and directed edges between them, in
/// NIR's vocabulary where NIR has a word (docs/GRAPHS.md). How it is
/// simulated (T, K, devices, balance, threads) is not part of it.
///
/// Semantics shared by every node: values flow along edges once per time
/// step; a node with several incoming edges takes their sum; a cycle must
/// pass through a Delay node (at least one step), so every step is
/// computable from the past. Neuron parameters are in snnsim's discrete
/// units (steps, SpikingJelly's update); NIR's continuous parameters are
/// converted at the file's edge (nir_file.h), never here.

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "snn/neurons/functional.h"

namespace snn::graph {

/// The kinds of node. Names as in NIR ("Affine", "LIF", ...); PLIF and
/// MaxPool2d are snnsim's (NIR has no word for them).
enum class NodeKind {
  kInput,      ///< the network's input: `shape` per sample
  kOutput,     ///< the network's output: `shape` per sample
  kAffine,     ///< W x + b: weight [out, in], bias [out]
  kLinear,     ///< W x: weight [out, in]
  kConv2d,     ///< 2-D convolution: weight [out, in / groups, kh, kw], bias [out]
  kSumPool2d,  ///< sum over kernel windows
  kAvgPool2d,  ///< mean over kernel windows
  kMaxPool2d,  ///< max over kernel windows (snnsim extension)
  kFlatten,    ///< merges dims start_dim..end_dim of the per-sample shape
  kScale,      ///< x * scale, element-wise
  kBatchNorm,  ///< batch normalisation per channel (training; folded into its synapse for inference and export)
  kDropout,    ///< zeroes each element with probability p while training (counter-based masks)
  kDelay,      ///< x from `delay` steps ago (0 before the first steps)
  kLIF,        ///< leaky integrate-and-fire (SpikingJelly's LIFNode)
  kIF,         ///< integrate-and-fire (IFNode)
  kPLIF,       ///< LIF with a learned time constant (ParametricLIFNode; snnsim extension)
  kLI,         ///< leaky integrator (no spikes)
  kCubaLIF,    ///< current-based LIF (synaptic current state)
  kCubaLI,     ///< current-based leaky integrator
  kThreshold,  ///< spikes where x > threshold, no state
};

/// "Affine", "LIF", ... (NIR's type names; "PLIF", "MaxPool2d" for ours).
std::string to_string(NodeKind kind);
/// The kind of a type name, or nullopt for an unknown one.
std::optional<NodeKind> parse_node_kind(const std::string& name);
/// Every kind's name, for messages listing the known ones.
std::string known_node_kinds();
/// LIF, IF, PLIF, LI, CubaLIF, CubaLI, Threshold: the nodes with neurons.
bool is_neuron(NodeKind kind);
/// Whether the kind emits spikes (all neuron kinds but LI and CubaLI, which
/// emit their potential).
bool is_spiking(NodeKind kind);

/// One node. Which fields matter depends on `kind` (the comments say);
/// the rest keep their defaults and are ignored.
struct Node {
  std::string name;                 ///< unique within the graph; names recordings' populations
  NodeKind kind = NodeKind::kInput;
  /// Input, Output: the per-sample shape (no batch or time dims), e.g. {784}
  /// or {1, 28, 28}. Delay, Scale and neuron nodes: their shape, or empty to
  /// take it from the incoming edges (a Delay on a cycle must state it).
  std::vector<int64_t> shape;
  /// Input: how a network turns each image into its T steps of input.
  /// "poisson" (default): rate-coded spikes, one Bernoulli draw per pixel
  /// and step with the pixel's value as probability. "direct": the pixel
  /// values themselves at every step, as an analog current (SpikingJelly's
  /// CNN tutorials; the first layer then sees no encoding noise).
  std::string encoding = "poisson";
  /// Affine, Linear, Conv2d: float32 weights and (Affine, Conv2d) bias.
  /// Undefined = not given (a human-written graph): the network initialises
  /// them from its seed, with `features` outputs (out channels for Conv2d).
  torch::Tensor weight, bias;
  int64_t features = 0;
  /// Conv2d and the pools: window geometry, per spatial dim (h, w).
  std::vector<int64_t> kernel_size, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;  ///< Conv2d
  /// A NIR file's statement of the node's input: Conv2d's input_shape
  /// ([H, W]), Flatten's input_type; validate() refuses one that disagrees
  /// with the input the edges bring. Empty: not stated.
  std::vector<int64_t> declared_input;
  /// Flatten: the first and last per-sample dims merged (negative counts
  /// from the end); default all of them.
  int64_t start_dim = 0, end_dim = -1;
  torch::Tensor scale;  ///< Scale: float32 factors of `shape`
  int64_t delay = 1;    ///< Delay: steps, >= 1
  /// BatchNorm (snnsim's; NIR has none): weight and bias hold its per-channel
  /// scale and shift (undefined: 1 and 0), arrays "running_mean" and
  /// "running_var" its statistics (undefined: 0 and 1); channels are dim 0 of
  /// its per-sample shape.
  double eps = 1e-5;
  double momentum = 0.1;
  double p = 0.5;  ///< Dropout: the probability of zeroing an element, in [0, 1)
  /// Neuron nodes: the options every kind keeps (surrogate, detach_reset,
  /// refractory; v_reset nullopt = soft reset) and, for LIF, IF and PLIF
  /// without `arrays`, SpikingJelly's dynamics in steps (tau, v_threshold,
  /// v_reset, decay_input), which run on the fused kernels; `neuron.model`
  /// agrees with `kind`.
  NeuronParams neuron;
  /// The general dynamics of a neuron node (general_neuron.h), by NIR's
  /// parameter names (dynamics_keys) in snnsim's units: time constants in
  /// steps (NIR's tau / dt), an IF's r per step (NIR's r dt), potentials
  /// as given. Each a float64 tensor: 0-dim (every neuron alike), of the
  /// node's shape, or flat in neuron-id order. Set for LI, CubaLIF, CubaLI
  /// and Threshold always, for LIF and IF when their parameters differ
  /// between neurons or leave SpikingJelly's form (v_leak != v_reset, r
  /// other than 1 or tau); empty otherwise. PLIF: only "w", its learned
  /// parameter (0-dim), when known.
  std::map<std::string, torch::Tensor> arrays;
};

/// A directed edge: `source`'s output feeds `target`'s input.
struct Edge {
  std::string source, target;
  bool operator==(const Edge& o) const { return source == o.source && target == o.target; }
};

/// What validate() works out: each node's input and output shape per
/// sample, and an order in which the nodes can be computed within a step:
/// every edge points forward in it, except edges into a Delay on a cycle
/// (the Delay gives its past input, so it comes first).
struct GraphShapes {
  std::map<std::string, std::vector<int64_t>> input, output;
  std::vector<std::string> order;
  /// Steps from the Input to the Output (the latest Output where there are
  /// several): the least sum of Delay steps over the paths between them.
  /// The Output's step t carries the input of step t - latency, so a run of
  /// T <= latency steps never reaches it. Default 0 (no Delay on the way).
  int64_t latency = 0;
  /// The Delay nodes on that path, from the Input on.
  std::vector<std::string> latency_path;
};

/// A network graph: nodes in the order they were given, and edges.
struct Graph {
  std::vector<Node> nodes;
  std::vector<Edge> edges;

  /// The node called `name`; throws snn::Error when there is none.
  const Node& node(const std::string& name) const;
  Node& node(const std::string& name);
  bool has_node(const std::string& name) const;
  /// Sources of the edges into `name`, in edge order.
  std::vector<std::string> sources_of(const std::string& name) const;
  /// Targets of the edges out of `name`, in edge order.
  std::vector<std::string> targets_of(const std::string& name) const;

  /// Checks the whole graph and infers its shapes. Throws snn::Error with one
  /// line naming the node, edge or parameter and the problem: a duplicate or
  /// empty name, an edge naming no node, a node no edge reaches or leaves, no
  /// Input or Output, a shape mismatch along an edge, parameters of the
  /// wrong shape or value, a cycle without a Delay.
  GraphShapes validate() const;
};

/// The general parameters of a neuron kind, by NIR's names: LIF {tau, r,
/// v_leak, v_threshold, v_reset}, IF {r, v_threshold, v_reset}, LI {tau, r,
/// v_leak}, CubaLIF {tau_syn, tau_mem, r, v_leak, v_threshold, v_reset,
/// w_in}, CubaLI {tau_syn, tau_mem, r, v_leak, w_in}, Threshold
/// {threshold}; empty for PLIF and non-neuron kinds.
const std::vector<std::string>& dynamics_keys(NodeKind kind);
/// Whether a neuron node runs on the general dynamics (Node::arrays) rather
/// than SpikingJelly's fused layers.
bool has_general_dynamics(const Node& n);
/// A LIF, IF or general node's parameters in the general form, every key of
/// dynamics_keys: its arrays, or its SpikingJelly dynamics written that way
/// (LIF: r = 1 with decay_input, else tau; v_leak = v_reset, 0 when soft;
/// IF: r = 1). 0-dim tensors where a value is common to all neurons.
std::map<std::string, torch::Tensor> general_dynamics(const Node& n);
/// The default of a general parameter in a graph file (tau 2, tau_syn 2,
/// tau_mem 2, r 1, v_leak 0, v_threshold 1, v_reset 0, w_in 1, threshold 1).
double dynamics_default(const std::string& key);

/// The graph for inference: each BatchNorm folded into the synapse that
/// feeds it alone (weights and bias scaled and shifted in double, rounded
/// once), Dropout nodes removed. A BatchNorm that follows anything else
/// stays; its name is added to `unfolded` when given.
Graph fold_for_inference(const Graph& graph, std::vector<std::string>* unfolded = nullptr);

/// "[1, 28, 28]".
std::string shape_str(const std::vector<int64_t>& shape);
/// "sigmoid:4", "atan:2.5": the form Surrogate::parse reads, alpha with
/// every digit (graph files and NIR metadata write it).
std::string surrogate_spec(const Surrogate& surrogate);

}  // namespace snn::graph
