#include "snn/analysis/analysis.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"
#include "snn/recording/detail/schema_check.h"
#include "snn/recording/schema.h"

namespace snn::analysis {
namespace {

using hdf5::check;
using hdf5::Handle;
using hdf5::open_dataset;
namespace schema = recording::schema;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr hsize_t kRowBlock = 65536;  // per-sample rows read at once

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Opens a finished recording and checks all of it against the format
// (every extent, pointer and id) before anything is read by them; anything
// else gets a message saying what to do.
Handle open_recording(const std::string& path, schema::Contents& contents) {
  const std::string recover = "; make it a normal file with: snnsim recover " + path;
  if (!exists(path)) {
    if (exists(path + ".partial")) {
      throw Error("recording '" + path + "' did not finish: only '" + path + ".partial' exists" + recover);
    }
    throw Error("no recording '" + path + "'");
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) throw Error("'" + path + "' is not an HDF5 file");
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) {
    // A killed SWMR writer leaves the file marked open for writing; a file
    // cut short fails the same way. (Not told apart by a second, SWMR open:
    // a failed open of a damaged file can leave HDF5 holding it.)
    throw Error("'" + path + "' cannot be opened: it is damaged (e.g. truncated), or a run that was killed while "
                "writing it left it marked open; in that case make it a normal file with: snnsim recover " + path);
  }
  const std::string where = "recording '" + path + "'";
  schema::check_format(f.get(), where);
  const std::string status = schema::read_status(f.get(), where);
  if (status != "complete" && status != "recovered") {
    throw Error(where + " did not finish (status '" + status + "')" + recover);
  }
  contents = schema::check(f.get(), where, schema::Rows::kExact);
  return f;
}

// The step within sample `sample` of a spike at `t_ms`; throws unless the
// time lies in that sample.
int64_t step_of(double t_ms, int64_t sample, int64_t steps, double dt_ms, const std::string& where) {
  const double x = t_ms / dt_ms - static_cast<double>(sample) * static_cast<double>(steps);
  if (!(x > -0.5 && x < static_cast<double>(steps) - 0.5)) {
    throw Error(where + " is inconsistent: a spike at " + std::to_string(t_ms) + " ms lies outside its sample " +
                std::to_string(sample));
  }
  return std::llround(x);
}

// Accumulates one population's statistics sample by sample.
class PopulationPass {
 public:
  // `bin`: synchrony's bin width in steps (1 .. steps).
  PopulationPass(PopulationStats& out, int64_t n_nodes, int64_t steps, int64_t bin, const std::string& where)
      : out_(out), steps_(steps), bin_(bin), where_(where), index_(static_cast<size_t>(n_nodes), -1) {
    const size_t n = out.node_ids.size();
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = out.node_ids[i];
      if (id < 0 || id >= n_nodes) throw Error(where + ": recorded node id " + std::to_string(id) + " is out of range");
      index_[static_cast<size_t>(id)] = static_cast<int64_t>(i);
    }
    count_.assign(n, 0);
    in_sample_.assign(n, 0);
    last_step_.assign(n, -1);
    sum_count2_.assign(n, 0);
    isi_n_.assign(n, 0);
    isi_sum_.assign(n, 0);
    isi_sum2_.assign(n, 0);
    bin_of_.assign(n, -1);
    in_bin_.assign(n, 0);
    binned_.assign(n, 0);
    binned2_.assign(n, 0);
    step_spikes_.assign(static_cast<size_t>(steps), 0);
    psth_.assign(static_cast<size_t>(steps), 0);
    out_.isi_histogram.assign(static_cast<size_t>(steps), 0);
  }

  // A sample's events arrive in pieces (steps within the sample, node ids,
  // in file order) between begin_sample() and end_sample().
  void begin_sample() {
    touched_.clear();
    std::fill(step_spikes_.begin(), step_spikes_.end(), 0);
    sample_events_ = 0;
  }

