#include "snn/graph/graph.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "snn/core/error.h"

namespace snn::graph {
namespace {

struct KindName {
  NodeKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {NodeKind::kInput, "Input"},         {NodeKind::kOutput, "Output"},       {NodeKind::kAffine, "Affine"},
    {NodeKind::kLinear, "Linear"},       {NodeKind::kConv2d, "Conv2d"},       {NodeKind::kSumPool2d, "SumPool2d"},
    {NodeKind::kAvgPool2d, "AvgPool2d"}, {NodeKind::kMaxPool2d, "MaxPool2d"}, {NodeKind::kFlatten, "Flatten"},
    {NodeKind::kScale, "Scale"},         {NodeKind::kBatchNorm, "BatchNorm"}, {NodeKind::kDropout, "Dropout"},
    {NodeKind::kDelay, "Delay"},         {NodeKind::kLIF, "LIF"},
    {NodeKind::kIF, "IF"},               {NodeKind::kPLIF, "PLIF"},           {NodeKind::kLI, "LI"},
    {NodeKind::kCubaLIF, "CubaLIF"},     {NodeKind::kCubaLI, "CubaLI"},       {NodeKind::kThreshold, "Threshold"},
};

[[noreturn]] void fail(const std::string& what) { throw Error("graph: " + what); }

std::vector<int64_t> tensor_shape(const torch::Tensor& t) { return t.sizes().vec(); }

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

// The largest size, count or window value a node may give (and the most
// values per sample a node's output may hold): the event kernels list a
// row's inputs by 32-bit index, and every product of two such values
// (dilation x kernel) fits in 64 bits, so no shape arithmetic below can
// overflow.
constexpr int64_t kMaxSize = 2147483647;  // 2^31 - 1

// Every integer of a node's geometry (features, kernel, stride, padding,
// dilation, groups, declared shape, delay) at most kMaxSize: a padding of
// 2^63 - 1 wrapped to -1 in the output size and trained another network.
void check_sizes(const Node& n) {
  const auto check = [&](const char* what, const std::vector<int64_t>& v) {
    for (auto x : v) {
      if (x > kMaxSize) {
        fail("node '" + n.name + "' (" + to_string(n.kind) + "): " + what + " " +
             (v.size() == 1 ? std::to_string(x) : shape_str(v)) + " is out of range (at most 2147483647)");
      }
    }
  };
  check("features", {n.features});
  check("kernel_size", n.kernel_size);
  check("stride", n.stride);
  check("padding", n.padding);
  check("dilation", n.dilation);
  check("groups", {n.groups});
  check("shape", n.shape);
  check("delay", {n.delay});
}

// A node's output: at most kMaxSize values per sample (counted without
// overflow).
void check_output_size(const Node& n, const std::vector<int64_t>& shape) {
  int64_t total = 1;
  for (auto s : shape) {
    if (s < 1) return;  // (an Input's own check names a size below 1)
    if (__builtin_mul_overflow(total, s, &total) || total > kMaxSize) {
      fail("node '" + n.name + "' (" + to_string(n.kind) + "): its output " + shape_str(shape) +
           " holds more than 2147483647 values per sample");
    }
  }
}

// The output size of a window op along one dim (PyTorch's formula).
int64_t window_out(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

void check_pair(const Node& n, const char* what, const std::vector<int64_t>& v, int64_t min) {
  if (v.size() != 2) fail("node '" + n.name + "': " + what + " needs 2 values (h, w), got " + shape_str(v));
  for (auto x : v) {
    if (x < min) fail("node '" + n.name + "': " + what + " " + shape_str(v) + " must be >= " + std::to_string(min));
  }
}

// Output shape of a Conv2d or pool node on `in` [C, H, W].
std::vector<int64_t> window_shape(const Node& n, const std::vector<int64_t>& in, int64_t out_channels) {
  if (in.size() != 3) fail("node '" + n.name + "' (" + to_string(n.kind) + ") takes [C, H, W], got " + shape_str(in));
  const bool conv = n.kind == NodeKind::kConv2d;
  check_pair(n, "kernel_size", n.kernel_size, 1);
  check_pair(n, "stride", n.stride, 1);
  check_pair(n, "padding", n.padding, 0);
  check_pair(n, "dilation", conv ? n.dilation : std::vector<int64_t>{1, 1}, 1);
  std::vector<int64_t> out{out_channels};
  for (int d = 0; d < 2; ++d) {
    const int64_t dil = conv ? n.dilation[d] : 1;
    const int64_t span = dil * (n.kernel_size[d] - 1) + 1;
    // A pool's window must hold some of the input: LibTorch's rule, checked
    // here so that the message names the node.
    if (!conv && 2 * n.padding[d] > n.kernel_size[d]) {
      fail("node '" + n.name + "' (" + to_string(n.kind) + "): padding " + shape_str(n.padding) +
           " must be at most half the kernel " + shape_str(n.kernel_size));
    }
    if (span > in[1 + d] + 2 * n.padding[d]) {
      fail("node '" + n.name + "': kernel " + shape_str(n.kernel_size) + (conv ? " (dilation " + shape_str(n.dilation) + ")" : "") +
           " is larger than the padded input " + shape_str(in) + " (padding " + shape_str(n.padding) + ")");
    }
    out.push_back(window_out(in[1 + d], n.kernel_size[d], n.stride[d], n.padding[d], dil));
  }
  return out;
}

void check_tensor_shape(const Node& n, const char* what, const torch::Tensor& t, const std::vector<int64_t>& want) {
  if (tensor_shape(t) != want) {
    fail("node '" + n.name + "': " + what + " has shape " + shape_str(tensor_shape(t)) + " but " + shape_str(want) +
         " is needed");
  }
}

// The output shape of node `n` given its input shape `in` (empty for Input).
std::vector<int64_t> output_shape(const Node& n, const std::vector<int64_t>& in) {
  if (!n.declared_input.empty()) {
    // NIR's Conv2d states [H, W] of its input, Flatten the whole shape.
    const bool spatial = n.kind == NodeKind::kConv2d && n.declared_input.size() == 2 && in.size() == 3;
    const std::vector<int64_t> actual = spatial ? std::vector<int64_t>(in.begin() + 1, in.end()) : in;
    if (actual != n.declared_input) {
      fail("node '" + n.name + "' (" + to_string(n.kind) + "): the file states its input as " +
           shape_str(n.declared_input) + " (" + (n.kind == NodeKind::kConv2d ? "input_shape" : "input_type") +
           ") but its input is " + shape_str(in));
    }
  }
  const auto same_or_declared = [&]() {
    if (!n.shape.empty() && n.shape != in) {
      fail("node '" + n.name + "' (" + to_string(n.kind) + ") has shape " + shape_str(n.shape) + " but its input is " +
           shape_str(in));
    }
    return in;
  };
  switch (n.kind) {
    case NodeKind::kInput:
      return n.shape;
    case NodeKind::kOutput:
      return same_or_declared();
    case NodeKind::kAffine:
    case NodeKind::kLinear: {
      if (in.size() != 1) {
        fail("node '" + n.name + "' (" + to_string(n.kind) + ") takes a vector, got " + shape_str(in) +
             " (put a Flatten before it)");
      }
      if (!n.weight.defined()) {
        if (n.features < 1) fail("node '" + n.name + "' has neither a weight nor a number of features (>= 1)");
        return {n.features};
      }
      if (n.weight.dim() != 2) fail("node '" + n.name + "': weight must be [out, in], got " + shape_str(tensor_shape(n.weight)));
      if (n.weight.size(1) != in[0]) {
        fail("node '" + n.name + "': weight " + shape_str(tensor_shape(n.weight)) + " takes " +
             std::to_string(n.weight.size(1)) + " inputs but its input is " + shape_str(in));
      }
      if (n.kind == NodeKind::kAffine && n.bias.defined()) check_tensor_shape(n, "bias", n.bias, {n.weight.size(0)});
      return {n.weight.size(0)};
    }
    case NodeKind::kConv2d: {
      int64_t out_channels = n.features;
      if (n.groups < 1) fail("node '" + n.name + "': groups must be >= 1, got " + std::to_string(n.groups));
      if (in.size() == 3 && in[0] % n.groups != 0) {
        fail("node '" + n.name + "': groups " + std::to_string(n.groups) + " do not divide the " + std::to_string(in[0]) +
             " input channels");
      }
      if (n.weight.defined()) {
        if (n.weight.dim() != 4) fail("node '" + n.name + "': weight must be [out, in/groups, kh, kw], got " + shape_str(tensor_shape(n.weight)));
        out_channels = n.weight.size(0);
        if (in.size() == 3 && n.weight.size(1) * n.groups != in[0]) {
          fail("node '" + n.name + "': weight " + shape_str(tensor_shape(n.weight)) + " with groups " +
               std::to_string(n.groups) + " takes " + std::to_string(n.weight.size(1) * n.groups) +
               " channels but its input is " + shape_str(in));
        }
        if (n.kernel_size != std::vector<int64_t>{n.weight.size(2), n.weight.size(3)}) {
          fail("node '" + n.name + "': kernel_size " + shape_str(n.kernel_size) + " disagrees with weight " +
               shape_str(tensor_shape(n.weight)));
        }
        if (n.bias.defined()) check_tensor_shape(n, "bias", n.bias, {out_channels});
      }
      if (out_channels < 1) fail("node '" + n.name + "' has neither a weight nor a number of output channels (>= 1)");
      if (out_channels % n.groups != 0) {
        fail("node '" + n.name + "': groups " + std::to_string(n.groups) + " do not divide the " +
             std::to_string(out_channels) + " output channels");
      }
      return window_shape(n, in, out_channels);
    }
    case NodeKind::kSumPool2d:
    case NodeKind::kAvgPool2d:
    case NodeKind::kMaxPool2d:
      return window_shape(n, in, in.empty() ? 0 : in[0]);
    case NodeKind::kFlatten: {
      const int64_t rank = static_cast<int64_t>(in.size());
      const int64_t a = n.start_dim < 0 ? n.start_dim + rank : n.start_dim;
      const int64_t b = n.end_dim < 0 ? n.end_dim + rank : n.end_dim;
      if (a < 0 || b >= rank || a > b) {
        fail("node '" + n.name + "': start_dim " + std::to_string(n.start_dim) + " and end_dim " +
             std::to_string(n.end_dim) + " do not fit its input " + shape_str(in));
      }
      std::vector<int64_t> out(in.begin(), in.begin() + a);
      out.push_back(numel(std::vector<int64_t>(in.begin() + a, in.begin() + b + 1)));
      out.insert(out.end(), in.begin() + b + 1, in.end());
      return out;
    }
    case NodeKind::kScale:
      if (!n.scale.defined()) fail("node '" + n.name + "' (Scale) has no scale");
      check_tensor_shape(n, "scale", n.scale, in);
      return in;
    default:  // Delay and the neuron nodes keep the shape
      return same_or_declared();
  }
}

// Parameter checks that need no shapes: values in range, arrays of the
// node's shape.
void check_values(const Node& n, const std::vector<int64_t>& shape) {
  if (n.kind == NodeKind::kDelay && n.delay < 1) {
    fail("node '" + n.name + "': a Delay needs at least 1 step, got " + std::to_string(n.delay));
  }
  if (n.kind == NodeKind::kInput) {
    if (n.shape.empty()) fail("node '" + n.name + "' (Input) has no shape");
    if (n.encoding != "poisson" && n.encoding != "direct") {
      fail("node '" + n.name + "' (Input): encoding '" + n.encoding + "' is neither poisson nor direct");
    }
    for (auto s : n.shape) {
      if (s < 1) fail("node '" + n.name + "' (Input) has shape " + shape_str(n.shape) + ": every size must be >= 1");
    }
  }
  if (is_neuron(n.kind)) {
    try {
      n.neuron.validate();
    } catch (const Error& e) {
      fail("node '" + n.name + "': " + e.what());
    }
  }
  if (n.kind == NodeKind::kBatchNorm) {
    if (shape.empty()) fail("node '" + n.name + "' (BatchNorm) needs channels: its input is a scalar");
    if (!(n.eps > 0) || !std::isfinite(n.eps)) fail("node '" + n.name + "': eps must be > 0, got " + std::to_string(n.eps));
    if (!(n.momentum >= 0 && n.momentum <= 1)) {
      fail("node '" + n.name + "': momentum must be in [0, 1], got " + std::to_string(n.momentum));
    }
    for (const auto* t : {&n.weight, &n.bias}) {
      if (t->defined()) check_tensor_shape(n, t == &n.weight ? "weight" : "bias", *t, {shape[0]});
    }
    for (const auto& [key, t] : n.arrays) {
      if (key != "running_mean" && key != "running_var") {
        fail("node '" + n.name + "' (BatchNorm) has no array " + key + " (it has running_mean, running_var)");
      }
      check_tensor_shape(n, key.c_str(), t, {shape[0]});
      if (!torch::isfinite(t).all().item<bool>()) fail("node '" + n.name + "': " + key + " holds NaN or infinity");
      if (key == "running_var" && !(t >= 0).all().item<bool>()) fail("node '" + n.name + "': running_var holds a negative value");
    }
  }
  if (n.kind == NodeKind::kDropout && !(n.p >= 0 && n.p < 1)) {
    fail("node '" + n.name + "': a Dropout's p must be in [0, 1), got " + std::to_string(n.p));
  }
  if (n.kind == NodeKind::kPLIF) {
    for (const auto& [key, t] : n.arrays) {
      if (key != "w" || t.numel() != 1) {
        fail("node '" + n.name + "' (PLIF): its only array is its learned w (one value), got " + key +
             " of shape " + shape_str(tensor_shape(t)));
      }
    }
  }
  if (has_general_dynamics(n)) {
    const auto& keys = dynamics_keys(n.kind);
    for (const auto& key : keys) {
      if (!n.arrays.count(key)) fail("node '" + n.name + "' (" + to_string(n.kind) + ") has no " + key);
    }
    for (const auto& [key, t] : n.arrays) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string list;
        for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
        fail("node '" + n.name + "' (" + to_string(n.kind) + ") has no parameter " + key + " (its parameters: " + list + ")");
      }
      const bool flat = t.dim() == 1 && shape.size() > 1 && t.numel() == numel(shape);
      if (t.dim() > 0 && tensor_shape(t) != shape && !flat) {
        fail("node '" + n.name + "': " + key + " has shape " + shape_str(tensor_shape(t)) + " but the node has " +
             std::to_string(numel(shape)) + " neurons of shape " + shape_str(shape) +
             " (give one value, or one per neuron)");
      }
      if (!torch::isfinite(t).all().item<bool>()) fail("node '" + n.name + "': " + key + " holds NaN or infinity");
      if ((key == "tau" || key == "tau_syn" || key == "tau_mem") && !(t > 0).all().item<bool>()) {
        fail("node '" + n.name + "': " + key + " must be > 0 steps, got " + std::to_string(t.min().item<double>()));
      }
    }
    if (n.neuron.refractory > 0 && (!is_spiking(n.kind) || n.kind == NodeKind::kThreshold)) {
      fail("node '" + n.name + "' (" + to_string(n.kind) + ") has no membrane to hold: no refractory period");
    }
  }
  for (const auto* t : {&n.weight, &n.bias, &n.scale}) {
    if (t->defined() && !torch::isfinite(*t).all().item<bool>()) {
      fail("node '" + n.name + "': its " + (t == &n.weight ? "weight" : t == &n.bias ? "bias" : "scale") +
           " holds NaN or infinity");
    }
  }
}

}  // namespace

