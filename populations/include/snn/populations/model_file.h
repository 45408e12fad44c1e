#pragma once
/// The population model file (TOML or JSON; docs/POPULATIONS.md): the
/// populations, projections and Poisson drives of a PopulationNetworkSpec,
/// the run's length, trials and seeds, and what to record. Quantities are
/// numbers in the documented unit (ms, mV, pA, pF, Hz) or expressions with
/// units ("1.5 ms", "20 kHz", "-g * J"; quantity.h) over the file's
/// [parameters], checked against the quantity's dimension.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "snn/populations/population_network.h"

namespace snn::populations {

/// Everything a model file says.
struct PopulationModel {
  PopulationNetworkSpec network;
  double duration_ms = 0;       ///< run length (a whole number of steps of dt)
  int64_t trials = 1;           ///< independent trials simulated together
  uint64_t seed = 1;            ///< connectivity seed
  uint64_t input_seed = 1;      ///< Poisson drives' seed
  /// Each trial its own network: trial b is drawn with connectivity seed
  /// seed + b (file key connectivity = "per_trial"; default "shared": every
  /// trial on the network of `seed`).
  bool connectivity_per_trial = false;
  PopulationRunOptions record;  ///< record_spikes, record_v, voltmeter_neurons (steps and trials set from above)
  std::string json;             ///< the model as JSON (provenance: a recording's /meta config)
  /// The run length in steps of dt.
  int64_t steps() const;
};

/// Parses a model; `where` names it in messages ("model 'brunel.toml'").
/// Throws snn::Error with one line naming the entry (population 'E',
/// projection 2 (E -> I), Poisson drive 'noise', the key) and the problem:
/// an unknown key, model or rule, a value of the wrong type or unit, a
/// delay below dt or off its grid, a probability outside [0, 1], a negative
/// rate, an undefined population. Connectivity limits that need the sizes
/// (in-degree above the sources without multapses) are checked when the
/// network is built (PopulationNetwork), with the same naming.
///
/// `set` replaces [parameters] values (name, expression) before anything is
/// evaluated, as a sweep's point or `snnsim simulate --set g=4` does; a
/// name the file's [parameters] lacks is an error. PopulationModel::json
/// holds the values used.
PopulationModel parse_population_model(const std::string& text, const std::string& where,
                                       const std::vector<std::pair<std::string, std::string>>& set = {});
/// Reads and parses the file at `path`.
PopulationModel read_population_model(const std::string& path,
                                      const std::vector<std::pair<std::string, std::string>>& set = {});

/// The value of an iaf model parameter written with or without a unit
/// ("10 ms", "0.25 nF", "-70"), in NEST's unit for it (ms, pF, pA, mV): a
/// model file's `params` and `snnsim neuron --nest NAME=VALUE` read it so.
/// Throws snn::Error for an unknown name (check_iaf_parameter_name's), an
/// expression that does not parse, or a unit of another dimension.
double iaf_parameter_value(IafModel model, const std::string& name, const std::string& text);

}  // namespace snn::populations
