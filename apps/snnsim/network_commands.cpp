// `snnsim train` and `snnsim run`: argument parsing and reporting around
// the simulator library's training and evaluation loops.

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <ctime>
#include <exception>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.h"
#include "dist_flags.h"
#include "neuron_flags.h"
#include "progress.h"
#include "validators.h"
#include "snn/core/atomic_file.h"
#include "snn/core/build_info.h"
#include "snn/core/error.h"
#include "snn/datasets/data_location.h"
#include "snn/datasets/idx.h"
#include "snn/dist/pipeline_links.h"
#include "snn/simulator/checkpoint.h"
#include "snn/simulator/distributed.h"
#include "snn/simulator/inspect.h"
#include "snn/simulator/network_graph.h"
#include "snn/simulator/run_recording.h"
#include "snn/recording/merged_recording.h"
#include "snn/recording/recording_file.h"
#include "snn/recording/recording_info.h"
#include "snn/simulator/training.h"

namespace snn::app {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) out.push_back(part);
  return out;
}

namespace {

std::vector<int64_t> parse_balance(const std::string& text) {
  std::vector<int64_t> out;
  for (const auto& p : split_list(text)) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(p, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != p.size()) throw Error("--balance: expected layer counts like 2,1, got '" + text + "'");
    out.push_back(v);
  }
  return out;
}

// Flags that place and time the simulation (train and run).
struct SimFlags {
  std::string devices = "cpu";
  std::string balance;
  int64_t steps_per_tick = 0;
  int threads = 0;
  std::string data_dir = default_data_dir();
  int64_t batch_size = 64;
};

void add_sim_flags(CLI::App* cmd, SimFlags& f) {
  cmd->add_option("--devices", f.devices, "Pipeline stages' devices, comma-separated (cpu, cuda:N)")->capture_default_str();
  cmd->add_option("--balance", f.balance,
                  "Layers per stage, comma-separated, or 'auto': time each layer on a first batch and split them so "
                  "that the slowest stage is fastest (default: even split)");
  cmd->add_option("--steps-per-tick", f.steps_per_tick, "Steps per pipeline block K (0 = T)")
      ->capture_default_str()
      ->check(whole_number(0));
  cmd->add_option("--threads", f.threads, "LibTorch intra-op threads (0 = LibTorch's default)")
      ->capture_default_str()
      ->check(whole_number(0));
  cmd->add_option("--data-dir", f.data_dir, "Folder with MNIST-format IDX files (plain or .gz)")->capture_default_str();
  cmd->add_option("--batch-size", f.batch_size, "Samples per batch")->capture_default_str()->check(whole_number(1));
}

// --balance auto's cut of the network into `stages`: each layer timed on
// the first batch of `images`; says what it chose.
std::vector<int64_t> measured_balance(const SimFlags& f, SpikingNetwork& net, const torch::Tensor& images,
                                      int64_t stages) {
  const std::vector<int64_t> b =
      net.measure_balance(images.narrow(0, 0, std::min<int64_t>(f.batch_size, images.size(0))), stages);
  std::string layers, ms;
  for (size_t i = 0; i < b.size(); ++i) layers += (i ? "," : "") + std::to_string(b[i]);
  for (size_t i = 0; i < net.measured_layer_seconds().size(); ++i) {
    ms += fmt::format("{}{:.2f}", i ? ", " : "", 1e3 * net.measured_layer_seconds()[i]);
  }
  std::cout << "balance auto: " << layers << " layers per stage (measured ms per layer: " << ms << ")\n";
  return b;
}

// --balance auto: sets the network's balance to the measured cut.
void auto_balance(const SimFlags& f, SpikingNetwork& net, const torch::Tensor& images) {
  if (f.balance != "auto") return;
  net.set_balance(measured_balance(f, net, images, static_cast<int64_t>(net.config().devices.size())));
}

Placement placement_of(const SimFlags& f) {
  Placement p;
  p.devices = split_list(f.devices);
  p.balance = (f.balance.empty() || f.balance == "auto") ? std::vector<int64_t>{} : parse_balance(f.balance);
  p.steps_per_tick = f.steps_per_tick;
  p.threads = f.threads;
  return p;
}

// --limit: -1 for all, else at least one sample (0 would simulate nothing,
// and other negatives are typos, not "all").
void check_limit(int64_t limit) {
  if (limit != -1 && limit < 1) {
    throw Error("--limit: expected a number of samples >= 1, or -1 for all, got " + std::to_string(limit));
  }
}

struct TrainFlags {
  std::string layers = "784-256-10";
  NeuronFlags neuron;
  int64_t steps = 8;
  uint64_t seed = 0;
  int64_t epochs = 10;
  double lr = 1e-3;
  std::string loss = "mse";
  int64_t limit = -1;
  double weight_decay = 0;
  std::string lr_schedule = "constant";
  int64_t augment_shift = 0;
  std::string checkpoint;
  std::string resume;
  bool overwrite = false;
  std::optional<double> nir_dt;
  FileArgument config;  // --config, which no output may replace
  SimFlags sim;
  DistFlags dist;
};

// The flags `train --resume` accepts: the epochs to reach, where the
// checkpoint goes, and placement, none of which changes the result. Every
// other flag defines the network or the training, which continue as the
// checkpoint says.
const std::vector<std::string> kTrainResumeFlags = {
    "--resume",     "--epochs",     "--checkpoint", "--overwrite", "--devices", "--balance",     "--threads",
    "--steps-per-tick", "--data-dir", "--world-size", "--rank",     "--master",  "--dist-timeout", "--parallel",
    "--cpu-bind"};

// The labels in order, as a fingerprint of the data the ranks compare:
// sum of (i + 1) * label.
int64_t labels_fingerprint(const torch::Tensor& labels) {
  const torch::Tensor l = labels.to(torch::kLong);
  return (l * torch::arange(1, l.size(0) + 1, torch::kLong)).sum().item<int64_t>();
}

