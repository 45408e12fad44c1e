#include "snn/simulator/inspect.h"

#include <fmt/format.h>
#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"
#include "snn/recording/recording_file.h"
#include "snn/recording/recording_info.h"
#include "snn/graph/nir_file.h"
#include "snn/simulator/checkpoint.h"
#include "snn/simulator/file_kind.h"
#include "snn/simulator/graph_model.h"
#include "snn/simulator/network_graph.h"

namespace snn {
namespace {

using json = nlohmann::json;
using hdf5::Handle;

// A sweep manifest is at most a few hundred bytes per point (1e6 points at
// most): anything far larger is not one, and is not read into memory.
constexpr std::streamoff kMaxManifestBytes = std::streamoff{1} << 30;

std::string quoted(const std::string& path) { return "'" + path + "'"; }

// "784-48-10"
std::string layers_text(const std::vector<int64_t>& layers) {
  std::string out;
  for (const int64_t n : layers) out += (out.empty() ? "" : "-") + std::to_string(n);
  return out;
}

// Shortest round-tripping text of a number (0.001, 2, 0.8133).
std::string num(double v) { return fmt::format("{}", v); }

// A NetworkConfig's "neuron" object as "lif (tau 2, v_threshold 1, ...)".
std::string neuron_text(const json& neuron) {
  std::string out = neuron.value("model", std::string("?")) + " (";
  bool first = true;
  for (const auto& [k, v] : neuron.items()) {
    if (k == "model") continue;
    out += (first ? "" : ", ") + k + " " + (v.is_null() ? std::string("none (soft reset)") : v.is_string() ? v.get<std::string>() : v.dump());
    first = false;
  }
  return out + ")";
}

// ---- checkpoints ----

json training_json(const TrainOptions& o) {
  return json{{"epochs", o.epochs},         {"lr", o.lr},
              {"lr_schedule", to_string(o.lr_schedule)}, {"loss", to_string(o.loss)},
              {"batch_size", o.batch_size}, {"seed", o.shuffle_seed},
              {"limit", o.limit},           {"weight_decay", o.weight_decay},
              {"augment_shift", o.augment_shift}};
}

}  // namespace

FileDescription describe_checkpoint(const std::string& path) {
  const CheckpointInfo c = read_checkpoint_info(path);
  const json config = json::parse(c.config.to_json());
  FileDescription d;
  d.kind = "checkpoint";
  d.path = path;
  json j{{"kind", d.kind},
         {"path", path},
         {"network", config},
         {"epochs_done", c.epoch},
         {"parameters", {{"count", c.parameter_count}, {"hash", c.parameters_hash}}},
         {"training", c.has_training_state ? training_json(c.training) : json(nullptr)},
         {"resumable", c.has_training_state}};
  d.lines.push_back("checkpoint " + path);
  if (c.config.graph) {
    // A graph network: its neuron layers by node name (each has its own dynamics).
    std::string layers;
    const auto names = graph_neuron_names(*c.config.graph);
    for (size_t i = 0; i < names.size(); ++i) {
      layers += fmt::format("{}{} [{}]", i ? ", " : "", names[i], c.config.layers[i + 1]);
    }
    d.lines.push_back(fmt::format("network: {}, a graph of {} nodes and {} edges (neuron layers {}), T = {}, seed {}, "
                                  "input gain {}",
                                  layers_text(c.config.layers), c.config.graph->nodes.size(),
                                  c.config.graph->edges.size(), layers, c.config.steps, c.config.seed,
                                  num(c.config.input_gain)));
  } else {
    d.lines.push_back(fmt::format("network: {}, T = {}, {}, seed {}, input gain {}", layers_text(c.config.layers),
                                  c.config.steps, neuron_text(config.at("neuron")), c.config.seed,
                                  num(c.config.input_gain)));
  }
  if (c.has_training_state) {
    const TrainOptions& o = c.training;
    d.lines.push_back(fmt::format(
        "training: {} of {} epochs done; lr {} ({}), loss {}, batch {}, seed {}, weight decay {}, augment shift {}, "
        "{}; resumable (Adam state saved)",
        c.epoch, o.epochs, num(o.lr), to_string(o.lr_schedule), to_string(o.loss), o.batch_size, o.shuffle_seed,
        num(o.weight_decay), o.augment_shift, o.limit < 0 ? "all samples" : fmt::format("first {} samples", o.limit)));
  } else {
    d.lines.push_back(fmt::format("training: {} epochs done; no training options or Adam state (not resumable)", c.epoch));
  }
  if (c.test_accuracy) {
    j["test_accuracy"] = *c.test_accuracy;
    d.lines.push_back(fmt::format("test accuracy: {:.4f} (after epoch {})", *c.test_accuracy, c.epoch));
  }
  d.lines.push_back(fmt::format("parameters: {} values (float32), hash {}", c.parameter_count, c.parameters_hash));
  std::string provenance;
  if (!c.snnsim_version.empty()) {
    j["snnsim_version"] = c.snnsim_version;
    provenance += "snnsim " + c.snnsim_version;
  }
  if (!c.git_commit.empty()) {
    j["git_commit"] = c.git_commit;
    provenance += (provenance.empty() ? "" : ", ") + std::string("commit ") + c.git_commit;
  }
  if (!c.saved_at.empty()) {
    j["saved_at"] = c.saved_at;
    provenance += (provenance.empty() ? "" : ", ") + std::string("saved ") + c.saved_at;
  }
  if (!provenance.empty()) d.lines.push_back("provenance: " + provenance);
  d.json = j.dump(2);
  return d;
}

namespace {

// ---- recordings ----

// "0,5,17" or, for runs of three or more consecutive ids, "0-99".
std::string ids_text(const std::vector<int64_t>& ids) {
  std::string out;
  const auto add = [&](const std::string& part) { out += (out.empty() ? "" : ",") + part; };
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (j >= i + 2) {
      add(std::to_string(ids[i]) + "-" + std::to_string(ids[j]));
    } else {
      for (size_t k = i; k <= j; ++k) add(std::to_string(ids[k]));
    }
    i = j + 1;
  }
  return out;
}

// run_options as the flags that set them: "--split test --limit 300 ...",
// leaving out what is shown elsewhere and what is unset.
std::string run_flags(const json& options) {
  std::string out;
  for (const auto& [k, v] : options.items()) {
    if (k == "checkpoint" || k == "data-dir" || v.is_null() || v == false || v == "") continue;
    out += (out.empty() ? "--" : " --") + k;
    if (v != true) out += " " + (v.is_string() ? v.get<std::string>() : v.dump());
  }
  return out;
}

// A /meta attribute holding JSON, parsed (its text when it does not parse).
json meta_json(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    return text;
  }
}

}  // namespace

