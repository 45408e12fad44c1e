#pragma once
/// The recording file: one HDF5 file per run in the SONATA-compatible layout
/// of docs/RECORDING.md (spikes per population, membrane-potential reports,
/// one row per sample, provenance in /meta), written while the simulation
/// runs and safe against crashes:
///
/// - it is written as `PATH.partial` and renamed to PATH by finish();
/// - every group and dataset is created first, then the file switches to
///   SWMR writing: from then on only raw data changes, and a crashed file
///   opens (SWMR read, or after `h5clear -s --increment=0`) with everything up
///   to the last commit();
/// - readers trust /meta/samples_committed: commit() writes it after the
///   samples' rows and spikes, then flushes;
/// - an unfinished file (killed, interrupted) is repaired by recover() or
///   continued by RecordingFile::resume(): both first drop whatever follows
///   the last commit.
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
  /// Neuron layers counted in /samples/layer_spikes (each sample's spikes per
  /// layer, recorded or not); 0 (default) = no such dataset.
  int64_t layers = 0;
  /// Write /samples/prediction_by_step [samples, T] (the class predicted from
  /// the output counts up to each step). Default false.
  bool prediction_by_step = false;
  /// Shuffle + deflate the spike and report datasets too (/samples always
  /// is): 10-30x smaller, but only readers whose HDF5 has zlib open them,
  /// which excludes libsonata's PyPI wheels. Default false: timestamps and
  /// potentials unfiltered, node ids packed by HDF5's own scale-offset filter.
  bool deflate_spikes = false;
  /// The run's index of the file's first sample: its time axis starts at
  /// first_sample * T * dt (one rank's part of a run over several
  /// processes; /meta attribute first_sample when > 0). Default 0.
  int64_t first_sample = 0;
};

/// Consecutive samples handed to the file in one call (typically a batch).
struct SampleBatch {
  torch::Tensor labels;                     ///< int64 [B]
  torch::Tensor predicted;                  ///< int64 [B]
  torch::Tensor output_counts;              ///< [B, classes], whole numbers
  std::vector<SpikeEvents> spikes;          ///< per layout.spikes entry: events over the samples'
                                            ///< T steps, sample-major (step 0..T-1 within its sample)
  std::vector<torch::Tensor> traces;        ///< per layout.traces entry: float [B, T, recorded neurons]
  torch::Tensor layer_spikes;               ///< [B, layout.layers] whole numbers (when layout.layers > 0)
  torch::Tensor prediction_by_step;         ///< int64 [B, T] (when layout.prediction_by_step)
};

/// The committed samples' rows, read back (e.g. for a resumed run's totals).
struct SampleRows {
  torch::Tensor labels;              ///< int64 [n]
  torch::Tensor predicted;           ///< int64 [n]
  torch::Tensor output_counts;       ///< int64 [n, classes]
  torch::Tensor layer_spikes;        ///< int64 [n, layers]; undefined when the layout has none
  torch::Tensor prediction_by_step;  ///< int64 [n, T]; undefined when the layout has none
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
  RecordingFile(RecordingFile&&) noexcept;
  RecordingFile& operator=(RecordingFile&&) noexcept;

  /// Reopens an unfinished recording to continue it: `path`.partial (left by
  /// a killed, interrupted or failed run), or `path` itself when recover()
  /// made it. Drops whatever follows the last commit; the next append()
  /// continues at sample samples_committed(). The file must be a consistent
  /// recording (schema::check) written with `layout` (populations, ids, T,
  /// dt, classes) whose /meta attributes named in `must_match` (e.g. the
  /// network config) hold the given values; throws snn::Error naming the
  /// difference, or when the file is complete. Everything is checked with
  /// the file opened read-only: a refused resume leaves it exactly as it was.
  static RecordingFile resume(std::string path, RecordingLayout layout,
                              const std::vector<std::pair<std::string, std::string>>& must_match = {});

  /// The name a recording has once finished: `path` without a trailing
  /// ".partial" (what resume() and recover() accept either way).
  static std::string final_path(const std::string& path);

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

  /// The committed samples' rows (all of them: meant for resumed runs).
  SampleRows read_rows() const;
  /// A string attribute of /meta, e.g. "config"; "" when absent.
  std::string meta_attribute(const std::string& key) const;

  int64_t samples_appended() const;
  int64_t samples_committed() const;
  const std::string& path() const;
  std::string partial_path() const;

 private:
  RecordingFile();
  struct State;
  std::unique_ptr<State> s_;
};

/// A string attribute of /meta of the recording at `path` (its unfinished
/// `path`.partial when that exists; opened for SWMR reading, so a killed
/// run's file is fine); "" when absent. Throws snn::Error when neither file
/// is a recording.
std::string read_meta_attribute(const std::string& path, const std::string& key);

/// What recover() did.
struct Recovered {
  std::string path;             ///< the repaired file
  int64_t samples = 0;          ///< samples it holds (those committed before the run stopped)
  std::string previous_status;  ///< "running" (killed) or "aborted" (interrupted, failed)
};

/// Turns an unfinished recording (`path`.partial; `path` may name either)
/// into a normal file at `path` truncated to its last committed sample,
/// with status "recovered". Refuses to replace an existing `path` unless
/// `overwrite`. Throws snn::Error saying what is wrong (no such file, a
/// complete file, not a recording, damaged beyond the last commit); the
/// file is checked read-only first, so a refused one is left as it was.
Recovered recover(const std::string& path, bool overwrite = false);

}  // namespace snn::recording