// What decides a training's result, for the ranks to compare: the network
// (placement aside), the training options, the starting weights and epoch,
// and the training labels. Keys are the flags' names where a flag sets the
// value, so that a mismatch names what to change ("T: 2 on rank 0, 3 on
// rank 1", not "config.steps").
std::string train_settings(const SpikingNetwork& net, const TrainOptions& o, int64_t first_epoch,
                           const LabeledImages& train) {
  const NetworkConfig& c = net.config();
  const nlohmann::json config = nlohmann::json::parse(c.to_json());
  nlohmann::json j{{"layers", c.layers},
                   {"T", c.steps},
                   {"neuron (--model, --tau, ...)", config.at("neuron")},
                   {"batch-size", o.batch_size},
                   {"lr", o.lr},
                   {"loss", to_string(o.loss)},
                   {"seed", o.shuffle_seed},
                   {"limit", o.limit},
                   {"weight-decay", o.weight_decay},
                   {"lr-schedule", to_string(o.lr_schedule)},
                   {"epochs", o.epochs},
                   {"augment-shift", o.augment_shift},
                   {"first epoch (--resume)", first_epoch},
                   {"starting weights (parameters hash)", parameters_hash(net)},
                   {"training samples (--data-dir, --limit)", train.size()},
                   {"training labels (--data-dir)", labels_fingerprint(train.labels)}};
  if (c.input_gain != 1.0) j["input gain"] = c.input_gain;
  if (config.contains("graph")) j["model (graph)"] = config.at("graph");
  if (config.contains("layer_names")) j["layer names"] = config.at("layer_names");
  if (c.seed != o.shuffle_seed) j["network seed"] = c.seed;
  return j.dump();
}

void run_train(const TrainFlags& f, const std::vector<std::string>& given) {
  if (f.dist.parallel == "pipeline") {
    throw Error("--parallel pipeline: training through a pipeline over ranks is not supported yet; train with "
                "--parallel data (the default), whose checkpoint equals one process's, or with --devices on "
                "one process");
  }
  if (!f.resume.empty()) {
    for (const auto& name : given) {
      if (std::find(kTrainResumeFlags.begin(), kTrainResumeFlags.end(), name) == kTrainResumeFlags.end()) {
        throw Error(name + " cannot change when resuming: --resume continues with the checkpoint's network and "
                    "training options");
      }
    }
  }
  check_limit(f.limit);
  // A run over several processes: joined first, so that a rank failing to
  // load its files tells the others at once. Rank 0 alone writes and prints.
  const std::optional<dist::WorldOptions> world_opts = world_options(f.dist, given);
  dist::World* world = world_opts ? &join_world(*world_opts) : nullptr;
  const bool speaks = !world || world->rank() == 0;
  if (f.checkpoint.empty() && std::find(given.begin(), given.end(), "--checkpoint") != given.end()) {
    throw Error("--checkpoint: expected a file name, got ''");
  }
  const std::string out_path = f.checkpoint.empty() ? (f.resume.empty() ? "snnsim-checkpoint.h5" : f.resume) : f.checkpoint;
  if (speaks) {
    // (The --resume checkpoint is the default output, and replacing it is
    // how training continues.)
    check_output_files({{"--checkpoint", out_path}},
                       {{"--model", is_graph_file_model(f.neuron.model) ? f.neuron.model : ""}, f.config});
  }
  // Only the checkpoint being continued may be replaced without --overwrite:
  // anything else at that path (an older training, a recording) is kept.
  struct stat st {};
  if (speaks && !f.overwrite && out_path != f.resume && ::stat(out_path.c_str(), &st) == 0) {
    throw Error("checkpoint '" + out_path + "' exists; pass --overwrite to replace it");
  }
  NetworkConfig c;
  TrainOptions o;
  LoadedCheckpoint resumed;
  if (!f.resume.empty()) {
    resumed = load_checkpoint(f.resume);
    if (!resumed.has_training_state) {
      throw Error("checkpoint '" + f.resume + "' holds no optimizer state to resume from");
    }
    if (resumed.epoch >= f.epochs) {
      throw Error("checkpoint '" + f.resume + "' already has " + std::to_string(resumed.epoch) +
                  " epochs; --epochs is the total to reach");
    }
    c = resumed.network->config();
    o = resumed.training;
    if (o.lr_schedule == LrSchedule::kCosine && f.epochs != o.epochs) {
      throw Error("the checkpoint's cosine schedule spans " + std::to_string(o.epochs) +
                  " epochs; resume with --epochs " + std::to_string(o.epochs));
    }
    o.epochs = f.epochs;
  } else if (is_graph_file_model(f.neuron.model)) {
    // The file defines the network: its sizes, neurons and (.nir) weights.
    for (const auto& name : given) {
      if (name == "--layers" || name == "--tau" || name == "--decay-input" || name == "--v-threshold" ||
          name == "--v-reset" || name == "--refractory" || name == "--surrogate") {
        throw Error(name + " cannot be combined with --model " + f.neuron.model +
                    ": the graph file defines the network (set it on the file's nodes)");
      }
    }
  } else {
    if (f.nir_dt) throw Error("--nir-dt needs --model FILE.nir");
    c.layers = NetworkConfig::parse_layers(f.layers);
    c.neuron = neuron_params(f.neuron);
  }
  if (f.resume.empty()) {
    c.steps = f.steps;
    c.seed = f.seed;
    o.batch_size = f.sim.batch_size;
    o.lr = f.lr;
    o.loss = parse_loss(f.loss);
    o.shuffle_seed = f.seed;
    o.limit = f.limit;
    o.weight_decay = f.weight_decay;
    o.lr_schedule = parse_lr_schedule(f.lr_schedule);
    o.epochs = f.epochs;
    o.augment_shift = f.augment_shift;
  }
  // Built once; the placement flags then say how it is simulated.
  std::unique_ptr<SpikingNetwork> built;
  const bool resuming = resumed.network != nullptr;
  if (resuming) {
    built = std::move(resumed.network);
  } else if (is_graph_file_model(f.neuron.model)) {
    built = network_from_model(f.neuron.model, c, f.nir_dt);
  } else {
    naming_flags(given, [&] { built = std::make_unique<SpikingNetwork>(c); });
  }
  naming_flags(given, [&] { placement_of(f.sim).apply(*built); });
  c = built->config();
  SpikingNetwork& net = *built;
  const ImageDataset data = load_data_for_outputs(f.sim.data_dir, c.layers.back());
  net.prepare_input(data.train.images.narrow(0, 0, 1));  // input size check before any output
  auto_balance(f.sim, net, data.train.images);
  Trainer trainer(net, o);
  if (resuming) trainer.load_optimizer_state(resumed.optimizer);
  if (world) {
    world->check_same_settings(train_settings(net, o, resumed.epoch, data.train));
    trainer.distribute(*world);
  }
  const std::string cores = world ? bind_cores(f.dist, *world, at::get_num_threads()) : "";
  std::string layers;
  for (const int64_t n : c.layers) layers += (layers.empty() ? "" : "-") + std::to_string(n);
  if (speaks) {
    std::cout << fmt::format("training {} on {} ({} train / {} test samples), T = {}, {} thread{}{}\n", layers,
                             f.sim.data_dir, o.limit < 0 ? data.train.size() : std::min(o.limit, data.train.size()),
                             data.test.size(), c.steps, at::get_num_threads(), at::get_num_threads() == 1 ? "" : "s",
                             world ? fmt::format(" per rank, {} ranks (batches of {} split among them)",
                                                 world->size(), o.batch_size)
                                   : "")
              << (world ? cores + "\n" : "") << std::flush;
  }
  // Where a training stopped by a signal can continue from (said by rank 0,
  // which writes the checkpoint; the other ranks' lines say no more).
  const auto continue_from = [&](const std::string& checkpoint, int64_t epoch) {
    if (!speaks) return;
    set_interrupt_note(fmt::format(" in epoch {} of {}; '{}' holds epoch {}: continue with snnsim train --resume {} "
                                   "--epochs {}",
                                   epoch + 1, f.epochs, checkpoint, epoch, checkpoint, f.epochs));
  };
  if (resumed.epoch > 0) {
    continue_from(f.resume, resumed.epoch);
  } else if (speaks) {
    set_interrupt_note(" in epoch 1, before any checkpoint was written");
  }
  for (int64_t e = resumed.epoch; e < f.epochs; ++e) {
    Progress progress(fmt::format("epoch {}/{}", e + 1, f.epochs));
    const EpochStats s = trainer.train_epoch(data.train, e, [&](int64_t d, int64_t t, double l) {
      if (speaks) progress.update(d, t, fmt::format("loss {:.4f}", l));
    });
    if (speaks) progress.finish();
    const EvalResult test = evaluate_over(world, net, data.test, f.sim.batch_size);
    if (!speaks) continue;
    std::cout << fmt::format("epoch {}/{}: train loss {:.4f}, train accuracy {:.4f}, test accuracy {:.4f}, {:.2f} s\n",
                             e + 1, f.epochs, s.loss, s.train_accuracy, test.accuracy, s.seconds)
              << (e == resumed.epoch ? "pipeline: " + s.execution.describe() + (world ? " on each rank" : "") + "\n"
                                     : "")
              << std::flush;
    if (world) {
      // What the exchanges cost (all epochs so far, rank 0's view).
      const dist::World::Traffic t = world->traffic();
      std::cout << fmt::format("communication: {:.2f} s in {} exchanges, {:.1f} MB sent by rank 0\n", t.seconds,
                               t.calls, static_cast<double>(t.bytes) / 1e6);
      if (s.optimizer_steps > 0) {
        // This epoch's steps (the communication line above sums all epochs).
        std::cout << fmt::format("optimizer: {} steps, {:.2f} ms each, {:.2f} ms of it in exchanges; {} of {} Linear "
                                 "layers summed from exchanged rows (rank 0)\n",
                                 s.optimizer_steps, 1e3 * s.optimizer_seconds / static_cast<double>(s.optimizer_steps),
                                 1e3 * s.optimizer_exchange_seconds / static_cast<double>(s.optimizer_steps),
                                 s.last_row_layers, s.row_layers);
      }
    }
    // A signal while the checkpoint goes into place waits until the line
    // names it (else it could say "holds epoch e" of a file that holds e + 1).
    HoldStopSignals hold;
    save_checkpoint(out_path, net, e + 1, &trainer, {kGitCommit, test.accuracy});
    if (e + 1 < f.epochs) {
      continue_from(out_path, e + 1);
    } else {
      set_interrupt_note(fmt::format(" after training; '{}' holds all {} epochs", out_path, f.epochs));
    }
  }
  if (world) world->finish();
  if (speaks) std::cout << "checkpoint: " << out_path << "\n";
}