  void add_events(const int64_t* step, const uint64_t* node, int64_t n) {
    for (int64_t e = 0; e < n; ++e) {
      const int64_t t = step[e];
      if (t < 0 || t >= steps_) {
        throw Error(where_ + " is inconsistent: a spike at step " + std::to_string(t) + " lies outside its sample");
      }
      if (node[e] >= index_.size() || index_[node[e]] < 0) {
        throw Error(where_ + ": /spikes/" + out_.name + "/node_ids holds node id " + std::to_string(node[e]) +
                    ", not a recorded neuron of the population (n_nodes " + std::to_string(index_.size()) + ")");
      }
      const size_t i = static_cast<size_t>(index_[node[e]]);
      if (in_sample_[i]++ == 0) touched_.push_back(i);
      ++step_spikes_[static_cast<size_t>(t)];
      if (last_step_[i] >= 0) {
        const int64_t isi = t - last_step_[i];
        if (isi <= 0) throw Error(where_ + " is inconsistent: spikes of a neuron are not in time order");
        ++out_.isi_histogram[static_cast<size_t>(isi)];
        ++isi_n_[i];
        isi_sum_[i] += static_cast<double>(isi);
        isi_sum2_[i] += static_cast<double>(isi) * static_cast<double>(isi);
      }
      last_step_[i] = t;
      // The neuron's count in its current bin; spikes arrive in time order
      // per neuron, so a spike in a later bin closes the previous one.
      const int64_t b = t / bin_;
      if (b != bin_of_[i]) {
        close_bin(i);
        bin_of_[i] = b;
      }
      ++in_bin_[i];
    }
    sample_events_ += n;
  }

  void end_sample() {
    for (size_t i : touched_) {
      close_bin(i);
      bin_of_[i] = -1;
      const double c = static_cast<double>(in_sample_[i]);
      count_[i] += in_sample_[i];
      sum_count2_[i] += c * c;
      in_sample_[i] = 0;
      last_step_[i] = -1;
    }
    const double total = static_cast<double>(sample_events_);
    pop_sum_ += total;
    pop_sum2_ += total * total;
    const double neurons = static_cast<double>(out_.node_ids.size());
    for (int64_t t = 0; t < steps_; ++t) psth_[static_cast<size_t>(t)] += step_spikes_[static_cast<size_t>(t)];
    for (int64_t b = 0; b < steps_ / bin_; ++b) {
      int64_t count = 0;
      for (int64_t t = b * bin_; t < (b + 1) * bin_; ++t) count += step_spikes_[static_cast<size_t>(t)];
      const double v = static_cast<double>(count) / neurons;
      sum_v_ += v;
      sum_v2_ += v * v;
    }
    ++samples_;
  }

  void finish(double dt_ms) {
    PopulationStats& p = out_;
    const double samples = static_cast<double>(samples_), steps = static_cast<double>(steps_);
    const double neurons = static_cast<double>(p.node_ids.size());
    const double per_step_to_hz = 1000.0 / dt_ms;
    p.neuron_spikes = count_;
    p.spikes = 0;
    for (auto c : count_) p.spikes += c;
    const double slots = samples * steps;
    const double bins = samples * static_cast<double>(steps_ / bin_);  // synchrony's (full) bins
    p.spikes_per_step = slots > 0 ? static_cast<double>(p.spikes) / (slots * neurons) : kNaN;
    p.rate_hz = p.spikes_per_step * per_step_to_hz;
    double cv_sum = 0, fano_sum = 0, var_sum = 0;
    int64_t isi_total = 0;
    double isi_sum = 0;
    for (size_t i = 0; i < count_.size(); ++i) {
      const double c = static_cast<double>(count_[i]);
      p.neuron_rate_hz.push_back(slots > 0 ? c / slots * per_step_to_hz : kNaN);
      if (count_[i] == 0) ++p.silent_neurons;
      isi_total += isi_n_[i];
      isi_sum += isi_sum_[i];
      if (isi_n_[i] >= 2) {
        const double n = static_cast<double>(isi_n_[i]);
        const double mean = isi_sum_[i] / n;
        const double var = std::max(0.0, isi_sum2_[i] / n - mean * mean);
        cv_sum += std::sqrt(var) / mean;
        ++p.cv_neurons;
      }
      if (count_[i] > 0 && samples_ >= 2) {
        const double mean = c / samples;
        const double var = (sum_count2_[i] - samples * mean * mean) / (samples - 1);
        fano_sum += std::max(0.0, var) / mean;
        ++p.fano_neurons;
      }
      // A neuron's count in a bin: its variance over the bins.
      if (bins > 0) {
        const double q = binned_[i] / bins;
        var_sum += std::max(0.0, binned2_[i] / bins - q * q);
      }
    }
    p.isi_count = isi_total;
    p.isi_mean_ms = isi_total > 0 ? isi_sum / static_cast<double>(isi_total) * dt_ms : kNaN;
    p.isi_cv = p.cv_neurons > 0 ? cv_sum / static_cast<double>(p.cv_neurons) : kNaN;
    p.fano = p.fano_neurons > 0 ? fano_sum / static_cast<double>(p.fano_neurons) : kNaN;
    if (samples_ >= 2 && pop_sum_ > 0) {
      const double mean = pop_sum_ / samples;
      p.population_fano = std::max(0.0, (pop_sum2_ - samples * mean * mean) / (samples - 1)) / mean;
    } else {
      p.population_fano = kNaN;
    }
    for (int64_t c : psth_) p.psth_hz.push_back(samples > 0 ? static_cast<double>(c) / (samples * neurons) * per_step_to_hz : kNaN);
    const double mean_v = bins > 0 ? sum_v_ / bins : 0;
    const double var_v = bins > 0 ? std::max(0.0, sum_v2_ / bins - mean_v * mean_v) : 0;
    const double mean_var = var_sum / neurons;
    p.synchrony = mean_var > 0 ? std::sqrt(var_v / mean_var) : kNaN;
  }

