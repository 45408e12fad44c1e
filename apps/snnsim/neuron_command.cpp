#include <sys/stat.h>

#include <iostream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "neuron_flags.h"
#include "validators.h"
#include "snn/core/atomic_file.h"
#include "snn/core/error.h"
#include "snn/populations/model_file.h"
#include "snn/simulator/csv.h"
#include "snn/simulator/neuron_sim.h"

namespace snn::app {
namespace {

struct NeuronCommandFlags {
  NeuronFlags neuron;
  std::vector<std::string> nest;  // NAME=VALUE settings of a NEST model
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

bool is_nest_model(const std::string& model) { return model.rfind("iaf_", 0) == 0; }

// A NEST model's options from --nest NAME=VALUE settings (NEST's names and units).
IafOptions nest_options(const NeuronCommandFlags& f) {
  IafOptions o(parse_iaf_model(f.neuron.model));
  for (const std::string& setting : f.nest) {
    const auto eq = setting.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error("--nest: expected NAME=VALUE (for example tau_m=20), got '" + setting + "'");
    }
    const std::string name = setting.substr(0, eq), text = setting.substr(eq + 1);
    double value = 0;
    try {  // with a unit or without, as a model file's params ("10 ms", 10)
      value = populations::iaf_parameter_value(o.model(), name, text);
    } catch (const Error& e) {
      throw Error("--nest " + name + ": " + e.what());
    }
    set_iaf_parameter(o, name, value);
  }
  o.validate();
  return o;
}

void run_neuron(const NeuronCommandFlags& f, const CLI::App& cmd) {
  const bool nest = is_nest_model(f.neuron.model);
  if (nest) {
    for (const std::string& flag : spikingjelly_neuron_flags()) {
      if (cmd.count(flag) > 0) {
        throw Error(flag + " is a parameter of lif, if and plif; " + f.neuron.model +
                    " takes NEST's parameters by --nest NAME=VALUE (docs/NEURONS.md)");
      }
    }
  } else if (!f.nest.empty()) {
    throw Error("--nest sets parameters of iaf_psc_delta and iaf_psc_exp, not of --model " + f.neuron.model);
  }
  const IafOptions iaf = nest ? nest_options(f) : IafOptions();
  const NeuronParams p = nest ? NeuronParams{} : neuron_params(f.neuron);
  check_output(f.output);
  check_output_files({{"--output", f.output}}, {{"--input", f.input}, config_argument(&cmd)});
  const torch::ScalarType dtype = f.dtype == "float64" ? torch::kDouble : torch::kFloat;
  const CsvMatrix currents = read_csv_matrix(f.input, dtype);
  write_output(f.output, nest ? simulate_iaf_layer(currents.values, iaf) : simulate_neuron_layer(currents.values, p));
}

}  // namespace

Run add_neuron_command(CLI::App& app) {
  auto flags = std::make_shared<NeuronCommandFlags>();
  CLI::App* cmd = app.add_subcommand(
      "neuron",
      "Simulate one layer of N neurons from an input-current CSV (one row per step, one column per neuron, "
      "optional header row). Prints CSV rows t,neuron,h,s,v: h is the potential before fire/reset, v after. "
      "NEST's models take the input as a current in pA and print potentials in mV.");
  add_neuron_flags(cmd, flags->neuron, /*with_surrogate=*/false, /*graph_files=*/false, /*nest_models=*/true);
  cmd->add_option("--nest", flags->nest,
                  "A parameter of iaf_psc_delta or iaf_psc_exp by NEST's name and unit, NAME=VALUE (repeatable): "
                  "dt, C_m, tau_m, t_ref, E_L, V_th, V_reset, I_e, V_min, tau_syn_ex, tau_syn_in");
  cmd->add_option("--dtype", flags->dtype, "Arithmetic precision: float32 or float64")
      ->capture_default_str()
      ->check(one_of({"float32", "float64"}));
  cmd->add_option("--input", flags->input, "Input-current CSV file")->required();
  cmd->add_option("--output", flags->output, "Output CSV file (default: standard output)");
  return [cmd, flags] {
    if (cmd->parsed()) run_neuron(*flags, *cmd);
  };
}

}  // namespace snn::app
