#pragma once
/// The human-written form of a network graph: TOML or JSON (docs/GRAPHS.md).
///
///   [[nodes]]                       # TOML: one table per node, in order
///   name = "input"
///   kind = "Input"
///   shape = [784]
///
///   [[nodes]]
///   name = "fc0"
///   kind = "Affine"
///   features = 256                  # weights initialised from the seed
///
///   [[nodes]]
///   name = "lif0"
///   kind = "LIF"
///   tau = 2.0                       # steps; SpikingJelly's parameters
///
/// A node takes its input from the node before it unless it says
/// `from = "name"` or `from = ["a", "b"]` (skip connections, recurrence:
/// the inputs are summed). JSON: {"nodes": [{"name": ..., "kind": ...}, ...]}
/// with the same keys. Unset neuron keys take snnsim train's defaults (LIF
/// tau 2, threshold 1, reset 0, decay_input, surrogate atan:2). Weights are not written here: a graph file says what
/// the network is, a checkpoint or a .nir file also what it learned.

#include <string>

#include "snn/graph/graph.h"

namespace snn::graph {

/// Parses a graph from TOML, or JSON when the text starts with '{'. `where`
/// names the source in errors ("model 'net.toml'"). Throws snn::Error with
/// one line naming the node and key (an unknown kind or key, a value of the
/// wrong type) or, for a syntax error, the line. Does not validate().
Graph parse_graph_text(const std::string& text, const std::string& where);
/// Reads and parses a file as parse_graph_text.
Graph read_graph_text(const std::string& path);
/// The graph's structure as JSON in the form parse_graph_text reads (every
/// node with its `from`; weights and per-neuron arrays left out).
std::string graph_to_json(const Graph& graph);

}  // namespace snn::graph
