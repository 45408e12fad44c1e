// `snnsim sweep SWEEP.toml`: parameter sweeps over `snnsim run` (a trained
// network's options) or `snnsim simulate` (a population model's
// [parameters] and run settings, when [base] names a model), one child
// process per point (a failing point cannot take the others down), each
// writing its own recording and summary; a manifest (JSON and CSV) that a
// rerun resumes from; --jobs on one machine and --shard i/n across machines.

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "commands.h"
#include "config_format.h"
#include "snn/core/atomic_file.h"
#include "snn/core/error.h"
#include "snn/populations/model_file.h"
#include "snn/simulator/checkpoint.h"

namespace snn::app {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// What a sweep may vary, and whether it takes whole numbers.
const std::map<std::string, bool> kSwept = {{"tau", false},     {"v-threshold", false}, {"v-reset", false},
                                            {"refractory", true}, {"gain", false},       {"T", true},
                                            {"seed", true},      {"limit", true},       {"checkpoint", false}};
// `snnsim run` options a sweep's [base] may set (the sweep sets --output,
// --summary and --overwrite itself).
const std::vector<std::string> kBase = {
    "checkpoint", "split", "T", "limit", "record", "record-v", "record-input", "dt", "compress", "data-dir",
    "batch-size", "devices", "balance", "steps-per-tick", "threads", "max-record-bytes", "tau", "v-threshold",
    "v-reset", "refractory", "gain", "seed"};

// A population model sweep ([base] model = ...): the `snnsim simulate`
// settings [base] may give, and those a [grid] or [random] may vary beside
// the model's [parameters] (with whether they take whole numbers).
const std::vector<std::string> kSimulateBase = {"model",        "duration", "trials",        "seed",
                                                "input-seed",   "connectivity", "threads", "synchrony-bin"};
const std::map<std::string, bool> kSimulateSwept = {
    {"duration", false}, {"trials", true}, {"seed", true}, {"input-seed", true}};

// Every point is held in memory (and listed in the manifest, rewritten as
// each one ends) before the first runs, so a sweep's size is checked before
// anything is materialised: a typo such as 1e11 samples must be refused,
// not grow until the kernel kills the sweep.
constexpr uint64_t kMaxPoints = 1000000;

struct Sweep {
  std::string file;
  std::string model;  // a population model sweep (snnsim simulate) when set
  std::vector<std::string> model_parameters;  // the model's [parameters]
  std::string out = "sweep-out";
  std::vector<std::pair<std::string, std::string>> base;
  std::vector<std::pair<std::string, std::vector<std::string>>> grid;
  int64_t random_samples = 0;
  uint64_t random_seed = 0;
  std::vector<std::pair<std::string, std::pair<double, double>>> random;
};

using Params = std::vector<std::pair<std::string, std::string>>;

std::string normalised(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}

std::vector<std::string> values_of(const CLI::ConfigItem& item) {
  std::vector<std::string> out;
  for (const auto& v : item.inputs) {  // JSON arrays arrive comma-joined
    std::stringstream in(v);
    std::string part;
    while (std::getline(in, part, ',')) out.push_back(part);
  }
  return out;
}

// The names of a population model's [parameters] (the model must parse).
std::vector<std::string> model_parameters(const std::string& model, const std::string& where) {
  std::vector<std::string> names;
  try {
    const nlohmann::json doc = nlohmann::json::parse(populations::read_population_model(model).json);
    const json params = doc.value("parameters", json::object());  // items() needs it alive
    for (const auto& [k, v] : params.items()) names.push_back(k);
  } catch (const Error& e) {
    throw Error(where + ": [base] model: " + e.what());
  }
  return names;
}

// Whether a swept name takes whole numbers.
bool takes_whole(const Sweep& s, const std::string& name) {
  if (s.model.empty()) return kSwept.at(name);
  const auto it = kSimulateSwept.find(name);
  return it != kSimulateSwept.end() && it->second;
}

// A swept value's own limits, so that a bad point fails before anything
// runs: a model's parameter is tried in the model (with the file's other
// values), which names the entry it breaks.
void check_value(const Sweep& s, const std::string& name, const std::string& v, const std::string& where) {
  const std::string what = where + " " + name;
  if (!s.model.empty()) {
    if (!kSimulateSwept.count(name)) {
      try {
        populations::read_population_model(s.model, {{name, v}});
      } catch (const Error& e) {
        throw Error(what + " = " + v + ": " + e.what());
      }
      return;
    }
    const double x = parse_number(what, v);
    if (takes_whole(s, name) && x != std::floor(x)) throw Error(what + ": expected a whole number, got '" + v + "'");
    if ((name == "duration" && !(x > 0)) || (name == "trials" && (x < 1 || x > 4096)) || x < 0) {
      throw Error(what + ": " + v + " is out of range (duration > 0 ms, trials 1 to 4096, seeds >= 0)");
    }
    return;
  }
  if (name == "checkpoint") {
    struct stat st {};
    if (::stat(v.c_str(), &st) != 0) throw Error(what + ": no checkpoint '" + v + "'");
    try {  // its network, not just its name: a recording would fail every point
      (void)read_checkpoint_config(v);
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
    return;
  }
  if (name == "v-reset" && v == "none") return;
  const double x = parse_number(what, v);
  const bool whole = takes_whole(s, name);
  if (whole && x != std::floor(x)) throw Error(what + ": expected a whole number, got '" + v + "'");
  if ((name == "tau" && x < 1) || (name == "T" && x < 1) || (name == "gain" && !(x > 0)) ||
      (name == "refractory" && x < 0) || (name == "seed" && x < 0) || (name == "limit" && x < 1 && x != -1)) {
    throw Error(what + ": " + v + " is out of range (tau >= 1, T >= 1, gain > 0, refractory >= 0, seed >= 0, "
                "limit >= 1 or -1)");
  }
}

// The number of points (grid combinations times random samples), counted
// with overflow checks and refused above kMaxPoints with its factors.
void check_size(const Sweep& s, const std::string& where) {
  uint64_t points = 1;
  bool overflow = false;
  std::string factors;
  auto times = [&](uint64_t n) { overflow = overflow || __builtin_mul_overflow(points, n, &points); };
  for (const auto& [name, values] : s.grid) {
    times(values.size());
    factors += (factors.empty() ? "grid " : " x ") + std::to_string(values.size());
  }
  if (!s.random.empty()) {
    times(static_cast<uint64_t>(s.random_samples));
    factors += (factors.empty() ? "" : ", each with ") + std::to_string(s.random_samples) + " random samples";
  }
  if (overflow || points > kMaxPoints) {
    throw Error(fmt::format("{}: {} points ({}), more than the {} a sweep may hold; split it into several sweeps",
                            where, overflow ? "over 2^64" : std::to_string(points), factors, kMaxPoints));
  }
}

Sweep read_sweep(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read sweep file '" + path + "'");
  std::vector<CLI::ConfigItem> items;
  try {
    items = TomlOrJsonConfig().from_config(in);
  } catch (const CLI::ParseError& e) {
    throw Error("sweep file '" + path + "': " + e.what());
  }
  Sweep s;
  s.file = path;
  const std::string where = "sweep file '" + path + "'";
  bool has_grid = false, has_random = false;
  for (const auto& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // CLI11's section begin and end markers
    const std::string section = item.parents.empty() ? "" : item.parents.front();
    if (section == "base" && item.name == "model") {
      s.model = values_of(item).empty() ? "" : values_of(item).front();
      break;
    }
  }
  if (!s.model.empty()) s.model_parameters = model_parameters(s.model, where);
  for (const auto& item : items) {
    if (item.name == "++" || item.name == "--") continue;
    const std::string section = item.parents.empty() ? "" : item.parents.front();
    // A model's parameter keeps its name (C_E); snnsim's options take dashes.
    const bool model_parameter = !s.model.empty() && (section == "grid" || section == "random") &&
                                 std::find(s.model_parameters.begin(), s.model_parameters.end(), item.name) !=
                                     s.model_parameters.end();
    const std::string key = model_parameter ? item.name : normalised(item.name);
    const std::vector<std::string> v = values_of(item);
    if (item.parents.size() > 1 || key.empty()) throw Error(where + ": unexpected nesting at '" + item.name + "'");
    if (section == "sweep") {
      if (key != "out") throw Error(where + ": [sweep] has no key '" + key + "' (it has: out)");
      s.out = v.empty() ? "" : v.front();
    } else if (section == "base") {
      const auto& allowed = s.model.empty() ? kBase : kSimulateBase;
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string all;
        for (const auto& k : allowed) all += (all.empty() ? "" : ", ") + k;
        throw Error(where + ": [base] has no " + (s.model.empty() ? "run" : "simulate") + " option '" + key +
                    "' (it takes: " + all + ")");
      }
      if (key == "model") continue;
      std::string joined;
      for (const auto& x : v) joined += (joined.empty() ? "" : ",") + x;
      s.base.push_back({key, joined});
    } else if (section == "grid" || section == "random") {
      if (section == "random" && (key == "samples" || key == "seed")) {
        if (v.size() != 1) throw Error(where + ": [random] " + key + " must be one number");
        const double x = parse_number(where + " [random] " + key, v.front());
        if (x < (key == "samples" ? 1 : 0) || x != std::floor(x)) {
          throw Error(where + ": [random] " + key + " must be a whole number" + (key == "samples" ? " >= 1" : " >= 0"));
        }
        // Bounded before the conversion to an integer (undefined beyond its range).
        if (key == "samples" && x > static_cast<double>(kMaxPoints)) {
          const std::string exact = x < 1e15 ? fmt::format(" ({:.0f})", x) : "";
          throw Error(fmt::format("{}: [random] samples = {}{}, more than the {} points a sweep may hold; split it "
                                  "into several sweeps",
                                  where, v.front(), exact, kMaxPoints));
        }
        if (key == "seed" && x > 9007199254740992.0) {
          throw Error(where + ": [random] seed = " + v.front() +
                      " is not a whole number a sweep file can hold exactly (0 to 2^53 = 9007199254740992)");
        }
        if (key == "samples") {
          s.random_samples = static_cast<int64_t>(x);
        } else {
          s.random_seed = static_cast<uint64_t>(x);
        }
        continue;
      }
      if (!s.model.empty()) {
        if (!model_parameter && !kSimulateSwept.count(key)) {
          std::string all;
          for (const auto& k : s.model_parameters) all += (all.empty() ? "" : ", ") + k;
          for (const auto& [k, whole] : kSimulateSwept) all += (all.empty() ? "" : ", ") + k;
          throw Error(where + ": '" + key + "' cannot be swept: it is neither in " + s.model + "'s [parameters] nor a " +
                      "simulate setting (these can: " + all + ")");
        }
      } else if (!kSwept.count(key)) {
        std::string all;
        for (const auto& [k, whole] : kSwept) all += (all.empty() ? "" : ", ") + k;
        throw Error(where + ": '" + key + "' cannot be swept (these can: " + all + ")");
      }
      if (section == "grid") {
        if (v.empty()) throw Error(where + ": the grid of '" + key + "' is empty");
        for (const auto& x : v) check_value(s, key, x, where + " [grid]");
        s.grid.push_back({key, v});
        has_grid = true;
      } else {
        if (key == "checkpoint" || key == "v-reset" || v.size() != 2) {
          throw Error(where + ": [random] " + key + " must be a numeric range [low, high]");
        }
        const double lo = parse_number(where + " [random] " + key, v[0]), hi = parse_number(where + " [random] " + key, v[1]);
        if (!(lo <= hi)) throw Error(where + ": [random] " + key + " range [" + v[0] + ", " + v[1] + "] is empty");
        check_value(s, key, v[0], where + " [random]");
        check_value(s, key, v[1], where + " [random]");
        s.random.push_back({key, {lo, hi}});
        has_random = true;
      }
    } else {
      throw Error(where + ": unknown section '" + section + "' (sections: sweep, base, grid, random)");
    }
  }
  if (!has_grid && !has_random) throw Error(where + " varies nothing: give a [grid] or a [random] section");
  if (has_random && s.random_samples < 1) throw Error(where + ": [random] needs samples = N");
  for (const auto& [k, v] : s.base) {
    if (k == "checkpoint") check_value(s, k, v, where + " [base]");
  }
  check_size(s, where);
  return s;
}

// Every point: the grid's combinations (the last parameter varying fastest),
// each with every random sample (drawn from one seeded generator).
std::vector<Params> points_of(const Sweep& s) {
  std::vector<Params> grid{{}};
  for (const auto& [name, values] : s.grid) {
    std::vector<Params> next;
    for (const auto& p : grid) {
      for (const auto& v : values) {
        Params q = p;
        q.push_back({name, v});
        next.push_back(q);
      }
    }
    grid = next;
  }
  if (s.random.empty()) return grid;
  std::mt19937_64 rng(s.random_seed);
  std::vector<Params> out;
  for (const auto& p : grid) {
    for (int64_t i = 0; i < s.random_samples; ++i) {
      Params q = p;
      for (const auto& [name, range] : s.random) {
        std::uniform_real_distribution<double> u(range.first, range.second);
        double x = u(rng);
        const bool whole = takes_whole(s, name);
        if (whole) x = std::round(x);
        q.push_back({name, whole ? fmt::format("{}", static_cast<int64_t>(x)) : fmt::format("{:.6g}", x)});
      }
      out.push_back(q);
    }
  }
  return out;
}

std::string params_text(const Params& p) {
  std::string out;
  for (const auto& [k, v] : p) out += (out.empty() ? "" : ", ") + k + "=" + v;
  return out;
}

json params_json(const Params& p) {
  json j = json::object();
  for (const auto& [k, v] : p) j[k] = v;
  return j;
}

// The last "snnsim: error:" line of a run's log, else its last line.
std::string error_of(const std::string& log) {
  std::ifstream in(log);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
    if (line.rfind("snnsim: error: ", 0) == 0) error = line.substr(15);
  }
  return error.empty() ? last : error;
}

