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
};

struct PopulationRunReport {
  populations::PopulationRunResult result;
  int64_t neurons = 0, synapses = 0, synapse_bytes = 0;
  double build_seconds = 0;  ///< drawing the connectivity
  std::string record_path;   ///< the recording written, or empty
};

/// Builds, simulates and records; throws snn::Error naming the problem.
/// The recording is written under a temporary name and renamed when
/// complete: an existing file is never damaged.
PopulationRunReport run_population_model(const populations::PopulationModel& model, const PopulationRunRequest& request);

}  // namespace snn
