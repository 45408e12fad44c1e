#pragma once
/// The recording file: one HDF5 file per run in the SONATA-compatible layout
/// of docs/RECORDING.md (spikes per population, membrane-potential reports,
/// one row per sample, provenance in /meta), written while the simulation
/// runs and safe against crashes:
///
/// - it is written as `PATH.partial` and renamed to PATH by finish();
/// - every group and dataset is created first, then the file switches to
///   SWMR writing: from then on only raw data changes, and a crashed file
///   opens (SWMR read, or after `h5clear -s`) with everything up to the last
///   commit();
/// - readers trust /meta/samples_committed: commit() writes it after the
///   samples' rows and spikes, then flushes.
///
/// Calls must come from one thread (the recorder's writer thread): the HDF5
/// library is not reentrant.

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "snn/recording/events.h"

namespace snn::recording {

/// A layer whose spikes are recorded (one SONATA population).
struct SpikePopulation {
  std::string name;               ///< population name, e.g. "hidden" or "output"
  int64_t size = 0;               ///< neurons in the layer
  int64_t layer = 0;              ///< the layer's index in the network (0 = input)
  std::vector<int64_t> node_ids;  ///< recorded neurons, ascending; empty = all
};

/// A layer whose chosen neurons' membrane potentials are recorded (a
/// SONATA element report).
struct TracePopulation {
  std::string name;               ///< population name
  int64_t size = 0;               ///< neurons in the layer
  int64_t layer = 0;              ///< the layer's index in the network
  std::vector<int64_t> node_ids;  ///< recorded neurons, ascending, non-empty
};

/// What the file holds, fixed when it is created.
struct RecordingLayout {
  std::vector<SpikePopulation> spikes;
  std::vector<TracePopulation> traces;
  int64_t classes = 10;  ///< width of /samples/output_counts
  int64_t steps = 8;     ///< T, steps per sample (each sample covers T * dt ms)
  double dt_ms = 1.0;    ///< duration of a step in ms (the timestamps' unit); default 1
};

/// Consecutive samples handed to the file in one call (typically a batch).
struct SampleBatch {
  torch::Tensor labels;                     ///< int64 [B]
  torch::Tensor predicted;                  ///< int64 [B]
  torch::Tensor output_counts;              ///< [B, classes], whole numbers
  std::vector<SpikeEvents> spikes;          ///< per layout.spikes entry: events over the samples'
                                            ///< T steps, sample-major (step 0..T-1 within its sample)
  std::vector<torch::Tensor> traces;        ///< per layout.traces entry: float [B, T, recorded neurons]
};

/// The HDF5 library's version, e.g. "1.10.8" (for provenance).
std::string hdf5_version();

/// The recording file (see the file comment).
class RecordingFile {
 public:
  /// Creates `path`.partial with the layout and /meta's attributes (string
  /// key-value pairs: config JSON, versions, devices, ...). Refuses an
  /// existing `path` unless `overwrite`. Throws snn::Error.
  RecordingFile(std::string path, RecordingLayout layout,
                const std::vector<std::pair<std::string, std::string>>& meta, bool overwrite = false);
  /// Without finish(): marks the file aborted (best effort) and leaves it as
  /// `path`.partial.
  ~RecordingFile();
  RecordingFile(const RecordingFile&) = delete;
  RecordingFile& operator=(const RecordingFile&) = delete;

  /// Appends the samples' rows, spikes and traces (not yet committed).
  void append(const SampleBatch& batch);
  /// Makes every appended sample visible: writes the committed-samples
  /// counter, then flushes.
  void commit();
  /// Commits, records the status ("complete" or "aborted") and the given
  /// final attributes of /meta (e.g. wall time), closes the file and, when
  /// complete, renames it to `path`.
  void finish(const std::string& status = "complete",
              const std::vector<std::pair<std::string, std::string>>& final_meta = {});

  int64_t samples_appended() const;
  int64_t samples_committed() const;
  const std::string& path() const;
  std::string partial_path() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace snn::recording
