// `snnsim simulate MODEL`: a population model file (docs/POPULATIONS.md)
// built, simulated and, with --record, recorded for `snnsim analyze`.

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "validators.h"
#include "snn/analysis/analysis.h"
#include "snn/core/atomic_file.h"
#include "snn/core/error.h"
#include "snn/recording/recording_file.h"
#include "snn/simulator/population_run.h"
#include "snn/simulator/run_options.h"

namespace snn::app {
namespace {

struct SimulateFlags {
  std::string model;
  std::string record;
  std::string summary;
  std::vector<std::string> set;
  bool overwrite = false;
  bool resume = false;
  int threads = 0;
  double duration = 0;
  double synchrony_bin = 0;  // ms; 0 = one step
  int64_t trials = 0;
  int64_t seed = -1, input_seed = -1;
  std::string connectivity;
  FileArgument config;  // --config, which no output may replace
};


// --summary: the run and each population's rate (all its neurons, from the
// simulation) and, where its spikes were recorded, the recording's ISI CV,
// Fano factor and synchrony (snnsim analyze's numbers): what a sweep's
// manifest collects.
void write_summary(const SimulateFlags& f, const populations::PopulationModel& model, const PopulationRunReport& r) {
  const auto& res = r.result;
  std::vector<analysis::PopulationStats> recorded;
  analysis::AnalysisOptions options;
  options.synchrony_bin_ms = f.synchrony_bin;
  if (!r.record_path.empty()) recorded = analysis::analyze_recording(r.record_path, options).populations;
  nlohmann::json pops = nlohmann::json::array();
  for (size_t p = 0; p < model.network.populations.size(); ++p) {
    const auto& pop = model.network.populations[p];
    const double n = static_cast<double>(pop.size);
    nlohmann::json j{{"name", pop.name},
                     {"neurons", pop.size},
                     {"spikes", r.population_spikes[p]},
                     {"rate_hz", r.population_spikes[p] / (n * model.duration_ms * 1e-3 * r.trials)}};
    for (const auto& st : recorded) {
      if (st.name != pop.name) continue;
      j["isi_cv"] = json_number(st.isi_cv);
      j["fano"] = json_number(st.fano);
      j["synchrony"] = json_number(st.synchrony);
    }
    pops.push_back(j);
  }
  const nlohmann::json doc = nlohmann::json::parse(model.json);
  nlohmann::json j{{"model", f.model},
                   {"parameters", doc.value("parameters", nlohmann::json::object())},
                   {"duration_ms", model.duration_ms},
                   {"dt_ms", model.network.dt},
                   {"synchrony_bin_ms", f.synchrony_bin > 0 ? f.synchrony_bin : model.network.dt},
                   {"trials", r.trials},
                   {"resumed_trials", r.resumed_trials},
                   {"seed", model.seed},
                   {"input_seed", model.input_seed},
                   {"connectivity", model.connectivity_per_trial ? "per_trial" : "shared"},
                   {"neurons", r.neurons},
                   {"synapses", r.synapses},
                   {"build_seconds", r.build_seconds},
                   {"seconds", res.seconds},
                   {"threads", at::get_num_threads()},
                   {"recording", r.record_path},
                   {"populations", pops}};
  write_file_atomically(f.summary, j.dump(2) + "\n");
}

void run_simulate(const SimulateFlags& f) {
  check_output_files({{"--record", f.record}, {"--summary", f.summary}}, {{"the model", f.model}, f.config});
  std::vector<std::pair<std::string, std::string>> set;
  for (const auto& kv : f.set) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) {
      throw Error("--set: expected NAME=VALUE (a parameter of the model's [parameters], e.g. g=4 or \"J=0.2 mV\"), got '" +
                  kv + "'");
    }
    set.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  populations::PopulationModel model = populations::read_population_model(f.model, set);
  // Flags override the file's run settings (a sweep changes them without editing it).
  if (f.duration > 0) {
    populations::whole_steps(f.duration, model.network.dt, "--duration:");
    model.duration_ms = f.duration;
  }
  if (f.synchrony_bin != 0) {
    // Checked before the run, not after it when the summary is written.
    if (f.summary.empty() || f.record.empty()) {
      throw Error("--synchrony-bin sets the bins of --summary's synchrony, which needs --summary and --record");
    }
    analysis::synchrony_bin_steps(f.synchrony_bin, model.network.dt, model.steps(), "model '" + f.model + "'");
  }
  if (f.resume && f.record.empty()) throw Error("--resume continues a recording: name it with --record");
  if (f.resume && f.overwrite) throw Error("--resume continues the recording; --overwrite would replace it: give one");
  if (f.trials > 0) model.trials = f.trials;
  if (f.seed >= 0) model.seed = static_cast<uint64_t>(f.seed);
  if (f.input_seed >= 0) model.input_seed = static_cast<uint64_t>(f.input_seed);
  if (!f.connectivity.empty()) model.connectivity_per_trial = f.connectivity == "per_trial";
  if (f.threads != 0) set_intra_op_threads(f.threads);
  PopulationRunRequest request;
  request.record_path = f.record;
  request.overwrite = f.overwrite;
  request.model_path = f.model;
  request.git_commit = kGitCommit;
  request.resume = f.resume;
  if (!f.record.empty()) {
    watch_stop_signals();
    request.stop_requested = stop_requested;
  }
  const PopulationRunReport r = run_population_model(model, request);
  const auto& res = r.result;
  const double seconds_bio = model.duration_ms * 1e-3;
  if (res.trials == 0) {  // a resumed recording that held every trial
    std::cout << fmt::format("{}: nothing left to simulate: the recording held all {} trials\n", f.model, r.trials);
  } else {
    std::cout << fmt::format("{}: {} neurons, {} synapses ({:.1f} bytes each){}, drawn in {:.2f} s\n", f.model,
                             r.neurons, r.synapses,
                             r.synapses ? static_cast<double>(r.synapse_bytes) / r.synapses : 0.0,
                             r.networks > 1 ? fmt::format(" in trial {}'s network of {}, one per trial",
                                                          r.resumed_trials, r.networks)
                                            : std::string(),
                             r.build_seconds);
    if (r.resumed_trials > 0) {
      std::cout << fmt::format("resumed: trials 0-{} were in the recording already\n", r.resumed_trials - 1);
    }
    std::cout << fmt::format("simulated {} ms x {} trial{} at dt = {} ms in {:.2f} s ({} thread{}): {} spikes, {} "
                             "synaptic events ({:.3g} per second)\n",
                             model.duration_ms, res.trials, res.trials == 1 ? "" : "s", model.network.dt, res.seconds,
                             at::get_num_threads(), at::get_num_threads() == 1 ? "" : "s", res.spike_count,
                             res.synaptic_events,
                             res.seconds > 0 ? res.synaptic_events / res.seconds : 0.0);
  }
  for (size_t p = 0; p < model.network.populations.size(); ++p) {
    const double n = static_cast<double>(model.network.populations[p].size);
    std::cout << fmt::format("population {}: {} neurons, {:.2f} Hz\n", model.network.populations[p].name, n,
                             r.population_spikes[p] / (n * seconds_bio * r.trials));
  }
  if (!r.record_path.empty()) std::cout << "recording " << r.record_path << "\n";
  if (!f.summary.empty()) write_summary(f, model, r);
}

}  // namespace

