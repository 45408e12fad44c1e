#pragma once
/// What a recording holds, read back without loading its spikes: the
/// numbers `snnsim inspect` prints. Works on finished files and on
/// unfinished ones (FILE.partial), including one whose run is still writing
/// it or was killed: it is opened read-only for SWMR reading and only what
/// the file committed (/meta/samples_committed) is counted.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace snn::recording {

/// A recording's contents and provenance.
struct RecordingInfo {
  std::string path;            ///< the file read (PATH.partial when only that exists)
  bool unfinished_file = false;  ///< path is a .partial file (not renamed by a finished run)
  std::string status;          ///< running, complete, aborted or recovered (/meta/status)
  int64_t samples = 0;         ///< committed samples (/meta/samples_committed)
  int64_t rows_written = 0;    ///< rows of /samples/label: more than samples while a batch is being written
  int64_t steps = 0;           ///< T, steps per sample
  double dt_ms = 0;            ///< duration of a step, ms
  int64_t classes = 0;         ///< width of /samples/output_counts
  int64_t correct = 0;         ///< committed samples whose prediction equals their label
  /// True for a population model's recording (snnsim simulate; /meta's
  /// `kind`): its samples are trials, its populations no layers.
  bool trials = false;

  /// A population whose spikes are recorded.
  struct Population {
    std::string name;
    int64_t layer = 0;     ///< 0 = input, 1 = first neuron layer, ...
    int64_t n_nodes = 0;   ///< neurons in the layer
    int64_t recorded = 0;  ///< neurons whose spikes are recorded
    int64_t spikes = 0;    ///< spikes of the committed samples
  };
  std::vector<Population> populations;  ///< name order
  /// A population whose membrane potentials are recorded (a report).
  struct Report {
    std::string name;
    std::vector<int64_t> node_ids;  ///< the neurons, ascending
  };
  std::vector<Report> reports;  ///< name order

  std::optional<int64_t> resumed_at_sample;   ///< where a run --resume continued the file
  std::string recovered_from_status;          ///< status before snnsim recover ("" = not recovered)
  /// Every string attribute of /meta (config, run_options, checkpoint,
  /// parameters_hash, versions, start_time, ...), in name order.
  std::vector<std::pair<std::string, std::string>> meta;

  /// The /meta attribute `key`; "" when absent.
  std::string meta_value(const std::string& key) const;
};

/// Reads the recording at `path`, or at `path`.partial when only that
/// exists (`path` may name either), checked against the format
/// (recording/schema.json) for its committed samples. Throws snn::Error
/// naming the file and the problem: no such file, not HDF5, not a
/// recording, damaged (with the dataset and defect).
RecordingInfo read_recording_info(const std::string& path);

}  // namespace snn::recording