struct Manifest {
  std::string json_path, csv_path;
  json doc;
};

std::string manifest_csv(const json& doc, const std::vector<std::string>& names) {
  const bool simulate = doc.value("command", "run") == "simulate";
  size_t layers = 0;
  for (const auto& row : doc["rows"]) layers = std::max(layers, row.value("firing_rate", json::array()).size());
  const std::vector<std::string> metrics = sweep_metric_names(doc["rows"]);
  std::ostringstream csv;
  csv << "index";
  for (const auto& n : names) csv << "," << n;
  csv << ",status";
  if (!simulate) csv << ",accuracy";
  for (size_t i = 0; i < layers; ++i) csv << ",firing_rate_layer" << i + 1;
  for (const auto& k : metrics) csv << "," << k;
  csv << ",wall_s,output,error\n";
  for (const auto& row : doc["rows"]) {
    csv << row["index"].get<int64_t>();
    for (const auto& n : names) csv << "," << row["params"].value(n, std::string());
    csv << "," << row["status"].get<std::string>();
    if (!simulate) csv << ",";
    if (row.contains("accuracy")) csv << row["accuracy"].get<double>();
    for (size_t i = 0; i < layers; ++i) {
      csv << ",";
      if (row.contains("firing_rate") && i < row["firing_rate"].size()) csv << row["firing_rate"][i].get<double>();
    }
    for (const auto& k : metrics) {
      csv << ",";
      const json m = row.value("metrics", json::object());
      if (m.contains(k) && m[k].is_number()) csv << m[k].get<double>();
    }
    std::string error = row.value("error", std::string());
    std::replace(error.begin(), error.end(), '"', '\'');
    csv << "," << row.value("wall_s", 0.0) << "," << row["output"].get<std::string>() << ",\"" << error << "\"\n";
  }
  return csv.str();
}