struct RunFlags {
  std::string checkpoint;
  std::string split = "test";
  int64_t steps = 0;
  int64_t limit = -1;
  std::string summary;
  std::string output;
  std::string record = "output";
  std::string record_v;
  bool overwrite = false;
  double dt = 1.0;
  bool record_input = false;
  bool compress = false;
  std::string resume;
  std::string max_record_bytes;
  FileArgument config;  // --config, which no output may replace
  // Overrides of the checkpoint's settings ("" = keep): what sweeps vary.
  std::string tau, v_threshold, v_reset, refractory, gain, seed;
  SimFlags sim;
  DistFlags dist;
};

// The whole number a flag holds (seed, refractory: given as text so that
// "not given" differs from 0).
int64_t parse_whole(const std::string& flag, const std::string& text, int64_t least) {
  const double v = parse_number(flag, text);
  if (v < static_cast<double>(least) || v != std::floor(v) || v > 9.2e18) {
    throw Error(flag + ": expected a whole number >= " + std::to_string(least) + ", got '" + text + "'");
  }
  return static_cast<int64_t>(v);
}

// The flags' result-deciding settings (everything but placement).
RunOptions run_options_of(const RunFlags& f) {
  RunOptions r;
  r.checkpoint = f.checkpoint;
  r.data_dir = f.sim.data_dir;
  r.split = f.split;
  r.limit = f.limit;
  r.record = f.record;
  r.record_v = f.record_v;
  r.record_input = f.record_input;
  r.dt_ms = f.dt;
  r.compress = f.compress;
  NetworkOverrides& o = r.overrides;
  if (f.steps > 0) o.steps = f.steps;
  if (!f.tau.empty()) o.tau = parse_number("--tau", f.tau);
  if (!f.v_threshold.empty()) o.v_threshold = parse_number("--v-threshold", f.v_threshold);
  if (!f.v_reset.empty()) {
    o.v_reset = f.v_reset == "none" ? std::optional<double>() : std::optional<double>(parse_number("--v-reset", f.v_reset));
  }
  if (!f.refractory.empty()) o.refractory = parse_whole("--refractory", f.refractory, 0);
  if (!f.gain.empty()) o.gain = parse_number("--gain", f.gain);
  if (!f.seed.empty()) o.seed = static_cast<uint64_t>(parse_whole("--seed", f.seed, 0));
  return r;
}

