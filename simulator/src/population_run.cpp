// `snnsim simulate`: a population model built, simulated and recorded.

#include "snn/simulator/population_run.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

#include "snn/core/error.h"
#include "snn/recording/detail/schema_check.h"
#include "snn/recording/recording_file.h"
#include "snn/recording/recording_info.h"
#include "snn/simulator/run_recording.h"

namespace snn {

using populations::PopulationNetwork;

namespace {

bool recorded(const populations::PopulationModel& model, const std::string& name) {
  const auto& r = model.record.record_spikes;
  return r.empty() || std::find(r.begin(), r.end(), name) != r.end();
}

// The recording's layout: trials are samples (label 0, one class), each
// trial's spikes per population (recorded or not) in /samples/layer_spikes.
recording::RecordingLayout layout_of(const populations::PopulationModel& model) {
  const auto& pops = model.network.populations;
  recording::RecordingLayout layout;
  layout.classes = 1;
  layout.steps = model.steps();
  layout.dt_ms = model.network.dt;
  layout.layers = static_cast<int64_t>(pops.size());
  const int64_t width = model.record.voltmeter_neurons;
  for (size_t p = 0; p < pops.size(); ++p) {
    const int64_t layer = static_cast<int64_t>(p) + 1;
    if (recorded(model, pops[p].name)) layout.spikes.push_back({pops[p].name, pops[p].size, layer, {}});
    const auto& v = model.record.record_v;
    if (std::find(v.begin(), v.end(), pops[p].name) != v.end()) {
      std::vector<int64_t> ids(static_cast<size_t>(std::min(width, pops[p].size)));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
      layout.traces.push_back({pops[p].name, pops[p].size, layer, ids});
    }
  }
  return layout;
}

// The /meta attributes a resumed recording must share with this run: the
// same model (after --set), connectivity and input streams.
std::vector<std::pair<std::string, std::string>> identity(const populations::PopulationModel& model) {
  return {{"config", model.json},
          {"seed", std::to_string(model.seed)},
          {"input_seed", std::to_string(model.input_seed)},
          {"connectivity", model.connectivity_per_trial ? "per_trial" : "shared"}};
}

// Trials simulated by one call as one batch of samples.
recording::SampleBatch batch_of(const populations::PopulationModel& model, const populations::PopulationRunResult& r) {
  const auto& pops = model.network.populations;
  const int64_t B = r.trials, P = static_cast<int64_t>(pops.size());
  recording::SampleBatch batch;
  batch.labels = torch::zeros({B}, torch::kLong);
  batch.predicted = torch::zeros({B}, torch::kLong);
  batch.output_counts = torch::zeros({B, 1}, torch::kLong);
  batch.layer_spikes = torch::tensor(r.trial_population_spikes, torch::kLong).reshape({B, P});
  for (int64_t p = 0; p < P; ++p) {
    if (recorded(model, pops[p].name)) {
      const auto& list = r.spikes[p];
      recording::SpikeEvents e;
      const int64_t n = list.size();
      e.sample = torch::empty({n}, torch::kLong);
      e.step = torch::empty({n}, torch::kLong);
      e.node = torch::empty({n}, torch::kLong);
      e.per_sample = torch::zeros({B}, torch::kLong);
      int64_t* sp = e.sample.data_ptr<int64_t>();
      int64_t* st = e.step.data_ptr<int64_t>();
      int64_t* nd = e.node.data_ptr<int64_t>();
      int64_t* per = e.per_sample.data_ptr<int64_t>();
      for (int64_t k = 0; k < n; ++k) {
        sp[k] = list.trial[k];
        st[k] = list.step[k];
        nd[k] = list.neuron[k];
        ++per[list.trial[k]];
      }
      batch.spikes.push_back(e);
    }
    if (r.v[p].defined()) batch.traces.push_back(r.v[p].to(torch::kFloat));
  }
  return batch;
}

}  // namespace

PopulationRunReport run_population_model(const populations::PopulationModel& model,
                                         const PopulationRunRequest& request) {
  PopulationRunReport report;
  const int64_t n_pop = static_cast<int64_t>(model.network.populations.size());
  report.trials = model.trials;
  report.population_spikes.assign(static_cast<size_t>(n_pop), 0);
  const bool recording = !request.record_path.empty();
  if (request.resume && !recording) throw Error("resuming a population run needs its recording");
  populations::check_run_size(model.steps(), model.trials);

  // Trials go a group at a time: one per network with a network per trial;
  // with a recording, as many as run in parallel (each committed before the
  // next group starts); otherwise all at once.
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  const int64_t group = model.connectivity_per_trial ? 1 : recording ? threads : std::max<int64_t>(1, model.trials);
  populations::PopulationRunOptions options = model.record;
  options.steps = model.steps();
  options.input_seed = model.input_seed;
  options.stop_requested = request.stop_requested;
  std::unique_ptr<PopulationNetwork> net;
  report.networks = 0;
  // The network of trial `first` (one in memory at a time).
  const auto draw = [&](int64_t first) {
    const auto start = std::chrono::steady_clock::now();
    net.reset();
    net = std::make_unique<PopulationNetwork>(
        model.network, model.seed + (model.connectivity_per_trial ? static_cast<uint64_t>(first) : 0));
    report.build_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (report.networks++ == 0) {
      report.neurons = net->neurons();
      report.synapses = net->synapses();
    }
    report.synapse_bytes = std::max(report.synapse_bytes, net->synapse_bytes());
  };

  // The file before the first step, after the first network (a model whose
  // connectivity cannot be drawn writes nothing): a bad path, an existing
  // file or a resume that does not fit is refused before anything is
  // simulated.
  std::optional<recording::RecordingFile> file;
  std::error_code no_error;  // an unreadable path counts as absent; opening it then says why
  int64_t done = 0;  // trials already in the file
  if (recording) {
    const recording::RecordingLayout layout = layout_of(model);
    const std::string partial = request.record_path + ".partial";
    if (request.resume) {
      // Read-only first: a resume refused here leaves the file as it was.
      const std::string unfinished = std::filesystem::exists(partial, no_error) ? partial : request.record_path;
      if (std::filesystem::exists(unfinished, no_error)) {
        const int64_t held = recording::read_recording_info(unfinished).samples;
        if (held > model.trials) {
          throw Error("the recording '" + unfinished + "' already holds " + std::to_string(held) +
                      " trials, more than the run's " + std::to_string(model.trials));
        }
      }
      file.emplace(recording::RecordingFile::resume(request.record_path, layout, identity(model)));
      done = file->samples_committed();
      const torch::Tensor prior = file->read_rows().layer_spikes.sum(0);
      for (int64_t p = 0; p < n_pop; ++p) report.population_spikes[p] = prior[p].item<int64_t>();
    } else {
      if (std::filesystem::exists(partial, no_error) && !request.overwrite) {
        throw Error("'" + partial + "' holds an unfinished run: continue it with --resume, keep what it holds with "
                    "'snnsim recover', or replace it with --overwrite");
      }
      draw(0);
      auto meta = identity(model);
      meta.insert(meta.begin() + 1, {{recording::schema::attr_kind.name, recording::schema::kPopulationsKind},
                                     {"model_file", request.model_path}});
      for (auto& kv : software_provenance(request.git_commit)) meta.push_back(std::move(kv));
      file.emplace(request.record_path, layout, meta, request.overwrite);
    }
  }
  report.resumed_trials = done;

  // A stop request ends the run with `committed` trials in the file.
  const auto stop = [&](int64_t committed) {
    const std::string where = file ? file->partial_path() : std::string();
    if (file) file->finish("aborted");
    throw Interrupted("interrupted: stopped after " + std::to_string(committed) + " of " +
                      std::to_string(model.trials) + " trials" +
                      (where.empty() ? std::string()
                                     : "; the recording '" + where + "' holds them (status aborted): continue it "
                                       "with --resume, or make it a normal file with 'snnsim recover'"));
  };
  const auto start_wall = std::chrono::steady_clock::now();
  // Taken now: the resume's start, written when the file is finished.
  const auto resumed_by = request.resume ? resume_provenance() : std::vector<std::pair<std::string, std::string>>();
  for (int64_t first = done; first < model.trials; first += group) {
    options.first_trial = first;
    options.trials = std::min(group, model.trials - first);
    if (!net || (model.connectivity_per_trial && first != done)) draw(first);
    populations::PopulationRunResult part;
    try {
      part = net->simulate(options);
    } catch (const Interrupted&) {
      stop(first);  // the group in progress is dropped
    }
    for (int64_t p = 0; p < n_pop; ++p) report.population_spikes[p] += part.population_spikes[p];
    if (file) {
      file->append(batch_of(model, part));
      file->commit();
      // Committed: only the counts stay in memory, however long the run.
      part.spikes.assign(part.spikes.size(), {});
      part.v.assign(part.v.size(), torch::Tensor());
    }
    populations::append_trials(report.result, part);
    const int64_t now_done = first + options.trials;
    if (now_done < model.trials && request.stop_requested && request.stop_requested()) stop(now_done);
  }
  // A resume that found every trial committed drew no network: the report
  // still describes the model's (trial 0's, as a fresh run's does).
  if (report.networks == 0) draw(0);
  if (file) {
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_wall).count();
    // wall_time_s is this invocation's time (snnsim run's name for it).
    std::vector<std::pair<std::string, std::string>> end{{"wall_time_s", std::to_string(wall)}};
    end.insert(end.end(), resumed_by.begin(), resumed_by.end());
    file->finish("complete", end);
    report.record_path = request.record_path;
  }
  return report;
}

}  // namespace snn