// Both files are replaced whole (snn::write_file_atomically): a killed sweep
// or a full disk leaves the previous manifest exactly as it was, and the
// rerun resumes from it.
void write_manifest(const Manifest& m, const std::vector<std::string>& names) {
  try {
    write_file_atomically(m.json_path, m.doc.dump(2) + "\n");
    write_file_atomically(m.csv_path, manifest_csv(m.doc, names));
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (the manifest keeps its previous content; once that is fixed, a rerun resumes from it)");
  }
}

void sort_rows(json& doc) {
  std::vector<json> rows(doc["rows"].begin(), doc["rows"].end());
  std::sort(rows.begin(), rows.end(), [](const json& a, const json& b) { return a["index"] < b["index"]; });
  doc["rows"] = rows;
}

struct Shard {
  int64_t index = 0, count = 1;
};

Shard parse_shard(const std::string& text) {
  Shard s;
  if (text.empty()) return s;
  const auto slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("");
    std::size_t a = 0, b = 0;
    s.index = std::stoll(text.substr(0, slash), &a);
    s.count = std::stoll(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1 || s.count < 1 || s.index < 0 || s.index >= s.count) {
      throw std::invalid_argument("");
    }
  } catch (const std::exception&) {
    throw Error("--shard: expected i/n with 0 <= i < n (e.g. 0/4, or $SLURM_ARRAY_TASK_ID/4), got '" + text + "'");
  }
  return s;
}

