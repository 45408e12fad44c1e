#include "snn/graph/graph_text.h"

#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "snn/core/error.h"
#include "snn/core/text_file.h"
#include "snn/graph/detail/text_document.h"

namespace snn::graph {
namespace {

using nlohmann::json;

// The keys each kind reads, beside name, kind and from.
const std::set<std::string> kNeuronKeys = {"tau",          "decay_input", "v_threshold", "v_reset",
                                           "detach_reset", "surrogate",   "refractory",  "size"};
// The options every spiking kind keeps beside its dynamics.
const std::set<std::string> kSpikeKeys = {"detach_reset", "surrogate", "refractory"};

std::set<std::string> keys_of(NodeKind kind) {
  switch (kind) {
    case NodeKind::kInput:
      return {"shape", "encoding"};
    case NodeKind::kOutput:
      return {"shape"};
    case NodeKind::kAffine:
    case NodeKind::kLinear:
      return {"features"};
    case NodeKind::kConv2d:
      return {"features", "kernel_size", "stride", "padding", "dilation", "groups"};
    case NodeKind::kSumPool2d:
    case NodeKind::kAvgPool2d:
    case NodeKind::kMaxPool2d:
      return {"kernel_size", "stride", "padding"};
    case NodeKind::kFlatten:
      return {"start_dim", "end_dim"};
    case NodeKind::kScale:
      return {"scale"};
    case NodeKind::kBatchNorm:
      return {"eps", "momentum"};
    case NodeKind::kDropout:
      return {"p"};
    case NodeKind::kDelay:
      return {"delay", "size", "shape"};
    case NodeKind::kPLIF:
      return kNeuronKeys;
    case NodeKind::kLIF:
    case NodeKind::kIF: {
      std::set<std::string> k = kNeuronKeys;
      k.insert("r");
      if (kind == NodeKind::kLIF) k.insert("v_leak");
      return k;
    }
    case NodeKind::kLI:
    case NodeKind::kCubaLIF:
    case NodeKind::kCubaLI:
    case NodeKind::kThreshold: {
      std::set<std::string> k(dynamics_keys(kind).begin(), dynamics_keys(kind).end());
      k.insert("size");
      if (is_spiking(kind)) k.insert("surrogate");
      if (kind == NodeKind::kCubaLIF) k.insert(kSpikeKeys.begin(), kSpikeKeys.end());
      return k;
    }
    default:
      return {};
  }
}

struct JsonReader {
  const json& j;
  const std::string& where;
  std::string node;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(where + (node.empty() ? "" : ", node '" + node + "'") + ": " + what);
  }
  bool has(const char* key) const { return j.contains(key); }
  template <typename T>
  T get(const char* key, const char* type) const {
    try {
      return j.at(key).get<T>();
    } catch (const json::exception&) {
      fail(std::string("'") + key + "' must be " + type + ", got " + j.at(key).dump());
    }
  }
  // (json's get<int64_t> would truncate 2.5 to 2: a whole number is
  // checked first. 32.0 is one, as NIR files give them.)
  static bool whole(const json& v) {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return d == std::floor(d) && std::fabs(d) < 9.0e15;
  }
  static int64_t whole_value(const json& v) {
    return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
  }
  int64_t integer(const char* key) const {
    if (!whole(j.at(key))) fail(std::string("'") + key + "' must be an integer, got " + j.at(key).dump());
    return whole_value(j.at(key));
  }
  double number(const char* key) const {
    if (!j.at(key).is_number()) fail(std::string("'") + key + "' must be a number, got " + j.at(key).dump());
    return j.at(key).get<double>();
  }
  bool boolean(const char* key) const { return get<bool>(key, "true or false"); }
  std::vector<int64_t> ints(const char* key) const {
    const json& v = j.at(key);
    if (whole(v)) return {whole_value(v)};
    if (!v.is_array() || !std::all_of(v.begin(), v.end(), whole)) {
      fail(std::string("'") + key + "' must be an integer or a list of integers, got " + v.dump());
    }
    std::vector<int64_t> out;
    for (const json& x : v) out.push_back(whole_value(x));
    return out;
  }
  // A neuron parameter: one number for every neuron, or a flat list with
  // one per neuron (in neuron-id order), as a float64 tensor.
  torch::Tensor values(const char* key) const {
    const json& v = j.at(key);
    if (v.is_number()) return torch::tensor(v.get<double>(), torch::kDouble);
    if (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); })) {
      return torch::tensor(v.get<std::vector<double>>(), torch::kDouble);
    }
    fail(std::string("'") + key + "' must be a number or a flat list of numbers (one per neuron), got " +
         (v.dump().size() > 60 ? v.dump().substr(0, 60) + "..." : v.dump()));
  }
  // A window parameter: one integer for both dims, or [h, w].
  std::vector<int64_t> pair(const char* key) const {
    std::vector<int64_t> v = ints(key);
    if (v.size() == 1) v.push_back(v[0]);
    return v;
  }
};