// The flags `run --resume` accepts: where and how fast the run goes and where
// its summary goes. Every other flag would change the recording's content,
// which continues with the RunOptions it was started with.
const std::vector<std::string> kRunResumeFlags = {"--resume",     "--summary",        "--devices", "--balance",
                                                  "--threads",    "--steps-per-tick", "--batch-size", "--world-size",
                                                  "--rank",       "--master",         "--dist-timeout",
                                                  "--cpu-bind"};

// --resume FILE: the RunOptions the recording was started with.
RunOptions resumed_options(const std::string& recording, const std::vector<std::string>& given) {
  const std::string text = recording::read_meta_attribute(recording, "run_options");
  if (text.empty()) {
    throw Error("recording '" + recording + "' does not say how it was made (no run_options in /meta): it cannot be resumed");
  }
  const RunOptions saved = RunOptions::from_json(text, "recording '" + recording + "'");
  const nlohmann::json values = nlohmann::json::parse(saved.to_json());
  for (const auto& flag : given) {
    if (std::find(kRunResumeFlags.begin(), kRunResumeFlags.end(), flag) != kRunResumeFlags.end()) continue;
    const std::string key = flag.substr(2);
    throw Error(flag + " cannot be given with --resume: the recording continues with the settings it was started " +
                "with" +
                (values.contains(key) ? " (" + key + " = " +
                                            (values.at(key).is_null() ? std::string("the checkpoint's")
                                                                      : values.at(key).dump()) + ")"
                                      : "") +
                "; only --devices, --balance, --threads, --steps-per-tick, --batch-size and --summary may change");
  }
  return saved;
}

// SIGINT and SIGTERM during a recording: the run finishes its batch,
// commits, marks the file aborted and exits non-zero. A second signal
// kills at once (SA_RESETHAND restores the default action).
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

// SIGINT and SIGTERM where no command catches them (training, a run without
// a recording, an analysis): one line, then death by the signal (a shell
// sees 128 + it, and a script's loop stops as it would for any program),
// not a silent death. Only async-signal-safe calls: the lines are built
// outside the handler in buffers that live to the end (never freed at
// exit), and read through atomic pointers.
std::atomic<const char*> g_interrupt_lines[2] = {nullptr, nullptr};  // SIGINT, SIGTERM

// While a HoldStopSignals lives (a checkpoint being put in place, then the
// line that names it): the signal that came is kept in g_held_signal and
// acted on when the hold ends, so that the line names the file as it then
// is. Exactly one of the handler and the hold's end takes a held signal
// (both exchange it out; sequentially consistent atomics).
std::atomic<bool> g_hold{false};
std::atomic<int> g_held_signal{0};

extern "C" void on_unhandled_stop(int sig) {
  if (g_hold.load()) {
    g_held_signal.store(sig);
    if (g_hold.load()) return;                  // the hold's end acts on it
    if (g_held_signal.exchange(0) == 0) return;  // it ended meanwhile and took it
  }
  const char* line = g_interrupt_lines[sig == SIGINT ? 0 : 1].load();
  if (line != nullptr) {
    size_t n = 0;
    while (line[n] != '\0') ++n;
    const ssize_t written = ::write(STDERR_FILENO, line, n);
    (void)written;
  }
  // (Installed with SA_RESETHAND | SA_NODEFER: the default action is back
  // and the signal not blocked, so this ends the process by it.)
  ::raise(sig);
  ::_exit(128 + sig);  // (not reached)
}

// Installs `handler` for SIGINT and SIGTERM; where `keep_ignored`, not over
// one the program was started ignoring (a script's background job).
void handle_stop_signals(void (*handler)(int), int flags, bool keep_ignored) {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (keep_ignored && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = flags;
    ::sigaction(sig, &sa, nullptr);
  }
}

// (Whatever the program was started with: `kill -INT` from the script that
// started a recording run in the background stops it cleanly.)
void catch_stop_signals() { handle_stop_signals(on_stop_signal, SA_RESETHAND, false); }

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// What decides a run's results, for the ranks of a run over several
// processes to compare: the run options (their paths aside: machines may
// mount the same files elsewhere), the weights and the samples.
// In a pipeline over ranks the stages and K must agree too: they decide
// which blocks pass between the ranks.
std::string run_settings(const RunOptions& o, const SpikingNetwork& net, const LabeledImages& split, int64_t samples,
                         bool pipeline) {
  nlohmann::json j = nlohmann::json::parse(o.to_json());
  j.erase("checkpoint");
  j.erase("data_dir");
  j["parallel"] = pipeline ? "pipeline" : "data";
  if (pipeline) {
    j["balance (layers per rank)"] = net.stage_layers();
    j["steps-per-tick"] = net.config().steps_per_tick;
  }
  j["parameters_hash"] = parameters_hash(net);
  j["samples"] = samples;
  j["labels (--data-dir, --split)"] = labels_fingerprint(split.labels.narrow(0, 0, samples));
  return j.dump();
}