namespace {

// How a recording's run continues: a population model's trials by
// simulate, a network's samples by run.
std::string resume_command(const recording::RecordingInfo& r) {
  const std::string file = recording::RecordingFile::final_path(r.path);
  // A rank's part of a run over several processes (FILE.rankR-of-N.h5)
  // continues with the whole run, on as many ranks.
  const std::string rank = r.meta_value("rank"), world = r.meta_value("world_size");
  if (!r.trials && !rank.empty() && !world.empty()) {
    // The run's name as given (parts from before it was stored: from the
    // part's name, FILE.rankR-of-N.h5, taking FILE to end in .h5).
    std::string run = r.meta_value("run_output");
    const std::string tail = ".rank" + rank + "-of-" + world + ".h5";
    if (run.empty() && file.size() > tail.size() && file.compare(file.size() - tail.size(), tail.size(), tail) == 0) {
      run = file.substr(0, file.size() - tail.size()) + ".h5";
    }
    return "snnsim run --resume " + (run.empty() ? file : run) + " on each of its " + world +
           " ranks (this file is rank " + rank + "'s part)";
  }
  if (!r.trials) return "snnsim run --resume " + file;
  const std::string model = r.meta_value("model_file").empty() ? std::string("MODEL") : r.meta_value("model_file");
  return "snnsim simulate " + model + " --record " + file + " --resume (with the flags it was started with)";
}

}  // namespace

std::string resume_command(const std::string& path) { return resume_command(recording::read_recording_info(path)); }

