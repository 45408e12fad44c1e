#include "snn/analysis/analysis.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"

namespace snn::analysis {
namespace {

using hdf5::check;
using hdf5::Handle;
using hdf5::open_dataset;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr hsize_t kRowBlock = 65536;  // per-sample rows read at once

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Rows and width of a 1-D or 2-D dataset.
std::pair<hsize_t, hsize_t> shape_of(hid_t ds) {
  Handle space(H5Dget_space(ds), H5Sclose);
  hsize_t dims[2] = {0, 1};
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > 2) return {0, 0};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  return {dims[0], rank == 2 ? dims[1] : 1};
}

// Opens a finished recording; anything else gets a message saying what to do.
Handle open_recording(const std::string& path) {
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
    // A killed SWMR writer leaves the file marked open for writing.
    throw Error("'" + path + "' cannot be opened: a run that was killed while writing it leaves it so" + recover);
  }
  if (H5Aexists(f.get(), "format") <= 0 ||
      hdf5::read_string_attribute(f.get(), "format", "'" + path + "'") != "snnsim-recording") {
    throw Error("'" + path + "' is not an snnsim recording (no format attribute 'snnsim-recording')");
  }
  return f;
}

std::string read_status(hid_t f, const std::string& where) {
  Handle ds = open_dataset(f, "meta/status", where);
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  const size_t size = H5Tget_size(type.get());
  std::string buf(size + 1, '\0');
  Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.get(), size + 1);
  check(H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), where + ": cannot read the status");
  return std::string(buf.c_str());
}

// Accumulates one population's statistics sample by sample.
class PopulationPass {
 public:
  PopulationPass(PopulationStats& out, int64_t n_nodes, int64_t steps, const std::string& where)
      : out_(out), steps_(steps), where_(where), index_(static_cast<size_t>(n_nodes), -1) {
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
    step_spikes_.assign(static_cast<size_t>(steps), 0);
    psth_.assign(static_cast<size_t>(steps), 0);
    out_.isi_histogram.assign(static_cast<size_t>(steps), 0);
  }

