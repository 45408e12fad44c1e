#include "snn/simulator/network.h"

#include <fmt/format.h>
#include <torch/nn/modules/container/sequential.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "snn/core/error.h"
#include "snn/graph/graph_text.h"
#include "snn/simulator/graph_model.h"
#include "snn/simulator/neuron_sim.h"

namespace snn {

using nlohmann::json;

std::vector<int64_t> NetworkConfig::parse_layers(const std::string& text) {
  std::vector<int64_t> sizes;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, '-')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != part.size() || v < 1) {
      throw Error("layer sizes must look like 784-256-10 (positive integers joined by '-'), got '" + text + "'");
    }
    sizes.push_back(v);
  }
  if (sizes.size() < 2) throw Error("layer sizes need an input and at least one layer, got '" + text + "'");
  return sizes;
}

void NetworkSpec::validate() const {
  if (layers.size() < 2) throw Error("a network needs an input size and at least one layer");
  for (auto s : layers) {
    if (s < 1) throw Error("layer sizes must be >= 1, got " + std::to_string(s));
  }
  neuron.validate();
  if (!(input_gain > 0) || !std::isfinite(input_gain)) {
    throw Error(fmt::format("the input gain must be positive, got {}", input_gain));
  }
  if (!layer_names.empty() && layer_names.size() + 1 != layers.size()) {
    throw Error(std::to_string(layer_names.size()) + " layer names for " + std::to_string(layers.size() - 1) +
                " neuron layers");
  }
  for (size_t i = 0; i < layer_names.size(); ++i) {
    if (layer_names[i].empty() || layer_names[i].find('/') != std::string::npos) {
      throw Error("layer name '" + layer_names[i] + "' is empty or holds '/'");
    }
    for (size_t j = 0; j < i; ++j) {
      if (layer_names[j] == layer_names[i]) throw Error("two neuron layers are named '" + layer_names[i] + "'");
    }
  }
}

void SimulationConfig::validate(int64_t units) const {
  if (steps < 1) throw Error("T (steps per sample) must be >= 1, got " + std::to_string(steps));
  if (steps_per_tick < 0) throw Error("steps per tick must be >= 1 (or 0 for T), got " + std::to_string(steps_per_tick));
  if (devices.empty()) throw Error("at least one device is needed");
  if (static_cast<int64_t>(devices.size()) > units) {
    throw Error(std::to_string(devices.size()) + " devices (stages) for " + std::to_string(units) +
                " layers: at most one stage per layer");
  }
  for (const auto& d : devices) {
    try {
      const torch::Device dev(d);
      if (!dev.is_cpu() && !dev.is_cuda()) throw Error("");
    } catch (const std::exception&) {
      throw Error("device '" + d + "' is not cpu or cuda:N");
    }

  }
  if (!balance.empty()) {
    if (balance.size() != devices.size()) {
      throw Error("balance has " + std::to_string(balance.size()) + " entries but there " +
                  (devices.size() == 1 ? "is 1 device" : "are " + std::to_string(devices.size()) + " devices") +
                  ": one count of layers per device");
    }
    int64_t sum = 0;
    for (auto b : balance) {
      if (b < 1) throw Error("every stage needs at least one layer; balance holds " + std::to_string(b));
      sum += b;
    }
    if (sum != units) {
      throw Error("balance assigns " + std::to_string(sum) + " layers but the network has " + std::to_string(units));
    }
  }
}

void NetworkConfig::validate() const {
  NetworkSpec::validate();
  SimulationConfig::validate(static_cast<int64_t>(layers.size()) - 1);
}

namespace {
json neuron_to_json(const NeuronParams& p) {
  return json{{"model", to_string(p.model)},
              {"tau", p.tau},
              {"decay_input", p.decay_input},
              {"v_threshold", p.v_threshold},
              {"v_reset", p.v_reset ? json(*p.v_reset) : json(nullptr)},
              {"detach_reset", p.detach_reset},
              {"surrogate", p.surrogate.kind == SurrogateKind::kSigmoid ? "sigmoid" : "atan"},
              {"alpha", p.surrogate.alpha},
              {"refractory", p.refractory}};
}

NeuronParams neuron_from_json(const json& j) {
  NeuronParams p;
  p.model = parse_neuron_model(j.at("model").get<std::string>());
  p.tau = j.at("tau").get<double>();
  p.decay_input = j.at("decay_input").get<bool>();
  p.v_threshold = j.at("v_threshold").get<double>();
  p.v_reset = j.at("v_reset").is_null() ? std::nullopt : std::optional<double>(j.at("v_reset").get<double>());
  p.detach_reset = j.at("detach_reset").get<bool>();
  p.surrogate = Surrogate::parse(j.at("surrogate").get<std::string>());
  p.surrogate.alpha = j.at("alpha").get<double>();
  p.refractory = j.at("refractory").get<int64_t>();
  return p;
}
}  // namespace