FileDescription describe_recording(const std::string& path) {
  const recording::RecordingInfo r = recording::read_recording_info(path);
  const auto meta = [&](const char* key) { return r.meta_value(key); };
  FileDescription d;
  d.kind = "recording";
  d.path = r.path;
  json j{{"kind", d.kind},
         {"path", r.path},
         {"status", r.status},
         {"samples_committed", r.samples},
         {"rows_written", r.rows_written},
         {"steps", r.steps},
         {"dt_ms", r.dt_ms},
         {"classes", r.classes}};
  d.lines.push_back("recording " + r.path);
  // A population model's trials (snnsim simulate) classify nothing, so
  // there is no accuracy to show (as analyze says).
  const bool classified = !r.trials;
  // A population model's run (snnsim simulate): its samples are trials,
  // its populations no layers, and simulate continues it.
  const bool trials = r.trials;
  const std::string unit = trials ? "trial" : "sample";
  const std::string samples = fmt::format("{} {}{}", r.samples, unit, r.samples == 1 ? "" : "s");
  const double accuracy = r.samples > 0 ? static_cast<double>(r.correct) / static_cast<double>(r.samples) : 0.0;
  if (r.samples > 0 && classified) j["accuracy"] = accuracy;
  const std::string acc = r.samples > 0 && classified ? fmt::format(", accuracy {:.4f}", accuracy) : "";
  const std::string final_path = recording::RecordingFile::final_path(r.path);
  const std::string resume = resume_command(r);
  if (r.status == "complete") {
    d.lines.push_back(fmt::format("status: complete, {}{}", samples, acc));
  } else if (r.status == "recovered") {
    d.lines.push_back(fmt::format("status: recovered (by snnsim recover from a run that was {}), {}{}; "
                                  "continue it with: {}",
                                  r.recovered_from_status == "running" ? "killed" : r.recovered_from_status, samples,
                                  acc, resume));
  } else {
    const std::string state = r.status == "aborted" ? "unfinished (aborted: the run was interrupted)"
                                                    : "unfinished (running: being written, or its run was killed)";
    const std::string extra = r.rows_written > r.samples
                                  ? fmt::format(" ({} rows written, the rest not committed)", r.rows_written)
                                  : "";
    d.lines.push_back(fmt::format("status: {}, {} committed{}{}; continue it with: {}, "
                                  "or keep what it holds with: snnsim recover {}",
                                  state, samples, extra, acc, resume, final_path));
  }
  d.lines.push_back(fmt::format("time: T = {} steps of {} ms per {}{}", r.steps, num(r.dt_ms), unit,
                                classified ? fmt::format(", {} classes", r.classes) : std::string()));
  json pops = json::array();
  std::string pop_text;
  for (const auto& p : r.populations) {
    pops.push_back({{"name", p.name}, {"layer", p.layer}, {"n_nodes", p.n_nodes}, {"recorded", p.recorded},
                    {"spikes", p.spikes}});
    pop_text += fmt::format("{}{}{}: {} of {} neurons, {} spikes", pop_text.empty() ? "" : "; ", p.name,
                            trials ? "" : fmt::format(" (layer {})", p.layer), p.recorded, p.n_nodes, p.spikes);
  }
  j["populations"] = pops;
  d.lines.push_back("spikes: " + (pop_text.empty() ? std::string("none recorded") : pop_text));
  json reports = json::array();
  std::string report_text;
  for (const auto& rep : r.reports) {
    reports.push_back({{"name", rep.name}, {"node_ids", rep.node_ids}});
    report_text += (report_text.empty() ? "" : "; ") + rep.name + " neurons " + ids_text(rep.node_ids);
  }
  j["potentials"] = reports;
  if (!report_text.empty()) d.lines.push_back("potentials: " + report_text);
  if (!meta("checkpoint").empty()) {
    d.lines.push_back("checkpoint: " + meta("checkpoint") +
                      (meta("parameters_hash").empty() ? "" : " (parameters hash " + meta("parameters_hash") + ")"));
  }
  std::string network;
  if (!meta("config").empty()) {
    const json config = meta_json(meta("config"));
    if (config.is_object() && config.contains("layers") && config.contains("neuron")) {
      network = fmt::format("network: {}, {}", layers_text(config.at("layers").get<std::vector<int64_t>>()),
                            neuron_text(config.at("neuron")));
    }
  }
  if (!network.empty()) d.lines.push_back(network);
  // A population model's run: which file, seeds and connectivity made it
  // (the model itself, after --set, is /meta/config).
  if (!meta("model_file").empty()) {
    d.lines.push_back(fmt::format("model: {}, seed {}, input seed {}, connectivity {}", meta("model_file"),
                                  meta("seed"), meta("input_seed"), meta("connectivity")));
  }
  if (!meta("run_options").empty()) {
    const json options = meta_json(meta("run_options"));
    if (options.is_object()) d.lines.push_back("run options: " + run_flags(options));
  }
  if (!meta("data_dir").empty()) d.lines.push_back("data: " + meta("data_dir") + " (" + meta("split") + " split)");
  std::string provenance;
  const auto add = [&](const std::string& text) { provenance += (provenance.empty() ? "" : ", ") + text; };
  if (!meta("snnsim_version").empty()) add("snnsim " + meta("snnsim_version"));
  if (!meta("git_commit").empty()) add("commit " + meta("git_commit"));
  if (!meta("libtorch_version").empty()) add("LibTorch " + meta("libtorch_version"));
  if (!meta("hdf5_version").empty()) add("HDF5 " + meta("hdf5_version"));
  if (!meta("host").empty()) add("host " + meta("host"));
  if (!meta("devices").empty()) add("devices " + meta("devices"));
  if (!meta("threads").empty()) add("threads " + meta("threads"));
  if (!meta("start_time").empty()) add("started " + meta("start_time"));
  if (!meta("wall_time_s").empty()) {
    try {
      add(fmt::format("took {:.1f} s", std::stod(meta("wall_time_s"))));
    } catch (const std::exception&) {
      add("took " + meta("wall_time_s") + " s");
    }
  }
  if (!provenance.empty()) d.lines.push_back("provenance: " + provenance);
  if (r.resumed_at_sample) {
    j["resumed_at_sample"] = *r.resumed_at_sample;
    d.lines.push_back(fmt::format("resumed: by snnsim run --resume at sample {}", *r.resumed_at_sample));
  }
  json m = json::object();
  for (const auto& [k, v] : r.meta) m[k] = (k == "config" || k == "run_options") ? meta_json(v) : json(v);
  j["meta"] = m;
  d.json = j.dump(2);
  return d;
}

