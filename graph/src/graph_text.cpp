#include "snn/graph/graph_text.h"

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "snn/core/error.h"

namespace snn::graph {
namespace {

using nlohmann::json;

// The keys each kind reads, beside name, kind and from.
const std::set<std::string> kNeuronKeys = {"tau",          "decay_input", "v_threshold", "v_reset",
                                           "detach_reset", "surrogate",   "refractory",  "size"};

std::set<std::string> keys_of(NodeKind kind) {
  switch (kind) {
    case NodeKind::kInput:
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
    case NodeKind::kDelay:
      return {"delay", "size", "shape"};
    case NodeKind::kLIF:
    case NodeKind::kIF:
    case NodeKind::kPLIF:
      return kNeuronKeys;
    default:
      return {};
  }
}

struct Reader {
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
  int64_t integer(const char* key) const { return get<int64_t>(key, "an integer"); }
  double number(const char* key) const {
    if (!j.at(key).is_number()) fail(std::string("'") + key + "' must be a number, got " + j.at(key).dump());
    return j.at(key).get<double>();
  }
  bool boolean(const char* key) const { return get<bool>(key, "true or false"); }
  std::vector<int64_t> ints(const char* key) const {
    if (j.at(key).is_number_integer()) return {j.at(key).get<int64_t>()};
    return get<std::vector<int64_t>>(key, "an integer or a list of integers");
  }
  // A window parameter: one integer for both dims, or [h, w].
  std::vector<int64_t> pair(const char* key) const {
    std::vector<int64_t> v = ints(key);
    if (v.size() == 1) v.push_back(v[0]);
    return v;
  }
};

Node read_node(const json& j, const std::string& where, size_t index) {
  if (!j.is_object()) throw Error(where + ": node " + std::to_string(index + 1) + " is not a table/object");
  Reader r{j, where, ""};
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
  if (r.has("features")) n.features = r.integer("features");
  if (r.has("kernel_size")) n.kernel_size = r.pair("kernel_size");
  if (r.has("stride")) n.stride = r.pair("stride");
  if (r.has("padding")) n.padding = r.pair("padding");
  if (r.has("dilation")) n.dilation = r.pair("dilation");
  if (r.has("groups")) n.groups = r.integer("groups");
  if (r.has("start_dim")) n.start_dim = r.integer("start_dim");
  if (r.has("end_dim")) n.end_dim = r.integer("end_dim");
  if (r.has("delay")) n.delay = r.integer("delay");
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
  if (n.kind == NodeKind::kLIF || n.kind == NodeKind::kIF || n.kind == NodeKind::kPLIF) {
    NeuronParams& p = n.neuron;
    p.surrogate = Surrogate::atan();  // snnsim train's default, so that a graph and --layers agree
    p.model = n.kind == NodeKind::kIF ? NeuronModel::kIF : n.kind == NodeKind::kPLIF ? NeuronModel::kParametricLIF
                                                                                      : NeuronModel::kLIF;
    if (r.has("tau")) p.tau = r.number("tau");
    if (r.has("decay_input")) p.decay_input = r.boolean("decay_input");
    if (r.has("v_threshold")) p.v_threshold = r.number("v_threshold");
    if (r.has("v_reset")) {
      if (j.at("v_reset").is_string() && j.at("v_reset").get<std::string>() == "none") {
        p.v_reset = std::nullopt;
      } else {
        if (!j.at("v_reset").is_number()) r.fail("'v_reset' must be a number or \"none\" (soft reset), got " + j.at("v_reset").dump());
        p.v_reset = j.at("v_reset").get<double>();
      }
    }
    if (r.has("detach_reset")) p.detach_reset = r.boolean("detach_reset");
    if (r.has("surrogate")) {
      try {
        p.surrogate = Surrogate::parse(r.get<std::string>("surrogate", "a string such as \"sigmoid:4\""));
      } catch (const Error& e) {
        r.fail(e.what());
      }
    }
    if (r.has("refractory")) p.refractory = r.integer("refractory");
  }
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
  const size_t first = text.find_first_not_of(" \t\r\n");
  json doc;
  if (first != std::string::npos && text[first] == '{') {
    try {
      doc = json::parse(text);
    } catch (const json::parse_error& e) {
      throw Error(where + " (JSON): " + e.what());
    }
  } else {
    toml::table table;
    try {
      table = toml::parse(text);
    } catch (const toml::parse_error& e) {
      throw Error(where + " (TOML), line " + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
    }
    std::ostringstream as_json;
    as_json << toml::json_formatter{table};
    doc = json::parse(as_json.str());
  }
  return graph_from_json(doc, where);
}

Graph read_graph_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("model '" + path + "': cannot open it");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_graph_text(text, "model '" + path + "'");
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
      case NodeKind::kDelay:
        j["delay"] = n.delay;
        if (!n.shape.empty()) j["shape"] = n.shape;
        break;
      case NodeKind::kLIF:
      case NodeKind::kIF:
      case NodeKind::kPLIF: {
        const NeuronParams& p = n.neuron;
        if (n.kind != NodeKind::kIF) {
          j["tau"] = p.tau;
          j["decay_input"] = p.decay_input;
        }
        j["v_threshold"] = p.v_threshold;
        j["v_reset"] = p.v_reset ? json(*p.v_reset) : json("none");
        j["detach_reset"] = p.detach_reset;
        j["surrogate"] = surrogate_spec(p.surrogate);
        j["refractory"] = p.refractory;
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
