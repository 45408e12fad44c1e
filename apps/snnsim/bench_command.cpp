// `snnsim bench`: simulation throughput of a rate-coded network through the
// pipeline, against a naive per-step LibTorch loop in the same run.

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "neuron_flags.h"
#include "validators.h"
#include "snn/core/error.h"
#include "snn/datasets/idx.h"
#include "snn/simulator/checkpoint.h"
#include "snn/simulator/throughput.h"
#include "snn/simulator/torch_config.h"

namespace snn::app {
namespace {

struct BenchFlags {
  std::string layers = "784-1024-10";
  int64_t batch = 64;
  int64_t steps = 100;
  std::string steps_per_tick = "1,10,0";
  int threads = 0;
  std::string devices = "cpu";
  std::string path = "auto";
  std::string checkpoint;
  double weight_scale = 8.0;
  uint64_t seed = 0;
  std::string data_dir;
  int reps = 3;
  bool json = false;
  bool no_naive = false;
  std::string save_weights;
  NeuronFlags neuron;
};

std::vector<int64_t> parse_ks(const std::string& text) {
  std::vector<int64_t> ks;
  for (const std::string& part : split_list(text)) {
    const double v = parse_number("--steps-per-tick", part);
    if (v < 0 || v != static_cast<double>(static_cast<int64_t>(v))) {
      throw Error("--steps-per-tick: expected whole numbers >= 0 (0 = T) joined by ',', got '" + text + "'");
    }
    ks.push_back(static_cast<int64_t>(v));
  }
  if (ks.empty()) throw Error("--steps-per-tick: expected at least one value, got '" + text + "'");
  return ks;
}

void run_bench(const BenchFlags& f, const std::vector<std::string>& given) {
  if (f.threads > 0) naming_flags(given, [&] { set_intra_op_threads(f.threads); });
  const int threads = at::get_num_threads();
  const auto has = [&](const char* flag) { return std::find(given.begin(), given.end(), flag) != given.end(); };
  std::unique_ptr<SpikingNetwork> net;
  NetworkConfig c;
  if (!f.checkpoint.empty()) {
    for (const char* flag : {"--layers", "--weight-scale", "--model", "--tau", "--decay-input", "--v-threshold",
                             "--v-reset", "--refractory"}) {
      if (has(flag)) throw Error(std::string(flag) + " cannot be combined with --checkpoint (the network is the checkpoint's)");
    }
    NetworkOverrides overrides;
    overrides.steps = f.steps;
    Placement placement;
    placement.devices = split_list(f.devices);
    naming_flags(given, [&] { net = load_network(f.checkpoint, overrides, placement).network; });
    c = net->config();
  } else {
    c.layers = NetworkConfig::parse_layers(f.layers);
    c.neuron = neuron_params(f.neuron);
    c.seed = f.seed;
    c.steps = f.steps;
    c.devices = split_list(f.devices);
    naming_flags(given, [&] { c.validate(); });
    if (!(f.weight_scale > 0)) throw Error("--weight-scale must be positive, got " + std::to_string(f.weight_scale));
    net = std::make_unique<SpikingNetwork>(c);
    // Initialised like torch::nn::Linear, then scaled: an untrained network
    // hardly fires; the scale gives rates like a trained one's.
    torch::NoGradGuard no_grad;
    for (const auto& fc : net->synapses()) fc->weight.mul_(f.weight_scale);
  }
  const LinearPath path = f.path == "dense" ? LinearPath::kDense : f.path == "event" ? LinearPath::kEvent : LinearPath::kAuto;
  for (Linear fc : net->synapses()) fc->options.path(path);
  net->make_pipeline();  // moves the stages to their devices (and says when one does not exist)

  // The first B held-out digits, rate coded.
  const ImageDataset data = load_data_for_outputs(f.data_dir, c.layers.back());
  if (data.test.size() < f.batch) {
    throw Error(fmt::format("--batch {} is more than the {} test images in {}", f.batch, data.test.size(), f.data_dir));
  }
  const torch::Tensor images = data.test.images.narrow(0, 0, f.batch);
  if (!f.save_weights.empty()) save_checkpoint(f.save_weights, *net, 0);

  ThroughputOptions o;
  o.steps_per_tick = parse_ks(f.steps_per_tick);
  o.repeats = f.reps;
  o.naive = !f.no_naive;
  const ThroughputResult r = measure_throughput(*net, images, o);

  std::string layers;
  for (size_t i = 0; i < c.layers.size(); ++i) layers += (i ? "-" : "") + std::to_string(c.layers[i]);
  const double naive_s = o.naive ? r.runs.back().seconds : 0.0;
  const double step_total = r.encode_seconds + r.synapse_seconds + r.neuron_seconds;
  // As the pipeline runs it: the encoder, then each synapse layer with its
  // neurons fused; the neurons' share is what the fusion adds to the
  // synapses alone (nothing where the fused pass is no slower: the synapses
  // alone store their currents to memory, the fused pass does not).
  const double fused_total = r.encode_seconds + r.fused_seconds;
  const double fused_neurons = std::max(0.0, r.fused_seconds - r.synapse_seconds);
  const double fused_fraction = fused_total > 0 ? (r.encode_seconds + fused_neurons) / fused_total : 0.0;
  if (f.json) {
    nlohmann::json j;
    j["layers"] = c.layers;
    j["neuron"] = to_string(c.neuron.model);
    j["tau"] = c.neuron.tau;
    j["batch"] = r.batch;
    j["T"] = r.steps;
    j["threads"] = threads;
    j["blas"] = torch_blas_name();
    j["devices"] = c.devices;
    j["weights"] = f.checkpoint.empty() ? "random x " + fmt::format("{}", f.weight_scale) : f.checkpoint;
    j["neuron_steps_per_batch"] = r.neuron_steps;
    j["dense_synaptic_ops_per_batch"] = r.dense_synaptic_ops;
    j["synaptic_events_per_batch"] = r.synaptic_events;
    for (const auto& a : r.layers) {
      j["layers_activity"].push_back(
          {{"in", a.in}, {"out", a.out}, {"input_rate", a.input_rate}, {"output_rate", a.output_rate}, {"path", a.path}});
    }
    for (const auto& run : r.runs) {
      nlohmann::json e{{"name", run.name},
                       {"seconds_per_batch", run.seconds},
                       {"samples_per_s", r.batch / run.seconds},
                       {"neuron_steps_per_s", r.neuron_steps / run.seconds},
                       {"dense_synaptic_ops_per_s", r.dense_synaptic_ops / run.seconds},
                       {"synaptic_events_per_s", r.synaptic_events / run.seconds}};
      if (run.steps_per_tick > 0) e["steps_per_tick"] = run.steps_per_tick;
      if (o.naive) e["speedup_vs_naive"] = naive_s / run.seconds;
      j["runs"].push_back(e);
    }
    j["sequential_seconds"] = {{"encode", r.encode_seconds}, {"synapses", r.synapse_seconds}, {"neurons", r.neuron_seconds}};
    j["non_synapse_fraction"] = step_total > 0 ? (r.encode_seconds + r.neuron_seconds) / step_total : 0.0;
    j["fused_seconds"] = {{"encode", r.encode_seconds}, {"synapses_with_neurons", r.fused_seconds},
                          {"neurons_added", fused_neurons}};
    j["non_synapse_fraction_fused"] = fused_fraction;
    if (o.naive) j["naive_output_rate"] = r.naive_output_rate;
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("snnsim bench: {} {} (tau {}), B = {}, T = {}, {} weights, the first {} test images of {}\n",
                           layers, to_string(c.neuron.model), c.neuron.tau, r.batch, r.steps,
                           f.checkpoint.empty() ? fmt::format("random (x {})", f.weight_scale) : f.checkpoint, r.batch,
                           f.data_dir);
  std::cout << torch_config_summary(threads);
  std::cout << "devices: " << f.devices << "\n";
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const auto& a = r.layers[i];
    std::cout << fmt::format("layer {} ({}-{}): input firing {:.1f}%, output firing {:.1f}%, synapse kernel {}\n", i,
                             a.in, a.out, 100 * a.input_rate, 100 * a.output_rate, a.path);
  }
  std::cout << fmt::format("\n{:<22} {:>10} {:>10} {:>15} {:>15} {:>15} {:>9}\n", "", "ms/batch", "samples/s",
                           "neuron-steps/s", "dense syn-op/s", "syn-events/s", "vs naive");
  for (const auto& run : r.runs) {
    // Without the naive loop (--no-naive) there is no ratio to print.
    const std::string ratio = o.naive ? fmt::format("{:.2f}x", naive_s / run.seconds) : "-";
    std::cout << fmt::format("{:<22} {:>10.2f} {:>10.1f} {:>15.3e} {:>15.3e} {:>15.3e} {:>9}\n", run.name,
                             1e3 * run.seconds, r.batch / run.seconds, r.neuron_steps / run.seconds,
                             r.dense_synaptic_ops / run.seconds, r.synaptic_events / run.seconds, ratio);
  }
  std::cout << fmt::format(
      "\nOne sequential pass (K = T): encoder {:.2f} ms, synapses {:.2f} ms, neurons {:.2f} ms: everything but the "
      "synapses is {:.1f}% of the time\n",
      1e3 * r.encode_seconds, 1e3 * r.synapse_seconds, 1e3 * r.neuron_seconds,
      step_total > 0 ? 100 * (r.encode_seconds + r.neuron_seconds) / step_total : 0.0);
  std::cout << fmt::format(
      "As the pipeline runs it (each synapse layer with its neurons, fused): encoder {:.2f} ms, synapses with "
      "neurons {:.2f} ms (synapses alone {:.2f} ms): everything but the synapses is {:.1f}% of the time\n",
      1e3 * r.encode_seconds, 1e3 * r.fused_seconds, 1e3 * r.synapse_seconds, 100 * fused_fraction);
  if (o.naive) {
    std::cout << fmt::format("naive loop output firing {:.1f}% (its own random spikes; the pipeline's {:.1f}%)\n",
                             100 * r.naive_output_rate, 100 * r.layers.back().output_rate);
  }
}

}  // namespace

Run add_bench_command(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  f->data_dir = default_data_dir();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Simulation throughput: a rate-coded network through the pipeline for several steps per tick, against a naive "
      "per-step LibTorch loop (BLAS GEMMs, one tensor op per formula) in the same run");
  cmd->add_option("--layers", f->layers, "Layer sizes, input first")->capture_default_str();
  add_neuron_flags(cmd, f->neuron, /*with_surrogate=*/false);
  cmd->add_option("--batch", f->batch, "Samples per batch (B)")->capture_default_str()->check(whole_number(1));
  cmd->add_option("--T", f->steps, "Steps per sample")->capture_default_str()->check(whole_number(1));
  cmd->add_option("--steps-per-tick", f->steps_per_tick, "Pipeline block lengths K to time, comma-separated (0 = T)")
      ->capture_default_str();
  cmd->add_option("--threads", f->threads, "LibTorch intra-op threads (0 = LibTorch's default)")
      ->capture_default_str()
      ->check(whole_number(0));
  cmd->add_option("--devices", f->devices, "Pipeline stages' devices, comma-separated (cpu, cuda:N)")
      ->capture_default_str();
  cmd->add_option("--path", f->path, "Synapse kernel: auto (CPU: by measured firing; GPU: the ordered event kernel), dense (CPU: register-tiled; GPU: cuBLAS) or event")
      ->capture_default_str()
      ->check(one_of({"auto", "dense", "event"}));
  cmd->add_option("--checkpoint", f->checkpoint, "Use a trained network (snnsim train's checkpoint) instead");
  cmd->add_option("--weight-scale", f->weight_scale,
                  "Random weights: torch::nn::Linear's initialisation times this (an untrained network hardly fires)")
      ->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the random weights and the encoder")
      ->capture_default_str()
      ->check(whole_number(0));
  cmd->add_option("--data-dir", f->data_dir, "Folder with MNIST-format IDX files; the first B test images are the input")
      ->capture_default_str();
  cmd->add_option("--reps", f->reps, "Timed repetitions; the best counts")->capture_default_str()->check(whole_number(1));
  cmd->add_flag("--json", f->json, "Print the results as JSON");
  cmd->add_flag("--no-naive", f->no_naive, "Skip the naive reference loop");
  cmd->add_option("--save-weights", f->save_weights,
                  "Also save the benchmarked network as a checkpoint (for bench/peer_bench.py)");
  return [cmd, f] {
    if (!cmd->parsed()) return;
    run_bench(*f, given_options(cmd));
  };
}

}  // namespace snn::app
