#pragma once
/// Networks and their graphs (snn/graph): the graph of a SpikingNetwork, for
/// export, and the SpikingNetwork of a graph, for `--model` files.
///
/// The graph of a network with layers 784-256-10 is the chain
///   input (Input [784]) -> fc0 (Affine) -> lif0 (LIF) -> fc1 -> lif1 -> output
/// (neuron nodes IF, LIF or PLIF as the network's model). Chains of this
/// shape run through the fused Linear+neuron path; other graphs (skip
/// connections, recurrence through a Delay, conv and pooling) through
/// GraphModel (graph_model.h).

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "snn/graph/graph.h"
#include "snn/simulator/network.h"

namespace snn {

/// The network as a graph, with its current weights (and PLIF rates).
graph::Graph network_graph(const SpikingNetwork& network);

/// What a chain graph defines: the layer sizes and neuron dynamics of a
/// NetworkConfig (other fields at their defaults), and its parameters named
/// as SpikingNetwork::named_parameters() when the graph has weights (empty
/// when it has none: the network initialises them from its seed).
struct ChainModel {
  std::vector<int64_t> layers;
  NeuronParams neuron;
  std::vector<std::string> layer_names;  ///< the neuron nodes' names, in order
  std::vector<std::pair<std::string, torch::Tensor>> parameters;
};
/// Validates `graph` and reads it as a chain. Throws snn::Error naming the
/// node and why it is not simulated yet (a kind other than Affine, Linear and
/// LIF/IF/PLIF, a node with several inputs or outputs, neuron layers with
/// different dynamics or per-neuron parameters, an Input with encoding
/// "direct").
ChainModel chain_model(const graph::Graph& graph);

/// Reads a model file: NIR (an HDF5 file with /version and /node; steps of
/// `nir_dt` seconds, default the file's own or 1e-4), else TOML or JSON
/// (graph_text.h); validated. Throws snn::Error naming the file and problem.
graph::Graph read_model_file(const std::string& path, std::optional<double> nir_dt = std::nullopt);

/// A network built from a model file (config: its chain, or the graph
/// itself when it is not one; `base`'s other fields; parameters from the file
/// when it has them). Throws as read_model_file, or naming a node snnsim
/// does not simulate yet.
std::unique_ptr<SpikingNetwork> network_from_model(const std::string& path, NetworkConfig base = {},
                                                   std::optional<double> nir_dt = std::nullopt);

/// The network as inference runs it (`snnsim run`): a graph network with
/// BatchNorm or Dropout nodes built again from graph::fold_for_inference of
/// its graph and weights, its simulation kept; nullptr when there is
/// nothing to fold. Its spikes are those of its NIR export.
std::unique_ptr<SpikingNetwork> inference_network(const SpikingNetwork& network);

}  // namespace snn
