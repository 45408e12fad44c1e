// `snnsim analyze RUN.h5`: statistics of a recording, a text summary on
// stdout and everything (per-neuron values included) as JSON.

#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <fstream>
#include <map>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/stat.h>

#include "commands.h"
#include "plots.h"
#include "snn/analysis/analysis.h"
#include "snn/core/atomic_file.h"
#include "snn/core/error.h"
#include "snn/simulator/file_kind.h"
#include "validators.h"

namespace snn::app {
namespace {

// NaN (an undefined statistic) becomes JSON null.


nlohmann::json numbers(const std::vector<double>& v) {
  nlohmann::json out = nlohmann::json::array();
  for (double x : v) out.push_back(json_number(x));
  return out;
}

nlohmann::json to_json(const analysis::RecordingStats& r) {
  nlohmann::json pops = nlohmann::json::array();
  for (const auto& p : r.populations) {
    pops.push_back({{"name", p.name},
                    {"layer", p.layer},
                    {"recorded_neurons", p.node_ids.size()},
                    {"spikes", p.spikes},
                    {"rate_hz", json_number(p.rate_hz)},
                    {"spikes_per_step", json_number(p.spikes_per_step)},
                    {"silent_neurons", p.silent_neurons},
                    {"isi_count", p.isi_count},
                    {"isi_mean_ms", json_number(p.isi_mean_ms)},
                    {"isi_cv", json_number(p.isi_cv)},
                    {"cv_neurons", p.cv_neurons},
                    {"isi_histogram_steps", p.isi_histogram},
                    {"fano", json_number(p.fano)},
                    {"fano_neurons", p.fano_neurons},
                    {"population_fano", json_number(p.population_fano)},
                    {"synchrony_chi", json_number(p.synchrony)},
                    {"psth_hz", numbers(p.psth_hz)},
                    {"node_ids", p.node_ids},
                    {"neuron_spikes", p.neuron_spikes},
                    {"neuron_rate_hz", numbers(p.neuron_rate_hz)}});
  }
  return {{"path", r.path},
          {"status", r.status},
          {"samples", r.samples},
          {"steps", r.steps},
          {"dt_ms", r.dt_ms},
          {"synchrony_bin_ms", r.synchrony_bin_ms},
          {"classes", r.classes},
          {"accuracy", json_number(r.accuracy)},
          {"accuracy_by_step", numbers(r.accuracy_by_step)},
          {"confusion", r.confusion},
          {"populations", pops},
          {"definitions",
           {{"bin", "one step of one sample; samples are separate trials"},
            {"isi", "intervals between a neuron's consecutive spikes within a sample"},
            {"isi_cv", "mean over neurons with >= 2 intervals of std/mean of their intervals (std divisor n)"},
            {"fano", "mean over spiking neurons of var/mean of their per-sample counts (var divisor n - 1)"},
            {"synchrony_chi", "Golomb's chi: sqrt(var over bins of synchrony_bin_ms of the population-mean spike count / "
                              "mean over neurons of the variance of their count in a bin)"},
            {"psth_hz", "mean rate per neuron at each step of a sample"}}}};
}

std::string fmt_number(double v, const char* spec = "{:.4g}") {
  return std::isnan(v) ? std::string("n/a") : fmt::format(fmt::runtime(spec), v);
}

std::string summary_text(const analysis::RecordingStats& r) {
  std::ostringstream out;
  // A population model's trials (snnsim simulate): nothing was classified,
  // its samples are trials and its populations no layers.
  const bool classified = !r.trials;
  const std::string unit = r.trials ? "trial" : "sample";
  out << fmt::format("recording {}: {} {}{}, T = {}, dt = {} ms, status {}\n", r.path, r.samples, unit,
                     r.samples == 1 ? "" : "s", r.steps, r.dt_ms, r.status);
  if (classified) {
    out << "accuracy " << fmt_number(r.accuracy);
    if (!r.accuracy_by_step.empty()) {
      out << "; by step t:";
      for (double a : r.accuracy_by_step) out << " " << fmt_number(a, "{:.4f}");
    }
    out << "\n";
  }
  for (const auto& p : r.populations) {
    out << fmt::format("population {} ({}{} neurons recorded): {} spikes, {} Hz ({} per step), {} silent\n",
                       p.name, classified ? fmt::format("layer {}, ", p.layer) : "", p.node_ids.size(), p.spikes,
                       fmt_number(p.rate_hz), fmt_number(p.spikes_per_step), p.silent_neurons);
    // Fano factors are variances over samples: one sample has none.
    const std::string fano =
        r.samples == 0   ? fmt::format("Fano n/a (no {}s)", unit)
        : r.samples == 1 ? fmt::format("Fano n/a (one {})", unit)
                         : fmt::format("Fano {} ({} neurons), population Fano {}", fmt_number(p.fano), p.fano_neurons,
                                       fmt_number(p.population_fano));
    out << fmt::format("  ISI: {} intervals, mean {} ms, CV {} ({} neurons); {}; synchrony chi {}{}\n", p.isi_count,
                       fmt_number(p.isi_mean_ms), fmt_number(p.isi_cv), p.cv_neurons, fano, fmt_number(p.synchrony),
                       r.synchrony_bin_ms > r.dt_ms ? " (bins of " + fmt_number(r.synchrony_bin_ms) + " ms)" : "");
    // Long runs (biological time): the PSTH in at most 100 bins of whole steps.
    const size_t bin = (p.psth_hz.size() + 99) / 100;
    if (r.samples == 0) {
      out << fmt::format("  PSTH n/a (no {}s)\n", unit);
      continue;
    }
    if (bin <= 1) {
      out << "  PSTH (Hz by step):";
    } else {
      out << fmt::format("  PSTH (Hz by bins of {} steps, {} ms):", bin, fmt_number(static_cast<double>(bin) * r.dt_ms));
    }
    for (size_t b = 0; b < p.psth_hz.size(); b += std::max<size_t>(bin, 1)) {
      const size_t end = std::min(p.psth_hz.size(), b + std::max<size_t>(bin, 1));
      double sum = 0;
      for (size_t t = b; t < end; ++t) sum += p.psth_hz[t];
      out << " " << fmt_number(sum / static_cast<double>(end - b), "{:.1f}");
    }
    out << "\n";
  }
  if (!classified) return out.str();
  out << "confusion matrix (rows: label, columns: predicted):\n";
  for (size_t i = 0; i < r.confusion.size(); ++i) {
    out << fmt::format("  {:>2}:", i);
    for (int64_t c : r.confusion[i]) out << fmt::format(" {:>5}", c);
    out << "\n";
  }
  return out.str();
}

struct ManifestFlags {
  std::string x, y = "accuracy", by, plot;
};

// A sweep manifest: a table (and optionally a plot) of one metric against a
// swept parameter, one column (line) per value of a second parameter; points
// that share both values (other parameters varied) are averaged.
void analyze_manifest(const std::string& path, ManifestFlags f) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read '" + path + "'");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
    (void)doc.at("rows");
  } catch (const nlohmann::json::exception&) {
    throw Error("'" + path + "' is not a sweep manifest (snnsim sweep writes manifest.json)");
  }
  const auto names = doc.value("parameters", std::vector<std::string>{});
  std::string all;
  for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
  if (f.x.empty() && !names.empty()) f.x = names[0];
  if (f.by.empty() && names.size() > 1) f.by = names[f.x == names[0] ? 1 : 0];
  for (const std::string* p : {&f.x, &f.by}) {
    if (!p->empty() && std::find(names.begin(), names.end(), *p) == names.end()) {
      throw Error("the sweep did not vary '" + *p + "' (it varied: " + all + ")");
    }
  }
  if (!f.by.empty() && f.by == f.x) {
    throw Error("--by '" + f.by + "' is also --x: one line per value of the x axis shows one point each; give --by "
                "another swept parameter" + (names.size() > 1 ? " (the sweep varied: " + all + ")" : ""));
  }
  // A population model sweep's rows hold each population's statistics
  // ("E.rate_hz", "E.synchrony", ...); the first is the default.
  const std::vector<std::string> metrics = sweep_metric_names(doc.at("rows"));
  const bool simulate = doc.value("command", "run") == "simulate";
  if (simulate && f.y == "accuracy" && !metrics.empty()) f.y = metrics.front();
  auto metric = [&](const nlohmann::json& row) -> double {
    if (simulate) {
      const auto m = row.value("metrics", nlohmann::json::object());
      if (m.contains(f.y)) return m[f.y].is_number() ? m[f.y].get<double>() : std::nan("");
      if (f.y == "wall_s") return row.at("wall_s").get<double>();
      std::string all;
      for (const auto& k : metrics) all += (all.empty() ? "" : ", ") + k;
      throw Error("--y: expected one of " + all + " or wall_s, got '" + f.y + "'");
    }
    if (f.y == "accuracy") return row.at("accuracy").get<double>();
    if (f.y == "wall_s") return row.at("wall_s").get<double>();
    const std::string prefix = "firing_rate_layer";
    if (f.y.rfind(prefix, 0) == 0) {
      const size_t layer = std::stoul(f.y.substr(prefix.size()));
      if (layer >= 1 && layer <= row.at("firing_rate").size()) return row.at("firing_rate")[layer - 1].get<double>();
    }
    throw Error("--y: expected accuracy, wall_s or firing_rate_layerN (N = 1.." +
                std::to_string(row.value("firing_rate", nlohmann::json::array()).size()) + "), got '" + f.y + "'");
  };
  // (by value, as a number where it is one; its label) -> (x value) -> (sum, count)
  std::map<std::pair<double, std::string>, std::map<double, std::pair<double, int>>> cells;
  std::map<double, std::string> x_text;
  int done = 0;
  for (const auto& row : doc.at("rows")) {
    if (row.value("status", "") != "done") continue;
    const std::string xs = row.at("params").value(f.x, "");
    double x = 0;
    try {
      x = std::stod(xs);
    } catch (const std::exception&) {
      throw Error("--x " + f.x + ": the values must be numbers, got '" + xs + "'");
    }
    const std::string bv = f.by.empty() ? "" : row.at("params").value(f.by, "");
    double order = 0;
    try {
      order = std::stod(bv);
    } catch (const std::exception&) {
      order = 0;  // not a number (e.g. a checkpoint path): by label
    }
    auto& cell = cells[{order, f.by.empty() ? f.y : f.by + "=" + bv}][x];
    cell.first += metric(row);
    cell.second += 1;
    x_text[x] = xs;
    ++done;
  }
  if (done == 0) throw Error("'" + path + "' has no completed point yet");
  std::ostringstream table;  // printed once the plot is written: a failure prints one line only
  table << fmt::format("{} against {} ({} completed points{})\n", f.y, f.x, done,
                       f.by.empty() ? "" : ", one column per " + f.by);
  table << fmt::format("{:>12}", f.x);
  for (const auto& [b, col] : cells) table << fmt::format(" {:>14}", b.second);
  table << "\n";
  for (const auto& [x, text] : x_text) {
    table << fmt::format("{:>12}", text);
    for (const auto& [b, col] : cells) {
      const auto it = col.find(x);
      table << (it == col.end() ? fmt::format(" {:>14}", "-")
                                : fmt::format(" {:>14.4f}", it->second.first / it->second.second));
    }
    table << "\n";
  }
  if (!f.plot.empty()) {
    std::vector<Series> series;
    for (const auto& [b, col] : cells) {
      Series s{b.second, {}, {}};
      for (const auto& [x, cell] : col) {
        s.x.push_back(x);
        s.y.push_back(cell.first / cell.second);
      }
      series.push_back(s);
    }
    std::string y_label = f.y;
    if (f.y == "wall_s") y_label = "wall time per run (s)";
    if (f.y.rfind("firing_rate_layer", 0) == 0) {
      y_label = "layer " + f.y.substr(17) + " firing rate (spikes per neuron per step)";
    }
    const auto dot = f.y.rfind('.');
    if (simulate && dot != std::string::npos) {
      const std::string pop = f.y.substr(0, dot), stat = f.y.substr(dot + 1);
      const std::map<std::string, std::string> words{{"rate_hz", "firing rate (Hz)"},
                                                     {"isi_cv", "ISI CV"},
                                                     {"fano", "Fano factor"},
                                                     {"synchrony", "synchrony (Golomb's chi)"}};
      if (words.count(stat)) y_label = "population " + pop + ": " + words.at(stat);
    }
    plot_lines(f.plot, fmt::format("sweep {}: {} against {}", doc.value("sweep", path), f.y, f.x), f.x, y_label,
               series);
    table << "plot: " << f.plot << "\n";
  }
  std::cout << table.str();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The extension of the last path component, with its dot ("" if none).
std::string extension_of(const std::string& path) {
  const size_t dot = path.rfind('.'), slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1) return "";
  return path.substr(dot);
}

