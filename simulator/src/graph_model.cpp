#include "snn/simulator/graph_model.h"

#include <torch/nn/functional/pooling.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <limits>
#include <functional>
#include <map>
#include <set>

#include "snn/core/error.h"
#include "snn/core/memory_limit.h"
#include "snn/core/temporal.h"
#include "snn/encoders/encoders.h"
#include "snn/neurons/batch_norm.h"
#include "snn/neurons/conv2d.h"
#include "snn/neurons/general_neuron.h"
#include "snn/neurons/windows.h"
#include "snn/simulator/neuron_sim.h"

namespace snn {

using graph::Graph;
using graph::Node;
using graph::NodeKind;

namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("graph: " + what); }

}  // namespace

// Named, not anonymous: GraphModel::Modules, a member of an exported class,
// holds these (GCC warns of a member whose type has internal linkage).
namespace graph_modules {

// A Delay of d steps: its output at step t is its input at t - d (zeros
// before). State: its last min(d, steps so far) inputs, a tensor each, so
// blocks of any K agree. A step adds one input and drops the oldest: it
// neither copies the others nor, when training, makes autograd keep a copy
// of all d per step (which, for a Delay of 10^5 steps, filled the memory);
// a delay longer than the run keeps only the run's steps.
class DelayLineImpl : public torch::nn::Module, public Temporal {
 public:
  DelayLineImpl(int64_t delay, std::vector<int64_t> shape) : delay_(delay), shape_(std::move(shape)) {}

  // A block [K, B, ...]: outputs for its K steps.
  torch::Tensor forward(const torch::Tensor& x) {
    std::vector<torch::Tensor> out;
    out.reserve(static_cast<size_t>(x.size(0)));
    for (int64_t k = 0; k < x.size(0); ++k) {
      out.push_back(peek(x.size(1), x.options()));
      push(x[k]);
    }
    return torch::stack(out);
  }
  // Step by step (inside a cycle): the output of the current step, then its input.
  torch::Tensor peek(int64_t batch, const torch::TensorOptions& options) {
    ensure(batch, options);
    return static_cast<int64_t>(inputs_.size()) < delay_ ? zeros_ : inputs_.front();
  }
  void push(const torch::Tensor& x_step) {
    inputs_.push_back(x_step.to(torch::kFloat));
    if (static_cast<int64_t>(inputs_.size()) > delay_) inputs_.pop_front();
  }
  void reset_state() override {
    inputs_.clear();
    zeros_ = torch::Tensor();
  }
  std::vector<torch::Tensor> save_state() const override {
    if (inputs_.empty()) return {};
    return {torch::stack(std::vector<torch::Tensor>(inputs_.begin(), inputs_.end()))};
  }
  void load_state(const std::vector<torch::Tensor>& state) override {
    reset_state();
    if (state.empty()) return;
    for (int64_t i = 0; i < state[0].size(0); ++i) inputs_.push_back(state[0][i]);
  }

 private:
  // A batch of another size starts from rest, as the whole history did.
  void ensure(int64_t batch, const torch::TensorOptions& options) {
    if (!inputs_.empty() && inputs_.front().size(0) != batch) inputs_.clear();
    if (zeros_.defined() && zeros_.size(0) == batch) return;
    std::vector<int64_t> dims{batch};
    dims.insert(dims.end(), shape_.begin(), shape_.end());
    zeros_ = torch::zeros(dims, options.dtype(torch::kFloat));
  }
  int64_t delay_;
  std::vector<int64_t> shape_;
  std::deque<torch::Tensor> inputs_;  // the last min(delay_, steps) inputs, oldest first
  torch::Tensor zeros_;               // the output before the first delay_ steps
};
TORCH_MODULE(DelayLine);

// Dropout while training (autograd recording): each element of a sample is
// kept with probability 1 - p and scaled by 1 / (1 - p), the same mask at
// every step of the sample (SpikingJelly's multi-step Dropout). The mask is
// the Poisson encoder's counter-based draw keyed by (the node's seed, the
// epoch in the step counter, the global sample index, the element), so it
// does not depend on the batch, K, partition, threads or device, and a
// resumed training draws what the uninterrupted one drew. Identity otherwise.
class DropoutImpl : public torch::nn::Module, public Temporal {
 public:
  DropoutImpl(double p, uint64_t seed) : p_(p), seed_(seed) {}

  torch::Tensor forward(const torch::Tensor& x) {
    if (p_ == 0 || !torch::GradMode::is_enabled()) return x;
    const int64_t B = x.size(1);
    torch::Tensor samples = samples_;
    if (!samples.defined() || samples.size(0) != B) samples = torch::arange(B, torch::kLong);
    const torch::Tensor keep = torch::full({B, x.numel() / std::max<int64_t>(1, x.size(0) * B)}, 1.0 - p_,
                                           x.options().dtype(torch::kFloat));
    const torch::Tensor mask =
        functional::poisson_encode(keep, samples, epoch_, 1, PoissonEncoderOptions().seed(seed_).spike_dtype(x.scalar_type()))[0];
    std::vector<int64_t> shape = x.sizes().vec();
    shape[0] = 1;
    return x * (mask.reshape(shape) * (1.0 / (1.0 - p_)));
  }
  void set_time(int64_t first_step, const torch::Tensor& sample_index) override {
    (void)first_step;
    samples_ = sample_index;
  }
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  void reset_state() override {}
  std::vector<torch::Tensor> save_state() const override { return {}; }
  void load_state(const std::vector<torch::Tensor>& state) override { (void)state; }

 private:
  double p_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  torch::Tensor samples_;
};
TORCH_MODULE(Dropout);
}  // namespace graph_modules
using graph_modules::DelayLine;
using graph_modules::Dropout;