std::string self_exe() {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) throw Error("cannot find the snnsim executable (/proc/self/exe)");
  return std::string(exe, static_cast<size_t>(n));
}

// The `snnsim run` children of a sweep, which must never outlive it. Each
// runs in its own process group (so that a terminal's Ctrl-C reaches only
// the sweep, which stops them once, in order) with PR_SET_PDEATHSIG, so
// that the kernel kills them if the sweep itself is killed (SIGKILL, a
// crash): nothing keeps writing a point file after its sweep is gone, and a
// point counts as done only once the sweep saw its run exit. SIGINT,
// SIGTERM and SIGHUP are blocked and taken synchronously in wait(), with
// SIGCHLD, so that a signal is never lost between two checks.
class Children {
 public:
  struct Event {
    enum Kind { kEnded, kSignal, kTimeout } kind;
    pid_t pid = 0;
    int status = 0;  // kEnded: as waitpid() gives it
    int signal = 0;  // kSignal
  };

  Children() : parent_(::getpid()) {
    // A child whose parent ignores SIGCHLD is reaped by the kernel, and
    // waitpid() could not see its exit status.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGCHLD, &dfl, nullptr);
    sigemptyset(&waited_);
    sigaddset(&waited_, SIGCHLD);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      // A signal the sweep was started ignoring (nohup, `&` in a script)
      // stays ignored: blocked, the kernel would queue it instead.
      struct sigaction old {};
      ::sigaction(sig, nullptr, &old);
      if (old.sa_handler != SIG_IGN) sigaddset(&waited_, sig);
    }
    ::sigprocmask(SIG_BLOCK, &waited_, &old_mask_);
  }

  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;

  // An error leaving the sweep (a full disk under the manifest) still stops
  // and reaps every child before the sweep exits.
  ~Children() {
    try {
      signal_all(SIGTERM);
      auto kill_at = Clock::now() + kGrace;
      while (!pids_.empty()) {
        if (wait(kill_at).kind == Event::kEnded) continue;
        signal_all(SIGKILL);
        kill_at = Clock::now() + std::chrono::seconds(1);
      }
    } catch (const std::exception&) {
      signal_all(SIGKILL);  // cannot wait: they die with the sweep (PR_SET_PDEATHSIG) in any case
    }
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }

  // How long stopped runs get to commit and close their recordings before
  // they are killed.
  static constexpr std::chrono::seconds kGrace{10};

  // Starts `argv` (argv[0] the executable) with stdout and stderr in `log`.
  pid_t start(std::vector<std::string> argv, const std::string& log) {
    // Everything the child needs is made before fork(): between fork() and
    // exec() only async-signal-safe calls are allowed.
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw Error(std::string("cannot start a run: fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      // The sweep may have died before prctl(): then the kernel sent nothing.
      if (::getppid() != parent_) ::_exit(127);
      ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
      }
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // as the child does: whichever runs first, kill(-pid) reaches it
    pids_.insert(pid);
    return pid;
  }

  // The next child to end, or a stop signal, or (with a deadline) kTimeout.
  Event wait(std::optional<Clock::time_point> deadline = std::nullopt) {
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid > 0 && pids_.erase(pid)) return {Event::kEnded, pid, status, 0};
      if (pid > 0) continue;  // not one of ours
      if (pid < 0 && errno != EINTR) throw InternalError("sweep: waitpid failed with runs outstanding");
      siginfo_t info{};
      int sig = -1;
      if (deadline) {
        const auto left = std::max(std::chrono::nanoseconds(0), *deadline - Clock::now());
        if (left.count() == 0) return {Event::kTimeout};
        const auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
        const timespec ts{static_cast<time_t>(secs.count()), static_cast<long>((left - secs).count())};
        sig = ::sigtimedwait(&waited_, &info, &ts);
        if (sig < 0 && errno == EAGAIN) return {Event::kTimeout};
      } else {
        sig = ::sigwaitinfo(&waited_, &info);
      }
      if (sig > 0 && sig != SIGCHLD) return {Event::kSignal, 0, 0, sig};
    }
  }

  // Sends `sig` to every running child's process group.
  void signal_all(int sig) const {
    for (const pid_t pid : pids_) {
      if (::kill(-pid, sig) != 0) ::kill(pid, sig);
    }
  }

  size_t running() const { return pids_.size(); }

 private:
  const pid_t parent_;
  sigset_t waited_{}, old_mask_{};
  std::set<pid_t> pids_;
};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