// The output flags, checked before the (long) analysis: a plot whose name
// says another format than the one written, or a --plots folder that is
// a file, fails at once.
void check_outputs(const std::string& plot, const std::string& plots) {
  if (!plot.empty() && plot_format_of(plot).empty()) {
    const std::string ext = extension_of(plot);
    throw Error("--plot: expected a file name ending in .png or .svg, got '" + plot + "' (" +
                (ext.empty() ? std::string("no extension") : "extension '" + ext + "'") + ")");
  }
  if (plots.empty()) return;
  struct stat st {};
  const bool exists = ::stat(plots.c_str(), &st) == 0;
  static const std::vector<std::string> kFileExtensions = {".png", ".svg", ".gif", ".jpg", ".jpeg", ".pdf", ".eps",
                                                           ".ps", ".tif", ".tiff", ".bmp", ".webp", ".json", ".h5"};
  std::string ext = extension_of(plots);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool file_like = std::find(kFileExtensions.begin(), kFileExtensions.end(), ext) != kFileExtensions.end();
  if ((exists && !S_ISDIR(st.st_mode)) || (!exists && file_like)) {
    throw Error("--plots: expected a folder (the plots go into it as raster.png, rates.png, ...; --plot-format "
                "picks png or svg), got " + std::string(exists ? "the file '" : "'") + plots + "'" +
                (exists ? "" : " (extension '" + extension_of(plots) + "'); a single plot is --plot FILE.png for a sweep manifest"));
  }
  if (!exists) {  // made after the analysis, in a folder that must be there now
    std::string folder = plots;
    while (folder.size() > 1 && folder.back() == '/') folder.pop_back();
    check_parent_folder(folder);
  }
}

}  // namespace

