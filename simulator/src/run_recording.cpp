#include "snn/simulator/run_recording.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <sstream>
#include <stdexcept>

#include "snn/core/build_info.h"
#include "snn/core/error.h"
#include "snn/recording/recording_file.h"

namespace snn {

std::vector<std::pair<int64_t, std::vector<int64_t>>> parse_population_list(const std::string& flag,
                                                                            const std::string& text,
                                                                            const NetworkConfig& c) {
  std::vector<std::pair<int64_t, std::vector<int64_t>>> out;
  const int64_t layers = static_cast<int64_t>(c.layers.size()) - 1;
  std::vector<std::string> names;
  for (int64_t i = 0; i < layers; ++i) names.push_back(population_name(c, i));
  auto add_ids = [&](const std::string& token) {
    if (out.empty()) throw Error(flag + ": '" + token + "' must follow a layer name");
    const auto dash = token.find('-');
    try {
      std::size_t used = 0;
      const int64_t a = std::stoll(token.substr(0, dash), &used);
      if (used != token.substr(0, dash).size()) throw std::invalid_argument("");
      int64_t b = a;
      if (dash != std::string::npos) {
        b = std::stoll(token.substr(dash + 1), &used);
        if (used != token.substr(dash + 1).size() || b < a) throw std::invalid_argument("");
      }
      // Bounded by the layer before expanding, so a huge range cannot exhaust memory.
      const int64_t size = c.layers[out.back().first + 1];
      if (a < 0 || b >= size) throw std::out_of_range("");
      for (int64_t i = a; i <= b; ++i) out.back().second.push_back(i);
    } catch (const std::exception&) {
      throw Error(flag + ": '" + token + "' is not a neuron id or an id range like 0-9 within layer '" +
                  names[out.back().first] + "' (0.." + std::to_string(c.layers[out.back().first + 1] - 1) + ")");
    }
  };
  std::vector<std::string> tokens;
  {
    std::stringstream in(text);
    std::string part;
    while (std::getline(in, part, ',')) tokens.push_back(part);
  }
  for (const auto& token : tokens) {
    if (token.empty()) continue;
    const auto colon = token.find(':');
    const std::string head = token.substr(0, colon);
    // A name, or ids of the layer before; a population named by digits (NIR
    // files from snnTorch name nodes "1", "3", ...) is a name.
    const bool named = std::find(names.begin(), names.end(), head) != names.end();
    if (!head.empty() && (named || !std::isdigit(static_cast<unsigned char>(head[0])))) {
      auto it = std::find(names.begin(), names.end(), head);
      // A graph network's populations are its neuron nodes; "output" still
      // names the last of them (the default of --record).
      if (it == names.end() && head == "output" && (c.graph || !c.layer_names.empty())) it = names.end() - 1;
      if (it == names.end()) {
        std::string all;
        for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
        throw Error(flag + ": no layer named '" + head + "' (this network has " + all + ")");
      }
      out.push_back({it - names.begin(), {}});
      if (colon != std::string::npos) add_ids(token.substr(colon + 1));
    } else {
      add_ids(token);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> run_provenance(const NetworkConfig& c, const RunOptions& o,
                                                                const std::string& git_commit) {
  std::string devices;
  for (const auto& d : c.devices) devices += (devices.empty() ? "" : ",") + d;
  std::vector<std::pair<std::string, std::string>> meta{{"config", c.to_json()},
                                                        {"run_options", o.to_json()},
                                                        {"checkpoint", o.checkpoint},
                                                        {"data_dir", o.data_dir},
                                                        {"split", o.split},
                                                        {"seed", std::to_string(c.seed)},
                                                        {"devices", devices}};
  for (auto& kv : software_provenance(git_commit)) meta.push_back(std::move(kv));
  return meta;
}

std::vector<std::pair<std::string, std::string>> software_provenance(const std::string& git_commit) {
  const std::time_t now = std::time(nullptr);
  char started[32];
  std::strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  char host[256] = "";
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return {{"snnsim_version", kVersion},
          {"git_commit", git_commit},
          {"libtorch_version", kTorchVersion},
          {"hdf5_version", recording::hdf5_version()},
          {"threads", std::to_string(at::get_num_threads())},
          {"host", host},
          {"start_time", started}};
}

std::vector<std::pair<std::string, std::string>> resume_provenance() {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [k, v] : software_provenance("")) {
    if (k == "start_time" || k == "threads" || k == "host") out.emplace_back("resume_" + k, v);
  }
  return out;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", b, units[u]);
}

RecordingEstimate estimate_recording(SpikingNetwork& net, const LabeledImages& split, int64_t batch_size,
                                     const RecordRequest& record, int64_t samples) {
  const NetworkConfig& c = net.config();
  const int64_t probe = std::min<int64_t>(batch_size, samples);
  const EvalResult first = evaluate(net, split, batch_size, probe);
  const double per_sample_steps = static_cast<double>(samples) * static_cast<double>(c.steps);
  RecordingEstimate e;
  e.probe_samples = probe;
  auto add = [&](const std::string& what, double bytes) {
    e.bytes += bytes;
    e.parts.emplace_back(what, bytes);
  };
  if (record.record_input) {
    const double rate = net.prepare_input(split.images.narrow(0, 0, probe)).mean().item<double>();
    add("input spikes", 16.0 * rate * static_cast<double>(c.layers[0]) * per_sample_steps);
  }
  for (const auto& [layer, ids] : record.spikes) {
    const double n = ids.empty() ? static_cast<double>(c.layers[layer + 1]) : static_cast<double>(ids.size());
    add(population_name(c, layer) + " spikes", 16.0 * first.firing_rate[layer] * n * per_sample_steps);
  }
  for (const auto& [layer, ids] : record.traces) {
    add(population_name(c, layer) + " potentials", 4.0 * static_cast<double>(ids.size()) * per_sample_steps);
  }
  const double row = 2 + 2 + 8 + 8 + 4.0 * static_cast<double>(c.layers.back() + c.layers.size() - 1) +
                     2.0 * static_cast<double>(c.steps) + 8.0 * static_cast<double>(record.spikes.size());
  add("per-sample rows", row * static_cast<double>(samples));
  return e;
}

std::string RecordingEstimate::parts_text() const {
  std::string list;
  for (const auto& [what, b] : parts) list += (list.empty() ? "" : ", ") + what + " " + human_bytes(b);
  return list;
}

std::string RecordingEstimate::describe() const {
  return fmt::format("recording estimate (before compression, firing rates of the first {} samples): {} ({})",
                     probe_samples, human_bytes(bytes), parts_text());
}

}  // namespace snn