  // One sample's events (steps within the sample, node ids), in file order.
  void add_sample(const int64_t* step, const uint64_t* node, int64_t n) {
    touched_.clear();
    std::fill(step_spikes_.begin(), step_spikes_.end(), 0);
    for (int64_t e = 0; e < n; ++e) {
      const int64_t t = step[e];
      if (t < 0 || t >= steps_ || node[e] >= index_.size() || index_[node[e]] < 0) {
        throw Error(where_ + " is inconsistent: a spike at step " + std::to_string(t) + " of neuron " +
                    std::to_string(node[e]) + " lies outside its sample or population");
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
    }
    for (size_t i : touched_) {
      const double c = static_cast<double>(in_sample_[i]);
      count_[i] += in_sample_[i];
      sum_count2_[i] += c * c;
      in_sample_[i] = 0;
      last_step_[i] = -1;
    }
    const double total = static_cast<double>(n);
    pop_sum_ += total;
    pop_sum2_ += total * total;
    const double neurons = static_cast<double>(out_.node_ids.size());
    for (int64_t t = 0; t < steps_; ++t) {
      const double v = static_cast<double>(step_spikes_[static_cast<size_t>(t)]) / neurons;
      sum_v_ += v;
      sum_v2_ += v * v;
      psth_[static_cast<size_t>(t)] += step_spikes_[static_cast<size_t>(t)];
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
      // A neuron's spike indicator over the bins: variance q (1 - q).
      if (slots > 0) {
        const double q = c / slots;
        var_sum += q * (1 - q);
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
    const double mean_v = slots > 0 ? sum_v_ / slots : 0;
    const double var_v = slots > 0 ? std::max(0.0, sum_v2_ / slots - mean_v * mean_v) : 0;
    const double mean_var = var_sum / neurons;
    p.synchrony = mean_var > 0 ? std::sqrt(var_v / mean_var) : kNaN;
  }

 private:
  PopulationStats& out_;
  int64_t steps_;
  std::string where_;
  std::vector<int64_t> index_;  // node id -> position among the recorded neurons, -1 if not recorded
  std::vector<int64_t> count_, in_sample_, last_step_, isi_n_;
  std::vector<double> sum_count2_, isi_sum_, isi_sum2_;
  std::vector<int64_t> step_spikes_, psth_;
  std::vector<size_t> touched_;
  double pop_sum_ = 0, pop_sum2_ = 0, sum_v_ = 0, sum_v2_ = 0;
  int64_t samples_ = 0;
};

// Streams one population's spikes through a PopulationPass, at most
// `chunk_bytes` of events at a time (one sample at least).
void analyze_population(hid_t f, const std::string& name, int64_t samples, int64_t steps, double dt_ms,
                        int64_t chunk_bytes, const std::string& where, PopulationStats& out, int64_t& peak) {
  out.name = name;
  Handle meta(H5Gopen2(f, ("meta/populations/" + name).c_str(), H5P_DEFAULT), H5Gclose);
  if (!meta.ok()) throw Error(where + " has no /meta/populations/" + name);
  out.layer = hdf5::read_int_attribute(meta.get(), "layer", where);
  const int64_t n_nodes = hdf5::read_int_attribute(meta.get(), "n_nodes", where);
  {
    Handle ids = open_dataset(meta.get(), "recorded_node_ids", where);
    std::vector<int64_t> v;
    hdf5::read_rows(ids.get(), H5T_NATIVE_INT64, 0, shape_of(ids.get()).first, 1, v, where);
    out.node_ids = v;
  }
  if (out.node_ids.empty()) throw Error(where + ": population '" + name + "' records no neuron");
  PopulationPass pass(out, n_nodes, steps, where + ", population '" + name + "'");
  Handle ptr = open_dataset(f, "samples/spike_ptr/" + name, where);
  Handle ts = open_dataset(f, "spikes/" + name + "/timestamps", where);
  Handle ids = open_dataset(f, "spikes/" + name + "/node_ids", where);
  if (shape_of(ptr.get()).first < static_cast<hsize_t>(samples + 1)) {
    throw Error(where + ": samples/spike_ptr/" + name + " is shorter than the samples");
  }
  const hsize_t stored = shape_of(ts.get()).first;
  if (shape_of(ids.get()).first != stored) throw Error(where + ": timestamps and node_ids of '" + name + "' differ in length");
  const int64_t max_events = std::max<int64_t>(1, chunk_bytes / 16);
  std::vector<uint64_t> p, node;
  std::vector<double> time;
  std::vector<int64_t> step;
  for (int64_t s0 = 0; s0 < samples; s0 += static_cast<int64_t>(kRowBlock)) {
    const hsize_t rows = static_cast<hsize_t>(std::min<int64_t>(kRowBlock, samples - s0));
    hdf5::read_rows(ptr.get(), H5T_NATIVE_UINT64, static_cast<hsize_t>(s0), rows + 1, 1, p, where);
    for (hsize_t a = 0; a < rows;) {
      // The longest run of samples from a whose events fit the budget.
      hsize_t b = a + 1;
      while (b < rows && static_cast<int64_t>(p[b + 1] - p[a]) <= max_events) ++b;
      if (p[b] < p[a] || p[b] > stored) throw Error(where + ": spike_ptr of '" + name + "' is not a valid index");
      const hsize_t first = p[a], n = p[b] - p[a];
      hdf5::read_rows(ts.get(), H5T_NATIVE_DOUBLE, first, n, 1, time, where);
      hdf5::read_rows(ids.get(), H5T_NATIVE_UINT64, first, n, 1, node, where);
      peak = std::max(peak, static_cast<int64_t>(n) * 16);
      step.resize(n);
      for (hsize_t s = a; s < b; ++s) {
        const int64_t sample = s0 + static_cast<int64_t>(s);
        for (hsize_t e = p[s] - first; e < p[s + 1] - first; ++e) {
          step[e] = std::llround(time[e] / dt_ms) - sample * steps;
        }
        pass.add_sample(step.data() + (p[s] - first), node.data() + (p[s] - first),
                        static_cast<int64_t>(p[s + 1] - p[s]));
      }
      a = b;
    }
  }
  pass.finish(dt_ms);
}

}  // namespace

SpikeTrains read_spikes(const std::string& path, const std::string& population, int64_t first, int64_t count) {
  hdf5::QuietHdf5 quiet;
  const std::string where = "recording '" + path + "'";
  Handle f = open_recording(path);
  if (H5Lexists(f.get(), "spikes", H5P_DEFAULT) <= 0 ||
      H5Lexists(f.get(), ("spikes/" + population).c_str(), H5P_DEFAULT) <= 0) {
    throw Error(where + " records no population '" + population + "'");
  }
  Handle meta(H5Gopen2(f.get(), "meta", H5P_DEFAULT), H5Gclose);
  const int64_t steps = hdf5::read_int_attribute(meta.get(), "steps_per_sample", where);
  const double dt = hdf5::read_double_attribute(meta.get(), "dt_ms", where);
  Handle counter = open_dataset(f.get(), "meta/samples_committed", where);
  uint64_t samples = 0;
  check(H5Dread(counter.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &samples), where + ": no sample count");
  if (first < 0 || first >= static_cast<int64_t>(samples)) {
    throw Error(where + " has samples 0.." + std::to_string(static_cast<int64_t>(samples) - 1) + ", not " +
                std::to_string(first));
  }
  count = std::min<int64_t>(count, static_cast<int64_t>(samples) - first);
  Handle ptr = open_dataset(f.get(), "samples/spike_ptr/" + population, where);
  std::vector<uint64_t> p;
  hdf5::read_rows(ptr.get(), H5T_NATIVE_UINT64, static_cast<hsize_t>(first), static_cast<hsize_t>(count + 1), 1, p, where);
  SpikeTrains out;
  Handle ts = open_dataset(f.get(), "spikes/" + population + "/timestamps", where);
  Handle ids = open_dataset(f.get(), "spikes/" + population + "/node_ids", where);
  if (p.back() < p.front() || p.back() > shape_of(ts.get()).first) throw Error(where + ": spike_ptr is not a valid index");
  hdf5::read_rows(ts.get(), H5T_NATIVE_DOUBLE, p.front(), p.back() - p.front(), 1, out.t_ms, where);
  hdf5::read_rows(ids.get(), H5T_NATIVE_INT64, p.front(), p.back() - p.front(), 1, out.node_ids, where);
  for (int64_t s = first; s <= first + count; ++s) out.sample_start_ms.push_back(static_cast<double>(s * steps) * dt);
  return out;
}

RecordingStats analyze_recording(const std::string& path, const AnalysisOptions& options) {
  hdf5::QuietHdf5 quiet;
  if (options.chunk_bytes < 1) throw Error("the chunk budget must be positive, got " + std::to_string(options.chunk_bytes));
  const std::string where = "recording '" + path + "'";
  RecordingStats r;
  r.path = path;
  Handle f = open_recording(path);
  r.status = read_status(f.get(), where);
  if (r.status != "complete" && r.status != "recovered") {
    throw Error(where + " did not finish (status '" + r.status + "'); make it a normal file with: snnsim recover " + path);
  }
  Handle meta(H5Gopen2(f.get(), "meta", H5P_DEFAULT), H5Gclose);
  r.steps = hdf5::read_int_attribute(meta.get(), "steps_per_sample", where);
  r.dt_ms = hdf5::read_double_attribute(meta.get(), "dt_ms", where);
  if (r.steps < 1 || !(r.dt_ms > 0)) throw Error(where + ": bad steps_per_sample or dt_ms");
  {
    Handle counter = open_dataset(f.get(), "meta/samples_committed", where);
    uint64_t n = 0;
    check(H5Dread(counter.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &n), where + ": no sample count");
    r.samples = static_cast<int64_t>(n);
  }

  // Per-sample rows: accuracy, accuracy by step, confusion matrix.
  Handle label = open_dataset(f.get(), "samples/label", where);
  Handle predicted = open_dataset(f.get(), "samples/predicted", where);
  Handle counts = open_dataset(f.get(), "samples/output_counts", where);
  r.classes = static_cast<int64_t>(shape_of(counts.get()).second);
  const bool by_step = H5Lexists(f.get(), "samples/prediction_by_step", H5P_DEFAULT) > 0;
  Handle pbs = by_step ? open_dataset(f.get(), "samples/prediction_by_step", where) : Handle(-1, H5Dclose);
  for (hid_t ds : {label.get(), predicted.get()}) {
    if (shape_of(ds).first < static_cast<hsize_t>(r.samples)) throw Error(where + ": fewer rows than samples");
  }
  r.confusion.assign(static_cast<size_t>(r.classes), std::vector<int64_t>(static_cast<size_t>(r.classes), 0));
  std::vector<int64_t> correct_by_step(static_cast<size_t>(r.steps), 0);
  int64_t correct = 0;
  std::vector<int64_t> y, p, q;
  for (int64_t s0 = 0; s0 < r.samples; s0 += static_cast<int64_t>(kRowBlock)) {
    const hsize_t rows = static_cast<hsize_t>(std::min<int64_t>(kRowBlock, r.samples - s0));
    hdf5::read_rows(label.get(), H5T_NATIVE_INT64, static_cast<hsize_t>(s0), rows, 1, y, where);
    hdf5::read_rows(predicted.get(), H5T_NATIVE_INT64, static_cast<hsize_t>(s0), rows, 1, p, where);
    if (by_step) hdf5::read_rows(pbs.get(), H5T_NATIVE_INT64, static_cast<hsize_t>(s0), rows, static_cast<hsize_t>(r.steps), q, where);
    for (hsize_t i = 0; i < rows; ++i) {
      if (y[i] < 0 || y[i] >= r.classes || p[i] < 0 || p[i] >= r.classes) {
        throw Error(where + ": sample " + std::to_string(s0 + static_cast<int64_t>(i)) + " has a label or prediction outside 0.." +
                    std::to_string(r.classes - 1));
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

  Handle spikes(H5Gopen2(f.get(), "spikes", H5P_DEFAULT), H5Gclose);
  if (!spikes.ok()) throw Error(where + " has no /spikes group");
  for (const std::string& name : hdf5::members(spikes.get())) {
    r.populations.emplace_back();
    analyze_population(f.get(), name, r.samples, r.steps, r.dt_ms, options.chunk_bytes, where, r.populations.back(),
                       r.peak_chunk_bytes);
  }
  return r;
}

}  // namespace snn::analysis