Run add_analyze_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<std::string>();
  auto chunk = std::make_shared<std::string>("64M");
  auto sync_bin = std::make_shared<double>(0);
  auto plots = std::make_shared<std::string>();
  auto plot = std::make_shared<PlotOptions>();
  auto raster = std::make_shared<std::string>("0-4");
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "Statistics of a recording, read chunk by chunk: firing rates per population and neuron, inter-spike "
      "intervals, Fano factors, PSTH, synchrony, accuracy by step, confusion matrix");
  auto mf = std::make_shared<ManifestFlags>();
  cmd->add_option("FILE", *path, "A recording written by snnsim run --output, or a sweep's manifest.json")->required();
  cmd->add_option("--x", mf->x, "Manifest: the swept parameter on the x axis (default: the first)");
  cmd->add_option("--y", mf->y,
                  "Manifest: accuracy, firing_rate_layerN or wall_s; for a population model sweep POP.rate_hz, "
                  "POP.isi_cv, POP.fano or POP.synchrony (default: the first population's rate)")->capture_default_str();
  cmd->add_option("--by", mf->by, "Manifest: one line per value of this parameter (default: the second)");
  cmd->add_option("--plot", mf->plot, "Manifest: write the plot to this .png or .svg file");
  cmd->add_option("--json", *json, "Write every result (per-neuron values too) to this JSON file");
  cmd->add_option("--chunk-bytes", *chunk, "Most spike data held in memory at once, e.g. 64M")->capture_default_str();
  cmd->add_option("--synchrony-bin", *sync_bin,
                  "Bin width of synchrony (Golomb's chi) in ms: a whole number of the recording's steps (default: "
                  "one step)");
  cmd->add_option("--plots", *plots,
                  "Write plots into this folder: raster, firing-rate histograms, PSTH, accuracy by t, confusion matrix");
  cmd->add_option("--plot-format", plot->format, "png or svg")->capture_default_str()->check(one_of({"png", "svg"}));
  cmd->add_option("--raster", *raster, "Samples in the raster plot, e.g. 0-4")->capture_default_str();
  return [cmd, path, json, chunk, sync_bin, plots, plot, raster, mf] {
    if (!cmd->parsed()) return;
    check_outputs(mf->plot, *plots);
    check_output_files({{"--json", *json}, {"--plot", mf->plot}}, {{"the input", *path}, config_argument(cmd)});
    // A file of another kind: say what it is and what reads it.
    struct stat st {};
    if (::stat(path->c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      throw Error("'" + *path + "' is a folder: analyze takes a recording (run --output) or a sweep's manifest.json" +
                  (::stat((*path + "/manifest.json").c_str(), &st) == 0 ? " (here: " + *path + "/manifest.json)" : ""));
    }
    const Hdf5Kind kind = hdf5_kind(*path);
    if (kind == Hdf5Kind::kCheckpoint || kind == Hdf5Kind::kNir) {
      throw Error("'" + *path + "' is " + describe(kind) + ", not a recording: snnsim run --checkpoint " + *path +
                  " --output run.h5 records one to analyze");
    }
    // Flags of the other kind of input are errors, not silently ignored
    // (where typed: a --config's [analyze] may set them for both kinds).
    auto refuse_given = [&](const std::vector<std::string>& flags, const char* what) {
      for (const std::string& flag : flags) {
        if (typed(flag)) throw Error(flag + " is for " + what);
      }
    };
    if (ends_with(*path, ".json")) {
      refuse_given({"--chunk-bytes", "--plot-format", "--raster"},
                   "recordings; a sweep manifest takes --x, --y, --by and --plot");
      if (!plots->empty() || !json->empty()) throw Error("--plots and --json are for recordings; a manifest takes --plot");
      if (*sync_bin != 0) {
        throw Error("--synchrony-bin is for recordings: a sweep's points measure synchrony as they run ([base] "
                    "synchrony-bin in the sweep file)");
      }
      analyze_manifest(*path, *mf);
      return;
    }
    if (!mf->plot.empty()) throw Error("--plot is for sweep manifests; a recording takes --plots DIR");
    refuse_given({"--x", "--y", "--by"}, "sweep manifests (manifest.json); a recording's statistics are all printed");
    analysis::AnalysisOptions o;
    o.chunk_bytes = static_cast<int64_t>(parse_bytes("--chunk-bytes", *chunk));
    o.synchrony_bin_ms = *sync_bin;
    // Every flag is checked before anything is printed.
    PlotOptions po = *plot;
    const auto dash = raster->find('-');
    try {
      po.raster_first = std::stoll(raster->substr(0, dash));
      const int64_t last = dash == std::string::npos ? po.raster_first : std::stoll(raster->substr(dash + 1));
      po.raster_count = last - po.raster_first + 1;
      if (po.raster_first < 0 || po.raster_count < 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw Error("--raster: expected samples like 0-4, got '" + *raster + "'");
    }
    const analysis::RecordingStats r = analysis::analyze_recording(*path, o);
    if (!plots->empty() && po.raster_first >= r.samples) {
      throw Error("--raster: the recording has samples 0.." + std::to_string(r.samples - 1) + ", not " +
                  std::to_string(po.raster_first));
    }
    // Every file first, through a temporary renamed when complete; then the
    // text: a failure (a full disk) prints one line and leaves the old files.
    std::string text = summary_text(r);
    if (!json->empty()) {
      write_file_atomically(*json, to_json(r).dump(2) + "\n");
      text += "results: " + *json + "\n";
    }
    if (!plots->empty()) {
      for (const auto& file : write_plots(*plots, r, po)) text += "plot: " + file + "\n";
    }
    std::cout << text;
  };
}

}  // namespace snn::app
