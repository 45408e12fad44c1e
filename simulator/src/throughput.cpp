#include "snn/simulator/throughput.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>

#include "snn/core/error.h"
#include "snn/core/frozen_weights.h"

namespace snn {
namespace {

// Waits for the device's queued work, so that a timer sees it finished.
void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

double best_seconds(int repeats, const torch::Device& device, const std::function<void()>& fn) {
  fn();  // warm-up: allocator, page faults, packed weights
  synchronize(device);
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    synchronize(device);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// The naive per-step loop: what a SpikingJelly or hand-written LibTorch
// script does with torch::nn::Linear (BLAS) and one tensor op per formula,
// allocating new tensors every step. Returns the last layer's spike counts.
torch::Tensor naive_loop(const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases,
                         const NeuronParams& p, const torch::Tensor& x, int64_t steps) {
  const double reset = p.v_reset.value_or(0.0);
  std::vector<torch::Tensor> v(weights.size());
  for (size_t l = 0; l < weights.size(); ++l) v[l] = torch::full({x.size(0), weights[l].size(0)}, reset, x.options());
  torch::Tensor counts = torch::zeros({x.size(0), weights.back().size(0)}, x.options());
  for (int64_t t = 0; t < steps; ++t) {
    torch::Tensor s = torch::rand_like(x).le(x).to(x.scalar_type());  // SpikingJelly's PoissonEncoder
    for (size_t l = 0; l < weights.size(); ++l) {
      const torch::Tensor in = torch::nn::functional::linear(s, weights[l], biases[l]);
      torch::Tensor h;
      if (p.model == NeuronModel::kIF) {
        h = v[l] + in;
      } else if (p.decay_input) {
        h = v[l] + (in - (v[l] - reset)) / p.tau;
      } else {
        h = v[l] - (v[l] - reset) / p.tau + in;
      }
      s = (h >= p.v_threshold).to(x.scalar_type());
      v[l] = p.v_reset ? h * (1 - s) + reset * s : h - s * p.v_threshold;
    }
    counts = counts + s;
  }
  return counts;
}

}  // namespace

ThroughputResult measure_throughput(SpikingNetwork& network, const torch::Tensor& images,
                                    const ThroughputOptions& options) {
  const NetworkConfig& config = network.config();
  if (config.neuron.model == NeuronModel::kParametricLIF || config.neuron.refractory > 0) {
    throw Error("snnsim bench's naive reference loop has LIF and IF neurons without a refractory period; got " +
                to_string(config.neuron.model) +
                (config.neuron.refractory > 0 ? " with refractory " + std::to_string(config.neuron.refractory) : ""));
  }
  torch::NoGradGuard no_grad;
  // No weight changes while measuring: layers pack theirs once, as in snnsim run.
  const FrozenWeights frozen;
  const torch::Tensor x = network.prepare_input(images);
  const int64_t B = x.size(0), T = config.steps;
  const torch::Device first(config.devices.front());
  ThroughputResult result;
  result.batch = B;
  result.steps = T;

  // One sequential pass, module by module over all T steps at once (one
  // block): the time split, and every layer's spikes for the rates.
  {
    const torch::Tensor ids = torch::arange(B);
    // Copies of the holders: the same modules, callable.
    PoissonEncoder enc = network.encoder();
    std::vector<Linear> synapses = network.synapses();
    std::vector<torch::nn::AnyModule> neurons = network.neuron_modules();
    const torch::Tensor x_dev = x.to(first);
    std::vector<torch::Tensor> spikes;
    std::vector<std::string> paths;
    auto pass = [&](bool timed) {
      spikes.clear();
      paths.clear();
      auto timed_call = [&](double& total, const std::function<torch::Tensor()>& fn) {
        const auto t0 = std::chrono::steady_clock::now();
        torch::Tensor out = fn();
        synchronize(first);
        if (timed) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return out;
      };
      enc->reset_state();
      enc->set_time(0, ids);
      torch::Tensor s = timed_call(result.encode_seconds,
                                   [&] { return enc->forward(x_dev.unsqueeze(0).expand({T, B, x.size(1)})); });
      spikes.push_back(s);
      for (size_t l = 0; l < synapses.size(); ++l) {
        network.neuron_layers()[l]->reset_state();
        const torch::Tensor in = timed_call(result.synapse_seconds, [&] { return synapses[l]->forward(s); });
        const LinearPath path = synapses[l]->last_path();
        if (s.is_cuda()) {
          paths.push_back(path == LinearPath::kDense ? "cublas" : "gpu-event");  // see LinearPath
        } else {
          paths.push_back(path == LinearPath::kEvent ? "event" : "dense");
        }
        const torch::Tensor unfused =
            timed_call(result.neuron_seconds, [&] { return neurons[l].forward<torch::Tensor>(in); });
        // The same layer as the pipeline runs it (fused on the CPU), which
        // must give the same spikes.
        network.neuron_layers()[l]->reset_state();
        s = timed_call(result.fused_seconds,
                       [&] { return network.neuron_layers()[l]->multi_step_after(*synapses[l], s); });
        if (!torch::equal(s, unfused)) {
          throw InternalError("layer " + std::to_string(l) + ": the fused synapse and neuron pass gave other spikes "
                              "than the two passes one after the other");
        }
        spikes.push_back(s);
      }
    };
    // Warm-up: also the calls on which a layer near its crossover times both
    // kernels (KernelTrial, 2 kRuns calls of forward and of forward_steps),
    // so that the timed passes and the reported kernel are the one it keeps.
    for (int w = 0; w < 2 * KernelTrial::kRuns; ++w) pass(false);
    // Each part's best pass: the parts are compared with each other (the
    // fused layers against the synapses alone), and one slow moment of the
    // machine in a pass should not count against one part only.
    const double inf = std::numeric_limits<double>::infinity();
    double enc_best = inf, syn_best = inf, neu_best = inf, fused_best = inf;
    for (int r = 0; r < std::max(1, options.repeats); ++r) {
      result.encode_seconds = result.synapse_seconds = result.neuron_seconds = result.fused_seconds = 0;
      pass(true);
      enc_best = std::min(enc_best, result.encode_seconds);
      syn_best = std::min(syn_best, result.synapse_seconds);
      neu_best = std::min(neu_best, result.neuron_seconds);
      fused_best = std::min(fused_best, result.fused_seconds);
    }
    result.encode_seconds = enc_best;
    result.synapse_seconds = syn_best;
    result.neuron_seconds = neu_best;
    result.fused_seconds = fused_best;
    for (size_t l = 0; l < synapses.size(); ++l) {
      LayerActivity a;
      a.in = config.layers[l];
      a.out = config.layers[l + 1];
      const double input_spikes = spikes[l].to(torch::kDouble).sum().item<double>();
      a.input_rate = input_spikes / (static_cast<double>(T) * B * a.in);
      a.output_rate = spikes[l + 1].to(torch::kDouble).sum().item<double>() / (static_cast<double>(T) * B * a.out);
      a.path = paths[l];
      result.layers.push_back(a);
      result.neuron_steps += static_cast<double>(T) * B * a.out;
      result.dense_synaptic_ops += static_cast<double>(T) * B * a.in * a.out;
      result.synaptic_events += input_spikes * a.out;
    }
  }

  const torch::Device last(config.devices.back());
  for (int64_t k : options.steps_per_tick) {
    if (k < 0) throw Error("steps per tick must be >= 0 (0 = T), got " + std::to_string(k));
    const int64_t K = k == 0 ? T : std::min(k, T);
    ModelPipeline pipe = network.make_pipeline();
    pipe.options().steps_per_tick(K);
    TimedRun run;
    run.name = "pipeline K=" + std::to_string(K);
    run.steps_per_tick = K;
    run.seconds = best_seconds(options.repeats, last, [&] { pipe.constant_forward(x, T); });
    result.runs.push_back(run);
  }

  if (options.naive) {
    std::vector<torch::Tensor> weights, biases;
    for (const auto& fc : network.synapses()) {
      weights.push_back(fc->weight.detach().to(first));
      biases.push_back(fc->bias.defined() ? fc->bias.detach().to(first) : torch::Tensor());
    }
    const torch::Tensor x_dev = x.to(first);
    torch::Tensor counts;
    TimedRun run;
    run.name = "naive per-step loop";
    run.seconds = best_seconds(options.repeats, first, [&] { counts = naive_loop(weights, biases, config.neuron, x_dev, T); });
    result.naive_output_rate = counts.to(torch::kDouble).sum().item<double>() / (static_cast<double>(T) * B * counts.size(1));
    result.runs.push_back(run);
  }
  return result;
}

}  // namespace snn