// A neuron node's keys: SpikingJelly's scalar form for LIF, IF and PLIF, the
// general form (graph.h, Node::arrays) for the other kinds and for a LIF or
// IF given r, v_leak or a per-neuron list.
void read_neuron(const JsonReader& r, Node& n) {
  const json& j = r.j;
  NeuronParams& p = n.neuron;
  p.surrogate = Surrogate::atan();  // snnsim train's default, so that a graph and --layers agree
  p.model = n.kind == NodeKind::kIF ? NeuronModel::kIF : n.kind == NodeKind::kPLIF ? NeuronModel::kParametricLIF
                                                                                    : NeuronModel::kLIF;
  if (r.has("detach_reset")) p.detach_reset = r.boolean("detach_reset");
  if (r.has("surrogate")) {
    try {
      p.surrogate = Surrogate::parse(r.get<std::string>("surrogate", "a string such as \"sigmoid:4\""));
    } catch (const Error& e) {
      r.fail(e.what());
    }
  }
  if (r.has("refractory")) p.refractory = r.integer("refractory");
  bool soft = false;
  if (r.has("v_reset") && j.at("v_reset").is_string()) {
    if (j.at("v_reset").get<std::string>() != "none") {
      r.fail("'v_reset' must be a number, a list of numbers or \"none\" (soft reset), got " + j.at("v_reset").dump());
    }
    soft = true;
    p.v_reset = std::nullopt;
  }
  bool general = n.kind != NodeKind::kLIF && n.kind != NodeKind::kIF && n.kind != NodeKind::kPLIF;
  for (const char* key : {"r", "v_leak"}) general |= r.has(key);
  for (const char* key : {"tau", "v_threshold", "v_reset"}) general |= r.has(key) && j.at(key).is_array();
  if (general && n.kind == NodeKind::kPLIF) {
    r.fail("a PLIF node takes one value per key (its tau is learned as one number); use LIF for per-neuron parameters");
  }
  if (!general) {
    if (r.has("tau")) p.tau = r.number("tau");
    if (r.has("decay_input")) p.decay_input = r.boolean("decay_input");
    if (r.has("v_threshold")) p.v_threshold = r.number("v_threshold");
    if (r.has("v_reset") && !soft) p.v_reset = r.number("v_reset");
    return;
  }
  if (r.has("decay_input") && r.has("r")) {
    r.fail("give 'r' or 'decay_input', not both (decay_input = true is r = 1, false is r = tau)");
  }
  for (const auto& key : dynamics_keys(n.kind)) {
    if (key == "v_reset" && soft) {
      n.arrays[key] = torch::tensor(0.0, torch::kDouble);  // unused: a soft reset subtracts the threshold
    } else if (r.has(key.c_str())) {
      n.arrays[key] = r.values(key.c_str());
    } else if (key == "r" && n.kind == NodeKind::kLIF && r.has("decay_input") && !r.boolean("decay_input")) {
      n.arrays[key] = n.arrays.at("tau").clone();  // SpikingJelly's decay_input = false
    } else if (key == "v_leak" && n.arrays.count("v_reset") == 0 && r.has("v_reset") && !soft) {
      n.arrays[key] = r.values("v_reset");  // leak toward the reset value, as SpikingJelly's LIF
    } else {
      n.arrays[key] = torch::tensor(dynamics_default(key), torch::kDouble);
    }
  }
  if (r.has("decay_input") && n.kind != NodeKind::kLIF) r.fail("'decay_input' is a LIF key");
  if (r.has("tau") && n.kind == NodeKind::kIF) r.fail("an IF node has no tau");
}