 private:
  // Adds neuron i's count in its current bin to its sums, unless that bin
  // is the short one at a sample's end.
  void close_bin(size_t i) {
    if (bin_of_[i] >= 0 && bin_of_[i] < steps_ / bin_) {
      const double c = static_cast<double>(in_bin_[i]);
      binned_[i] += c;
      binned2_[i] += c * c;
    }
    in_bin_[i] = 0;
  }

  PopulationStats& out_;
  int64_t steps_, bin_;
  std::string where_;
  std::vector<int64_t> index_;  // node id -> position among the recorded neurons, -1 if not recorded
  std::vector<int64_t> count_, in_sample_, last_step_, isi_n_;
  std::vector<double> sum_count2_, isi_sum_, isi_sum2_;
  std::vector<int64_t> bin_of_, in_bin_;  // per neuron: its current synchrony bin and its count there
  std::vector<double> binned_, binned2_;  // per neuron: sums of its bin counts and their squares (full bins)
  std::vector<int64_t> step_spikes_, psth_;
  std::vector<size_t> touched_;
  double pop_sum_ = 0, pop_sum2_ = 0, sum_v_ = 0, sum_v2_ = 0;
  int64_t samples_ = 0, sample_events_ = 0;
};

// Rows of a checked one-dimensional uint64 dataset, read a block at a time
// as the caller walks forward.
class BlockReader {
 public:
  BlockReader(hid_t ds, const std::string& where) : ds_(ds), where_(where) {}
  uint64_t at(hsize_t i) {
    if (i < first_ || i >= first_ + block_.size()) {
      first_ = i;
      hdf5::read_rows(ds_, H5T_NATIVE_UINT64, i, std::min<hsize_t>(kRowBlock, rows(ds_) - i), 1, block_, where_);
    }
    return block_[i - first_];
  }

 private:
  static hsize_t rows(hid_t ds) {
    Handle space(H5Dget_space(ds), H5Sclose);
    hsize_t dims[1] = {0};
    H5Sget_simple_extent_dims(space.get(), dims, nullptr);
    return dims[0];
  }
  hid_t ds_;
  std::string where_;
  hsize_t first_ = 0;
  std::vector<uint64_t> block_;
};

// Streams one (checked) population's spikes through a PopulationPass, at
// most `chunk_bytes` of events at a time, whatever the samples' sizes.
void analyze_population(hid_t f, const schema::Contents::Population& pop, const schema::Contents& c,
                        int64_t chunk_bytes, int64_t bin, const std::string& where, PopulationStats& out,
                        int64_t& peak) {
  const std::string& name = pop.name;
  out.name = name;
  out.layer = pop.layer;
  out.node_ids = pop.recorded;
  PopulationPass pass(out, pop.n_nodes, c.steps, bin, where + ", population '" + name + "'");
  Handle ptr = open_dataset(f, schema::at(schema::spike_ptr, name), where);
  Handle ts = open_dataset(f, schema::at(schema::timestamps, name), where);
  Handle ids = open_dataset(f, schema::at(schema::node_ids, name), where);
  BlockReader pointers(ptr.get(), where);
  const uint64_t max_events = static_cast<uint64_t>(std::max<int64_t>(1, chunk_bytes / 16));
  std::vector<uint64_t> node;
  std::vector<double> time;
  std::vector<int64_t> step;
  uint64_t buf_first = 0, pos = 0;  // the events in memory: [buf_first, buf_first + time.size())
  for (int64_t sample = 0; sample < c.samples; ++sample) {
    const uint64_t end = pointers.at(static_cast<hsize_t>(sample + 1));  // checked: rising, <= events
    pass.begin_sample();
    while (pos < end) {
      if (pos == buf_first + time.size()) {  // read the next piece
        buf_first = pos;
        const hsize_t n = std::min<uint64_t>(max_events, pop.events - pos);
        hdf5::read_rows(ts.get(), H5T_NATIVE_DOUBLE, pos, n, 1, time, where);
        hdf5::read_rows(ids.get(), H5T_NATIVE_UINT64, pos, n, 1, node, where);
        peak = std::max(peak, static_cast<int64_t>(n) * 16);
      }
      const uint64_t stop = std::min<uint64_t>(end, buf_first + time.size());
      const size_t from = static_cast<size_t>(pos - buf_first), n = static_cast<size_t>(stop - pos);
      step.resize(n);
      for (size_t e = 0; e < n; ++e) {
        step[e] = step_of(time[from + e], c.first_sample + sample, c.steps, c.dt_ms,
                          where + ", population '" + name + "'");
      }
      pass.add_events(step.data(), node.data() + from, static_cast<int64_t>(n));
      pos = stop;
    }
    pass.end_sample();
  }
  pass.finish(c.dt_ms);
}

}  // namespace