namespace {

// ---- sweep manifests ----

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open " + quoted(path) + ": " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > kMaxManifestBytes) {
    throw Error(quoted(path) + " is " + std::to_string(size) + " bytes, too large for a sweep manifest");
  }
  in.seekg(0);
  std::string text(static_cast<size_t>(std::max<std::streamoff>(size, 0)), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(quoted(path) + " is not valid JSON (" + std::string(e.what()) + ")");
  }
}

bool is_manifest(const json& doc) {
  return doc.is_object() && doc.contains("rows") && doc.contains("total_points") && doc.contains("parameters");
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// The parameter's values over the rows: "0.5 .. 2 (3 values)" when numeric,
// else the distinct values.
json parameter_range(const std::vector<std::string>& values, std::string& text) {
  std::set<std::string> distinct(values.begin(), values.end());
  std::vector<double> numbers;
  for (const auto& v : distinct) {
    try {
      size_t used = 0;
      const double x = std::stod(v, &used);
      if (used == v.size() && std::isfinite(x)) numbers.push_back(x);
    } catch (const std::exception&) {
    }
  }
  json j{{"values", distinct.size()}};
  if (!numbers.empty() && numbers.size() == distinct.size()) {
    const auto [lo, hi] = std::minmax_element(numbers.begin(), numbers.end());
    j["min"] = *lo;
    j["max"] = *hi;
    text = distinct.size() == 1 ? num(*lo) : fmt::format("{} .. {} ({} values)", num(*lo), num(*hi), distinct.size());
  } else {
    j["distinct"] = distinct;
    text.clear();
    size_t shown = 0;
    for (const auto& v : distinct) {
      if (shown++ == 6) {
        text += ", ...";
        break;
      }
      text += (text.empty() ? "" : ", ") + v;
    }
    text += fmt::format(" ({} values)", distinct.size());
  }
  return j;
}

FileDescription describe_manifest_doc(const std::string& path, const json& doc) {
  const std::string where = "sweep manifest " + quoted(path);
  FileDescription d;
  d.kind = "sweep manifest";
  d.path = path;
  try {
    const int64_t total = doc.at("total_points").get<int64_t>();
    const auto names = doc.at("parameters").get<std::vector<std::string>>();
    const json& rows = doc.at("rows");
    if (!rows.is_array()) throw Error(where + ": 'rows' is not a list");
    // A shard's manifest lists points i, i + n, ... only.
    int64_t in_file = total;
    std::string shard_text;
    if (doc.contains("shard") && doc.at("shard").is_string()) {
      const std::string s = doc.at("shard").get<std::string>();
      long long i = 0, n = 0;
      if (std::sscanf(s.c_str(), "%lld/%lld", &i, &n) == 2 && n > 0 && i >= 0 && i < n) {
        in_file = (total - i + n - 1) / n;
        shard_text = fmt::format(" (shard {}: {} of the {} points)", s, in_file, total);
      }
    }
    std::map<std::string, int64_t> by_status;
    std::map<std::string, std::vector<std::string>> values;
    const json* best = nullptr;
    double wall = 0;
    for (const json& row : rows) {
      by_status[row.at("status").get<std::string>()] += 1;
      for (const auto& n : names) {
        if (row.at("params").contains(n)) values[n].push_back(row.at("params").at(n).get<std::string>());
      }
      wall += row.value("wall_s", 0.0);
      if (row.contains("accuracy") && (!best || row.at("accuracy").get<double>() > best->at("accuracy").get<double>())) {
        best = &row;
      }
    }
    const int64_t not_run = std::max<int64_t>(0, in_file - static_cast<int64_t>(rows.size()));
    json j{{"kind", d.kind}, {"path", path}, {"sweep", doc.value("sweep", json(nullptr))}, {"total_points", total},
           {"points_in_file", in_file}, {"output_folder", directory_of(path)}};
    json counts = json::object();
    std::string status_text;
    for (const auto& [status, n] : by_status) {
      counts[status] = n;
      status_text += fmt::format("{}{} {}", status_text.empty() ? "" : ", ", n, status);
    }
    counts["not run"] = not_run;
    status_text += fmt::format("{}{} not run", status_text.empty() ? "" : ", ", not_run);
    j["points"] = counts;
    d.lines.push_back("sweep manifest " + path);
    d.lines.push_back(fmt::format("sweep: {}, {} points{}{}", doc.value("sweep", std::string("?")), total, shard_text,
                                  doc.contains("merged_shards") ? fmt::format(", merged from {} shards",
                                                                              doc.at("merged_shards").dump())
                                                                : ""));
    d.lines.push_back("points: " + status_text);
    json params = json::object();
    for (const auto& n : names) {
      std::string text = "not run yet";
      params[n] = values.count(n) ? parameter_range(values[n], text) : json(nullptr);
      d.lines.push_back(fmt::format("  {}: {}", n, text));
    }
    j["parameters"] = params;
    d.lines.push_back("output folder: " + directory_of(path) + " (point-NNNN.h5, .json, .log)");
    if (best) {
      std::string p;
      for (const auto& [k, v] : best->at("params").items()) {
        p += (p.empty() ? "" : ", ") + k + " " + (v.is_string() ? v.get<std::string>() : v.dump());
      }
      j["best"] = {{"index", best->at("index")}, {"accuracy", best->at("accuracy")}, {"params", best->at("params")}};
      d.lines.push_back(fmt::format("best accuracy: {:.4f} at point {} ({})", best->at("accuracy").get<double>(),
                                    best->at("index").dump(), p));
    }
    j["wall_s"] = wall;
    d.lines.push_back(fmt::format("run time: {:.1f} s over the points recorded", wall));
    d.json = j.dump(2);
  } catch (const json::exception& e) {
    throw Error(where + " is malformed: " + e.what());
  }
  return d;
}

}  // namespace