Node read_node(const json& j, const std::string& where, size_t index) {
  if (!j.is_object()) throw Error(where + ": node " + std::to_string(index + 1) + " is not a table/object");
  JsonReader r{j, where, ""};
  if (!j.contains("name")) r.fail("node " + std::to_string(index + 1) + " has no 'name'");
  Node n;
  n.name = r.get<std::string>("name", "a string");
  r.node = n.name;
  if (!j.contains("kind")) r.fail("no 'kind' (one of " + known_node_kinds() + ")");
  const std::string kind = r.get<std::string>("kind", "a string");
  const auto k = parse_node_kind(kind);
  if (!k) r.fail("unknown kind '" + kind + "' (known: " + known_node_kinds() + ")");
  n.kind = *k;
  const std::set<std::string> allowed = keys_of(n.kind);
  for (const auto& [key, value] : j.items()) {
    if (key == "name" || key == "kind" || key == "from") continue;
    if (!allowed.count(key)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      r.fail("a " + kind + " node has no key '" + key + "'" + (list.empty() ? "" : " (its keys: " + list + ")"));
    }
  }
  if (r.has("shape")) n.shape = r.ints("shape");
  if (r.has("size")) n.shape = r.ints("size");
  if (r.has("encoding")) n.encoding = r.get<std::string>("encoding", "a string (poisson or direct)");
  if (r.has("features")) n.features = r.integer("features");
  if (r.has("kernel_size")) n.kernel_size = r.pair("kernel_size");
  if (r.has("stride")) n.stride = r.pair("stride");
  if (r.has("padding")) n.padding = r.pair("padding");
  if (r.has("dilation")) n.dilation = r.pair("dilation");
  if (r.has("groups")) n.groups = r.integer("groups");
  if (r.has("start_dim")) n.start_dim = r.integer("start_dim");
  if (r.has("end_dim")) n.end_dim = r.integer("end_dim");
  if (r.has("delay")) n.delay = r.integer("delay");
  if (r.has("eps")) n.eps = r.number("eps");
  if (r.has("momentum")) n.momentum = r.number("momentum");
  if (r.has("p")) n.p = r.number("p");
  if ((n.kind == NodeKind::kSumPool2d || n.kind == NodeKind::kAvgPool2d || n.kind == NodeKind::kMaxPool2d) &&
      !r.has("stride")) {
    n.stride = n.kernel_size;  // PyTorch's default: windows side by side
  }
  if (r.has("scale")) {
    if (j.at("scale").is_number()) {
      r.fail("'scale' must be a list of numbers, one per element (of the node's input shape)");
    }
    const auto v = r.get<std::vector<float>>("scale", "a list of numbers");
    n.scale = torch::tensor(v, torch::kFloat);
  }
  if (is_neuron(n.kind)) read_neuron(r, n);
  return n;
}

Graph graph_from_json(const json& doc, const std::string& where) {
  if (!doc.is_object()) throw Error(where + ": expected a table of nodes");
  for (const auto& [key, value] : doc.items()) {
    if (key != "nodes") throw Error(where + ": unknown top-level key '" + key + "' (a graph file has 'nodes')");
  }
  if (!doc.contains("nodes") || !doc.at("nodes").is_array() || doc.at("nodes").empty()) {
    throw Error(where + ": no nodes (a graph file is a list of [[nodes]] tables)");
  }
  Graph g;
  const json& nodes = doc.at("nodes");
  for (size_t i = 0; i < nodes.size(); ++i) g.nodes.push_back(read_node(nodes[i], where, i));
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& j = nodes[i];
    const std::string& name = g.nodes[i].name;
    if (j.contains("from")) {
      std::vector<std::string> from;
      if (j.at("from").is_string()) {
        from = {j.at("from").get<std::string>()};
      } else if (j.at("from").is_array() && std::all_of(j.at("from").begin(), j.at("from").end(),
                                                         [](const json& x) { return x.is_string(); })) {
        from = j.at("from").get<std::vector<std::string>>();
      } else {
        throw Error(where + ", node '" + name + "': 'from' must be a node name or a list of them, got " + j.at("from").dump());
      }
      for (const auto& s : from) g.edges.push_back({s, name});
    } else if (g.nodes[i].kind != NodeKind::kInput) {
      if (i == 0) throw Error(where + ", node '" + name + "': the first node takes no input; make it an Input or give 'from'");
      g.edges.push_back({g.nodes[i - 1].name, name});
    }
  }
  return g;
}

}  // namespace