std::string NetworkConfig::to_json() const {
  json j{{"layers", layers},   {"neuron", neuron_to_json(neuron)}, {"seed", seed},
         {"steps", steps},     {"steps_per_tick", steps_per_tick}, {"devices", devices},
         {"balance", balance}, {"input_gain", input_gain}};
  if (graph) j["graph"] = json::parse(graph::graph_to_json(*graph));  // structure; weights are parameters
  if (!layer_names.empty()) j["layer_names"] = layer_names;
  return j.dump(2);
}

NetworkConfig NetworkConfig::from_json(const std::string& text) {
  NetworkConfig c;
  try {
    const json j = json::parse(text);
    c.layers = j.at("layers").get<std::vector<int64_t>>();
    c.neuron = neuron_from_json(j.at("neuron"));
    c.seed = j.at("seed").get<uint64_t>();
    c.steps = j.at("steps").get<int64_t>();
    c.steps_per_tick = j.at("steps_per_tick").get<int64_t>();
    c.devices = j.at("devices").get<std::vector<std::string>>();
    c.balance = j.at("balance").get<std::vector<int64_t>>();
    c.input_gain = j.value("input_gain", 1.0);  // absent in files written before it existed
    if (j.contains("layer_names")) c.layer_names = j.at("layer_names").get<std::vector<std::string>>();
    if (j.contains("graph")) {
      c.graph = std::make_shared<const graph::Graph>(graph::parse_graph_text(j.at("graph").dump(), "network config's graph"));
    }
  } catch (const json::exception& e) {
    throw Error(std::string("network config: ") + e.what());
  }
  c.validate();
  return c;
}

namespace {
// A graph whose Output lags its Input by T steps or more (Delays on every
// path) never sees the input within a sample: its outputs are all zero, and
// training found no gradient (LibTorch's "element 0 of tensors does not
// require grad").
void check_latency(const graph::Graph& graph, const graph::GraphShapes& s, int64_t steps) {
  if (steps > s.latency) return;
  std::string delays;
  for (const auto& name : s.latency_path) {
    delays += (delays.empty() ? "" : ", ") + fmt::format("'{}' of {}", name, graph.node(name).delay);
  }
  if (s.latency >= std::numeric_limits<int64_t>::max() / 4) {
    throw InternalError("the graph's Output is not reached from its Input, yet its validation passed");
  }
  throw Error(fmt::format("the graph's Output is {} steps behind its Input (its shortest path passes the Delay{} {}), "
                          "so T = {} steps never reach it: give T > {} (--T) or shorter Delays",
                          s.latency, s.latency_path.size() == 1 ? "" : "s", delays, steps, s.latency));
}
}  // namespace

