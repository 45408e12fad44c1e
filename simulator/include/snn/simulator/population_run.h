#pragma once
/// Running a population model file (`snnsim simulate`): build the network,
/// simulate every trial, and write the spikes and voltmeters as a SONATA
/// recording (docs/RECORDING.md: one sample per trial, T = the run's steps,
/// dt in ms, one class), so that `snnsim analyze` reads it unchanged.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "snn/populations/model_file.h"

namespace snn {

struct PopulationRunRequest {
  std::string record_path;  ///< recording to write; empty: none
  bool overwrite = false;   ///< replace an existing recording
  /// Continue record_path's unfinished recording (left by a killed or
  /// interrupted run): its committed trials are kept and the run goes on
  /// from the next one, giving the file an uninterrupted run would have.
  bool resume = false;
  std::string model_path;   ///< for provenance (/meta model_file)
  std::string git_commit;   ///< for provenance (/meta git_commit)
  /// Polled after each group of trials is committed (with a recording):
  /// true ends the run there, the recording marked aborted, by throwing
  /// snn::Interrupted. Empty: never.
  std::function<bool()> stop_requested;
};

struct PopulationRunReport {
  /// The trials this call simulated (after a resume: the rest of them).
  populations::PopulationRunResult result;
  int64_t trials = 0;                      ///< every trial of the run, resumed ones included
  int64_t resumed_trials = 0;              ///< trials the recording already held (resume)
  std::vector<int64_t> population_spikes;  ///< per population, every trial of the run
  int64_t neurons = 0, synapses = 0, synapse_bytes = 0;  ///< of the first network drawn (the largest's bytes)
  int64_t networks = 1;      ///< networks drawn: one, or one per simulated trial (connectivity_per_trial)
  double build_seconds = 0;  ///< drawing the connectivity (every network)
  std::string record_path;   ///< the recording written, or empty
};

/// Builds, simulates and records; throws snn::Error naming the problem.
/// With model.connectivity_per_trial, trial b runs on the network drawn with
/// seed + b (built one at a time, so memory holds one network), with the
/// same input streams as in a shared-network run.
/// The recording is written under a temporary name and renamed when
/// complete: an existing file is never damaged. It is created before the
/// first step (a bad path costs no simulation) and trials are committed a
/// group at a time (as many as run in parallel): a killed run leaves the
/// committed ones for `snnsim recover`, or for request.resume to go on.
PopulationRunReport run_population_model(const populations::PopulationModel& model, const PopulationRunRequest& request);

}  // namespace snn