FileDescription describe_sweep_manifest(const std::string& path) {
  const json doc = read_json_file(path);
  if (!is_manifest(doc)) throw Error(quoted(path) + " is JSON but not a sweep manifest (no 'rows', 'total_points', 'parameters')");
  return describe_manifest_doc(path, doc);
}

FileDescription describe_nir(const std::string& path) {
  const graph::Graph g = graph::read_nir(path);
  FileDescription d;
  d.kind = "NIR graph";
  d.path = path;
  std::string simulated;
  try {
    const ChainModel m = chain_model(g);
    simulated = "yes, as the chain " + layers_text(m.layers) + " (" + to_string(m.neuron.model) + ")";
  } catch (const Error&) {
    try {
      const GraphModel model(g);
      std::string names;
      for (const auto& n : model.neuron_names()) names += (names.empty() ? "" : ", ") + n;
      simulated = "yes, as a graph with neuron layers " + names;
    } catch (const Error& e) {
      simulated = std::string("not yet: ") + e.what();
    }
  }
  const graph::GraphShapes shapes = g.validate();
  json nodes = json::array();
  d.lines.push_back("NIR graph " + path);
  d.lines.push_back(fmt::format("{} nodes, {} edges; simulated by snnsim: {}", g.nodes.size(), g.edges.size(), simulated));
  for (const auto& name : shapes.order) {
    const graph::Node& n = g.node(name);
    std::string from;
    for (const auto& s : g.sources_of(name)) from += (from.empty() ? " <- " : ", ") + s;
    d.lines.push_back(fmt::format("  {}: {} {}{}", name, graph::to_string(n.kind), graph::shape_str(shapes.output.at(name)), from));
    nodes.push_back(json{{"name", name}, {"kind", graph::to_string(n.kind)}, {"shape", shapes.output.at(name)},
                         {"from", g.sources_of(name)}});
  }
  d.json = json{{"kind", d.kind}, {"path", path}, {"nodes", nodes}, {"simulated", simulated}}.dump(2);
  return d;
}

