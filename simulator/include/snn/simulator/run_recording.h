#pragma once
/// What a run's recording is made of, decided before it starts: which
/// populations a "hidden:0-9,output" list names, the provenance written to
/// /meta, and the file's estimated size.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "snn/datasets/idx.h"
#include "snn/simulator/network.h"
#include "snn/simulator/run_options.h"
#include "snn/simulator/training.h"

namespace snn {

/// Parses a population list such as "hidden,output:0-9,3": a layer name
/// (population_name()), optionally ":ids", starts a layer; bare ids or
/// ranges after it add to that layer. Returns (neuron layer index, ids;
/// empty = all). `what` names the list in errors (e.g. "--record"). Throws
/// snn::Error naming the token, the layer and its id range.
std::vector<std::pair<int64_t, std::vector<int64_t>>> parse_population_list(const std::string& what,
                                                                            const std::string& text,
                                                                            const NetworkConfig& config);

/// The /meta provenance of a run's recording: the config and run options
/// (JSON), checkpoint, data, seed, devices, then software_provenance().
std::vector<std::pair<std::string, std::string>> run_provenance(const NetworkConfig& config, const RunOptions& options,
                                                                const std::string& git_commit);

/// The part of a recording's /meta provenance that every command writes
/// (`snnsim run` and `snnsim simulate`): versions (snnsim, `git_commit`,
/// LibTorch, HDF5), threads, the host's name and the start time (UTC, now).
std::vector<std::pair<std::string, std::string>> software_provenance(const std::string& git_commit);

/// What a resumed recording's /meta adds when it is finished (its
/// start_time, threads and host stay the first invocation's): the
/// resuming invocation's resume_start_time, resume_threads and resume_host.
/// Beside resumed_at_sample (where it went on) and wall_time_s (that
/// invocation's time).
std::vector<std::pair<std::string, std::string>> resume_provenance();

/// A recording's size before compression, estimated from the firing rates
/// of a first batch: 16 bytes per spike (timestamp and id), 4 per recorded
/// potential and step, and each sample's rows.
struct RecordingEstimate {
  double bytes = 0;                                  ///< the total
  std::vector<std::pair<std::string, double>> parts; ///< e.g. ("hidden spikes", bytes)
  int64_t probe_samples = 0;                         ///< samples whose rates were measured
  /// "hidden spikes 1.2 MiB, per-sample rows 3.0 KiB"
  std::string parts_text() const;
  /// The line snnsim prints before a recording starts.
  std::string describe() const;
};
/// Simulates the first batch (without recording) to measure the rates.
RecordingEstimate estimate_recording(SpikingNetwork& network, const LabeledImages& split, int64_t batch_size,
                                     const RecordRequest& record, int64_t samples);

/// "1.5 MiB": bytes in B, KiB, MiB, GiB or TiB with one decimal.
std::string human_bytes(double bytes);

}  // namespace snn
