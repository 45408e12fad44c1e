#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.h"
#include "snn/core/error.h"
#include "snn/simulator/csv.h"
#include "snn/simulator/neuron_sim.h"

namespace snn::app {
namespace {

struct NeuronFlags {
  std::string model = "lif";
  double tau = 2.0;
  std::string decay_input = "true";
  double v_threshold = 1.0;
  std::string v_reset = "0";
  int64_t refractory = 0;
  std::string dtype = "float32";
  std::string input;
  std::string output;
};

std::optional<double> parse_v_reset(const std::string& text) {
  if (text == "none") return std::nullopt;
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw Error("--v-reset: expected a number or 'none' (soft reset), got '" + text + "'");
  }
  return v;
}

// Writes through a temporary file renamed into place, so an interrupted run
// never leaves a truncated trace under the requested name.
void write_output(const std::string& path, const NeuronSimResult& result) {
  if (path.empty()) {
    write_neuron_trace_csv(std::cout, result);
    std::cout.flush();
    if (!std::cout) throw Error("cannot write to standard output");
    return;
  }
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot open output file '" + path + "' for writing");
    write_neuron_trace_csv(out, result);
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error("cannot write output file '" + path + "'");
    }
  }
  // std::rename, not std::filesystem (whose symbols libtorch.so shadows).
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error("cannot move '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
}

void run_neuron(const NeuronFlags& f) {
  NeuronParams p;
  p.model = parse_neuron_model(f.model);
  p.tau = f.tau;
  p.decay_input = f.decay_input == "true";
  p.v_threshold = f.v_threshold;
  p.v_reset = parse_v_reset(f.v_reset);
  p.refractory = f.refractory;
  p.validate();
  const torch::ScalarType dtype = f.dtype == "float64" ? torch::kDouble : torch::kFloat;
  const CsvMatrix currents = read_csv_matrix(f.input, dtype);
  write_output(f.output, simulate_neuron_layer(currents.values, p));
}

}  // namespace

Run add_neuron_command(CLI::App& app) {
  auto flags = std::make_shared<NeuronFlags>();
  CLI::App* cmd = app.add_subcommand(
      "neuron",
      "Simulate one layer of N neurons from an input-current CSV (one row per step, one column per neuron, "
      "optional header row). Prints CSV rows t,neuron,h,s,v: h is the potential before fire/reset, v after.");
  cmd->add_option("--model", flags->model, "Neuron model: lif, if or plif (parametric LIF, --tau is its initial tau)")
      ->capture_default_str()
      ->check(CLI::IsMember({"lif", "if", "plif"}));
  cmd->add_option("--tau", flags->tau, "Membrane time constant in steps (>= 1; plif: > 1)")->capture_default_str();
  cmd->add_option("--decay-input", flags->decay_input, "Whether the input is divided by tau too: true or false")
      ->capture_default_str()
      ->check(CLI::IsMember({"true", "false"}));
  cmd->add_option("--v-threshold", flags->v_threshold, "Firing threshold; reaching it fires")->capture_default_str();
  cmd->add_option("--v-reset", flags->v_reset, "Hard reset value, or 'none' for a soft reset (v -= threshold)")
      ->capture_default_str();
  cmd->add_option("--refractory", flags->refractory, "Absolute refractory period in steps (0 = none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--dtype", flags->dtype, "Arithmetic precision: float32 or float64")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "float64"}));
  cmd->add_option("--input", flags->input, "Input-current CSV file")->required();
  cmd->add_option("--output", flags->output, "Output CSV file (default: standard output)");
  return [cmd, flags] {
    if (cmd->parsed()) run_neuron(*flags);
  };
}

}  // namespace snn::app
