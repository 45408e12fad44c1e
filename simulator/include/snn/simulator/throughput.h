#pragma once
/// Simulation throughput of a network, measured the way `snnsim bench`
/// reports it: the pipeline's constant-input T-step loop for several block
/// lengths K, against a naive per-step LibTorch loop in the same process
/// (one tensor op at a time, SpikingJelly's formulas, BLAS GEMMs), with
/// the time split into synapses and everything else.

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "snn/simulator/network.h"

namespace snn {

/// What to measure.
struct ThroughputOptions {
  /// Pipeline block lengths K to time (0 means T). Default {1, 10, 0}.
  std::vector<int64_t> steps_per_tick{1, 10, 0};
  /// Timed repetitions of each measurement; the best counts. Default 3.
  int repeats = 3;
  /// Also time the naive per-step loop. Default true.
  bool naive = true;
};

/// One layer's activity in the measured simulation.
struct LayerActivity {
  int64_t in = 0, out = 0;
  double input_rate = 0;   ///< spikes per input per step (the encoder's for layer 0)
  double output_rate = 0;  ///< spikes per neuron per step
  std::string path;        ///< the synapse kernel used: "dense" or "event" (CPU), "matmul" (CUDA)
};

/// Seconds per batch (B samples, T steps) of one way of simulating.
struct TimedRun {
  std::string name;  ///< "pipeline K=10", "naive per-step loop", ...
  int64_t steps_per_tick = 0;
  double seconds = 0;
};

struct ThroughputResult {
  int64_t batch = 0, steps = 0;
  std::vector<LayerActivity> layers;
  std::vector<TimedRun> runs;  ///< the pipeline for each K, then the naive loop
  /// Per batch: neuron-steps (B T sum of layer sizes), dense synaptic
  /// operations (B T sum of in x out) and synaptic events (input spikes x
  /// fan-out, summed over layers).
  double neuron_steps = 0, dense_synaptic_ops = 0, synaptic_events = 0;
  /// One sequential pass over all T steps (K = T, one stage), timed per
  /// module: encoder, synapses (snn::Linear), neuron layers.
  double encode_seconds = 0, synapse_seconds = 0, neuron_seconds = 0;
  /// The same layers as the pipeline runs them (snn::LinearNeuron: each
  /// synapse layer with its neurons, fused on the CPU), summed over layers.
  /// fused_seconds - synapse_seconds is what the neurons add there.
  double fused_seconds = 0;
  /// The naive loop's firing rate of the last layer (a check that it
  /// simulates the same network: close to layers.back().output_rate).
  double naive_output_rate = 0;
};

/// Simulates `images` ([B, ...], one batch) through `network` for T =
/// network.config().steps, as `snnsim run` does (no gradients), and times
/// it. The network's devices are used for the pipeline; the naive loop runs
/// on the first stage's device.
ThroughputResult measure_throughput(SpikingNetwork& network, const torch::Tensor& images,
                                    const ThroughputOptions& options);

}  // namespace snn
