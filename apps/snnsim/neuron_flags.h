#pragma once
// The neuron flags shared by `snnsim neuron` and `snnsim train`.

#include <CLI/CLI.hpp>

#include <string>

#include "snn/neurons/functional.h"

namespace snn::app {

struct NeuronFlags {
  std::string model = "lif";
  double tau = 2.0;
  std::string decay_input = "true";
  double v_threshold = 1.0;
  std::string v_reset = "0";
  int64_t refractory = 0;
  std::string surrogate = "atan";
};

/// Adds --model, --tau, --decay-input, --v-threshold, --v-reset,
/// --refractory and, with_surrogate, --surrogate. With graph_files, --model
/// also takes a network graph file (train --model net.toml); with
/// nest_models, NEST's iaf_psc_delta and iaf_psc_exp (snnsim neuron).
void add_neuron_flags(CLI::App* cmd, NeuronFlags& flags, bool with_surrogate, bool graph_files = false,
                      bool nest_models = false);
/// The flags add_neuron_flags adds for the SpikingJelly models only.
const std::vector<std::string>& spikingjelly_neuron_flags();
/// Whether a --model value names a graph file rather than lif, if or plif.
bool is_graph_file_model(const std::string& model);

/// The validated parameters; throws snn::Error naming a bad value.
NeuronParams neuron_params(const NeuronFlags& flags);

}  // namespace snn::app