struct SweepFlags {
  std::string file;
  int jobs = 1;
  std::string shard;
  std::string merge;
};

void run_sweep(const SweepFlags& f) {
  const Sweep s = read_sweep(f.file);
  const Shard shard = parse_shard(f.shard);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (f.jobs < 1 || f.jobs > static_cast<int>(4 * cores)) {
    throw Error(fmt::format("--jobs {}: expected 1 to {} (4 x the {} cores; each run uses cores / jobs threads)", f.jobs,
                            4 * cores, cores));
  }
  const std::vector<Params> points = points_of(s);
  std::vector<std::string> names;
  for (const auto& [k, v] : points.front()) names.push_back(k);
  {
    std::error_code ec;  // with its parents, as mkdir -p
    std::filesystem::create_directories(s.out, ec);
    if (ec) throw Error("cannot create the sweep folder '" + s.out + "': " + ec.message());
  }
  const std::string suffix = shard.count > 1 ? fmt::format("-shard-{}-of-{}", shard.index, shard.count) : "";
  Manifest m{s.out + "/manifest" + suffix + ".json", s.out + "/manifest" + suffix + ".csv", {}};

  // A rerun keeps the points that completed with the same parameters.
  std::map<int64_t, json> kept;
  {
    std::ifstream in(m.json_path);
    if (in) {
      try {
        const json old = json::parse(in);
        for (const auto& row : old.at("rows")) {
          struct stat st {};
          const int64_t i = row.at("index").get<int64_t>();
          if (row.at("status") == "done" && i >= 0 && i < static_cast<int64_t>(points.size()) &&
              row.at("params") == params_json(points[static_cast<size_t>(i)]) &&
              ::stat(row.at("output").get<std::string>().c_str(), &st) == 0) {
            kept[i] = row;
          }
        }
      } catch (const json::exception& e) {
        throw Error("the manifest '" + m.json_path + "' does not parse (" + e.what() + "): move it away to start afresh");
      }
    }
  }
  m.doc = {{"sweep", s.file}, {"command", s.model.empty() ? "run" : "simulate"}, {"model", s.model},
           {"total_points", points.size()}, {"parameters", names},
           {"shard", shard.count > 1 ? json(f.shard) : json(nullptr)}, {"rows", json::array()}};
  std::vector<size_t> todo;
  for (size_t i = 0; i < points.size(); ++i) {
    if (static_cast<int64_t>(i) % shard.count != shard.index) continue;
    if (kept.count(static_cast<int64_t>(i))) {
      m.doc["rows"].push_back(kept[static_cast<int64_t>(i)]);
    } else {
      todo.push_back(i);
    }
  }
  const size_t mine = m.doc["rows"].size() + todo.size();
  write_manifest(m, names);  // first: a sweep that cannot keep its manifest starts nothing
  const std::string exe = self_exe();
  const auto base_threads_at =
      std::find_if(s.base.begin(), s.base.end(), [](const auto& kv) { return kv.first == "threads"; });
  const bool base_threads = base_threads_at != s.base.end();
  const std::string threads = std::to_string(std::max(1u, cores / static_cast<unsigned>(f.jobs)));
  std::cout << fmt::format("sweep {}: {} points in all, {} in this shard, {} done before, {} to run with {} job(s), "
                           "{} threads each\n",
                           s.file, points.size(), mine, m.doc["rows"].size(), todo.size(), f.jobs,
                           base_threads ? base_threads_at->second : threads)
            << std::flush;
  struct Running {
    size_t point;
    Clock::time_point start;
    std::string output, summary, log;
  };
  std::map<pid_t, Running> running;
  size_t next = 0, finished = 0;
  double busy_seconds = 0;
  const auto t0 = Clock::now();
  int stopped_by = 0;  // the signal that stopped the sweep
  size_t stopped_runs = 0;
  Clock::time_point kill_at = Clock::time_point::max();
  Children children;
  while ((next < todo.size() && stopped_by == 0) || !running.empty()) {
    while (stopped_by == 0 && next < todo.size() && static_cast<int>(running.size()) < f.jobs) {
      const size_t i = todo[next++];
      const std::string stem = fmt::format("{}/point-{:04d}", s.out, i);
      Running r{i, Clock::now(), stem + ".h5", stem + ".json", stem + ".log"};
      std::vector<std::string> args{exe, "run"};
      if (!s.model.empty()) args = {exe, "simulate", s.model};
      for (const auto& [k, v] : s.base) {
        const bool swept = std::any_of(points[i].begin(), points[i].end(), [&](const auto& kv) { return kv.first == k; });
        if (swept) continue;  // the point's value wins
        const bool flag = k == "record-input" || k == "compress";
        if (flag && v != "true" && v != "false") throw Error("[base] " + k + " must be true or false");
        if (flag) {
          if (v == "true") args.push_back("--" + k);
          continue;
        }
        args.push_back("--" + k);
        args.push_back(v);
      }
      for (const auto& [k, v] : points[i]) {
        if (!s.model.empty() && !kSimulateSwept.count(k)) {
          args.insert(args.end(), {"--set", k + "=" + v});  // the model's parameter
        } else {
          args.insert(args.end(), {"--" + k, v});
        }
      }
      if (!base_threads) args.insert(args.end(), {"--threads", threads});
      args.insert(args.end(), {s.model.empty() ? "--output" : "--record", r.output, "--overwrite", "--summary", r.summary});
      // A point not recorded as done is redone from scratch: whatever an
      // earlier, interrupted attempt left under its names goes first.
      for (const std::string& stale : {r.output, r.summary, r.output + ".partial", r.output + ".partial.creating"}) {
        std::remove(stale.c_str());
      }
      running[children.start(args, r.log)] = r;
    }
    const Children::Event e = children.wait(stopped_by ? std::optional(kill_at) : std::nullopt);
    if (e.kind == Children::Event::kSignal && stopped_by == 0) {
      // The runs get SIGTERM (they commit and close their recordings) and
      // kGrace to end; the points they ran are redone by the next sweep.
      stopped_by = e.signal;
      kill_at = Clock::now() + Children::kGrace;
      children.signal_all(SIGTERM);
      continue;
    }
    if (e.kind != Children::Event::kEnded) {  // a second signal, or the grace is over
      children.signal_all(SIGKILL);
      kill_at = Clock::now() + std::chrono::seconds(1);
      continue;
    }
    const auto it = running.find(e.pid);
    const Running r = it->second;
    running.erase(it);
    const int status = e.status;
    const bool succeeded = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (stopped_by != 0 && !succeeded) {
      ++stopped_runs;  // not recorded: the next sweep runs it again
      continue;
    }
    const double wall = std::chrono::duration<double>(Clock::now() - r.start).count();
    busy_seconds += wall;
    ++finished;
    // When the run started and ended, in seconds since the sweep started:
    // with --jobs N, N runs' intervals overlap.
    const double started = std::chrono::duration<double>(r.start - t0).count();
    json row{{"index", r.point}, {"params", params_json(points[r.point])}, {"output", r.output},
             {"summary", r.summary}, {"log", r.log}, {"wall_s", wall}, {"started_s", started},
             {"ended_s", started + wall}};
    std::string note;
    try {
      if (!succeeded) throw Error(error_of(r.log));
      std::ifstream in(r.summary);
      const json sum = json::parse(in);
      row["status"] = "done";
      row["threads"] = sum.at("threads");  // what the run used: cores / jobs unless [base] sets threads
      if (s.model.empty()) {
        row["accuracy"] = sum.at("accuracy");
        row["firing_rate"] = sum.at("firing_rate");
        note = fmt::format("accuracy {:.4f}", sum.at("accuracy").get<double>());
      } else {
        // Each population's statistics as "E.rate_hz", "E.isi_cv", ... (null where undefined).
        json metrics = json::object();
        for (const auto& pop : sum.at("populations")) {
          const std::string name = pop.at("name").get<std::string>();
          for (const char* k : {"rate_hz", "isi_cv", "fano", "synchrony"}) {
            if (pop.contains(k)) metrics[name + "." + k] = pop.at(k);
          }
          const auto shown = [&](const char* k, const char* fmt_) {
            return pop.contains(k) && pop.at(k).is_number() ? fmt::format(fmt::runtime(fmt_), pop.at(k).get<double>())
                                                            : std::string();
          };
          note += fmt::format("{}{} {}{}{}", note.empty() ? "" : "; ", name, shown("rate_hz", "{:.2f} Hz"),
                              shown("isi_cv", ", CV {:.2f}"), shown("synchrony", ", synchrony {:.3f}"));
        }
        row["metrics"] = metrics;
      }
    } catch (const std::exception& e) {
      row["status"] = "failed";
      row["error"] = std::string(e.what()).empty() ? "the run stopped without a message" : e.what();
      note = "FAILED: " + row["error"].get<std::string>();
    }
    m.doc["rows"].push_back(row);
    sort_rows(m.doc);
    write_manifest(m, names);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    const double eta = elapsed / static_cast<double>(finished) * static_cast<double>(todo.size() - finished);
    std::cout << fmt::format("[{}/{}] point {} ({}): {}, {:.1f} s; ETA {:.0f} s\n", finished, todo.size(), r.point,
                             params_text(points[r.point]), note, wall, eta)
              << std::flush;
  }
  if (stopped_by != 0) {
    throw Error(fmt::format("sweep stopped by {}: {} of {} point(s) are recorded in '{}'; {} run(s) were stopped and "
                            "{} not started: rerun the sweep to finish",
                            signal_name(stopped_by), m.doc["rows"].size(), mine, m.json_path, stopped_runs,
                            todo.size() - next));
  }
  int64_t failed = 0;
  for (const auto& row : m.doc["rows"]) failed += row["status"] == "failed";
  std::cout << fmt::format("manifest: {} and {} ({} failed)\n", m.json_path, m.csv_path, failed);
  if (failed > 0) throw Error(std::to_string(failed) + " point(s) failed (see the manifest); rerun the sweep to redo them");
}

