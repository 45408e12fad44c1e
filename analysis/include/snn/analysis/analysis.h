#pragma once
/// Statistics of a spike recording (docs/RECORDING.md), computed chunk by
/// chunk so that files larger than memory are fine: firing rates per
/// population and per neuron, inter-spike intervals, Fano factors, the
/// PSTH, a synchrony measure, accuracy as a function of t and the
/// confusion matrix. Torch-free: it reads HDF5 only.
///
/// Samples are separate trials: intervals and counts never span two
/// samples, and a "bin" is one step of one sample.

#include <cstdint>
#include <string>
#include <vector>

namespace snn::analysis {

/// How analyze_recording() reads the file.
struct AnalysisOptions {
  /// Most bytes of spike events held at once (16 per spike: timestamp and
  /// id); a sample with more spikes is read in pieces. Default 64 MiB.
  int64_t chunk_bytes = int64_t{64} << 20;
  /// Width of the bins over which synchrony (Golomb's chi) compares the
  /// neurons' spike counts, in ms: a whole multiple of the recording's dt,
  /// at most one sample long. Default 0: one step (dt). Wider bins (1 to 5 ms
  /// for Brunel's networks) let spikes that are near-coincident, not in the
  /// same 0.1 ms step, count as synchronous.
  double synchrony_bin_ms = 0;
};

/// One recorded population (a layer's recorded neurons).
struct PopulationStats {
  std::string name;
  int64_t layer = 0;                   ///< 0 = input, 1 = first neuron layer, ...
  std::vector<int64_t> node_ids;       ///< recorded neurons
  int64_t spikes = 0;
  double rate_hz = 0;                  ///< spikes / (samples * T * dt * recorded neurons), in Hz
  double spikes_per_step = 0;          ///< the same per neuron and step (firing probability)
  std::vector<int64_t> neuron_spikes;  ///< per recorded neuron
  std::vector<double> neuron_rate_hz;  ///< per recorded neuron
  int64_t silent_neurons = 0;          ///< neurons with no spike at all
  /// Inter-spike intervals within a sample: isi_histogram[k] counts
  /// intervals of k steps (k = 1 .. T - 1; entry 0 is always 0).
  std::vector<int64_t> isi_histogram;
  int64_t isi_count = 0;
  double isi_mean_ms = 0;              ///< NaN without intervals
  /// Coefficient of variation (std / mean, std with divisor n) of each
  /// neuron's intervals, averaged over the cv_neurons neurons with >= 2
  /// intervals; NaN when there are none.
  double isi_cv = 0;
  int64_t cv_neurons = 0;
  /// Fano factor (variance with divisor n - 1, over mean) of each neuron's
  /// per-sample spike counts, averaged over the fano_neurons neurons that
  /// spiked; NaN with fewer than 2 samples or no spike.
  double fano = 0;
  int64_t fano_neurons = 0;
  double population_fano = 0;          ///< the same for the population's per-sample totals
  std::vector<double> psth_hz;         ///< [T]: mean rate per neuron at each step of a sample, in Hz
  /// Golomb's synchrony chi: sqrt(var over bins of the population-mean
  /// spike count / mean over neurons of each neuron's variance of its count
  /// in a bin), from 0 (asynchronous, as N grows) to 1 (all neurons
  /// identical); NaN when no neuron varies. Bins are
  /// RecordingStats::synchrony_bin_ms wide; a sample's last steps, when
  /// fewer than a bin, are left out of chi.
  double synchrony = 0;
};

/// Everything analyze_recording() found.
struct RecordingStats {
  std::string path;
  std::string status;                          ///< "complete" or "recovered"
  int64_t samples = 0;
  int64_t steps = 0;                           ///< T
  double dt_ms = 1;
  double synchrony_bin_ms = 1;                 ///< the bin width synchrony was measured on (dt by default)
  int64_t classes = 0;
  /// A population model's recording (snnsim simulate; /meta's `kind`): its
  /// samples are trials, its populations no layers, nothing classified.
  bool trials = false;
  std::vector<PopulationStats> populations;    ///< in name order
  double accuracy = 0;                         ///< predicted == label
  std::vector<double> accuracy_by_step;        ///< [T] (empty when the file lacks prediction_by_step)
  std::vector<std::vector<int64_t>> confusion; ///< [label][predicted] sample counts
  int64_t peak_chunk_bytes = 0;                ///< the most event bytes held at once
};

/// Reads the recording at `path` chunk by chunk, after checking all of it
/// against the format (recording/schema.json: every dataset's type and
/// extent, spike pointers, node ids, labels). Throws snn::Error naming what
/// is wrong: no such file, not an HDF5 file or not a recording, a run that
/// did not finish (pointing to `snnsim recover`), the dataset and the defect
/// of a malformed file.
RecordingStats analyze_recording(const std::string& path, const AnalysisOptions& options = {});

/// Synchrony's bin width in steps for AnalysisOptions::synchrony_bin_ms =
/// `bin_ms` (0: one step) on a recording or model `where` of `steps` steps of
/// `dt_ms` per sample. Throws snn::Error naming the values unless the bin is
/// a positive whole number of steps, at most `steps`.
int64_t synchrony_bin_steps(double bin_ms, double dt_ms, int64_t steps, const std::string& where);

/// Spikes of consecutive samples of one population (e.g. for a raster).
struct SpikeTrains {
  std::vector<double> t_ms;         ///< spike times on the file's time axis
  std::vector<int64_t> node_ids;    ///< neuron of each spike
  std::vector<double> sample_start_ms;  ///< start of each sample, then the end of the last
  std::vector<int64_t> labels;      ///< label of each sample
  std::vector<int64_t> predicted;   ///< class predicted for each sample
};

/// Reads samples [first, first + count) of `population` (count is clipped
/// to the samples committed), with their labels and predictions. Throws snn::Error as analyze_recording().
SpikeTrains read_spikes(const std::string& path, const std::string& population, int64_t first, int64_t count);

}  // namespace snn::analysis