namespace {

// A seed of its own per node: the network's, mixed with the node's name (FNV-1a).
uint64_t node_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h ^ (seed * 0x9E3779B97F4A7C15ull);
}

// A neuron node with general dynamics (graph.h: Node::arrays) as a
// GeneralNeuron layer of its shape.
NeuronModule general_neuron_layer(const Node& n, const std::vector<int64_t>& shape) {
  static const std::map<NodeKind, GeneralNeuronKind> kinds{
      {NodeKind::kLIF, GeneralNeuronKind::kLIF},         {NodeKind::kIF, GeneralNeuronKind::kIF},
      {NodeKind::kLI, GeneralNeuronKind::kLI},           {NodeKind::kCubaLIF, GeneralNeuronKind::kCubaLIF},
      {NodeKind::kCubaLI, GeneralNeuronKind::kCubaLI},   {NodeKind::kThreshold, GeneralNeuronKind::kThreshold}};
  GeneralNeuronOptions o(kinds.at(n.kind));
  // Per-neuron values of the node's shape (graph files may give them flat).
  const auto a = [&](const char* key) {
    const torch::Tensor& t = n.arrays.at(key);
    return t.dim() == 0 ? t.to(torch::kDouble) : t.to(torch::kDouble).reshape(shape);
  };
  for (const auto& key : graph::dynamics_keys(n.kind)) {
    if (key == "tau" || key == "tau_mem") o.tau(a(key.c_str()));
    if (key == "tau_syn") o.tau_syn(a(key.c_str()));
    if (key == "r") o.r(a(key.c_str()));
    if (key == "v_leak") o.v_leak(a(key.c_str()));
    if (key == "v_threshold" || key == "threshold") o.v_threshold(a(key.c_str()));
    if (key == "v_reset") o.v_reset(a(key.c_str()));
    if (key == "w_in") o.w_in(a(key.c_str()));
  }
  o.soft_reset(!n.neuron.v_reset.has_value())
      .detach_reset(n.neuron.detach_reset)
      .surrogate(n.neuron.surrogate)
      .refractory(n.neuron.refractory)
      .step_mode(StepMode::kMulti);
  try {
    GeneralNeuron layer(o);
    return NeuronModule{torch::nn::AnyModule(layer), layer.ptr()};
  } catch (const Error& e) {
    fail("node '" + n.name + "': " + e.what());
  }
}

}  // namespace

// The module of each node that has one.
struct GraphModel::Modules {
  std::map<std::string, Linear> linear;  // Affine, Linear, Conv2d (im2col)
  std::map<std::string, std::vector<Linear>> grouped;  // a grouped Conv2d: one Linear per group
  std::map<std::string, NeuronModule> neuron;
  std::map<std::string, DelayLine> delay;
  std::map<std::string, torch::Tensor> scale;
  std::map<std::string, BatchNorm> norm;
  std::map<std::string, Dropout> dropout;
};

struct GraphModel::Unit {
  std::vector<const Node*> nodes;  // one node, or a cycle's nodes in step order
  bool cycle = false;
  int64_t neurons = 0;
};

