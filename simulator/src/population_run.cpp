// `snnsim simulate`: a population model built, simulated and recorded.

#include "snn/simulator/population_run.h"

#include <algorithm>
#include <chrono>

#include "snn/core/error.h"
#include "snn/recording/recording_file.h"
#include "snn/simulator/run_recording.h"

namespace snn {

using populations::PopulationNetwork;

namespace {

// The recording of a finished run: trials are samples (label 0, one class).
void write_recording(const populations::PopulationModel& model, const populations::PopulationRunResult& r,
                     const PopulationRunRequest& request) {
  const auto& pops = model.network.populations;
  recording::RecordingLayout layout;
  layout.classes = 1;
  layout.steps = r.steps;
  layout.dt_ms = model.network.dt;
  recording::SampleBatch batch;
  const int64_t B = r.trials;
  batch.labels = torch::zeros({B}, torch::kLong);
  batch.predicted = torch::zeros({B}, torch::kLong);
  batch.output_counts = torch::zeros({B, 1}, torch::kLong);
  for (size_t p = 0; p < pops.size(); ++p) {
    const auto& list = r.spikes[p];
    const bool recorded = model.record.record_spikes.empty() ||
                          std::find(model.record.record_spikes.begin(), model.record.record_spikes.end(),
                                    pops[p].name) != model.record.record_spikes.end();
    if (recorded) {
      layout.spikes.push_back({pops[p].name, pops[p].size, static_cast<int64_t>(p) + 1, {}});
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
    if (r.v[p].defined()) {
      const int64_t width = r.v[p].size(2);
      std::vector<int64_t> ids(static_cast<size_t>(width));
      for (int64_t i = 0; i < width; ++i) ids[i] = i;
      layout.traces.push_back({pops[p].name, pops[p].size, static_cast<int64_t>(p) + 1, ids});
      batch.traces.push_back(r.v[p].to(torch::kFloat));
    }
  }
  std::vector<std::pair<std::string, std::string>> meta{
      {"config", model.json},
      {"kind", "populations"},
      {"model_file", request.model_path},
      {"seed", std::to_string(model.seed)},
      {"input_seed", std::to_string(model.input_seed)},
      {"connectivity", model.connectivity_per_trial ? "per_trial" : "shared"}};
  for (auto& kv : software_provenance(request.git_commit)) meta.push_back(std::move(kv));
  recording::RecordingFile file(request.record_path, layout, meta, request.overwrite);
  file.append(batch);
  file.finish("complete", {{"wall_seconds", std::to_string(r.seconds)}});
}

}  // namespace

PopulationRunReport run_population_model(const populations::PopulationModel& model,
                                         const PopulationRunRequest& request) {
  PopulationRunReport report;
  populations::PopulationRunOptions options = model.record;
  options.steps = model.steps();
  options.trials = model.trials;
  options.input_seed = model.input_seed;
  // One network for all trials, or trial b alone on the network of seed + b.
  report.networks = model.connectivity_per_trial ? model.trials : 1;
  if (model.connectivity_per_trial) options.trials = 1;
  for (int64_t b = 0; b < report.networks; ++b) {
    const auto start = std::chrono::steady_clock::now();
    const PopulationNetwork net(model.network, model.seed + static_cast<uint64_t>(b));
    report.build_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (b == 0) {
      report.neurons = net.neurons();
      report.synapses = net.synapses();
    }
    report.synapse_bytes = std::max(report.synapse_bytes, net.synapse_bytes());
    options.first_trial = model.connectivity_per_trial ? b : 0;
    populations::append_trials(report.result, net.simulate(options));
  }
  if (!request.record_path.empty()) {
    write_recording(model, report.result, request);
    report.record_path = request.record_path;
  }
  return report;
}

}  // namespace snn