int64_t synchrony_bin_steps(double bin_ms, double dt_ms, int64_t steps, const std::string& where) {
  if (bin_ms == 0) return 1;
  const std::string named = fmt::format("the synchrony bin of {} ms", bin_ms);
  if (!(bin_ms > 0) || !std::isfinite(bin_ms)) throw Error(named + " must be a positive number of ms");
  const double x = bin_ms / dt_ms;
  const double whole = std::round(x);
  if (whole < 1 || std::abs(x - whole) > 1e-9 * whole) {
    throw Error(fmt::format("{} is not a whole number of steps of dt = {} ms ({})", named, dt_ms, where));
  }
  if (whole > static_cast<double>(steps)) {
    throw Error(fmt::format("{} is longer than a sample of {} ({} steps of {} ms)", named, where, steps, dt_ms));
  }
  return static_cast<int64_t>(whole);
}

SpikeTrains read_spikes(const std::string& path, const std::string& population, int64_t first, int64_t count) {
  hdf5::QuietHdf5 quiet;
  const std::string where = "recording '" + path + "'";
  schema::Contents c;
  Handle f = open_recording(path, c);
  const auto pop = std::find_if(c.populations.begin(), c.populations.end(),
                                [&](const auto& p) { return p.name == population; });
  if (pop == c.populations.end()) throw Error(where + " records no population '" + population + "'");
  if (first < 0 || first >= c.samples) {
    throw Error(where + " has samples 0.." + std::to_string(c.samples - 1) + ", not " + std::to_string(first));
  }
  if (count < 0) throw Error("read_spikes: count must not be negative, got " + std::to_string(count));
  count = std::min<int64_t>(count, c.samples - first);
  Handle ptr = open_dataset(f.get(), schema::at(schema::spike_ptr, population), where);
  std::vector<uint64_t> p;
  hdf5::read_rows(ptr.get(), H5T_NATIVE_UINT64, static_cast<hsize_t>(first), static_cast<hsize_t>(count + 1), 1, p, where);
  // The pointers were checked (rising, within the spikes); the spikes' ids
  // and times are checked here, as the analysis does.
  SpikeTrains out;
  Handle ts = open_dataset(f.get(), schema::at(schema::timestamps, population), where);
  Handle ids = open_dataset(f.get(), schema::at(schema::node_ids, population), where);
  hdf5::read_rows(ts.get(), H5T_NATIVE_DOUBLE, p.front(), p.back() - p.front(), 1, out.t_ms, where);
  std::vector<uint64_t> raw;
  hdf5::read_rows(ids.get(), H5T_NATIVE_UINT64, p.front(), p.back() - p.front(), 1, raw, where);
  const std::string what = where + ", population '" + population + "'";
  for (int64_t s = 0; s < count; ++s) {
    for (uint64_t e = p[s] - p.front(); e < p[s + 1] - p.front(); ++e) {
      step_of(out.t_ms[e], c.first_sample + first + s, c.steps, c.dt_ms, what);
      if (!std::binary_search(pop->recorded.begin(), pop->recorded.end(), static_cast<int64_t>(std::min<uint64_t>(raw[e], INT64_MAX)))) {
        throw Error(where + ": /" + schema::at(schema::node_ids, population) + " holds node id " +
                    std::to_string(raw[e]) + ", not a recorded neuron of the population (n_nodes " +
                    std::to_string(pop->n_nodes) + ")");
      }
    }
  }
  out.node_ids.assign(raw.begin(), raw.end());
  for (int64_t s = first; s <= first + count; ++s) {
    out.sample_start_ms.push_back(static_cast<double>((c.first_sample + s) * c.steps) * c.dt_ms);
  }
  Handle label = open_dataset(f.get(), schema::label.path, where);
  Handle predicted = open_dataset(f.get(), schema::predicted.path, where);
  hdf5::read_rows(label.get(), H5T_NATIVE_INT64, static_cast<hsize_t>(first), static_cast<hsize_t>(count), 1, out.labels, where);
  hdf5::read_rows(predicted.get(), H5T_NATIVE_INT64, static_cast<hsize_t>(first), static_cast<hsize_t>(count), 1, out.predicted, where);
  return out;
}