// --parallel pipeline: the network's stages are the ranks, rank r holding
// stage r, joined by the ranks' pipeline links. --devices names one device
// per rank (or one for all), --balance the layers per rank (auto: as rank 0
// measures them); K defaults to 1 (K = T would leave nothing to overlap
// within a batch).
void place_over_ranks(SpikingNetwork& net, const SimFlags& f, dist::World& world, const torch::Tensor& images) {
  const int64_t n = world.size();
  Placement p = placement_of(f);
  if (p.devices.size() == 1) p.devices.assign(static_cast<size_t>(n), p.devices.front());
  if (static_cast<int64_t>(p.devices.size()) != n) {
    throw Error(fmt::format("--devices: a pipeline over {} ranks takes one device per rank, or one for all; got {}",
                            n, f.devices));
  }
  if (p.steps_per_tick == 0) p.steps_per_tick = 1;
  try {
    if (f.balance == "auto") {
      // Rank 0 times the layers and every rank takes its cut: each rank
      // timing its own would choose differently (and the settings check
      // would then refuse the run).
      std::vector<int64_t> mine;
      if (world.rank() == 0) mine = measured_balance(f, net, images, n);
      const torch::Tensor cut = world.all_gather_rows(torch::tensor(mine, torch::kLong));
      p.balance.assign(cut.data_ptr<int64_t>(), cut.data_ptr<int64_t>() + cut.numel());
    }
    p.apply(net);
  } catch (const Error& e) {
    throw Error(fmt::format("a pipeline over {} ranks, one stage each: {}", n, e.what()));
  }
  net.set_pipeline_part(world.rank(), 1, dist::pipeline_links(world));
}