namespace {

// What a stage needs: the graph, the units it runs, and how its input and
// output are packed.
struct StagePlan {
  const Graph* graph = nullptr;
  const graph::GraphShapes* shapes = nullptr;
  std::shared_ptr<GraphModel::Modules> modules;
  std::vector<std::shared_ptr<GraphModel::Unit>> units;
  std::vector<std::string> inputs;   // values arriving, in this order (stage 0: the Input node)
  std::vector<std::string> outputs;  // values leaving (the last stage: the Output node)
  bool first = false, last = false;
  std::vector<double>* unit_seconds = nullptr;  // when set: each unit's time is added (time_groups)
};

// The MaxPool2d of 2 x 2 windows at stride 2 that alone reads the spikes
// of a neuron unit outside cycles, and reads nothing else; or null. The
// two run as one pass in inference (NeuronLayer::multi_step_max_pooled),
// and a stage cut keeps them together.
const Node* sole_max_pool(const Graph& g, const GraphModel::Unit& u) {
  if (u.cycle || u.neurons == 0) return nullptr;
  const Node& n = *u.nodes[0];
  const std::vector<std::string> targets = g.targets_of(n.name);
  if (targets.size() != 1) return nullptr;
  const Node& t = g.node(targets[0]);
  const std::vector<int64_t> two{2, 2}, zero{0, 0};
  if (t.kind != NodeKind::kMaxPool2d || t.kernel_size != two || t.stride != two || t.padding != zero) return nullptr;
  if (g.sources_of(t.name) != std::vector<std::string>{n.name}) return nullptr;
  return &t;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (auto v : s) n *= v;
  return n;
}

// A node's (y, x) setting as the kernels take it.
std::array<int64_t, 2> pair(const std::vector<int64_t>& v) { return {v[0], v[1]}; }

std::vector<int64_t> with_time(int64_t K, int64_t B, const std::vector<int64_t>& shape) {
  std::vector<int64_t> d{K, B};
  d.insert(d.end(), shape.begin(), shape.end());
  return d;
}

// One node on its summed input `in` [K, B, ...] (K = 1 inside a cycle).
torch::Tensor apply_node(const Node& n, GraphModel::Modules& m, const graph::GraphShapes& shapes, const torch::Tensor& in) {
  const int64_t K = in.size(0), B = in.size(1);
  const auto& out_shape = shapes.output.at(n.name);
  switch (n.kind) {
    case NodeKind::kOutput:
      return in;
    case NodeKind::kAffine:
    case NodeKind::kLinear:
      return m.linear.at(n.name)->forward(in);
    case NodeKind::kConv2d: {
      const auto& is = shapes.input.at(n.name);
      const torch::Tensor x = in.reshape({K * B, is[0], is[1], is[2]});
      const int64_t cin = is[0] / n.groups;
      std::vector<Linear*> fcs;  // one per group
      if (n.groups == 1) {
        fcs.push_back(&m.linear.at(n.name));
      } else {
        for (auto& fc : m.grouped.at(n.name)) fcs.push_back(&fc);
      }
      // Inference: the event-driven kernel, whose values are the im2col
      // path's below, and faster at any density (snn/neurons/conv2d.h).
      // Anything that wants a gradient (a frozen layer's input included)
      // takes the differentiable paths.
      bool wants_grad = x.requires_grad();
      for (const Linear* fc : fcs) {
        wants_grad = wants_grad || (*fc)->weight.requires_grad() || ((*fc)->bias.defined() && (*fc)->bias.requires_grad());
      }
      const bool records_grad = torch::GradMode::is_enabled() && wants_grad;
      if (!records_grad && (*fcs[0])->weight.is_cpu() && functional::conv2d_event_pays(x)) {
        std::vector<torch::Tensor> parts;
        for (int64_t j = 0; j < n.groups; ++j) {
          const Linear& fc = *fcs[static_cast<size_t>(j)];
          const torch::Tensor xg = n.groups == 1 ? x : x.narrow(1, j * cin, cin);
          parts.push_back(functional::conv2d_event(
              xg, fc->weight.view({fc->weight.size(0), cin, n.kernel_size[0], n.kernel_size[1]}), fc->bias,
              pair(n.stride), pair(n.padding), pair(n.dilation)));
        }
        const torch::Tensor y = n.groups == 1 ? parts[0] : torch::cat(parts, 1);
        return y.reshape(with_time(K, B, out_shape));
      }
      // im2col copies values; the sums are snn::Linear's, fixed-order per row.
      const auto conv = [&](const torch::Tensor& xg, Linear& fc) {
        const torch::Tensor rows = functional::im2rows(xg, pair(n.kernel_size), pair(n.stride), pair(n.padding), pair(n.dilation));
        return fc->forward(rows);  // [K B L, Cout / groups]
      };
      const torch::Tensor weight4 =
          (*fcs[0])->weight.view({(*fcs[0])->weight.size(0), cin, n.kernel_size[0], n.kernel_size[1]});
      if (n.groups == 1 && records_grad &&
          functional::conv2d_input_grad_fits(x, weight4, pair(n.stride), pair(n.padding), pair(n.dilation))) {
        // Training a stride-1 convolution: the im2col path's values and
        // gradients without its rows and their copies (the output straight
        // into planes, the input's gradient without the rows' gradient 9
        // times its size; snn/neurons/conv2d.h).
        const Linear& fc = *fcs[0];
        return functional::conv2d_train(x, fc->weight, fc->bias, pair(n.kernel_size), pair(n.padding),
                                        fc->grad_sums())
            .reshape(with_time(K, B, out_shape));
      }
      torch::Tensor y;
      if (n.groups == 1) {
        y = conv(x, *fcs[0]);
      } else {
        // Each group's output channels from its own input channels.
        std::vector<torch::Tensor> parts;
        for (int64_t j = 0; j < n.groups; ++j) parts.push_back(conv(x.narrow(1, j * cin, cin), *fcs[static_cast<size_t>(j)]));
        y = torch::cat(parts, 1);
      }
      const int64_t L = y.size(0) / (K * B);
      return y.reshape({K * B, L, out_shape[0]})
          .transpose(1, 2)
          .reshape(with_time(K, B, out_shape));
    }
    case NodeKind::kSumPool2d:
    case NodeKind::kAvgPool2d: {
      const auto& is = shapes.input.at(n.name);
      const torch::Tensor x = in.reshape({K * B, is[0], is[1], is[2]});
      // A sum pool is an average whose divisor is 1.
      const std::optional<int64_t> divisor = n.kind == NodeKind::kSumPool2d ? std::optional<int64_t>(1) : std::nullopt;
      return torch::avg_pool2d(x, n.kernel_size, n.stride, n.padding, /*ceil_mode=*/false, /*count_include_pad=*/true,
                               divisor)
          .reshape(with_time(K, B, out_shape));
    }
    case NodeKind::kMaxPool2d: {
      const auto& is = shapes.input.at(n.name);
      const torch::Tensor x = in.reshape({K * B, is[0], is[1], is[2]});
      return functional::max_pool2d(x, pair(n.kernel_size), pair(n.stride), pair(n.padding))
          .reshape(with_time(K, B, out_shape));
    }
    case NodeKind::kFlatten:
      return in.reshape(with_time(K, B, out_shape));
    case NodeKind::kScale:
      return in * m.scale.at(n.name).to(in.device());
    case NodeKind::kDelay:
      return m.delay.at(n.name)->forward(in);
    case NodeKind::kBatchNorm:
      return m.norm.at(n.name)->forward(in);
    case NodeKind::kDropout:
      return m.dropout.at(n.name)->forward(in);
    default:
      if (graph::is_neuron(n.kind)) return m.neuron.at(n.name).module.forward(in);
      throw InternalError("node kind without execution: " + graph::to_string(n.kind));
  }
}

// Whether a node's output at each step is a function of its input at that
// step alone, in the current mode: then a block whose input is the same at
// every step has the same output at every step. Not while gradients are
// recorded: autograd would then sum a shared step's gradient over K before
// the kernels' fixed-order sums, and training would round differently for
// each K (BatchNorm, which also uses the block's statistics then, too).
// Neurons and delays carry state from step to step.
bool same_every_step(const Node& n) {
  if (torch::GradMode::is_enabled()) return false;
  switch (n.kind) {
    case NodeKind::kAffine:
    case NodeKind::kLinear:
    case NodeKind::kConv2d:
    case NodeKind::kSumPool2d:
    case NodeKind::kAvgPool2d:
    case NodeKind::kMaxPool2d:
    case NodeKind::kFlatten:
    case NodeKind::kScale:
    case NodeKind::kBatchNorm:  // the running statistics, without gradients
    case NodeKind::kDropout:    // the identity, without gradients
    case NodeKind::kOutput:
      return true;
    default:
      return false;
  }
}

// Runs a stage's units on its packed input.
class GraphStageImpl : public torch::nn::Module {
 public:
  explicit GraphStageImpl(std::shared_ptr<const StagePlan> plan) : plan_(std::move(plan)) {
    // Register the stage's modules, so that the pipeline moves them and
    // finds the stateful ones (neurons, delays).
    // Registered as "node<i>": node names may hold dots (NIR files from
    // PyTorch exporters: "fc.0"), which LibTorch refuses in module names.
    size_t i = 0;
    for (const auto& u : plan_->units) {
      for (const Node* n : u->nodes) {
        sources_[n->name] = plan_->graph->sources_of(n->name);
        const auto& m = *plan_->modules;
        const std::string key = "node" + std::to_string(i++);
        if (m.linear.count(n->name)) register_module(key, m.linear.at(n->name).ptr());
        if (m.grouped.count(n->name)) {
          const auto& fcs = m.grouped.at(n->name);
          for (size_t j = 0; j < fcs.size(); ++j) register_module(key + "_g" + std::to_string(j), fcs[j].ptr());
        }
        if (m.neuron.count(n->name)) register_module(key, m.neuron.at(n->name).module.ptr());
        if (m.delay.count(n->name)) register_module(key, m.delay.at(n->name).ptr());
        if (m.norm.count(n->name)) register_module(key, m.norm.at(n->name).ptr());
        if (m.dropout.count(n->name)) register_module(key, m.dropout.at(n->name).ptr());
      }
    }
    find_pooled_neurons();
  }

