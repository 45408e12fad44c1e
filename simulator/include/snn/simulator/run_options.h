#pragma once
/// What a simulation run of a trained network is: the one description of
/// `snnsim run`'s result-deciding settings, kept in a recording's /meta
/// (attribute "run_options") so that `run --resume` continues a recording
/// with exactly the settings it was started with, and checked against the
/// checkpoint it names. How a run is placed (devices, balance, steps per
/// tick, threads, batch size) is not part of it: those never change results.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "snn/simulator/network.h"

namespace snn {

/// Changes to a checkpoint's network for one run (what sweeps vary); every
/// field unset (default) keeps the checkpoint's value.
struct NetworkOverrides {
  std::optional<int64_t> steps;                 ///< T, steps per sample (>= 1)
  std::optional<double> tau;                    ///< membrane time constant in steps (not for plif)
  std::optional<double> v_threshold;            ///< firing threshold
  std::optional<std::optional<double>> v_reset; ///< hard reset value, or an empty inner optional: soft reset
  std::optional<int64_t> refractory;            ///< absolute refractory period in steps (>= 0)
  std::optional<double> gain;                   ///< encoder gain (> 0)
  std::optional<uint64_t> seed;                 ///< encoder seed

  /// Applies the set fields to `config` and validates it. Throws snn::Error
  /// naming the override (e.g. tau of a plif network, which learned its own).
  void apply(NetworkConfig& config) const;
  bool empty() const;
  /// Whether it changes what the network is (neurons, encoder gain or
  /// seed), not only how it is simulated (T): then the network is built anew.
  bool changes_network() const;
};

/// Where and how a network runs: pipeline stages, their devices, block size
/// and threads. Never changes results (the pipeline is bit-identical for
/// every partition, K and thread count), so it may differ between a run and
/// its resumption.
struct Placement {
  std::vector<std::string> devices{"cpu"};  ///< one per stage: cpu, cuda:N; default one cpu stage
  std::vector<int64_t> balance;             ///< layers per stage; empty (default) = even split
  int64_t steps_per_tick = 0;               ///< K, steps per pipeline block; 0 (default) = T
  int threads = 0;                          ///< LibTorch intra-op threads; 0 (default) = LibTorch's choice

  /// Sets config's devices, balance and K and validates it; sets the
  /// intra-op threads (set_intra_op_threads) when threads > 0.
  void apply(NetworkConfig& config) const;
  /// The same on a built network (SpikingNetwork::set_simulation): placing
  /// a network never builds it again.
  void apply(SpikingNetwork& network) const;
};

/// Sets LibTorch's intra-op thread count after checking it: at least 1 and
/// at most max_intra_op_threads(). Throws snn::Error naming both.
void set_intra_op_threads(int threads);
/// The most threads a run may ask for: 8 per core of this machine, at least 64
/// (more only oversubscribes the cores; 100000 would effectively hang).
int max_intra_op_threads();

/// The result-deciding settings of `snnsim run` (see the file comment).
struct RunOptions {
  std::string checkpoint;        ///< the checkpoint file; absolute once resolve_paths() ran
  std::string data_dir;          ///< folder of the IDX files; absolute once resolve_paths() ran
  std::string split = "test";    ///< "test" or "train"
  int64_t limit = -1;            ///< the first N samples (>= 1), or -1 (default): all
  NetworkOverrides overrides;    ///< changes to the checkpoint's network
  // The recording (used only with an output file):
  std::string record = "output"; ///< layers (and ids) whose spikes are recorded, e.g. "hidden:0-9,output"
  std::string record_v;          ///< potentials to record, e.g. "hidden:0,5"; default none
  bool record_input = false;     ///< also record the encoder's spikes
  double dt_ms = 1.0;            ///< duration of a step in ms (> 0); the recording's time unit
  bool compress = false;         ///< deflate the spike and report datasets

  /// Throws snn::Error naming the first bad value (split, limit, dt).
  void validate() const;
  /// Makes checkpoint and data_dir absolute (relative to the current
  /// folder), so that a recording can be resumed from anywhere. Throws
  /// snn::Error when the checkpoint does not exist.
  void resolve_paths();
  /// Every field as one JSON object (unset overrides as null).
  std::string to_json() const;
  /// Parses to_json()'s output; `where` names the source in errors (e.g.
  /// "recording 'run.h5'"). Throws snn::Error on a missing or mistyped field.
  static RunOptions from_json(const std::string& json, const std::string& where);
};

}  // namespace snn
