#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "neuron_flags.h"
#include "validators.h"
#include "snn/core/atomic_file.h"
#include "snn/core/error.h"
#include "snn/simulator/csv.h"
#include "snn/simulator/neuron_sim.h"

namespace snn::app {
namespace {

struct NeuronCommandFlags {
  NeuronFlags neuron;
  std::string dtype = "float32";
  std::string input;
  std::string output;
};

// The trace goes to a temporary name renamed into place only when complete
// (snn::write_file_atomically): a full disk or a kill never leaves a
// truncated trace, nor a stray temporary, under the requested name.
void write_output(const std::string& path, const NeuronSimResult& result) {
  if (path.empty()) {
    write_neuron_trace_csv(std::cout, result);
    std::cout.flush();
    if (!std::cout) throw Error("cannot write to standard output");
    return;
  }
  std::ostringstream out;
  write_neuron_trace_csv(out, result);
  write_file_atomically(path, out.str());
}

// Checked before simulating, so that a directory given as --output fails at
// once instead of after the whole simulation.
void check_output(const std::string& path) {
  struct stat st {};
  if (!path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw Error("--output '" + path + "' is a directory; give the name of a CSV file to write");
  }
}

void run_neuron(const NeuronCommandFlags& f) {
  const NeuronParams p = neuron_params(f.neuron);
  check_output(f.output);
  const torch::ScalarType dtype = f.dtype == "float64" ? torch::kDouble : torch::kFloat;
  const CsvMatrix currents = read_csv_matrix(f.input, dtype);
  write_output(f.output, simulate_neuron_layer(currents.values, p));
}

}  // namespace

Run add_neuron_command(CLI::App& app) {
  auto flags = std::make_shared<NeuronCommandFlags>();
  CLI::App* cmd = app.add_subcommand(
      "neuron",
      "Simulate one layer of N neurons from an input-current CSV (one row per step, one column per neuron, "
      "optional header row). Prints CSV rows t,neuron,h,s,v: h is the potential before fire/reset, v after.");
  add_neuron_flags(cmd, flags->neuron, /*with_surrogate=*/false);
  cmd->add_option("--dtype", flags->dtype, "Arithmetic precision: float32 or float64")
      ->capture_default_str()
      ->check(one_of({"float32", "float64"}));
  cmd->add_option("--input", flags->input, "Input-current CSV file")->required();
  cmd->add_option("--output", flags->output, "Output CSV file (default: standard output)");
  return [cmd, flags] {
    if (cmd->parsed()) run_neuron(*flags);
  };
}

}  // namespace snn::app