Run add_simulate_command(CLI::App& app) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate a population model file (TOML or JSON: populations of NEST's iaf_psc_delta / iaf_psc_exp, sparse "
      "random projections with delays, Poisson drives; docs/POPULATIONS.md) and print each population's rate.");
  cmd->add_option("model", flags->model, "Population model file (.toml or .json)")->required();
  cmd->add_option("--record", flags->record, "Write spikes and voltmeters to this SONATA recording (HDF5)");
  cmd->add_flag("--overwrite", flags->overwrite, "Replace an existing recording");
  cmd->add_flag("--resume", flags->resume,
                "Continue the unfinished --record file of a killed or interrupted run with the same model and "
                "settings (--trials may grow): its committed trials are kept, the rest simulated");
  cmd->add_option("--set", flags->set,
                  "NAME=VALUE: replace a value of the model's [parameters] (repeatable; VALUE may have a unit or be an "
                  "expression, e.g. --set g=4 --set \"J=0.2 mV\")");
  cmd->add_option("--summary", flags->summary,
                  "Write the run and each population's rate (and, for recorded populations, ISI CV, Fano factor and "
                  "synchrony) as JSON to this file");
  cmd->add_option("--synchrony-bin", flags->synchrony_bin,
                  "Bin width in ms of --summary's synchrony (Golomb's chi): a whole number of steps (default: one "
                  "step, dt)");
  cmd->add_option("--duration", flags->duration, "Run length in ms (default: the file's)")
      ->check(number_above(0));
  cmd->add_option("--trials", flags->trials, "Independent trials simulated together (default: the file's)")
      ->check(whole_number(1, 4096));
  cmd->add_option("--seed", flags->seed, "Connectivity seed (default: the file's)")
      ->check(whole_number(0, int64_t{1} << 62));
  cmd->add_option("--connectivity", flags->connectivity,
                  "shared: every trial on the network of --seed; per_trial: trial b on the network of seed + b "
                  "(default: the file's, else shared)")
      ->check(CLI::IsMember({"shared", "per_trial"}));
  cmd->add_option("--input-seed", flags->input_seed, "Poisson drives' seed (default: the file's)")
      ->check(whole_number(0, int64_t{1} << 62));
  cmd->add_option("--threads", flags->threads, "Threads (0 = LibTorch's default); trials run in parallel")
      ->check(whole_number(0, 4096));
  return [cmd, flags] {
    if (!cmd->parsed()) return;
    flags->config = config_argument(cmd);
    if (flags->resume) flags->record = recording::RecordingFile::final_path(flags->record);  // as run's
    run_simulate(*flags);
  };
}

}  // namespace snn::app