std::string to_string(NodeKind kind) {
  for (const auto& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  throw InternalError("unnamed node kind");
}

std::optional<NodeKind> parse_node_kind(const std::string& name) {
  for (const auto& k : kKinds) {
    if (name == k.name) return k.kind;
  }
  return std::nullopt;
}

std::string known_node_kinds() {
  std::string out;
  for (const auto& k : kKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

bool is_neuron(NodeKind kind) {
  switch (kind) {
    case NodeKind::kLIF:
    case NodeKind::kIF:
    case NodeKind::kPLIF:
    case NodeKind::kLI:
    case NodeKind::kCubaLIF:
    case NodeKind::kCubaLI:
    case NodeKind::kThreshold:
      return true;
    default:
      return false;
  }
}

bool is_spiking(NodeKind kind) { return is_neuron(kind) && kind != NodeKind::kLI && kind != NodeKind::kCubaLI; }

const std::vector<std::string>& dynamics_keys(NodeKind kind) {
  static const std::vector<std::string> lif{"tau", "r", "v_leak", "v_threshold", "v_reset"};
  static const std::vector<std::string> if_{"r", "v_threshold", "v_reset"};
  static const std::vector<std::string> li{"tau", "r", "v_leak"};
  static const std::vector<std::string> cuba_lif{"tau_syn", "tau_mem", "r", "v_leak", "v_threshold", "v_reset", "w_in"};
  static const std::vector<std::string> cuba_li{"tau_syn", "tau_mem", "r", "v_leak", "w_in"};
  static const std::vector<std::string> threshold{"threshold"};
  static const std::vector<std::string> none;
  switch (kind) {
    case NodeKind::kLIF:
      return lif;
    case NodeKind::kIF:
      return if_;
    case NodeKind::kLI:
      return li;
    case NodeKind::kCubaLIF:
      return cuba_lif;
    case NodeKind::kCubaLI:
      return cuba_li;
    case NodeKind::kThreshold:
      return threshold;
    default:
      return none;
  }
}

bool has_general_dynamics(const Node& n) {
  if (n.kind == NodeKind::kLIF || n.kind == NodeKind::kIF) return !n.arrays.empty();
  return is_neuron(n.kind) && n.kind != NodeKind::kPLIF;  // LI, CubaLIF, CubaLI, Threshold
}

double dynamics_default(const std::string& key) {
  if (key == "tau" || key == "tau_syn" || key == "tau_mem") return 2.0;
  if (key == "v_leak" || key == "v_reset") return 0.0;
  return 1.0;  // r, v_threshold, w_in, threshold
}

std::map<std::string, torch::Tensor> general_dynamics(const Node& n) {
  if (has_general_dynamics(n)) return n.arrays;
  const NeuronParams& p = n.neuron;
  const auto scalar = [](double v) { return torch::tensor(v, torch::kDouble); };
  const double v_reset = p.v_reset.value_or(0.0);
  if (n.kind == NodeKind::kIF) {
    return {{"r", scalar(1.0)}, {"v_threshold", scalar(p.v_threshold)}, {"v_reset", scalar(v_reset)}};
  }
  if (n.kind == NodeKind::kLIF) {
    return {{"tau", scalar(p.tau)},
            {"r", scalar(p.decay_input ? 1.0 : p.tau)},
            {"v_leak", scalar(v_reset)},
            {"v_threshold", scalar(p.v_threshold)},
            {"v_reset", scalar(v_reset)}};
  }
  throw InternalError("node '" + n.name + "' (" + to_string(n.kind) + ") has no general dynamics");
}

std::string surrogate_spec(const Surrogate& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s:%.17g", s.kind == SurrogateKind::kSigmoid ? "sigmoid" : "atan", s.alpha);
  return buf;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

bool Graph::has_node(const std::string& name) const {
  return std::any_of(nodes.begin(), nodes.end(), [&](const Node& n) { return n.name == name; });
}

const Node& Graph::node(const std::string& name) const {
  for (const auto& n : nodes) {
    if (n.name == name) return n;
  }
  fail("no node named '" + name + "'");
}

Node& Graph::node(const std::string& name) { return const_cast<Node&>(static_cast<const Graph&>(*this).node(name)); }

std::vector<std::string> Graph::sources_of(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& e : edges) {
    if (e.target == name) out.push_back(e.source);
  }
  return out;
}

std::vector<std::string> Graph::targets_of(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& e : edges) {
    if (e.source == name) out.push_back(e.target);
  }
  return out;
}

GraphShapes Graph::validate() const {
  std::set<std::string> names;
  for (const auto& n : nodes) {
    if (n.name.empty()) fail("a node has an empty name");
    if (n.name.find('/') != std::string::npos) fail("node '" + n.name + "': a name may not contain '/'");
    if (!names.insert(n.name).second) fail("two nodes are named '" + n.name + "'");
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& e : edges) {
    for (const auto* end : {&e.source, &e.target}) {
      if (!names.count(*end)) fail("edge '" + e.source + "' -> '" + e.target + "' names no node '" + *end + "'");
    }
    if (!seen.emplace(e.source, e.target).second) fail("edge '" + e.source + "' -> '" + e.target + "' is given twice");
    if (node(e.target).kind == NodeKind::kInput) fail("edge '" + e.source + "' -> '" + e.target + "' leads into an Input");
    if (node(e.source).kind == NodeKind::kOutput) fail("edge '" + e.source + "' -> '" + e.target + "' leaves an Output");
  }
  bool any_input = false, any_output = false;
  for (const auto& n : nodes) {
    any_input |= n.kind == NodeKind::kInput;
    any_output |= n.kind == NodeKind::kOutput;
    if (n.kind != NodeKind::kInput && sources_of(n.name).empty()) {
      fail("node '" + n.name + "' (" + to_string(n.kind) + ") has no incoming edge");
    }
    if (n.kind != NodeKind::kOutput && targets_of(n.name).empty()) {
      fail("node '" + n.name + "' (" + to_string(n.kind) + ") has no outgoing edge (a dangling node)");
    }
  }
  if (!any_input) fail("no Input node");
  if (!any_output) fail("no Output node");

  // Order within a step (Kahn's algorithm, ties in the order the nodes were
  // given, so it is reproducible). Every edge points forward where it can;
  // when the rest waits on a cycle, a Delay on it goes first: it gives its
  // past input, so the edges out of it need not wait. Stuck with no Delay
  // left means a cycle without one.
  std::map<std::string, int> pending;
  for (const auto& n : nodes) pending[n.name] = 0;
  for (const auto& e : edges) ++pending[e.target];
  GraphShapes out;
  std::vector<bool> done(nodes.size(), false);
  const auto place = [&](size_t i) {
    done[i] = true;
    out.order.push_back(nodes[i].name);
    for (const auto& t : targets_of(nodes[i].name)) --pending[t];
  };
  while (out.order.size() < nodes.size()) {
    bool progress = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!done[i] && pending[nodes[i].name] == 0) {
        place(i);
        progress = true;
      }
    }
    if (progress) continue;
    size_t delay = nodes.size();
    for (size_t i = 0; i < nodes.size() && delay == nodes.size(); ++i) {
      if (!done[i] && nodes[i].kind == NodeKind::kDelay) delay = i;
    }
    if (delay < nodes.size()) {
      place(delay);
      continue;
    }
    // Name one cycle: walk back along edges among the unplaced nodes (each
    // waits on one of them), from the first of them in the given order.
    std::map<std::string, size_t> rank;
    for (size_t i = 0; i < nodes.size(); ++i) rank[nodes[i].name] = done[i] ? nodes.size() : i;
    std::string first;
    for (size_t i = 0; i < nodes.size() && first.empty(); ++i) {
      if (!done[i]) first = nodes[i].name;
    }
    std::vector<std::string> path{first};
    std::map<std::string, size_t> at{{first, 0}};
    for (;;) {
      std::string prev;
      for (const auto& src : sources_of(path.back())) {
        if (rank.at(src) < nodes.size()) {
          prev = src;
          break;
        }
      }
      if (prev.empty()) throw InternalError("an unplaced node waits on no unplaced node");
      if (at.count(prev)) {
        std::vector<std::string> cycle(path.begin() + static_cast<std::ptrdiff_t>(at[prev]), path.end());
        std::reverse(cycle.begin(), cycle.end());  // forward along the edges
        std::rotate(cycle.begin(),
                    std::min_element(cycle.begin(), cycle.end(),
                                     [&](const std::string& a, const std::string& b) { return rank[a] < rank[b]; }),
                    cycle.end());
        std::string text;
        for (const auto& c : cycle) text += c + " -> ";
        fail("the cycle " + text + cycle.front() +
             " has no Delay node (a cycle needs at least one step of delay; add a Delay node on it)");
      }
      at[prev] = path.size();
      path.push_back(prev);
    }
  }

  // Shapes in that order. A Delay's output is its declared shape, or its
  // input's when that is already known (no cycle through it).
  for (const auto& name : out.order) {
    const Node& n = node(name);
    std::vector<int64_t> in;
    bool have = false;
    for (const auto& s : sources_of(name)) {
      if (!out.output.count(s)) {
        // Only a Delay's input can come later in the order: it is on a cycle.
        if (n.kind == NodeKind::kDelay) continue;
        throw InternalError("node '" + s + "' is computed after its target '" + name + "'");
      }
      const auto& sh = out.output.at(s);
      if (have && sh != in) {
        fail("edge '" + s + "' -> '" + name + "': " + s + " gives " + shape_str(sh) + " but '" + name +
             "' already takes " + shape_str(in) + " from " + sources_of(name).front() +
             " (the inputs of a node are summed and must agree)");
      }
      in = sh;
      have = true;
    }
    if (n.kind == NodeKind::kDelay && !have) {
      // Its input comes later in the step order (a cycle): trust the declared shape.
      if (n.shape.empty()) fail("node '" + name + "' (Delay) is on a cycle and must state its shape");
      in = n.shape;
    }
    std::vector<int64_t> o;
    check_sizes(n);
    try {
      o = output_shape(n, in);
    } catch (const Error& e) {
      // Name the edge when the mismatch is with an incoming value.
      const std::string what = e.what();
      if (!sources_of(name).empty() && what.find("its input is") != std::string::npos) {
        throw Error(what + " (edge '" + sources_of(name).front() + "' -> '" + name + "')");
      }
      throw;
    }
    check_output_size(n, o);
    check_values(n, o);
    out.input[name] = in;
    out.output[name] = o;
  }
  // A Delay on a cycle: its input, known now, must match what it declared.
  for (const auto& n : nodes) {
    if (n.kind != NodeKind::kDelay) continue;
    for (const auto& s : sources_of(n.name)) {
      if (out.output.at(s) != out.output.at(n.name)) {
        fail("edge '" + s + "' -> '" + n.name + "': " + s + " gives " + shape_str(out.output.at(s)) + " but '" + n.name +
             "' (Delay) has shape " + shape_str(out.output.at(n.name)));
      }
    }
    out.input[n.name] = out.output.at(n.name);
  }
  // The Output's latency: the least sum of Delay steps over the paths from
  // the Input (relaxed until nothing changes; sums saturate, so no path of
  // long Delays overflows).
  constexpr int64_t kFar = std::numeric_limits<int64_t>::max() / 4;
  std::map<std::string, int64_t> reach;  // steps until a node's output first carries the input
  std::map<std::string, int64_t> delay;  // a Delay's steps, 0 for other nodes
  std::map<std::string, std::string> via;
  for (const auto& n : nodes) {
    reach[n.name] = n.kind == NodeKind::kInput ? 0 : kFar;
    delay[n.name] = n.kind == NodeKind::kDelay ? n.delay : 0;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& e : edges) {
      const int64_t r = std::min(kFar, reach.at(e.source) + delay.at(e.target));
      if (r < reach.at(e.target)) {
        reach[e.target] = r;
        via[e.target] = e.source;
        changed = true;
      }
    }
  }
  for (const auto& n : nodes) {
    // Every node has an incoming edge (or is the Input) and an outgoing one
    // (or is the Output), yet a cycle through a Delay can feed the Output
    // while nothing from the Input enters it: then it never sees the input.
    if (n.kind == NodeKind::kOutput && reach.at(n.name) >= kFar) {
      std::string from;
      for (const auto& s : sources_of(n.name)) from += (from.empty() ? "'" : ", '") + s + "'";
      fail("the Output '" + n.name + "' is not reached from the Input: its input comes from " + from +
           ", which no path from the Input enters (a cycle of its own), so it never sees the input");
    }
    if (n.kind != NodeKind::kOutput || reach.at(n.name) < out.latency) continue;
    out.latency = reach.at(n.name);
    out.latency_path.clear();
    for (std::string at = n.name; via.count(at); at = via.at(at)) {
      if (delay.at(at) > 0) out.latency_path.insert(out.latency_path.begin(), at);
    }
  }
  return out;
}

}  // namespace snn::graph