void run_run(const RunFlags& f, const std::vector<std::string>& given) {
  const bool resuming = !f.resume.empty();
  // Before the work: a --summary or --output that names a device, a FIFO or
  // a link is refused now, not after the simulation.
  const bool model_flag = std::find(given.begin(), given.end(), "--model") != given.end();
  check_output_files({{"--output", f.output}, {"--summary", f.summary}},
                     {{model_flag ? "--model" : "--checkpoint", f.checkpoint}, {"--resume", f.resume}, f.config});
  const std::optional<dist::WorldOptions> world_opts = world_options(f.dist, given);
  const bool pipeline = f.dist.parallel == "pipeline";
  if (pipeline) {
    if (!world_opts) throw Error("--parallel pipeline needs a run over several processes (--world-size N, or torchrun)");
    if (resuming || !f.output.empty()) {
      throw Error(std::string(resuming ? "--resume" : "--output") +
                  ": recording a pipeline over ranks is not supported yet; record with --parallel data (the "
                  "default), whose merged recording equals one process's");
    }
  }
  // Joined first, so that a rank failing to load its files tells the others
  // at once instead of leaving them waiting for it.
  dist::World* world = world_opts ? &join_world(*world_opts) : nullptr;
  // Over several processes each rank records its share to its own part
  // (FILE.rankR-of-N.h5); rank 0 then writes FILE presenting them as one.
  const auto part_of = [&](const std::string& file) {
    return world ? recording::part_path(file, world->rank(), world->size()) : file;
  };
  // A part that was finished before the run stopped is not resumed: its
  // share is simulated again, unrecorded, for the run's totals. (A part
  // that `snnsim recover` made a normal file is not finished: it resumes.)
  const bool part_done = world && resuming && !file_exists(part_of(f.resume) + ".partial") &&
                         file_exists(part_of(f.resume)) &&
                         recording::read_recording_info(part_of(f.resume)).status == "complete";
  const auto has = [&](const char* flag) { return std::find(given.begin(), given.end(), flag) != given.end(); };
  RunOptions o;
  if (resuming) {
    o = resumed_options(part_of(f.resume), given);
  } else {
    if (f.checkpoint.empty()) throw Error("run needs --checkpoint FILE (or --resume RECORDING)");
    if (f.output.empty()) {
      for (const char* flag : {"--record", "--record-v", "--record-input", "--compress", "--max-record-bytes",
                               "--overwrite", "--dt"}) {
        if (has(flag)) throw Error(std::string(flag) + " needs --output FILE (the recording it configures)");
      }
    }
    o = run_options_of(f);
    check_limit(o.limit);
    o.validate();
    o.resolve_paths();
  }
  const std::string output = resuming ? f.resume : f.output;
  if (resuming) check_output_files({{"--summary", f.summary}}, {{"the recording's checkpoint", o.checkpoint}});
  LoadedNetwork loaded;
  try {
    // (Resumed, the overrides are the recording's, not flags: none is given.)
    naming_flags(given, [&] {
      loaded = load_network(o.checkpoint, o.overrides, pipeline ? Placement{} : placement_of(f.sim));
    });
  } catch (const Error& e) {
    // (A flag named by the message is one given now, not the recording's.)
    if (!resuming || std::string(e.what()).rfind("--", 0) == 0) throw;
    throw Error(std::string(e.what()) + " (the checkpoint recording '" + f.resume + "' was started with)");
  }
  SpikingNetwork& net = *loaded.network;
  const NetworkConfig& c = net.config();
  const ImageDataset data = load_data_for_outputs(o.data_dir, c.layers.back());
  const LabeledImages& split = o.split == "train" ? data.train : data.test;
  net.prepare_input(split.images.narrow(0, 0, 1));
  if (pipeline) {
    place_over_ranks(net, f.sim, *world, split.images);
  } else {
    auto_balance(f.sim, net, split.images);
  }
  const int64_t samples = o.limit < 0 ? split.size() : std::min(o.limit, split.size());
  // A run over several processes: this rank simulates its share of the
  // samples (or, in a pipeline, its stage of all of them); the results are
  // gathered below.
  SampleRange share;
  if (world) {
    world->check_same_settings(run_settings(o, net, split, samples, pipeline));
    if (!pipeline) share = rank_share(samples, world->rank(), world->size());
  }
  const std::string cores = world ? bind_cores(f.dist, *world, at::get_num_threads()) : "";
  const bool speaks = !world || world->rank() == 0;  // what the run prints, rank 0 prints
  if (world && world->rank() == 0 && !output.empty() && !resuming && !f.overwrite && file_exists(output)) {
    throw Error("recording '" + output + "' exists; pass --overwrite to replace it");
  }
  const bool recording = !output.empty() && !part_done;
  RecordRequest record;
  if (recording) {
    record.path = part_of(output);
    record.overwrite = f.overwrite;
    record.dt_ms = o.dt_ms;
    record.record_input = o.record_input;
    record.deflate_spikes = o.compress;
    record.resume = resuming;
    record.spikes = parse_population_list("--record", o.record, c);
    record.traces = parse_population_list("--record-v", o.record_v, c);
    for (const auto& [layer, ids] : record.traces) {
      if (ids.empty()) {  // (--record NAME means every neuron; potentials are per chosen neuron)
        const std::string name = population_name(c, layer);
        throw Error("--record-v: '" + name + "' names no neurons: potentials are recorded for the neurons listed, e.g. " +
                    name + ":0,5,17 or " + name + ":0-9");
      }
    }
    record.meta = run_provenance(c, o, kGitCommit);
    if (world) {
      record.meta.emplace_back("world_size", std::to_string(world->size()));
      record.meta.emplace_back("rank", std::to_string(world->rank()));
      record.meta.emplace_back("run_output", output);  // the run's name, for inspect's and recover's --resume hint
    }
    if (!resuming) {
      const RecordingEstimate estimate = estimate_recording(net, split, f.sim.batch_size, record,
                                                            world ? share.end - share.begin : samples);
      const double budget = f.max_record_bytes.empty() ? 0 : parse_bytes("--max-record-bytes", f.max_record_bytes);
      if (budget > 0 && estimate.bytes > budget) {
        throw Error(fmt::format("the recording would take about {} ({}), more than --max-record-bytes {}: record "
                                "fewer layers or neurons (e.g. --record hidden:0-99), fewer samples (--limit), or "
                                "raise the limit",
                                human_bytes(estimate.bytes), estimate.parts_text(), human_bytes(budget)));
      }
      if (speaks) record.on_open = [line = estimate.describe()] { std::cout << line << "\n"; };
    }
    catch_stop_signals();
    record.stop_requested = [] { return g_stop_signal.load() != 0; };
  }
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress(o.split + " split");
  const EvalResult mine = evaluate(net, split, f.sim.batch_size, o.limit, recording ? &record : nullptr,
                                   [&](int64_t done, int64_t total) {
                                     if (speaks) progress.update(done, total);
                                   },
                                   share);
  if (speaks) progress.finish();
  const EvalResult r = world ? gather_results(*world, mine, c) : mine;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<int64_t> rank_samples{r.samples};
  if (world) {
    secs = world->all_gather_rows(torch::tensor({secs}, torch::kDouble)).max().item<double>();  // the slowest rank's
    const torch::Tensor n = world->all_gather_rows(torch::tensor({mine.samples}, torch::kLong));
    rank_samples.assign(n.data_ptr<int64_t>(), n.data_ptr<int64_t>() + n.numel());
    // Every part is finished (the gathers above wait for every rank).
    if (!output.empty() && world->rank() == 0) {
      std::vector<std::string> parts;
      for (int64_t r = 0; r < world->size(); ++r) parts.push_back(recording::part_path(output, r, world->size()));
      recording::write_merged_recording(output, parts, f.overwrite || resuming,
                                        {{"world_size", std::to_string(world->size())}});
    }
    world->barrier();  // the others end once the merged file is there
    world->finish();
    if (!speaks) return;
  }
  const dist::World::Traffic traffic = world ? world->traffic() : dist::World::Traffic{};
  std::cout << fmt::format("{} split: {} samples, T = {}, accuracy {:.4f} ({:.1f} s)\n", o.split, r.samples, c.steps,
                           r.accuracy, secs);
  if (r.resumed_at > 0) {
    std::cout << fmt::format("resumed: samples 0..{} came from the recording, {} were simulated now\n",
                             r.resumed_at - 1, r.samples - r.resumed_at);
  }
  if (pipeline) {
    std::string layers;
    for (int64_t l : net.stage_layers()) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    std::cout << fmt::format("pipeline: {} ranks, a stage each (layers {} on {}), K = {}, batch size {}; "
                             "communication {:.2f} s on rank 0\n",
                             world->size(), layers, f.sim.devices, net.config().steps_per_tick, f.sim.batch_size,
                             traffic.seconds);
  } else if (r.samples > r.resumed_at) {
    std::cout << "pipeline: " << r.execution.describe() << (world ? " on each rank" : "") << "\n";
  }
  if (world && !pipeline) {
    std::string shares;
    for (size_t k = 0, first = 0; k < rank_samples.size(); first += static_cast<size_t>(rank_samples[k]), ++k) {
      shares += fmt::format("{}{}..{} on rank {}", k ? ", " : "", first, first + rank_samples[k] - 1, k);
    }
    std::cout << fmt::format("ranks: {} processes; samples {}; communication {:.2f} s\n", world->size(), shares,
                             traffic.seconds);
  }
  if (world) std::cout << cores << "\n";
  for (size_t i = 0; i < r.firing_rate.size(); ++i) {
    if (!net.neuron_layers()[i]->spiking()) {
      std::cout << fmt::format("layer {} ({} neurons): a leaky integrator, passes its potential on (no spikes)\n",
                               i + 1, c.layers[i + 1]);
      continue;
    }
    std::cout << fmt::format("layer {} ({} neurons): mean firing rate {:.4f} spikes/neuron/step\n", i + 1,
                             c.layers[i + 1], r.firing_rate[i]);
  }
  std::cout << "accuracy by step t:";
  for (double a : r.accuracy_by_step) std::cout << fmt::format(" {:.4f}", a);
  std::cout << "\n";
  if (!output.empty()) std::cout << "recording: " << output << "\n";
  if (!f.summary.empty()) {
    nlohmann::json j{{"checkpoint", o.checkpoint},
                     {"data_dir", o.data_dir},
                     {"split", o.split},
                     {"samples", r.samples},
                     {"steps", c.steps},
                     {"accuracy", r.accuracy},
                     {"accuracy_by_step", r.accuracy_by_step},
                     {"firing_rate", r.firing_rate},
                     {"tie_rule", "argmax of output spike counts; ties go to the lowest class index"},
                     {"seconds", secs},
                     {"threads", at::get_num_threads()},
                     {"execution", nlohmann::json::parse(r.execution.to_json())},
                     {"ranks", world ? world->size() : 1},
                     {"parallel", pipeline ? "pipeline" : "data"},
                     {"samples_per_rank", rank_samples},
                     {"communication_seconds", traffic.seconds},
                     {"snnsim_version", kVersion},
                     {"config", nlohmann::json::parse(c.to_json())}};
    try {
      write_file_atomically(f.summary, j.dump(2) + "\n");
    } catch (const Error& e) {
      // The recording is complete by now, and --resume refuses a complete
      // one: say how the summary can still be had (a run of the same
      // network and data without the recording).
      if (output.empty()) throw;
      const std::string again =
          f.resume.empty() ? "the same command without --output and its recording flags (--record, --record-v, ...)"
                           : fmt::format("snnsim run --checkpoint {} with the recording's other flags, without "
                                         "--output,",
                                         o.checkpoint);
      throw Error(fmt::format("{} (the recording '{}' is complete; {} writes the summary again)", e.what(), output,
                              again));
    }
  }
}

}  // namespace