// --merge DIR: joins the shards' manifests into DIR/manifest.json and .csv,
// checking that every point is there exactly once.
void merge_shards(const std::string& dir) {
  std::vector<json> shards;
  int64_t total = -1, count = -1;
  std::vector<std::string> names;
  for (int64_t i = 0; count < 0 || i < count; ++i) {
    // The shard count is read from the first manifest found.
    std::string path;
    if (count < 0) {
      for (int64_t n = 1; n <= 4096 && path.empty(); ++n) {
        const std::string p = fmt::format("{}/manifest-shard-0-of-{}.json", dir, n);
        if (std::ifstream(p)) {
          path = p;
          count = n;
        }
      }
      if (path.empty()) throw Error("no shard manifests (manifest-shard-0-of-N.json) in '" + dir + "'");
    } else {
      path = fmt::format("{}/manifest-shard-{}-of-{}.json", dir, i, count);
    }
    std::ifstream in(path);
    if (!in) throw Error("shard " + std::to_string(i) + " of " + std::to_string(count) + " is missing: no '" + path + "'");
    json doc;
    try {
      doc = json::parse(in);
    } catch (const json::exception& e) {
      throw Error("'" + path + "' does not parse: " + e.what());
    }
    if (total < 0) {
      total = doc.at("total_points").get<int64_t>();
      names = doc.at("parameters").get<std::vector<std::string>>();
    } else if (doc.at("total_points").get<int64_t>() != total) {
      throw Error("'" + path + "' is from another sweep (" + std::to_string(doc.at("total_points").get<int64_t>()) +
                  " points, not " + std::to_string(total) + ")");
    }
    shards.push_back(doc);
  }
  Manifest m{dir + "/manifest.json", dir + "/manifest.csv",
             {{"sweep", shards.front().at("sweep")}, {"command", shards.front().value("command", "run")},
              {"model", shards.front().value("model", "")}, {"total_points", total}, {"parameters", names},
              {"shard", nullptr}, {"merged_shards", count}, {"rows", json::array()}}};
  std::vector<int> seen(static_cast<size_t>(total), 0);
  for (const auto& doc : shards) {
    for (const auto& row : doc.at("rows")) {
      const int64_t i = row.at("index").get<int64_t>();
      if (i < 0 || i >= total || seen[static_cast<size_t>(i)]++) throw Error("point " + std::to_string(i) + " appears twice");
      m.doc["rows"].push_back(row);
    }
  }
  int64_t missing = 0;
  for (int v : seen) missing += v == 0;
  sort_rows(m.doc);
  write_manifest(m, names);
  std::cout << fmt::format("merged {} shards: {} of {} points in {}{}\n", count, total - missing, total, m.json_path,
                           missing ? fmt::format(" ({} not run yet)", missing) : "");
}

}  // namespace