namespace snn::graph {
namespace {

// Removes node `name`, giving its edges out to its sources: each edge
// name -> t becomes s -> t for every source s of `name` (in place, in
// order), so a target still sums the same values.
void bypass(Graph& g, const std::string& name) {
  const std::vector<std::string> sources = g.sources_of(name);
  std::vector<Edge> edges;
  for (const auto& e : g.edges) {
    if (e.target == name) continue;
    if (e.source == name) {
      for (const auto& s : sources) edges.push_back({s, e.target});
    } else {
      edges.push_back(e);
    }
  }
  g.edges = std::move(edges);
  g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.name == name; }),
                g.nodes.end());
}

}  // namespace

Graph fold_for_inference(const Graph& graph, std::vector<std::string>* unfolded) {
  Graph g = graph;
  std::vector<std::string> dropouts, norms;
  for (const auto& n : g.nodes) {
    if (n.kind == NodeKind::kDropout) dropouts.push_back(n.name);
    if (n.kind == NodeKind::kBatchNorm) norms.push_back(n.name);
  }
  for (const auto& d : dropouts) bypass(g, d);
  for (const auto& b : norms) {
    const Node bn = g.node(b);
    const auto sources = g.sources_of(b);
    const bool foldable = sources.size() == 1 && g.targets_of(sources[0]).size() == 1 &&
                          (g.node(sources[0]).kind == NodeKind::kAffine || g.node(sources[0]).kind == NodeKind::kLinear ||
                           g.node(sources[0]).kind == NodeKind::kConv2d) &&
                          g.node(sources[0]).weight.defined();
    if (!foldable) {
      if (unfolded) unfolded->push_back(b);
      continue;
    }
    Node& syn = g.node(sources[0]);
    const int64_t C = syn.weight.size(0);
    const auto value = [&](const torch::Tensor& t, double fallback) {
      return t.defined() ? t.to(torch::kDouble).reshape({C}) : torch::full({C}, fallback, torch::kDouble);
    };
    const auto array = [&](const char* key, double fallback) {
      const auto it = bn.arrays.find(key);
      return value(it == bn.arrays.end() ? torch::Tensor() : it->second, fallback);
    };
    const torch::Tensor scale = value(bn.weight, 1.0) / (array("running_var", 1.0) + bn.eps).sqrt();
    const torch::Tensor shift = value(bn.bias, 0.0) - array("running_mean", 0.0) * scale;
    std::vector<int64_t> per_out(static_cast<size_t>(syn.weight.dim()), 1);
    per_out[0] = C;
    syn.weight = (syn.weight.to(torch::kDouble) * scale.view(per_out)).to(torch::kFloat);
    syn.bias = (value(syn.bias, 0.0) * scale + shift).to(torch::kFloat);
    if (syn.kind == NodeKind::kLinear) syn.kind = NodeKind::kAffine;  // the shift needs a bias
    bypass(g, b);
  }
  return g;
}

}  // namespace snn::graph