// "500M"-style sizes: bytes, or with a K, M, G or T suffix (powers of 1024).
double parse_bytes(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string suffix = text.substr(std::min(used, text.size()));
  double unit = 1;
  if (suffix.size() == 1) {
    const auto pos = std::string("KMGT").find(static_cast<char>(std::toupper(suffix[0])));
    if (pos != std::string::npos) {
      unit = std::pow(1024.0, static_cast<double>(pos + 1));
      suffix.clear();
    }
  }
  if (used == 0 || !suffix.empty() || !(v > 0)) {
    throw Error(flag + ": expected a positive size like 500M or 2G, got '" + text + "'");
  }
  return v * unit;
}

nlohmann::json json_number(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

double parse_number(const std::string& what, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v)) throw Error(what + ": expected a number, got '" + text + "'");
  return v;
}

std::vector<std::string> given_options(const CLI::App* cmd) {
  std::vector<std::string> given;
  for (const CLI::Option* opt : cmd->get_options()) {
    if (opt->count() > 0) given.push_back(opt->get_name());
  }
  return given;
}

namespace {
std::vector<std::string>& command_line() {
  static std::vector<std::string> words;
  return words;
}
}  // namespace

void set_command_line(int argc, const char* const* argv) { command_line().assign(argv, argv + argc); }

bool typed(const std::string& flag) {
  for (const std::string& w : command_line()) {
    if (w == flag || w.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

ImageDataset load_data_for_outputs(const std::string& dir, int64_t outputs) {
  ImageDataset data = load_image_dataset(dir, 256);  // every byte label; checked against the network below
  for (const auto& [name, split] : {std::pair<const char*, const LabeledImages*>{"train", &data.train},
                                    std::pair<const char*, const LabeledImages*>{"test", &data.test}}) {
    if (split->size() == 0) continue;
    const int64_t top = split->labels.max().item<int64_t>();
    if (top < outputs) continue;
    const int64_t sample = (split->labels >= outputs).nonzero()[0][0].item<int64_t>();
    // Most likely a network too small for the data; a damaged labels file
    // reads the same, so the sample is named too.
    throw Error("the network's output layer has " + std::to_string(outputs) + " neuron" + (outputs == 1 ? "" : "s") +
                ", one per class, but the " + name + " labels in '" + dir + "' go up to " + std::to_string(top) +
                " (sample " + std::to_string(sample) + " is labelled " +
                std::to_string(split->labels[sample].item<int64_t>()) + "): give it at least " +
                std::to_string(top + 1) + " output neurons, or check the labels file");
  }
  return data;
}

FileArgument config_argument(const CLI::App* cmd) {
  while (cmd->get_parent() != nullptr) cmd = cmd->get_parent();
  const CLI::Option* opt = cmd->get_config_ptr();
  FileArgument a{"--config", ""};
  if (opt != nullptr && opt->count() > 0 && !opt->results().empty()) a.path = opt->results().back();
  return a;
}

int stop_signal() { return g_stop_signal.load(); }

void watch_stop_signals() { catch_stop_signals(); }

void end_on_stop_signals() {
  set_interrupt_note("");
  // An ignored signal stays ignored: this handler ends the program, which
  // the signal did not do before.
  // (SA_RESTART: a held signal's handler returns, and the call it
  // interrupted goes on.)
  handle_stop_signals(on_unhandled_stop, SA_RESETHAND | SA_NODEFER | SA_RESTART, true);
}

HoldStopSignals::HoldStopSignals() { g_hold.store(true); }

HoldStopSignals::~HoldStopSignals() {
  g_hold.store(false);
  const int sig = g_held_signal.exchange(0);
  // Left by an error (the save failed): its line, not the signal's, ends
  // the program (a non-zero exit either way).
  if (sig != 0 && std::uncaught_exceptions() == 0) on_unhandled_stop(sig);  // the line, then the end
}

void set_interrupt_note(const std::string& note) {
  // Built in the slot the handler does not point at, then published: a
  // signal during the call prints the old line or the new, never a half.
  // (Plain arrays: static strings would be freed while exit() runs.)
  static char slots[2][2][1024];
  static int next = 0;
  char(*lines)[1024] = slots[next];
  next = 1 - next;
  std::snprintf(lines[0], sizeof lines[0], "snnsim: error: interrupted by SIGINT%s\n", note.c_str());
  std::snprintf(lines[1], sizeof lines[1], "snnsim: error: stopped by SIGTERM%s\n", note.c_str());
  g_interrupt_lines[0].store(lines[0]);
  g_interrupt_lines[1].store(lines[1]);
}

bool stop_requested() { return g_stop_signal.load() != 0; }


Run add_recover_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto overwrite = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "recover",
      "Make the recording of a killed or interrupted run (FILE.partial) a normal file holding every sample it "
      "committed (status 'recovered'); snnsim run --resume (simulate --resume for a population model's) can still "
      "continue it");
  cmd->add_option("FILE", *path, "The recording: run.h5 or run.h5.partial")->required();
  cmd->add_flag("--overwrite", *overwrite, "Replace an existing FILE");
  return [cmd, path, overwrite] {
    if (!cmd->parsed()) return;
    const recording::Recovered r = recording::recover(*path, *overwrite);
    const recording::RecordingInfo info = recording::read_recording_info(r.path);
    const std::string unit = info.trials ? "trial" : "sample";
    std::cout << fmt::format("recovered '{}': {} committed {}{} (the file's status was '{}'); continue the run "
                             "with: {}\n",
                             r.path, r.samples, unit, r.samples == 1 ? "" : "s", r.previous_status,
                             resume_command(r.path));
  };
}

Run add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand("train",
                                     "Train a fully connected spiking network on MNIST-format images with "
                                     "surrogate-gradient BPTT (Adam), saving an HDF5 checkpoint after every epoch");
  cmd->add_option("--layers", f->layers, "Layer sizes, input first")->capture_default_str();
  add_neuron_flags(cmd, f->neuron, /*with_surrogate=*/true, /*graph_files=*/true);
  cmd->add_option("--nir-dt", f->nir_dt,
                  "With --model FILE.nir: the duration of a step in seconds (default: the file's own, else 1e-4)")
      ->check(number_above(0));
  cmd->add_option("--T", f->steps, "Steps per sample")->capture_default_str()->check(whole_number(1));
  cmd->add_option("--seed", f->seed, "Seed of weights, encoder and batch order")
      ->capture_default_str()
      ->check(whole_number(0));
  cmd->add_option("--epochs", f->epochs, "Epochs")->capture_default_str()->check(whole_number(1));
  cmd->add_option("--lr", f->lr, "Adam learning rate")->capture_default_str()->check(number_above(0));
  cmd->add_option("--loss", f->loss, "mse (rates vs one-hot) or ce (cross-entropy on counts)")
      ->capture_default_str()
      ->check(one_of({"mse", "ce"}));
  cmd->add_option("--limit", f->limit, "Train on the first N samples only (-1: all)")
      ->capture_default_str()
      ->check(whole_number_or(1, -1, "all"));
  cmd->add_option("--weight-decay", f->weight_decay, "Adam's L2 penalty on all parameters")
      ->capture_default_str()
      ->check(number_at_least(0));
  cmd->add_option("--lr-schedule", f->lr_schedule,
                  "constant, or cosine: lr * (1 + cos(pi * epoch / epochs)) / 2, annealed over --epochs")
      ->capture_default_str()
      ->check(one_of({"constant", "cosine"}));
  cmd->add_option("--augment-shift", f->augment_shift,
                  "Shift each training image by up to N pixels per axis (drawn per seed, epoch and sample; 0: off)")
      ->capture_default_str()
      ->check(whole_number(0, 64));
  cmd->add_option("--checkpoint", f->checkpoint,
                  "Output checkpoint (HDF5), rewritten after every epoch (default: snnsim-checkpoint.h5, or the "
                  "--resume file)");
  cmd->add_flag("--overwrite", f->overwrite, "Replace an existing --checkpoint file (other than the --resume one)");
  cmd->add_option("--resume", f->resume,
                  "Continue training from this checkpoint, with its network, training options and Adam state, "
                  "up to --epochs in total; the result equals an uninterrupted run");
  add_sim_flags(cmd, f->sim);
  add_dist_flags(cmd, f->dist);
  return [cmd, f] {
    if (!cmd->parsed()) return;
    f->config = config_argument(cmd);
    run_train(*f, given_options(cmd));
  };
}