Graph parse_graph_text(const std::string& text, const std::string& where) {
  const json doc = detail::parse_text_document(text, where);
  return graph_from_json(doc, where);
}

Graph read_graph_text(const std::string& path) {
  const std::string where = "model '" + path + "'";
  return parse_graph_text(read_text_file(path, where), where);
}

std::string graph_to_json(const Graph& graph) {
  json nodes = json::array();
  for (const auto& n : graph.nodes) {
    json j{{"name", n.name}, {"kind", to_string(n.kind)}};
    const auto from = graph.sources_of(n.name);
    if (n.kind != NodeKind::kInput) j["from"] = from;
    switch (n.kind) {
      case NodeKind::kInput:
      case NodeKind::kOutput:
        if (!n.shape.empty()) j["shape"] = n.shape;
        if (n.kind == NodeKind::kInput && n.encoding != "poisson") j["encoding"] = n.encoding;
        break;
      case NodeKind::kAffine:
      case NodeKind::kLinear:
        j["features"] = n.weight.defined() ? n.weight.size(0) : n.features;
        break;
      case NodeKind::kConv2d:
        j["features"] = n.weight.defined() ? n.weight.size(0) : n.features;
        j["dilation"] = n.dilation;
        j["groups"] = n.groups;
        [[fallthrough]];
      case NodeKind::kSumPool2d:
      case NodeKind::kAvgPool2d:
      case NodeKind::kMaxPool2d:
        j["kernel_size"] = n.kernel_size;
        j["stride"] = n.stride;
        j["padding"] = n.padding;
        break;
      case NodeKind::kFlatten:
        j["start_dim"] = n.start_dim;
        j["end_dim"] = n.end_dim;
        break;
      case NodeKind::kScale:
        if (n.scale.defined()) {
          const torch::Tensor f = n.scale.detach().to(torch::kCPU, torch::kFloat).contiguous().reshape({-1});
          j["scale"] = std::vector<float>(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
        }
        break;
      case NodeKind::kBatchNorm:
        j["eps"] = n.eps;
        j["momentum"] = n.momentum;
        break;
      case NodeKind::kDropout:
        j["p"] = n.p;
        break;
      case NodeKind::kDelay:
        j["delay"] = n.delay;
        if (!n.shape.empty()) j["shape"] = n.shape;
        break;
      case NodeKind::kLIF:
      case NodeKind::kIF:
      case NodeKind::kPLIF:
      case NodeKind::kLI:
      case NodeKind::kCubaLIF:
      case NodeKind::kCubaLI:
      case NodeKind::kThreshold: {
        const NeuronParams& p = n.neuron;
        if (has_general_dynamics(n)) {
          for (const auto& [key, t] : n.arrays) {
            const torch::Tensor f = t.detach().to(torch::kCPU, torch::kDouble).contiguous().reshape({-1});
            if (t.dim() == 0) {
              j[key] = f[0].item<double>();
            } else {
              j[key] = std::vector<double>(f.data_ptr<double>(), f.data_ptr<double>() + f.numel());
            }
          }
          if (!p.v_reset && j.contains("v_reset")) j["v_reset"] = "none";
        } else {
          if (n.kind != NodeKind::kIF) {
            j["tau"] = p.tau;
            j["decay_input"] = p.decay_input;
          }
          j["v_threshold"] = p.v_threshold;
          j["v_reset"] = p.v_reset ? json(*p.v_reset) : json("none");
        }
        if (is_spiking(n.kind)) j["surrogate"] = surrogate_spec(p.surrogate);
        if (n.kind == NodeKind::kLIF || n.kind == NodeKind::kIF || n.kind == NodeKind::kPLIF ||
            n.kind == NodeKind::kCubaLIF) {
          j["detach_reset"] = p.detach_reset;
          j["refractory"] = p.refractory;
        }
        if (!n.shape.empty()) j["size"] = n.shape.size() == 1 ? json(n.shape[0]) : json(n.shape);
        break;
      }
      default:
        break;
    }
    nodes.push_back(j);
  }
  return json{{"nodes", nodes}}.dump(2);
}

}  // namespace snn::graph
