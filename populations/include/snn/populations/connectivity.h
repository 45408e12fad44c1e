#pragma once
/// Sparse random projections between populations, drawn by NEST's rules
/// (fixed_indegree, fixed_total_number, pairwise_bernoulli, all_to_all) and
/// stored compactly by source, so that a spike's targets, weights and
/// delays are contiguous.
///
/// Drawn with the counter-based Philox generator keyed by (seed, projection,
/// target) (fixed_total_number: by (seed, projection, pair)): the synapses do
/// not depend on threads, trials, devices or the order projections are made
/// in. They are not NEST's synapses (NEST draws from its own generators), so
/// comparisons with NEST are statistical.

#include <torch/types.h>

#include <cstdint>
#include <string>

namespace snn::populations {

/// How sources are chosen for targets (NEST's names).
enum class ConnectionRule {
  kAllToAll,           ///< every source to every target ("all_to_all")
  kFixedIndegree,      ///< each target draws `indegree` sources ("fixed_indegree")
  kFixedTotalNumber,   ///< `total` (source, target) pairs drawn uniformly ("fixed_total_number")
  kPairwiseBernoulli,  ///< each (source, target) pair with probability `p` ("pairwise_bernoulli")
};

/// "all_to_all", ... and back (throws snn::Error naming the known rules).
std::string to_string(ConnectionRule rule);
ConnectionRule parse_connection_rule(const std::string& name);

/// A scalar drawn per synapse: constant, uniform in [low, high), or normal
/// (mean, std), NEST's names; for delays, rounded to the grid of dt.
struct Distribution {
  enum class Kind { kConstant, kUniform, kNormal };
  Kind kind = Kind::kConstant;
  double a = 0;  ///< constant value, low, or mean
  double b = 0;  ///< high, or std
  static Distribution constant(double value) { return {Kind::kConstant, value, 0}; }
  static Distribution uniform(double low, double high) { return {Kind::kUniform, low, high}; }
  static Distribution normal(double mean, double std) { return {Kind::kNormal, mean, std}; }
  bool is_constant() const { return kind == Kind::kConstant; }
  /// Throws snn::Error naming `what` for a bad form (high <= low, std < 0, not finite).
  void validate(const std::string& what) const;
};

/// The rule and its number, and NEST's options.
struct ConnectionSpec {
  ConnectionRule rule = ConnectionRule::kAllToAll;
  int64_t indegree = 0;  ///< fixed_indegree: sources per target, >= 0
  int64_t total = 0;     ///< fixed_total_number: synapses, >= 0
  double p = 0;          ///< pairwise_bernoulli: probability in [0, 1]
  bool autapses = true;  ///< whether a neuron may connect to itself (same population); NEST's default true
  bool multapses = true; ///< whether a pair may connect more than once; NEST's default true
};

/// What each synapse carries: weight (mV for iaf_psc_delta targets, pA for
/// iaf_psc_exp; positive excitatory, negative inhibitory) and delay (ms, at
/// least one step of dt).
struct SynapseSpec {
  Distribution weight = Distribution::constant(1.0);
  Distribution delay = Distribution::constant(1.0);
};

/// A projection stored by source (compressed rows): source s's synapses are
/// [offsets[s], offsets[s + 1]), in the order they were drawn.
struct Projection {
  int64_t n_source = 0, n_target = 0;
  torch::Tensor offsets;  ///< int64 [n_source + 1]
  torch::Tensor targets;  ///< int32 [synapses]: target neuron within its population
  torch::Tensor weights;  ///< float32 [synapses]
  /// int16 [synapses] delays in steps, or undefined when every synapse has
  /// `delay_steps` (a constant delay: 8 bytes per synapse instead of 10).
  torch::Tensor delays;
  int32_t delay_steps = 1;
  int64_t synapses() const { return targets.defined() ? targets.numel() : 0; }
  /// The largest delay in steps.
  int32_t max_delay() const;
  /// Bytes the synapses take (targets, weights, delays, offsets).
  int64_t bytes() const;
};

/// Where a projection's random numbers come from: the run's connectivity
/// seed and the projection's index in the model.
struct ConnectKey {
  uint64_t seed = 0;
  uint32_t projection = 0;
};

/// The synapses connect() draws for this rule, or their expected number
/// (pairwise_bernoulli): what a model will hold, known before any is drawn.
double expected_synapses(int64_t n_source, int64_t n_target, const ConnectionSpec& spec, bool same_population);

/// Draws a projection from n_source to n_target neurons. same_population:
/// source and target are one population (autapses then mean s == t). dt:
/// the grid step in ms; constant delays must be a whole number of steps (>=
/// 1), drawn ones are rounded to the grid and must stay >= 1 step. Throws
/// snn::Error naming the problem: p outside [0, 1], an in-degree above the
/// sources without multapses, more pairs than exist without multapses, a
/// delay below dt or off its grid, a negative count.
Projection connect(int64_t n_source, int64_t n_target, const ConnectionSpec& spec, const SynapseSpec& synapse,
                   ConnectKey key, double dt, bool same_population);

}  // namespace snn::populations