std::vector<std::string> sweep_metric_names(const nlohmann::json& rows) {
  static const std::vector<std::string> kStats = {"rate_hz", "isi_cv", "fano", "synchrony"};
  const auto rank = [](const std::string& name) {
    const auto dot = name.rfind('.');
    const auto it = std::find(kStats.begin(), kStats.end(), name.substr(dot + 1));
    return std::make_pair(name.substr(0, dot), it - kStats.begin());
  };
  std::vector<std::string> names;
  for (const auto& row : rows) {
    const json m = row.value("metrics", json::object());  // items() needs it alive
    for (const auto& [k, v] : m.items()) {
      if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
    }
  }
  std::sort(names.begin(), names.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  return names;
}

Run add_sweep_command(CLI::App& app) {
  auto f = std::make_shared<SweepFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run `snnsim run` over a grid and/or random samples of parameters (tau, v-threshold, v-reset, refractory, "
      "gain, T, seed, limit, checkpoint), or `snnsim simulate` over a population model's [parameters] (duration, "
      "trials, seed, input-seed) when [base] names a model, from a TOML or JSON sweep file; a manifest (JSON, CSV) "
      "records every point and a rerun redoes only what did not complete");
  cmd->add_option("SWEEP", f->file, "The sweep file: [sweep] out, [base] run options, [grid] lists, [random] ranges");
  cmd->add_option("--jobs", f->jobs, "Runs at once on this machine (each gets cores / jobs threads)")
      ->capture_default_str();
  cmd->add_option("--shard", f->shard, "Run only points i, i + n, i + 2n, ... (i/n, e.g. a job array's task id)");
  cmd->add_option("--merge", f->merge, "Join the shard manifests in this folder into manifest.json and .csv");
  return [cmd, f] {
    if (!cmd->parsed()) return;
    if (!f->merge.empty()) {
      if (!f->file.empty()) throw Error("--merge takes the sweep's output folder, not a sweep file");
      merge_shards(f->merge);
      return;
    }
    if (f->file.empty()) throw Error("sweep needs a SWEEP file (or --merge DIR)");
    run_sweep(*f);
  };
}

}  // namespace snn::app