  torch::Tensor forward(const torch::Tensor& packed) {
    const StagePlan& p = *plan_;
    const int64_t K = packed.size(0), B = packed.size(1);
    std::map<std::string, torch::Tensor> values;
    // Unpack what crossed the cut.
    int64_t at = 0;
    for (const auto& name : p.inputs) {
      const auto& shape = p.shapes->output.at(name);
      const int64_t n = numel(shape);
      torch::Tensor v = packed.narrow(2, at, n);
      if (v.scalar_type() != torch::kFloat) v = v.to(torch::kFloat);
      values[name] = v.reshape(with_time(K, B, shape));
      at += n;
    }
    for (size_t ui = 0; ui < p.units.size(); ++ui) {
      const auto& u = p.units[ui];
      const auto t0 = std::chrono::steady_clock::now();
      struct Timed {  // adds the unit's time when it is done, whichever way the loop continues
        std::vector<double>* out;
        size_t i;
        std::chrono::steady_clock::time_point t0;
        ~Timed() {
          if (out) (*out)[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
      } timed{p.unit_seconds, ui, t0};
      if (!u->cycle) {
        const Node& n = *u->nodes[0];
        if (n.kind == NodeKind::kInput) continue;  // unpacked above
        if (pooled_.count(n.name) && !torch::GradMode::is_enabled()) continue;  // made with its neurons' spikes
        const torch::Tensor in = summed(n, values, nullptr, -1);
        const auto pool = pool_of_.find(n.name);
        if (pool != pool_of_.end() && !torch::GradMode::is_enabled()) {
          // Neurons whose spikes only a 2 x 2 max pool reads: each step's
          // spikes are pooled while still in cache and only the pooled ones
          // stored (NeuronLayer::multi_step_max_pooled; the same values).
          const auto& is = p.shapes->input.at(pool->second);
          const torch::Tensor pooled =
              p.modules->neuron.at(n.name).layer->multi_step_max_pooled(in.reshape(with_time(K, B, is)));
          values[pool->second] = pooled.reshape(with_time(K, B, p.shapes->output.at(pool->second)));
          continue;
        }
        if (K > 1 && in.stride(0) == 0 && same_every_step(n)) {
          // The same input at every step of the block (a constant input
          // such as a direct-coded image, expanded over K): one step's
          // output, expanded the same way, is every step's, bit for bit
          // (the kernels' values do not depend on the batch's make-up).
          // So the convolution of the image runs once per block, not K
          // times; the first stateful node (a neuron) takes it from there.
          const torch::Tensor one = apply_node(n, *p.modules, *p.shapes, in.narrow(0, 0, 1));
          std::vector<int64_t> shape = one.sizes().vec();
          shape[0] = K;
          values[n.name] = one.expand(shape);
          continue;
        }
        values[n.name] = apply_node(n, *p.modules, *p.shapes, in);
        continue;
      }
      run_cycle(*u, values, K, B, packed.device());
    }
    if (p.last) return values.at(p.outputs.at(0));
    std::vector<torch::Tensor> out;
    for (const auto& name : p.outputs) out.push_back(values.at(name).reshape({K, B, -1}));
    return out.size() == 1 ? out[0] : torch::cat(out, 2);
  }

 private:
  // The neuron nodes of this stage whose sole_max_pool is in this stage
  // too: without gradients the two run as one pass.
  void find_pooled_neurons() {
    const StagePlan& p = *plan_;
    std::set<std::string> here;
    for (const auto& u : p.units) {
      if (!u->cycle) here.insert(u->nodes[0]->name);
    }
    for (const auto& u : p.units) {
      const Node* t = sole_max_pool(*p.graph, *u);
      const std::string& n = u->nodes[0]->name;
      if (!t || !here.count(t->name) || !p.modules->neuron.count(n)) continue;
      if (std::find(p.outputs.begin(), p.outputs.end(), n) != p.outputs.end()) continue;
      pool_of_[n] = t->name;
      pooled_.insert(t->name);
    }
  }

  // The sum of a node's sources in edge order; inside a cycle, step k's
  // values (`step` holds the cycle's own of this step).
  torch::Tensor summed(const Node& n, const std::map<std::string, torch::Tensor>& values,
                       const std::map<std::string, torch::Tensor>* step, int64_t k) const {
    torch::Tensor acc;
    for (const auto& s : sources_.at(n.name)) {
      torch::Tensor v;
      if (step && step->count(s)) {
        v = step->at(s);
      } else {
        v = values.at(s);
        if (k >= 0) v = v.narrow(0, k, 1);
      }
      acc = acc.defined() ? acc + v : v;
    }
    return acc;
  }

  void run_cycle(const GraphModel::Unit& u, std::map<std::string, torch::Tensor>& values, int64_t K, int64_t B,
                 const torch::Device& device) {
    const StagePlan& p = *plan_;
    std::map<std::string, std::vector<torch::Tensor>> steps;
    for (int64_t k = 0; k < K; ++k) {
      std::map<std::string, torch::Tensor> now;  // [1, B, ...] this step
      for (const Node* n : u.nodes) {
        if (n->kind == NodeKind::kDelay) {
          now[n->name] = p.modules->delay.at(n->name)->peek(B, torch::TensorOptions().device(device)).unsqueeze(0);
        } else {
          now[n->name] = apply_node(*n, *p.modules, *p.shapes, summed(*n, values, &now, k));
        }
      }
      for (const Node* n : u.nodes) {
        if (n->kind == NodeKind::kDelay) p.modules->delay.at(n->name)->push(summed(*n, values, &now, k).squeeze(0));
      }
      for (const auto& [name, v] : now) steps[name].push_back(v);
    }
    for (auto& [name, list] : steps) values[name] = torch::cat(list, 0);
  }

  std::shared_ptr<const StagePlan> plan_;
  // Each node's sources in edge order, looked up once: summed() runs per
  // node and, inside cycles, per step.
  std::map<std::string, std::vector<std::string>> sources_;
  std::map<std::string, std::string> pool_of_;  // neuron node -> the pool fused with it (find_pooled_neurons)
  std::set<std::string> pooled_;                // those pools
};
TORCH_MODULE(GraphStage);

// Strongly connected components (Tarjan), as node-name sets.
std::vector<std::vector<std::string>> components(const Graph& g) {
  std::map<std::string, int> index, low;
  std::map<std::string, bool> on;
  std::vector<std::string> stack;
  std::vector<std::vector<std::string>> out;
  int next = 0;
  std::function<void(const std::string&)> visit = [&](const std::string& v) {
    index[v] = low[v] = next++;
    stack.push_back(v);
    on[v] = true;
    for (const auto& w : g.targets_of(v)) {
      if (!index.count(w)) {
        visit(w);
        low[v] = std::min(low[v], low[w]);
      } else if (on[w]) {
        low[v] = std::min(low[v], index[w]);
      }
    }
    if (low[v] == index[v]) {
      std::vector<std::string> c;
      std::string w;
      do {
        w = stack.back();
        stack.pop_back();
        on[w] = false;
        c.push_back(w);
      } while (w != v);
      out.push_back(c);
    }
  };
  for (const auto& n : g.nodes) {
    if (!index.count(n.name)) visit(n.name);
  }
  return out;
}

}  // namespace

static std::vector<std::shared_ptr<GraphModel::Unit>> make_units(const Graph& graph_, const graph::GraphShapes& shapes_) {
  std::map<std::string, size_t> rank;
  for (size_t i = 0; i < shapes_.order.size(); ++i) rank[shapes_.order[i]] = i;
  std::vector<std::shared_ptr<GraphModel::Unit>> units_;
  // Units: the components in an order where every edge between two of them
  // points forward (Kahn, ties by step order); a component of several nodes
  // (or a node feeding itself) is a cycle, run step by step.
  std::vector<std::vector<std::string>> comps = components(graph_);
  std::map<std::string, size_t> comp_of;
  for (size_t c = 0; c < comps.size(); ++c) {
    std::sort(comps[c].begin(), comps[c].end(), [&](const std::string& a, const std::string& b) { return rank[a] < rank[b]; });
    for (const auto& v : comps[c]) comp_of[v] = c;
  }
  std::vector<int> pending(comps.size(), 0);
  for (const auto& e : graph_.edges) {
    if (comp_of[e.source] != comp_of[e.target]) ++pending[comp_of[e.target]];
  }
  std::vector<bool> placed(comps.size(), false);
  for (size_t count = 0; count < comps.size(); ++count) {
    size_t best = comps.size();
    for (size_t c = 0; c < comps.size(); ++c) {
      if (!placed[c] && pending[c] == 0 && (best == comps.size() || rank[comps[c][0]] < rank[comps[best][0]])) best = c;
    }
    if (best == comps.size()) throw InternalError("the component graph has a cycle");
    placed[best] = true;
    auto u = std::make_shared<GraphModel::Unit>();
    bool self_loop = false;
    for (const auto& v : comps[best]) {
      u->nodes.push_back(&graph_.node(v));
      for (const auto& t : graph_.targets_of(v)) self_loop |= t == v;
      for (const auto& t : graph_.targets_of(v)) {
        if (comp_of[t] != best) --pending[comp_of[t]];
      }
    }
    u->cycle = u->nodes.size() > 1 || self_loop;
    for (const Node* n : u->nodes) {
      if (graph::is_neuron(n->kind)) ++u->neurons;
    }
    units_.push_back(u);
  }
  return units_;
}

std::vector<std::string> graph_neuron_names(const Graph& graph) {
  const graph::GraphShapes shapes = graph.validate();
  std::vector<std::string> out;
  for (const auto& u : make_units(graph, shapes)) {
    for (const Node* n : u->nodes) {
      if (graph::is_neuron(n->kind)) out.push_back(n->name);
    }
  }
  return out;
}

GraphModel::GraphModel(const Graph& graph, uint64_t seed) : graph_(graph), shapes_(graph_.validate()) {
  auto modules = std::make_shared<Modules>();
  modules_ = modules;
  for (const auto& n : graph_.nodes) {
    switch (n.kind) {
      case NodeKind::kInput:
      case NodeKind::kOutput:
      case NodeKind::kFlatten:
      case NodeKind::kSumPool2d:
      case NodeKind::kAvgPool2d:
      case NodeKind::kMaxPool2d:
        break;
      case NodeKind::kAffine:
      case NodeKind::kLinear:
      case NodeKind::kConv2d: {
        const auto& in = shapes_.input.at(n.name);
        const int64_t groups = n.kind == NodeKind::kConv2d ? n.groups : 1;
        // Per group (one for all but a grouped Conv2d): its share of the
        // outputs from its share of the inputs (PyTorch's fan-in).
        const int64_t out = shapes_.output.at(n.name)[0] / groups;
        const int64_t fan_in = n.kind == NodeKind::kConv2d ? in[0] / groups * n.kernel_size[0] * n.kernel_size[1] : in[0];
        const bool bias = n.kind != NodeKind::kLinear;
        // Refused by name before the allocator fails with a size alone.
        const double weight_bytes = static_cast<double>(fan_in) * static_cast<double>(out) *
                                    static_cast<double>(groups) * static_cast<double>(sizeof(float));
        const std::string beyond = beyond_memory(weight_bytes);
        if (!beyond.empty()) {
          throw Error(fmt::format("graph: node '{}' ({}): its {} x {} weights{} need {:.3g} GiB as float32, {}: give "
                                  "it fewer features or inputs",
                                  n.name, graph::to_string(n.kind), out * groups, fan_in,
                                  groups > 1 ? fmt::format(" ({} groups)", groups) : std::string(),
                                  weight_bytes / double(int64_t{1} << 30), beyond));
        }
        std::vector<Linear> fcs;
        for (int64_t j = 0; j < groups; ++j) {
          Linear fc(LinearOptions(fan_in, out).bias(bias).carry_grad_sums(true));
          torch::NoGradGuard no_grad;
          if (n.weight.defined()) fc->weight.copy_(n.weight.narrow(0, j * out, out).reshape({out, fan_in}));
          if (bias && n.bias.defined()) fc->bias.copy_(n.bias.narrow(0, j * out, out));
          if (bias && n.weight.defined() && !n.bias.defined()) fc->bias.zero_();
          fcs.push_back(fc);
        }
        if (groups == 1) {
          modules->linear.emplace(n.name, fcs[0]);
        } else {
          modules->grouped.emplace(n.name, fcs);
        }
        break;
      }
      case NodeKind::kScale:
        modules->scale.emplace(n.name, n.scale.to(torch::kFloat));
        break;
      case NodeKind::kDelay:
        modules->delay.emplace(n.name, DelayLine(n.delay, shapes_.output.at(n.name)));
        break;
      case NodeKind::kBatchNorm: {
        BatchNorm bn(BatchNormOptions(shapes_.output.at(n.name)[0]).eps(n.eps).momentum(n.momentum));
        torch::NoGradGuard no_grad;
        if (n.weight.defined()) bn->weight.copy_(n.weight.reshape(bn->weight.sizes()));
        if (n.bias.defined()) bn->bias.copy_(n.bias.reshape(bn->bias.sizes()));
        if (n.arrays.count("running_mean")) bn->running_mean.copy_(n.arrays.at("running_mean").reshape(bn->running_mean.sizes()));
        if (n.arrays.count("running_var")) bn->running_var.copy_(n.arrays.at("running_var").reshape(bn->running_var.sizes()));
        modules->norm.emplace(n.name, bn);
        break;
      }
      case NodeKind::kDropout:
        modules->dropout.emplace(n.name, Dropout(n.p, node_seed(seed, n.name)));
        break;
      default: {
        if (!graph::is_neuron(n.kind)) fail("node '" + n.name + "' (" + graph::to_string(n.kind) + ") is not simulated yet");
        if (graph::has_general_dynamics(n)) {
          modules->neuron.emplace(n.name, general_neuron_layer(n, shapes_.output.at(n.name)));
          break;
        }
        NeuronModule nm = make_neuron_layer(n.neuron, StepMode::kMulti);
        if (n.kind == NodeKind::kPLIF && n.arrays.count("w")) {
          torch::NoGradGuard no_grad;
          for (auto& p : nm.module.ptr()->named_parameters()) {
            if (p.key() == "w") p.value().copy_(n.arrays.at("w").reshape(p.value().sizes()));
          }
        }
        modules->neuron.emplace(n.name, nm);
        break;
      }
    }
  }
  units_ = make_units(graph_, shapes_);
  for (const auto& u : units_) {
    for (const Node* n : u->nodes) {
      if (modules->neuron.count(n->name)) {
        neurons_.push_back(modules->neuron.at(n->name).layer);
        neuron_names_.push_back(n->name);
      }
    }
  }
  if (neurons_.empty()) fail("the graph has no neuron layer (LIF, IF, PLIF, LI, CubaLIF, CubaLI or Threshold)");
  // The output is the last neuron layer's spikes (what evaluation counts).
  for (const auto& n : graph_.nodes) {
    if (n.kind != NodeKind::kOutput) continue;
    const auto src = graph_.sources_of(n.name);
    if (src.size() != 1 || src[0] != neuron_names_.back()) {
      fail("the Output '" + n.name + "' must be fed by the last neuron layer ('" + neuron_names_.back() +
           "') alone: snnsim counts its spikes (sums its potential, an LI's or CubaLI's)");
    }
  }
}

std::vector<int64_t> GraphModel::layer_sizes() const {
  std::vector<int64_t> out;
  for (const auto& n : graph_.nodes) {
    if (n.kind == NodeKind::kInput) out.push_back(numel(shapes_.output.at(n.name)));
  }
  if (out.size() != 1) fail("a graph network needs exactly one Input, this one has " + std::to_string(out.size()));
  for (const auto& name : neuron_names_) out.push_back(numel(shapes_.output.at(name)));
  return out;
}

std::vector<Linear> GraphModel::linear_layers() const {
  std::vector<Linear> out;
  const auto& m = *modules_;
  for (const auto& u : units_) {
    for (const Node* n : u->nodes) {
      if (m.linear.count(n->name)) out.push_back(m.linear.at(n->name));
      if (m.grouped.count(n->name)) {
        for (const auto& fc : m.grouped.at(n->name)) out.push_back(fc);
      }
    }
  }
  return out;
}

std::vector<std::string> GraphModel::batch_norm_nodes() const {
  std::vector<std::string> out;
  for (const auto& u : units_) {
    for (const Node* n : u->nodes) {
      if (modules_->norm.count(n->name)) out.push_back(n->name);
    }
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> GraphModel::named_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  const auto& m = *modules_;
  for (const auto& u : units_) {
    for (const Node* n : u->nodes) {
      if (m.linear.count(n->name)) {
        for (const auto& p : m.linear.at(n->name)->named_parameters()) out.emplace_back(n->name + "." + p.key(), p.value());
      }
      if (m.grouped.count(n->name)) {  // "<node>.g<j>.weight", ...
        const auto& fcs = m.grouped.at(n->name);
        for (size_t j = 0; j < fcs.size(); ++j) {
          for (const auto& p : fcs[j]->named_parameters()) {
            out.emplace_back(n->name + ".g" + std::to_string(j) + "." + p.key(), p.value());
          }
        }
      }
      if (m.neuron.count(n->name)) {
        for (const auto& p : m.neuron.at(n->name).module.ptr()->named_parameters()) {
          out.emplace_back(n->name + "." + p.key(), p.value());
        }
      }
      if (m.norm.count(n->name)) {
        for (const auto& p : m.norm.at(n->name)->named_parameters()) out.emplace_back(n->name + "." + p.key(), p.value());
      }
    }
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> GraphModel::named_buffers() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& u : units_) {
    for (const Node* n : u->nodes) {
      if (!modules_->norm.count(n->name)) continue;
      for (const auto& b : modules_->norm.at(n->name)->named_buffers()) out.emplace_back(n->name + "." + b.key(), b.value());
    }
  }
  return out;
}

void GraphModel::set_epoch(int64_t epoch) {
  for (auto& [name, d] : modules_->dropout) d->set_epoch(epoch);
}

Graph GraphModel::graph_with_weights() const {
  Graph g = graph_;
  const auto& m = *modules_;
  for (auto& n : g.nodes) {
    if (m.linear.count(n.name) || m.grouped.count(n.name)) {
      const std::vector<Linear> fcs = m.linear.count(n.name) ? std::vector<Linear>{m.linear.at(n.name)} : m.grouped.at(n.name);
      std::vector<torch::Tensor> w, b;
      for (const Linear& fc : fcs) {
        w.push_back(fc->weight.detach().to(torch::kCPU));
        if (fc->bias.defined()) b.push_back(fc->bias.detach().to(torch::kCPU));
      }
      n.weight = torch::cat(w, 0);
      if (n.kind == NodeKind::kConv2d) {
        const auto& in = shapes_.input.at(n.name);
        n.weight = n.weight.reshape({n.weight.size(0), in[0] / n.groups, n.kernel_size[0], n.kernel_size[1]});
      }
      if (!b.empty()) n.bias = torch::cat(b, 0);
      n.features = 0;
    }
    if (m.norm.count(n.name)) {
      const BatchNorm& bn = m.norm.at(n.name);
      n.weight = bn->weight.detach().to(torch::kCPU).clone();
      n.bias = bn->bias.detach().to(torch::kCPU).clone();
      n.arrays["running_mean"] = bn->running_mean.detach().to(torch::kCPU, torch::kDouble);
      n.arrays["running_var"] = bn->running_var.detach().to(torch::kCPU, torch::kDouble);
    }
    if (n.kind == NodeKind::kPLIF && m.neuron.count(n.name)) {
      for (const auto& p : m.neuron.at(n.name).module.ptr()->named_parameters()) {
        if (p.key() == "w") n.arrays["w"] = p.value().detach().to(torch::kCPU).clone().reshape({});
      }
    }
  }
  return g;
}

std::vector<int64_t> GraphModel::atomic_groups() const {
  std::vector<int64_t> out;
  for (const auto& u : units_) {
    if (u->neurons > 0) out.push_back(u->neurons);
  }
  return out;
}

std::vector<int64_t> GraphModel::even_balance(int64_t stages) const {
  const std::vector<int64_t> groups = atomic_groups();
  if (stages < 1 || stages > static_cast<int64_t>(groups.size())) {
    throw Error(std::to_string(stages) + " stages for a graph with " + std::to_string(groups.size()) +
                " neuron layers (or cycles, which stay in one stage): at most one stage each");
  }
  // Even over the groups, as the chain splits its layers.
  const int64_t n = static_cast<int64_t>(groups.size());
  std::vector<int64_t> out;
  size_t g = 0;
  for (int64_t s = 0; s < stages; ++s) {
    const int64_t take = n / stages + (s < n % stages ? 1 : 0);
    int64_t layers = 0;
    for (int64_t i = 0; i < take; ++i) layers += groups[g++];
    out.push_back(layers);
  }
  return out;
}

void GraphModel::check_balance(const std::vector<int64_t>& balance) const {
  size_t s = 0;
  int64_t count = 0;
  for (const auto& u : units_) {
    if (u->neurons == 0) continue;
    count += u->neurons;
    if (s < balance.size() && count > balance[s]) {
      std::string names;
      for (const Node* n : u->nodes) names += (names.empty() ? "" : ", ") + n->name;
      throw Error("balance " + std::to_string(balance[s]) + " for stage " + std::to_string(s) +
                  " cuts the cycle through " + names + ": a cycle runs in one stage");
    }
    if (s < balance.size() && count == balance[s]) {
      ++s;
      count = 0;
    }
  }
}

std::vector<double> GraphModel::time_groups(const torch::Tensor& spikes) const {
  torch::NoGradGuard no_grad;
  auto p = std::make_shared<StagePlan>();
  p->graph = &graph_;
  p->shapes = &shapes_;
  p->modules = modules_;
  p->units = units_;
  p->first = p->last = true;
  for (const auto& n : graph_.nodes) {
    if (n.kind == NodeKind::kInput) p->inputs.push_back(n.name);
    if (n.kind == NodeKind::kOutput) p->outputs.push_back(n.name);
  }
  std::vector<double> unit_seconds(units_.size(), 0.0);
  p->unit_seconds = &unit_seconds;
  GraphStage stage{std::shared_ptr<const StagePlan>(p)};
  for (auto& n : neurons_) n->reset_state();
  for (auto& [name, d] : modules_->delay) d->reset_state();
  stage->forward(spikes);
  for (auto& n : neurons_) n->reset_state();
  for (auto& [name, d] : modules_->delay) d->reset_state();
  // A unit's time counts with the next group that has neurons (its stage;
  // a max pool run with its neurons takes no time of its own).
  std::vector<double> out;
  double pending = 0;
  for (size_t i = 0; i < units_.size(); ++i) {
    pending += unit_seconds[i];
    if (units_[i]->neurons > 0) {
      out.push_back(pending);
      pending = 0;
    }
  }
  if (!out.empty()) out.back() += pending;
  return out;
}

std::vector<int64_t> GraphModel::layers_of_groups(const std::vector<int64_t>& groups_per_stage) const {
  const std::vector<int64_t> groups = atomic_groups();
  std::vector<int64_t> out;
  size_t g = 0;
  for (const int64_t n : groups_per_stage) {
    int64_t layers = 0;
    for (int64_t i = 0; i < n; ++i) layers += groups.at(g++);
    out.push_back(layers);
  }
  return out;
}

std::vector<torch::nn::AnyModule> GraphModel::make_stages(const std::vector<int64_t>& balance) const {
  check_balance(balance);
  const int64_t S = static_cast<int64_t>(balance.size());
  std::vector<std::shared_ptr<StagePlan>> plans;
  for (int64_t s = 0; s < S; ++s) {
    auto p = std::make_shared<StagePlan>();
    p->graph = &graph_;
    p->shapes = &shapes_;
    p->modules = modules_;
    p->first = s == 0;
    p->last = s == S - 1;
    plans.push_back(p);
  }
  // Units to stages: a stage ends after its last neuron layer, or after
  // the max pool that alone reads it (sole_max_pool: the two run as one
  // pass, and a quarter of the values cross the cut); what follows (the
  // next layer's synapses) opens the next stage.
  std::map<std::string, int64_t> stage_of;
  int64_t s = 0, count = 0;
  const auto place = [&](const std::shared_ptr<Unit>& u) {
    plans[s]->units.push_back(u);
    for (const Node* n : u->nodes) stage_of[n->name] = s;
  };
  for (size_t i = 0; i < units_.size(); ++i) {
    place(units_[i]);
    count += units_[i]->neurons;
    if (units_[i]->neurons > 0 && count == balance[s] && s + 1 < S) {
      const Node* pool = sole_max_pool(graph_, *units_[i]);
      if (pool && i + 1 < units_.size() && !units_[i + 1]->cycle && units_[i + 1]->nodes[0] == pool) place(units_[++i]);
      ++s;
      count = 0;
    }
  }
  // What crosses each cut: values made at or before it and used after it.
  for (const auto& n : graph_.nodes) {
    if (n.kind == NodeKind::kInput) plans[0]->inputs.push_back(n.name);
    if (n.kind == NodeKind::kOutput) plans[S - 1]->outputs.push_back(n.name);
  }
  for (int64_t cut = 0; cut + 1 < S; ++cut) {
    std::vector<std::string> live;
    for (const auto& u : units_) {
      for (const Node* n : u->nodes) {
        if (stage_of[n->name] > cut) continue;
        for (const auto& t : graph_.targets_of(n->name)) {
          if (stage_of[t] > cut) {
            live.push_back(n->name);
            break;
          }
        }
      }
    }
    plans[cut]->outputs = live;
    plans[cut + 1]->inputs = live;
  }
  std::vector<torch::nn::AnyModule> out;
  for (const auto& p : plans) out.emplace_back(GraphStage(std::shared_ptr<const StagePlan>(p)));
  return out;
}

}  // namespace snn
