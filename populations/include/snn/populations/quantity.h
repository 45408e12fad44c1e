#pragma once
/// Quantities with units, and the arithmetic of model files: "1.5 ms",
/// "-g * J", "eta * V_th / (J * tau_m)" (docs/POPULATIONS.md, Parameters).
/// A quantity is held in the base units ms, mV and pA with the exponents of
/// those three dimensions; pF is pA ms / mV and Hz is 1e-3 / ms exactly, so
/// every unit a model file names is a product of the three.

#include <array>
#include <functional>
#include <map>
#include <string>

namespace snn::populations {

/// value x 10^exp10 in base units (ms, mV, pA) and its dimension: the
/// exponents of time, potential and current ({0, 0, 0}: a plain number).
/// Every unit is a power of ten of the base units, kept apart from the
/// value so that "20 kHz" is 20000 Hz and "0.5 nA" 500 pA exactly, as
/// written.
struct Quantity {
  double value = 0;
  int exp10 = 0;
  std::array<int, 3> dim{0, 0, 0};
  bool dimensionless() const { return dim == std::array<int, 3>{0, 0, 0}; }
};

/// What a model file's field holds: each kind's dimension and documented
/// unit (the unit a bare number is in).
enum class Kind { kNumber, kTime, kPotential, kCurrent, kCapacitance, kRate };

/// "a time (ms)", "a rate (Hz)", "a number", ...
std::string kind_name(Kind k);
/// The dimension of kind `k`.
std::array<int, 3> dimension_of(Kind k);
/// A dimension in words: "a time (ms)", or "mV ms" for one no kind has.
std::string dimension_name(const std::array<int, 3>& dim);

/// Named values an expression may use; `lookup` evaluates a name on demand
/// (so that parameters may refer to each other in any order) and returns
/// false for a name it does not know.
using NameLookup = std::function<bool(const std::string& name, Quantity& out)>;

/// Evaluates `text`: numbers (1.5, 2e-3), a number or a parenthesised
/// expression followed by a unit (ms s us mV V uV pA nA uA pF nF Hz kHz),
/// names through `lookup`, + - * / and parentheses. Throws snn::Error with
/// the problem ("'x' is not defined", "adds a time (ms) to a potential
/// (mV)", "unexpected ')' at character 7"); the caller prefixes the entry.
Quantity evaluate_expression(const std::string& text, const NameLookup& lookup = {});

/// The value of `q` as kind `k` in k's documented unit. A plain number is
/// taken to be in that unit already (as a bare number in a model file is).
/// Throws snn::Error "is <q's dimension>, not <kind>" on a mismatch.
double value_as(const Quantity& q, Kind k);

/// True when `name` is one of the units above.
bool is_unit(const std::string& name);

}  // namespace snn::populations