FileDescription describe_file(const std::string& path) {
  const std::string kinds = "snnsim inspect reads checkpoints, recordings, sweep manifests and NIR graphs";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat partial {};
    if (::stat((path + ".partial").c_str(), &partial) == 0) return describe_recording(path);  // an unfinished run's
    throw Error("cannot inspect " + quoted(path) + ": " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    struct stat m {};
    const std::string manifest = path + (path.empty() || path.back() != '/' ? "/" : "") + "manifest.json";
    if (::stat(manifest.c_str(), &m) == 0) return describe_sweep_manifest(manifest);
    throw Error(quoted(path) + " is a directory without a sweep manifest (manifest.json); " + kinds);
  }
  if (!S_ISREG(st.st_mode)) throw Error(quoted(path) + " is not a regular file; " + kinds);
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw Error("cannot open " + quoted(path) + ": " + std::strerror(errno));
  hdf5::QuietHdf5 quiet;
  switch (const Hdf5Kind kind = hdf5_kind(path)) {
    case Hdf5Kind::kNotHdf5:
      break;
    case Hdf5Kind::kRecording:
      return describe_recording(path);
    case Hdf5Kind::kCheckpoint:
      return describe_checkpoint(path);
    case Hdf5Kind::kNir:
      return describe_nir(path);
    default:
      throw Error(quoted(path) + " is " + describe(kind));
  }
  char first = 0;
  while (probe.get(first) && std::isspace(static_cast<unsigned char>(first))) {
  }
  if (!probe || (first != '{' && first != '[')) {
    throw Error(quoted(path) + " is neither an HDF5 file nor JSON; " + kinds);
  }
  const json doc = read_json_file(path);
  if (!is_manifest(doc)) throw Error(quoted(path) + " is JSON but not a sweep manifest (no 'rows', 'total_points', 'parameters')");
  return describe_manifest_doc(path, doc);
}

}  // namespace snn
