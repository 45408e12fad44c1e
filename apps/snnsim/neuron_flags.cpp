#include "neuron_flags.h"

#include <unistd.h>

#include "snn/core/error.h"
#include "validators.h"

namespace snn::app {

bool is_graph_file_model(const std::string& model) { return model != "lif" && model != "if" && model != "plif"; }

const std::vector<std::string>& spikingjelly_neuron_flags() {
  static const std::vector<std::string> flags{"--tau", "--decay-input", "--v-threshold", "--v-reset", "--refractory"};
  return flags;
}

void add_neuron_flags(CLI::App* cmd, NeuronFlags& f, bool with_surrogate, bool graph_files, bool nest_models) {
  if (nest_models) {
    cmd->add_option("--model", f.model,
                    "Neuron model: lif, if or plif (SpikingJelly's; plif: parametric LIF, --tau is its initial "
                    "tau), or NEST's iaf_psc_delta or iaf_psc_exp (parameters by --nest NAME=VALUE)")
        ->capture_default_str()
        ->check(one_of({"lif", "if", "plif", "iaf_psc_delta", "iaf_psc_exp"}));
  } else if (!graph_files) {
    cmd->add_option("--model", f.model, "Neuron model: lif, if or plif (parametric LIF, --tau is its initial tau)")
        ->capture_default_str()
        ->check(one_of({"lif", "if", "plif"}));
  } else {
    cmd->add_option("--model", f.model,
                    "Neuron model: lif, if or plif (parametric LIF, --tau is its initial tau); or a network graph "
                    "file (.toml, .json or .nir, docs/GRAPHS.md) that defines the whole network")
        ->capture_default_str()
        ->check(CLI::Validator(
            [](std::string& v) -> std::string {
              if (!is_graph_file_model(v) || ::access(v.c_str(), R_OK) == 0) return "";
              return "expected lif, if, plif or a readable graph file (.toml, .json, .nir), got '" + v + "'";
            },
            "lif|if|plif|FILE"));
  }
  // The limits of tau and the threshold are NeuronParams::validate()'s; here only their form.
  cmd->add_option("--tau", f.tau, "Membrane time constant in steps (>= 1; plif: > 1)")
      ->capture_default_str()
      ->check(finite_number());
  cmd->add_option("--decay-input", f.decay_input, "Whether the input is divided by tau too: true or false")
      ->capture_default_str()
      ->check(one_of({"true", "false"}));
  cmd->add_option("--v-threshold", f.v_threshold, "Firing threshold; reaching it fires")
      ->capture_default_str()
      ->check(finite_number());
  cmd->add_option("--v-reset", f.v_reset, "Hard reset value, or 'none' for a soft reset (v -= threshold)")
      ->capture_default_str();
  cmd->add_option("--refractory", f.refractory, "Absolute refractory period in steps (0 = none)")
      ->capture_default_str()
      ->check(whole_number(0, int64_t{1} << 30));
  if (with_surrogate) {
    cmd->add_option("--surrogate", f.surrogate, "Surrogate gradient: sigmoid[:alpha] or atan[:alpha]")
        ->capture_default_str();
  }
}

NeuronParams neuron_params(const NeuronFlags& f) {
  NeuronParams p;
  p.model = parse_neuron_model(f.model);
  p.tau = f.tau;
  p.decay_input = f.decay_input == "true";
  p.v_threshold = f.v_threshold;
  if (f.v_reset == "none") {
    p.v_reset = std::nullopt;
  } else {
    std::size_t used = 0;
    try {
      p.v_reset = std::stod(f.v_reset, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != f.v_reset.size()) {
      throw Error("--v-reset: expected a number or 'none' (soft reset), got '" + f.v_reset + "'");
    }
  }
  p.refractory = f.refractory;
  p.surrogate = Surrogate::parse(f.surrogate);
  // Every value here is a flag's (the defaults are valid).
  naming_flags({"--tau", "--v-threshold", "--v-reset", "--refractory", "--surrogate"}, [&] { p.validate(); });
  return p;
}

}  // namespace snn::app
