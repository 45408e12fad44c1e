#pragma once
/// Networks of neuron populations in biological time, as neuroscientists
/// write them for NEST: populations of iaf_psc_delta / iaf_psc_exp neurons
/// (neurons/iaf.h), sparse random projections with delays
/// (connectivity.h), and Poisson drives; simulated on the grid of dt with
/// spikes delivered event by event through a ring buffer of delays, for B
/// independent trials at once (the batch dimension: same connectivity,
/// different input seeds).
///
/// One step of a trial, for step t (NEST's order):
///
///   slot t % D of the ring buffer holds the input arriving at the end of t
///   1. Poisson drives add their counts x weight to slot t
///   2. every population advances one step with slot t's input (iaf_step)
///      and takes the DC currents given at t (they act from t + 1, NEST's
///      lag of current generators); slot t is cleared
///   3. each spike of step t adds its synapses' weights to slots
///      (t + delay) % D of their targets (a delay >= 1 step, so always a
///      later step; D = the largest delay + 1)
///
/// A spike emitted at step t with a delay of d steps arrives at the end of
/// step t + d, as in NEST (tests/python/nest_reference.py checks NEST's
/// timing).

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "snn/neurons/iaf.h"
#include "snn/populations/connectivity.h"

namespace snn::populations {

/// A population of `size` neurons of one model; the model's dt must be the
/// network's.
struct PopulationSpec {
  std::string name;
  int64_t size = 0;
  IafOptions neuron;
  /// The membrane potential at the start (mV, absolute; NEST's V_m),
  /// constant or drawn per neuron and trial from the input seed. Default
  /// none: every neuron starts at E_L.
  std::optional<Distribution> v_init;
};

/// Synapses from population `source` to population `target`.
struct ProjectionSpec {
  std::string source, target;
  ConnectionSpec connection;
  SynapseSpec synapse;
};

/// NEST's poisson_generator connected to every neuron of `target`: each
/// neuron receives its own independent Poisson train of `rate_hz`, each
/// spike of weight `weight` (mV or pA, as the target's model takes).
struct PoissonDriveSpec {
  std::string name;
  std::string target;
  double rate_hz = 0;
  double weight = 0;
};

/// NEST's dc_generator connected to every neuron of `target` with delay
/// `delay_ms`: a constant current `amplitude_pa` that acts in the steps
/// from (max(start_ms, dt) + delay_ms) / dt to (stop_ms + delay_ms) / dt - 1
/// (step k ending at (k + 1) dt), as NEST 3.10 gives it, including its
/// silent first step (tests/cli/nest_dc_test.sh checks it spike for spike).
/// Times are whole steps of dt.
struct CurrentSpec {
  std::string name;
  std::string target;
  double amplitude_pa = 0;
  double start_ms = 0;
  double stop_ms = std::numeric_limits<double>::infinity();  ///< infinity: to the end
  double delay_ms = 0;  ///< 0: one step (dt), NEST's smallest delay
};

/// The whole model: what a model file holds (without the run's length).
struct PopulationNetworkSpec {
  double dt = 0.1;  ///< grid step in ms
  std::vector<PopulationSpec> populations;
  std::vector<ProjectionSpec> projections;
  std::vector<PoissonDriveSpec> drives;
  std::vector<CurrentSpec> currents;
  /// Throws snn::Error naming the entry and the problem: an unknown or
  /// repeated population, a model whose dt differs, a negative rate, ...
  void validate() const;
  /// The index of population `name`; throws snn::Error naming it if none.
  int64_t population_index(const std::string& name) const;
};

/// What to simulate and record.
struct PopulationRunOptions {
  int64_t steps = 0;         ///< run length in steps of dt
  int64_t trials = 1;        ///< independent trials simulated together (B)
  uint64_t input_seed = 1;   ///< Poisson drives; trial b uses its own streams
  /// The index of the first trial: the run simulates trials [first_trial,
  /// first_trial + trials) with those trials' streams (initial potentials,
  /// Poisson drives), numbered from 0 in the result. A batch split across
  /// runs (one network per trial, or several processes) gives the spikes of
  /// one run of all of them. first_trial + trials is at most 4096.
  int64_t first_trial = 0;
  /// Populations whose spikes are recorded (empty: all).
  std::vector<std::string> record_spikes;
  /// Voltmeters: V_m (mV) after every step of the first `voltmeter_neurons`
  /// neurons of each population listed here.
  std::vector<std::string> record_v;
  int64_t voltmeter_neurons = 0;
  /// Polled every 128 steps (from any of the run's threads): true stops
  /// every trial there and simulate() throws snn::Interrupted, returning
  /// nothing of the unfinished trials. Empty: never.
  std::function<bool()> stop_requested;
};

/// Throws snn::Error unless a run of `steps` steps and trials
/// [first_trial, first_trial + trials) is within what the random streams
/// can number (1 to 2^28 steps, 1 to 4096 trials in all).
void check_run_size(int64_t steps, int64_t trials, int64_t first_trial = 0);

/// A population's recorded spikes: one entry per spike, ordered by trial,
/// step, neuron.
struct SpikeList {
  std::vector<int32_t> trial, step, neuron;
  int64_t size() const { return static_cast<int64_t>(step.size()); }
};

struct PopulationRunResult {
  std::vector<std::string> populations;  ///< names, the spec's order
  std::vector<SpikeList> spikes;         ///< per population (empty if not recorded)
  std::vector<int64_t> population_spikes;  ///< per population: its spikes in all trials, recorded or not
  /// Each trial's spikes per population, recorded or not: [trials x
  /// populations], trial-major.
  std::vector<int64_t> trial_population_spikes;
  std::vector<torch::Tensor> v;          ///< per population: [trials, steps, neurons] float64, or undefined
  int64_t steps = 0, trials = 0;
  int64_t spike_count = 0;   ///< every spike of every population and trial
  int64_t synaptic_events = 0;  ///< synapses a spike went through, all trials
  double seconds = 0;        ///< wall time of the simulation loop
  /// Where threads shared a trial: steps one of them ran alone, because
  /// that was faster then (another program on the cores; same results).
  int64_t alone_steps = 0;
};

/// `ms` as a whole number of steps of `dt` (ms), at least 0; throws
/// snn::Error "WHAT X ms is not a whole number of steps of dt = Y ms"
/// otherwise.
int64_t whole_steps(double ms, double dt, const std::string& what);

/// Appends `more`'s trials to `into` (same network layout, same steps):
/// trial b of `more` becomes trial into.trials + b. Throws snn::Error if the
/// populations or steps differ.
void append_trials(PopulationRunResult& into, const PopulationRunResult& more);

/// A built network: its populations and drawn projections.
class PopulationNetwork {
 public:
  /// Validates the spec and draws every projection with the connectivity
  /// seed (projection i keyed by i). Throws snn::Error, before drawing, when
  /// the network would need more than 80% of the machine's memory.
  PopulationNetwork(PopulationNetworkSpec spec, uint64_t connectivity_seed);

  const PopulationNetworkSpec& spec() const { return spec_; }
  const std::vector<Projection>& projections() const { return projections_; }
  int64_t neurons() const { return total_; }
  int64_t synapses() const;
  /// Bytes the synapses of every projection take.
  int64_t synapse_bytes() const;

  /// Simulates options.trials trials from rest; throws snn::Error for bad
  /// options (no steps, an unknown population to record).
  PopulationRunResult simulate(const PopulationRunOptions& options) const;

 private:
  void check_memory() const;  // the constructor's estimate (above)

  PopulationNetworkSpec spec_;
  std::vector<Projection> projections_;
  std::vector<int64_t> first_;  ///< first neuron of each population in the network-wide numbering
  int64_t total_ = 0;
};

}  // namespace snn::populations