Run add_run_command(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run",
                                     "Simulate a data split through a trained network for T steps: accuracy, "
                                     "firing rate per layer and accuracy as a function of t");
  auto* ckpt = cmd->add_option("--checkpoint", f->checkpoint,
                               "Checkpoint written by snnsim train, or a .nir file (required unless --resume or --model)");
  cmd->add_option("--model", f->checkpoint, "A network graph with its weights: a .nir file (or a checkpoint)")
      ->excludes(ckpt);
  cmd->add_option("--split", f->split, "test or train")->capture_default_str()->check(one_of({"test", "train"}));
  cmd->add_option("--T", f->steps, "Steps per sample (0: the checkpoint's)")
      ->capture_default_str()
      ->check(whole_number(0));
  cmd->add_option("--limit", f->limit, "Simulate the first N samples only (-1: all)")
      ->capture_default_str()
      ->check(whole_number_or(1, -1, "all"));
  cmd->add_option("--summary", f->summary, "Write the results as JSON to this file");
  cmd->add_option("--output", f->output,
                  "Record to this HDF5 file (SONATA-compatible spikes, per-sample rows, provenance), streamed while "
                  "the simulation runs");
  cmd->add_option("--record", f->record,
                  "Layers whose spikes go to --output: hidden, output (hidden1, hidden2, ... in deeper networks), "
                  "each optionally with neuron ids, e.g. hidden:0-99,output")
      ->capture_default_str();
  cmd->add_option("--record-v", f->record_v, "Membrane potentials to record, e.g. hidden:0,5,17");
  cmd->add_flag("--overwrite", f->overwrite, "Replace an existing --output file");
  cmd->add_option("--dt", f->dt, "Duration of a step in ms, the recording's time unit")
      ->capture_default_str()
      ->check(number_above(0));
  cmd->add_option("--tau", f->tau, "Override the neurons' time constant (steps; not for plif)");
  cmd->add_option("--v-threshold", f->v_threshold, "Override the firing threshold");
  cmd->add_option("--v-reset", f->v_reset, "Override the reset: a value, or 'none' for a soft reset");
  cmd->add_option("--refractory", f->refractory, "Override the refractory period (steps)");
  cmd->add_option("--gain", f->gain, "Encoder gain: a pixel x spikes with probability min(1, gain * x) per step");
  cmd->add_option("--seed", f->seed, "Override the encoder's seed");
  cmd->add_flag("--record-input", f->record_input, "Also record the encoder's spikes (population 'input')");
  cmd->add_flag("--compress", f->compress,
                "Deflate the spike and potential datasets too: 10-30x smaller, but readers whose HDF5 lacks zlib "
                "(libsonata's PyPI wheels) cannot open them");
  cmd->add_option("--max-record-bytes", f->max_record_bytes,
                  "Refuse to start when the recording's estimated size (printed before the run) exceeds this, "
                  "e.g. 500M or 2G");
  cmd->add_option("--resume", f->resume,
                  "Continue the unfinished recording FILE (interrupted or killed) with the settings it was started "
                  "with; the result equals an uninterrupted run's");
  add_sim_flags(cmd, f->sim);
  add_dist_flags(cmd, f->dist, /*pipeline=*/true);
  return [cmd, f] {
    if (!cmd->parsed()) return;
    f->config = config_argument(cmd);
    // Resumed by its unfinished name (run.h5.partial), a recording is still
    // run.h5: its parts, messages and merged file go by that name.
    f->resume = recording::RecordingFile::final_path(f->resume);
    run_run(*f, given_options(cmd));
  };
}

}  // namespace snn::app
