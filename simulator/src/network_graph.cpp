#include "snn/simulator/network_graph.h"

#include <algorithm>

#include "snn/core/error.h"
#include "snn/graph/graph_text.h"
#include "snn/graph/nir_file.h"
#include "snn/simulator/file_kind.h"
#include "snn/simulator/graph_model.h"

namespace snn {

using graph::Graph;
using graph::Node;
using graph::NodeKind;

namespace {

NodeKind kind_of(NeuronModel m) {
  switch (m) {
    case NeuronModel::kIF:
      return NodeKind::kIF;
    case NeuronModel::kParametricLIF:
      return NodeKind::kPLIF;
    default:
      return NodeKind::kLIF;
  }
}

bool same_dynamics(const NeuronParams& a, const NeuronParams& b) {
  return a.model == b.model && a.tau == b.tau && a.decay_input == b.decay_input && a.v_threshold == b.v_threshold &&
         a.v_reset == b.v_reset && a.detach_reset == b.detach_reset && a.surrogate.kind == b.surrogate.kind &&
         a.surrogate.alpha == b.surrogate.alpha && a.refractory == b.refractory;
}

[[noreturn]] void not_a_chain(const Node& n, const std::string& why) {
  throw Error("graph: node '" + n.name + "' (" + graph::to_string(n.kind) + ") " + why +
              "; snnsim simulates chains of Affine (or Linear) and LIF/IF/PLIF nodes so far");
}

}  // namespace

Graph network_graph(const SpikingNetwork& net) {
  if (net.graph_model()) return net.graph_model()->graph_with_weights();
  const NetworkConfig& c = net.config();
  Graph g;
  Node in;
  in.name = "input";
  in.kind = NodeKind::kInput;
  in.shape = {c.layers.front()};
  g.nodes.push_back(in);
  std::string prev = in.name;
  const auto named = net.named_parameters();
  const auto param = [&](const std::string& name) {
    for (const auto& [n, t] : named) {
      if (n == name) return t.detach().to(torch::kCPU).clone();
    }
    throw InternalError("no parameter " + name);
  };
  for (size_t i = 0; i + 1 < c.layers.size(); ++i) {
    Node fc;
    fc.name = "fc" + std::to_string(i);
    fc.kind = NodeKind::kAffine;
    fc.weight = param(fc.name + ".weight");
    fc.bias = param(fc.name + ".bias");
    Node lif;
    lif.name = c.layer_names.empty() ? "lif" + std::to_string(i) : c.layer_names[i];
    lif.kind = kind_of(c.neuron.model);
    lif.neuron = c.neuron;
    if (lif.kind == NodeKind::kPLIF) lif.arrays["w"] = param("lif" + std::to_string(i) + ".w");  // a chain's parameter name
    g.edges.push_back({prev, fc.name});
    g.edges.push_back({fc.name, lif.name});
    prev = lif.name;
    g.nodes.push_back(fc);
    g.nodes.push_back(lif);
  }
  Node out;
  out.name = "output";
  out.kind = NodeKind::kOutput;
  out.shape = {c.layers.back()};
  g.nodes.push_back(out);
  g.edges.push_back({prev, out.name});
  return g;
}

ChainModel chain_model(const Graph& g) {
  const graph::GraphShapes shapes = g.validate();
  // Walk from the one Input along single edges to the one Output.
  const Node* input = nullptr;
  for (const auto& n : g.nodes) {
    if (n.kind != NodeKind::kInput) continue;
    if (input) not_a_chain(n, "is a second Input");
    input = &n;
  }
  // The fused chain rate-codes its input; a direct one runs as a graph.
  if (input->encoding != "poisson") not_a_chain(*input, "takes its images directly (encoding " + input->encoding + ")");
  ChainModel m;
  m.layers.push_back(1);
  for (auto s : shapes.output.at(input->name)) m.layers[0] *= s;
  const Node* at = input;
  bool any_weights = false, no_weights = false;
  std::optional<NeuronParams> dynamics;
  torch::Tensor pending_weight, pending_bias;
  size_t layer = 0;
  for (;;) {
    const auto next = g.targets_of(at->name);
    if (next.size() != 1) not_a_chain(*at, "feeds " + std::to_string(next.size()) + " nodes");
    const Node& n = g.node(next[0]);
    if (g.sources_of(n.name).size() != 1) not_a_chain(n, "takes the sum of several inputs");
    if (n.kind == NodeKind::kOutput) {
      if (m.layers.size() == 1) not_a_chain(n, "follows the Input directly");
      if (m.layers.size() != layer + 1) not_a_chain(n, "follows a synapse, not a neuron layer");
      break;
    }
    if (n.kind == NodeKind::kFlatten && at == input) {
      at = &n;  // Input [C, H, W] -> Flatten: the chain's input is the flat vector
      continue;
    }
    if (n.kind == NodeKind::kAffine || n.kind == NodeKind::kLinear) {
      if (m.layers.size() != layer + 1) not_a_chain(n, "follows another synapse");
      m.layers.push_back(shapes.output.at(n.name)[0]);
      if (n.weight.defined()) {
        any_weights = true;
        pending_weight = n.weight;
        pending_bias = n.kind == NodeKind::kAffine && n.bias.defined() ? n.bias : torch::zeros({n.weight.size(0)});
      } else {
        no_weights = true;
      }
      if (any_weights && no_weights) not_a_chain(n, "has no weights while others have");
    } else if (n.kind == NodeKind::kLIF || n.kind == NodeKind::kIF || n.kind == NodeKind::kPLIF) {
      if (m.layers.size() != layer + 2) not_a_chain(n, "does not follow a synapse");
      const bool per_neuron = n.kind == NodeKind::kPLIF ? n.arrays.size() > 1 : !n.arrays.empty();
      if (per_neuron) not_a_chain(n, "has per-neuron parameters");
      if (dynamics && !same_dynamics(*dynamics, n.neuron)) {
        not_a_chain(n, "has other dynamics than the layers before it (one neuron setting for every layer so far)");
      }
      dynamics = n.neuron;
      m.layer_names.push_back(n.name);
      const std::string fc = "fc" + std::to_string(layer), lif = "lif" + std::to_string(layer);
      if (pending_weight.defined()) {
        m.parameters.emplace_back(fc + ".weight", pending_weight.to(torch::kFloat));
        m.parameters.emplace_back(fc + ".bias", pending_bias.to(torch::kFloat));
        pending_weight = pending_bias = torch::Tensor();
      }
      if (n.kind == NodeKind::kPLIF) {
        const auto it = n.arrays.find("w");
        if (it == n.arrays.end()) {
          if (any_weights) not_a_chain(n, "has no learned w while the synapses have weights");
        } else if (any_weights) {
          m.parameters.emplace_back(lif + ".w", it->second.to(torch::kFloat).reshape({}));
        }
      }
      ++layer;
    } else {
      not_a_chain(n, "is neither a synapse nor a LIF, IF or PLIF layer");
    }
    at = &n;
  }
  m.neuron = *dynamics;
  return m;
}

Graph read_model_file(const std::string& path, std::optional<double> nir_dt) {
  const bool nir = graph::is_nir_file(path);
  if (!nir) {
    // Any other HDF5 file (a checkpoint, a recording, a NIR file without
    // /version or cut short) would be read as TOML and fail on its bytes.
    const Hdf5Kind kind = hdf5_kind(path);
    if (kind != Hdf5Kind::kNotHdf5) {
      const bool other = kind == Hdf5Kind::kDamaged || kind == Hdf5Kind::kNirWithoutVersion;  // says what is wrong
      throw Error("model '" + path + "' is " + describe(kind) + (other ? "" : ", not a network graph") +
                  (kind == Hdf5Kind::kCheckpoint
                       ? ": simulate it with snnsim run --checkpoint, or continue its training with snnsim train --resume"
                       : ""));
    }
  }
  if (nir_dt && !nir) throw Error("--nir-dt applies to .nir files only; model '" + path + "' is a TOML or JSON graph");
  Graph g = nir ? graph::read_nir(path, nir_dt) : graph::read_graph_text(path);
  try {
    g.validate();
  } catch (const Error& e) {
    throw Error("model '" + path + "': " + e.what());
  }
  return g;
}

std::unique_ptr<SpikingNetwork> network_from_model(const std::string& path, NetworkConfig base,
                                                   std::optional<double> nir_dt) {
  const Graph g = read_model_file(path, nir_dt);
  ChainModel m;
  try {
    m = chain_model(g);
  } catch (const Error&) {
    // Not a chain: the graph executor runs it (weights from the file, or seeded).
    base.graph = std::make_shared<const Graph>(g);
    try {
      return std::make_unique<SpikingNetwork>(base);
    } catch (const Error& e) {
      throw Error("model '" + path + "': " + e.what());
    }
  }
  base.layers = m.layers;
  base.neuron = m.neuron;
  // Its nodes name the populations of its recordings, unless they are the
  // names --layers gives (an export of a --layers checkpoint read back).
  bool default_names = true;
  for (size_t i = 0; i < m.layer_names.size(); ++i) default_names &= m.layer_names[i] == "lif" + std::to_string(i);
  base.layer_names = default_names ? std::vector<std::string>{} : m.layer_names;
  auto net = std::make_unique<SpikingNetwork>(base);
  if (!m.parameters.empty()) {
    torch::NoGradGuard no_grad;
    const auto named = net->named_parameters();
    for (const auto& [name, param] : named) {
      bool found = false;
      for (const auto& [n, t] : m.parameters) {
        if (n != name) continue;
        param.copy_(t.reshape(param.sizes()));
        found = true;
      }
      if (!found) throw InternalError("chain_model gave no " + name);
    }
  }
  return net;
}

std::unique_ptr<SpikingNetwork> inference_network(const SpikingNetwork& network) {
  if (!network.graph_model()) return nullptr;
  const Graph& g = *network.config().graph;
  const bool any = std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) {
    return n.kind == NodeKind::kBatchNorm || n.kind == NodeKind::kDropout;
  });
  if (!any) return nullptr;
  NetworkConfig c = network.config();
  // The same neuron layers (folding removes no neuron), so the same placement.
  c.graph = std::make_shared<const Graph>(graph::fold_for_inference(network.graph_model()->graph_with_weights()));
  return std::make_unique<SpikingNetwork>(c);
}

}  // namespace snn