RecordingStats analyze_recording(const std::string& path, const AnalysisOptions& options) {
  hdf5::QuietHdf5 quiet;
  if (options.chunk_bytes < 1) throw Error("the chunk budget must be positive, got " + std::to_string(options.chunk_bytes));
  const std::string where = "recording '" + path + "'";
  RecordingStats r;
  r.path = path;
  schema::Contents c;
  Handle f = open_recording(path, c);
  r.status = c.status;
  r.steps = c.steps;
  r.dt_ms = c.dt_ms;
  r.samples = c.samples;
  r.classes = c.classes;
  r.trials = c.kind == schema::kPopulationsKind;
  const int64_t bin = synchrony_bin_steps(options.synchrony_bin_ms, c.dt_ms, c.steps, where);
  r.synchrony_bin_ms = static_cast<double>(bin) * c.dt_ms;

  // Per-sample rows (extents checked): accuracy, accuracy by step, confusion matrix.
  Handle label = open_dataset(f.get(), schema::label.path, where);
  Handle predicted = open_dataset(f.get(), schema::predicted.path, where);
  const bool by_step = c.prediction_by_step;
  Handle pbs = by_step ? open_dataset(f.get(), schema::prediction_by_step.path, where) : Handle(-1, H5Dclose);
  r.confusion.assign(static_cast<size_t>(r.classes), std::vector<int64_t>(static_cast<size_t>(r.classes), 0));
  std::vector<int64_t> correct_by_step(static_cast<size_t>(r.steps), 0);
  int64_t correct = 0;
  std::vector<int64_t> y, p, q;
  // Rows of prediction_by_step are T wide: fewer of them a block.
  const hsize_t block = std::max<hsize_t>(1, kRowBlock / (by_step ? static_cast<hsize_t>(r.steps) : 1));
  for (int64_t s0 = 0; s0 < r.samples; s0 += static_cast<int64_t>(block)) {
    const hsize_t rows = static_cast<hsize_t>(std::min<int64_t>(static_cast<int64_t>(block), r.samples - s0));
    hdf5::read_rows(label.get(), H5T_NATIVE_INT64, static_cast<hsize_t>(s0), rows, 1, y, where);
    hdf5::read_rows(predicted.get(), H5T_NATIVE_INT64, static_cast<hsize_t>(s0), rows, 1, p, where);
    if (by_step) hdf5::read_rows(pbs.get(), H5T_NATIVE_INT64, static_cast<hsize_t>(s0), rows, static_cast<hsize_t>(r.steps), q, where);
    for (hsize_t i = 0; i < rows; ++i) {
      if (y[i] < 0 || y[i] >= r.classes || p[i] < 0 || p[i] >= r.classes) {
        throw Error(where + ": /" + schema::label.path + " or /" + schema::predicted.path + ": sample " +
                    std::to_string(s0 + static_cast<int64_t>(i)) + " has label " + std::to_string(y[i]) +
                    " and prediction " + std::to_string(p[i]) + ", outside the classes 0.." + std::to_string(r.classes - 1));
      }
      ++r.confusion[static_cast<size_t>(y[i])][static_cast<size_t>(p[i])];
      correct += y[i] == p[i];
      for (int64_t t = 0; by_step && t < r.steps; ++t) {
        correct_by_step[static_cast<size_t>(t)] += q[i * static_cast<hsize_t>(r.steps) + static_cast<hsize_t>(t)] == y[i];
      }
    }
  }
  const double n = static_cast<double>(r.samples);
  r.accuracy = r.samples > 0 ? static_cast<double>(correct) / n : kNaN;
  for (int64_t t = 0; by_step && t < r.steps; ++t) {
    r.accuracy_by_step.push_back(r.samples > 0 ? static_cast<double>(correct_by_step[static_cast<size_t>(t)]) / n : kNaN);
  }

  for (const auto& pop : c.populations) {
    r.populations.emplace_back();
    analyze_population(f.get(), pop, c, options.chunk_bytes, bin, where, r.populations.back(), r.peak_chunk_bytes);
  }
  return r;
}

}  // namespace snn::analysis
