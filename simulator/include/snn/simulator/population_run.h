#pragma once
/// Running a population model file (`snnsim simulate`): build the network,
/// simulate every trial, and write the spikes and voltmeters as a SONATA
/// recording (docs/RECORDING.md: one sample per trial, T = the run's steps,
/// dt in ms, one class), so that `snnsim analyze` reads it unchanged.

#include <cstdint>
#include <string>

#include "snn/populations/model_file.h"

namespace snn {

struct PopulationRunRequest {
  std::string record_path;  ///< recording to write; empty: none
  bool overwrite = false;   ///< replace an existing recording
  std::string model_path;   ///< for provenance (/meta model_file)
  std::string git_commit;   ///< for provenance (/meta git_commit)
};

struct PopulationRunReport {
  populations::PopulationRunResult result;
  int64_t neurons = 0, synapses = 0, synapse_bytes = 0;  ///< of trial 0's network (the largest's bytes)
  int64_t networks = 1;      ///< networks drawn: one, or one per trial (connectivity_per_trial)
  double build_seconds = 0;  ///< drawing the connectivity (every network)
  std::string record_path;   ///< the recording written, or empty
};

/// Builds, simulates and records; throws snn::Error naming the problem.
/// With model.connectivity_per_trial, trial b runs on the network drawn with
/// seed + b (built one at a time, so memory holds one network), with the
/// same input streams as in a shared-network run.
/// The recording is written under a temporary name and renamed when
/// complete: an existing file is never damaged.
PopulationRunReport run_population_model(const populations::PopulationModel& model, const PopulationRunRequest& request);

}  // namespace snn