SpikingNetwork::SpikingNetwork(const NetworkConfig& config) : config_(config) {
  if (config_.graph) {
    // Weights the graph lacks depend only on the seed, as a chain's.
    torch::manual_seed(static_cast<uint64_t>(config_.seed));
    graph_model_ = std::make_shared<GraphModel>(*config_.graph, config_.seed);
    config_.layers = graph_model_->layer_sizes();
    config_.validate();
    if (!config_.balance.empty()) graph_model_->check_balance(config_.balance);
    PoissonEncoderOptions enc;
    enc.seed(config_.seed).step_mode(StepMode::kMulti).spike_dtype(torch::kBool);
    encoder_ = PoissonEncoder(enc);
    neurons_ = graph_model_->neuron_layers();
    return;
  }
  config_.validate();
  // Weights depend only on the seed (LibTorch's global generator, reseeded).
  torch::manual_seed(static_cast<uint64_t>(config_.seed));
  PoissonEncoderOptions enc;
  // Spikes that only feed an snn::Linear travel as bool: a quarter of the
  // memory traffic of float32, the same values. The encoder's always (they
  // carry no gradient), the hidden layers' when no gradient is recorded
  // (simulation, evaluation). The last layer's spikes, the network's
  // output, keep the input's dtype: callers sum them into counts.
  enc.seed(config_.seed).step_mode(StepMode::kMulti).spike_dtype(torch::kBool);
  encoder_ = PoissonEncoder(enc);
  for (size_t i = 0; i + 1 < config_.layers.size(); ++i) {
    synapses_.emplace_back(LinearOptions(config_.layers[i], config_.layers[i + 1]).carry_grad_sums(true));
    NeuronModule n = make_neuron_layer(config_.neuron, StepMode::kMulti);
    n.layer->set_bool_spikes_without_grad(i + 2 < config_.layers.size());
    neuron_modules_.push_back(n.module);
    neurons_.push_back(n.layer);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> SpikingNetwork::named_parameters() const {
  if (graph_model_) return graph_model_->named_parameters();
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (size_t i = 0; i < synapses_.size(); ++i) {
    for (const auto& p : synapses_[i]->named_parameters()) out.emplace_back("fc" + std::to_string(i) + "." + p.key(), p.value());
    for (const auto& p : neuron_modules_[i].ptr()->named_parameters()) {
      out.emplace_back("lif" + std::to_string(i) + "." + p.key(), p.value());
    }
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> SpikingNetwork::named_buffers() const {
  return graph_model_ ? graph_model_->named_buffers() : std::vector<std::pair<std::string, torch::Tensor>>{};
}

void SpikingNetwork::set_training_epoch(int64_t epoch) {
  if (graph_model_) graph_model_->set_epoch(epoch);
}

std::vector<Linear> SpikingNetwork::linear_layers() const {
  return graph_model_ ? graph_model_->linear_layers() : synapses_;
}

std::vector<torch::Tensor> SpikingNetwork::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : named_parameters()) out.push_back(p.second);
  return out;
}

std::vector<int64_t> SpikingNetwork::stage_layers() const {
  const int64_t stages = static_cast<int64_t>(config_.devices.size());
  const int64_t units = static_cast<int64_t>(synapses_.size());
  std::vector<int64_t> balance = config_.balance;
  if (balance.empty() && graph_model_) return graph_model_->even_balance(stages);
  if (balance.empty()) {
    for (int64_t s = 0; s < stages; ++s) balance.push_back(units / stages + (s < units % stages ? 1 : 0));
  }
  return balance;
}

ModelPipeline SpikingNetwork::make_pipeline() const {
  // Here and in set_simulation, not in the constructor: a NIR file is read
  // with the default T, and a run's --T comes after.
  if (graph_model_) check_latency(*config_.graph, graph_model_->shapes(), config_.steps);
  const int64_t stages = static_cast<int64_t>(config_.devices.size());
  const std::vector<int64_t> balance = stage_layers();
  ModelPipeline pipe(PipelineOptions().steps_per_tick(config_.steps_per_tick > 0 ? config_.steps_per_tick
                                                                                 : config_.steps));
  const int64_t first = part_count_ > 0 ? part_first_ : 0;
  const int64_t last = part_count_ > 0 ? part_first_ + part_count_ : stages;
  if (first < 0 || last > stages) {
    throw Error("the pipeline part of stages " + std::to_string(first) + ".." + std::to_string(last - 1) +
                " is not within the network's " + std::to_string(stages) + " stages");
  }
  pipe.set_links(part_links_);
  if (graph_model_) {
    std::vector<torch::nn::AnyModule> modules = graph_model_->make_stages(balance);
    for (int64_t s = first; s < last; ++s) {
      torch::nn::Sequential seq;
      if (s == 0 && poisson_input()) seq->push_back(encoder_);  // direct: the images go in as they are
      seq->push_back(modules[s]);
      pipe.append(seq, torch::Device(config_.devices[s]));
    }
    return pipe;
  }
  size_t next = 0;
  for (int64_t s = 0; s < last; ++s) {
    if (s < first) {  // another process's stage
      next += static_cast<size_t>(balance[s]);
      continue;
    }
    torch::nn::Sequential seq;
    if (s == 0) seq->push_back(encoder_);
    // Each synapse layer with its neurons: fused when simulating on the CPU.
    for (int64_t i = 0; i < balance[s]; ++i, ++next) {
      seq->push_back(LinearNeuron(synapses_[next], neuron_modules_[next], neurons_[next]));
    }
    pipe.append(seq, torch::Device(config_.devices[s]));
  }
  return pipe;
}

void SpikingNetwork::set_pipeline_part(int64_t first, int64_t count, PipelineLinks links) {
  const int64_t stages = static_cast<int64_t>(config_.devices.size());
  if (count < 0 || first < 0 || (count > 0 && first + count > stages)) {
    throw Error("a pipeline part of " + std::to_string(count) + " stages from stage " + std::to_string(first) +
                " is not within the network's " + std::to_string(stages) + " stages");
  }
  part_first_ = count > 0 ? first : 0;
  part_count_ = count;
  part_links_ = count > 0 ? std::move(links) : PipelineLinks{};
}

std::vector<int64_t> balanced_partition(const std::vector<double>& costs, int64_t groups) {
  const int64_t n = static_cast<int64_t>(costs.size());
  if (groups < 1 || groups > n) {
    throw Error("cannot split " + std::to_string(n) + " layers into " + std::to_string(groups) +
                " non-empty stages");
  }
  std::vector<double> prefix(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  // best[g][i]: the smallest possible maximum when the first i items form g groups.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(groups + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> cut(groups + 1, std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t g = 1; g <= groups; ++g) {
    for (int64_t i = g; i <= n; ++i) {
      for (int64_t j = i - 1; j >= g - 1; --j) {  // the last group is items [j, i)
        const double worst = std::max(best[g - 1][j], prefix[i] - prefix[j]);
        if (worst < best[g][i]) {
          best[g][i] = worst;
          cut[g][i] = j;
        }
      }
    }
  }
  std::vector<int64_t> sizes(groups);
  for (int64_t g = groups, i = n; g >= 1; --g) {
    sizes[g - 1] = i - cut[g][i];
    i = cut[g][i];
  }
  return sizes;
}

bool SpikingNetwork::poisson_input() const {
  if (!config_.graph) return true;  // a chain's input is always rate coded
  for (const auto& n : config_.graph->nodes) {
    if (n.kind == graph::NodeKind::kInput) return n.encoding == "poisson";
  }
  return true;
}

torch::Tensor SpikingNetwork::encode_input(const torch::Tensor& x) const {
  const torch::Tensor steps = x.unsqueeze(0).expand({config_.steps, x.size(0), x.size(1)});
  if (!poisson_input()) return steps;
  PoissonEncoder enc(PoissonEncoderOptions().seed(config_.seed).step_mode(StepMode::kMulti).spike_dtype(torch::kBool));
  return enc->forward(steps);
}

std::vector<int64_t> SpikingNetwork::measure_balance(const torch::Tensor& images, int64_t stages, int repeats) {
  torch::NoGradGuard no_grad;
  if (graph_model_) {
    // Groups (a layer, or a cycle's layers, which stay in one stage) timed
    // as one stage runs them, best of `repeats`, then split as the chain's.
    // Dense, not the direct input's expansion over T: every step then pays
    // for the layers before the first neurons, as in training and in blocks
    // of K = 1 (a pipeline over ranks), where they are not shared
    // (inference with K > 1 shares them, and is at worst cut as before).
    const torch::Tensor spikes = encode_input(prepare_input(images)).contiguous();
    std::vector<double> best;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      const std::vector<double> t = graph_model_->time_groups(spikes);
      if (best.empty()) best = t;
      for (size_t i = 0; i < t.size(); ++i) best[i] = std::min(best[i], t[i]);
    }
    measured_seconds_ = best;
    return graph_model_->layers_of_groups(balanced_partition(best, stages));
  }
  torch::Tensor spikes = encode_input(prepare_input(images));
  measured_seconds_.assign(synapses_.size(), std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < synapses_.size(); ++i) {
    torch::Tensor out;
    for (int r = 0; r < std::max(1, repeats); ++r) {
      neurons_[i]->reset_state();
      const auto t0 = std::chrono::steady_clock::now();
      out = neurons_[i]->multi_step_after(*synapses_[i], spikes);  // as the pipeline runs it
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      measured_seconds_[i] = std::min(measured_seconds_[i], s);
    }
    neurons_[i]->reset_state();
    spikes = out;
  }
  return balanced_partition(measured_seconds_, stages);
}

void SpikingNetwork::set_balance(std::vector<int64_t> balance) {
  SimulationConfig s = config_.simulation();
  s.balance = std::move(balance);
  set_simulation(s);
}

void SpikingNetwork::set_simulation(const SimulationConfig& simulation) {
  simulation.validate(static_cast<int64_t>(config_.layers.size()) - 1);
  if (graph_model_ && !simulation.balance.empty()) graph_model_->check_balance(simulation.balance);
  if (graph_model_) check_latency(*config_.graph, graph_model_->shapes(), simulation.steps);
  config_.simulation() = simulation;
}

torch::Tensor SpikingNetwork::prepare_input(const torch::Tensor& images) const {
  TORCH_CHECK(images.dim() >= 1, "images must be [B, ...]");
  torch::Tensor x = images.scalar_type() == torch::kUInt8 ? images.to(torch::kFloat).div(255.0) : images.to(torch::kFloat);
  x = x.reshape({images.size(0), -1});
  if (x.size(1) != config_.layers.front()) {
    throw Error("the network's input size is " + std::to_string(config_.layers.front()) + " but the images have " +
                std::to_string(x.size(1)) + " values each");
  }
  if (config_.input_gain != 1.0) x = (x * config_.input_gain).clamp_max(1.0);
  return x;
}

}  // namespace snn
