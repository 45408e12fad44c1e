#include "snn/simulator/run_options.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "snn/core/error.h"

namespace snn {

using nlohmann::json;

bool NetworkOverrides::empty() const {
  return !steps && !tau && !v_threshold && !v_reset && !refractory && !gain && !seed;
}

bool NetworkOverrides::changes_network() const { return tau || v_threshold || v_reset || refractory || gain || seed; }

void NetworkOverrides::apply(NetworkConfig& c) const {
  if (c.graph && (tau || v_threshold || v_reset || refractory)) {
    throw Error(std::string(tau ? "tau" : v_threshold ? "v_threshold" : v_reset ? "v_reset" : "refractory") +
                ": a graph network's neurons are set on its nodes, one per layer; overrides are for --layers "
                "networks");
  }
  if (steps) {
    if (*steps < 1) throw Error("T: expected a whole number >= 1, got " + std::to_string(*steps));
    c.steps = *steps;
  }
  if (tau) {
    if (c.neuron.model == NeuronModel::kParametricLIF) {
      throw Error("tau: a plif network learned its time constants; they cannot be overridden");
    }
    c.neuron.tau = *tau;
  }
  if (v_threshold) c.neuron.v_threshold = *v_threshold;
  if (v_reset) c.neuron.v_reset = *v_reset;
  if (refractory) {
    if (*refractory < 0) throw Error("refractory: expected whole steps >= 0, got " + std::to_string(*refractory));
    c.neuron.refractory = *refractory;
  }
  if (gain) c.input_gain = *gain;
  if (seed) c.seed = *seed;
  c.validate();
}

int max_intra_op_threads() {
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<int>(std::max<long>(64, 8 * std::max<long>(cores, 1)));
}

void set_intra_op_threads(int threads) {
  const int most = max_intra_op_threads();
  if (threads < 1 || threads > most) {
    throw Error("threads: expected 1 to " + std::to_string(most) + " (8 per core of this machine's " +
                std::to_string(::sysconf(_SC_NPROCESSORS_ONLN)) + ", at least 64), got " + std::to_string(threads));
  }
  at::set_num_threads(threads);
}

void Placement::apply(NetworkConfig& c) const {
  c.devices = devices;
  c.balance = balance;
  c.steps_per_tick = steps_per_tick;
  c.validate();
  if (threads != 0) set_intra_op_threads(threads);
}

void Placement::apply(SpikingNetwork& network) const {
  SimulationConfig s = network.config().simulation();
  s.devices = devices;
  s.balance = balance;
  s.steps_per_tick = steps_per_tick;
  network.set_simulation(s);
  if (threads != 0) set_intra_op_threads(threads);
}

void RunOptions::validate() const {
  if (split != "test" && split != "train") throw Error("split: expected test or train, got '" + split + "'");
  if (limit != -1 && limit < 1) {
    throw Error("limit: expected a number of samples >= 1 (or -1 for all), got " + std::to_string(limit));
  }
  if (!(dt_ms > 0) || !std::isfinite(dt_ms)) throw Error("dt: expected a positive number of ms, got " + std::to_string(dt_ms));
  if (checkpoint.empty()) throw Error("a run needs a checkpoint");
}

namespace {

// `path` made absolute and normalised by the kernel (symbolic links
// resolved) when it exists; otherwise joined to the current folder.
std::string absolute(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) != nullptr) return resolved;
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

}  // namespace

void RunOptions::resolve_paths() {
  struct stat st {};
  if (::stat(checkpoint.c_str(), &st) != 0) {
    throw Error("cannot open checkpoint '" + checkpoint + "': " + std::strerror(errno));
  }
  checkpoint = absolute(checkpoint);
  data_dir = absolute(data_dir);
}

std::string RunOptions::to_json() const {
  const NetworkOverrides& o = overrides;
  json v_reset = nullptr;
  if (o.v_reset) v_reset = *o.v_reset ? json(**o.v_reset) : json("none");
  // Keys are the flags' names, so that an error can name the flag.
  const json j{{"checkpoint", checkpoint},
               {"data-dir", data_dir},
               {"split", split},
               {"limit", limit},
               {"T", o.steps ? json(*o.steps) : json(nullptr)},
               {"tau", optional_json(o.tau)},
               {"v-threshold", optional_json(o.v_threshold)},
               {"v-reset", v_reset},
               {"refractory", o.refractory ? json(*o.refractory) : json(nullptr)},
               {"gain", optional_json(o.gain)},
               {"seed", o.seed ? json(*o.seed) : json(nullptr)},
               {"record", record},
               {"record-v", record_v},
               {"record-input", record_input},
               {"dt", dt_ms},
               {"compress", compress}};
  return j.dump();
}

RunOptions RunOptions::from_json(const std::string& text, const std::string& where) {
  RunOptions r;
  std::string key;
  try {
    const json j = json::parse(text);
    if (!j.is_object()) throw Error(where + ": run_options is not a JSON object");
    auto get = [&](const char* name) -> const json& {
      key = name;
      return j.at(name);
    };
    // Optional keys: recordings of snnsim 0.1 lack the overrides (and keep
    // T = 0 for "the checkpoint's").
    auto opt = [&](const char* name) -> json {
      key = name;
      return j.contains(name) ? j.at(name) : json(nullptr);
    };
    r.checkpoint = get("checkpoint").get<std::string>();
    r.data_dir = get("data-dir").get<std::string>();
    r.split = get("split").get<std::string>();
    r.limit = get("limit").get<int64_t>();
    r.record = get("record").get<std::string>();
    r.record_v = get("record-v").get<std::string>();
    r.record_input = get("record-input").get<bool>();
    r.dt_ms = get("dt").get<double>();
    r.compress = get("compress").get<bool>();
    NetworkOverrides& o = r.overrides;
    if (const json t = opt("T"); !t.is_null() && t.get<int64_t>() != 0) o.steps = t.get<int64_t>();
    if (const json v = opt("tau"); !v.is_null()) o.tau = v.get<double>();
    if (const json v = opt("v-threshold"); !v.is_null()) o.v_threshold = v.get<double>();
    if (const json v = opt("v-reset"); !v.is_null()) {
      if (v.is_string()) {
        if (v.get<std::string>() != "none") throw Error(where + ": run_options v-reset is neither a number nor none");
        o.v_reset = std::optional<double>();
      } else {
        o.v_reset = std::optional<double>(v.get<double>());
      }
    }
    if (const json v = opt("refractory"); !v.is_null()) o.refractory = v.get<int64_t>();
    if (const json v = opt("gain"); !v.is_null()) o.gain = v.get<double>();
    if (const json v = opt("seed"); !v.is_null()) o.seed = v.get<uint64_t>();
  } catch (const json::exception& e) {
    throw Error(where + ": run_options " + (key.empty() ? "" : "key '" + key + "' ") + "is missing or malformed (" +
                e.what() + ")");
  }
  return r;
}

}  // namespace snn
