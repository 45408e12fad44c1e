// Drawing projections: each target's sources by the rule, then its
// synapses' weights and delays, each from its own counter-based stream;
// then one stable counting sort turns the per-target lists into rows by
// source.

#include "snn/populations/connectivity.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_set>
#include <vector>

#include "random_stream.h"
#include "snn/core/error.h"
#include "snn/core/message_number.h"

namespace snn::populations {

using detail::Purpose;
using detail::RandomStream;
using detail::draw;

std::string to_string(ConnectionRule rule) {
  switch (rule) {
    case ConnectionRule::kAllToAll:
      return "all_to_all";
    case ConnectionRule::kFixedIndegree:
      return "fixed_indegree";
    case ConnectionRule::kFixedTotalNumber:
      return "fixed_total_number";
    case ConnectionRule::kPairwiseBernoulli:
      return "pairwise_bernoulli";
  }
  return "?";
}

ConnectionRule parse_connection_rule(const std::string& name) {
  for (auto rule : {ConnectionRule::kAllToAll, ConnectionRule::kFixedIndegree, ConnectionRule::kFixedTotalNumber,
                    ConnectionRule::kPairwiseBernoulli}) {
    if (to_string(rule) == name) return rule;
  }
  throw Error("unknown connection rule '" + name +
              "': expected all_to_all, fixed_indegree, fixed_total_number or pairwise_bernoulli");
}

namespace {

// Delay in ms to whole steps of dt; `exact`: it must already be on the grid.
int32_t delay_steps(double delay, double dt, bool exact) {
  const double steps = delay / dt, rounded = std::round(steps);
  if (!std::isfinite(steps) || rounded < 1 || (exact && steps < 1 - 1e-9)) {
    throw Error("a delay of " + message_number(delay) + " ms is below one step of dt = " + message_number(dt) + " ms");
  }
  if (exact && std::fabs(steps - rounded) > 1e-9 * rounded) {
    throw Error("a delay of " + message_number(delay) + " ms is not a whole number of steps of dt = " + message_number(dt) + " ms");
  }
  if (rounded > std::numeric_limits<int16_t>::max()) {
    throw Error("a delay of " + message_number(delay) + " ms is more than 32767 steps of dt = " + message_number(dt) + " ms");
  }
  return static_cast<int32_t>(rounded);
}

// The sources of one target, in the order they were drawn.
void sources_of_target(int64_t t, int64_t n_source, const ConnectionSpec& spec, ConnectKey key, bool exclude_self,
                       std::vector<int32_t>& out) {
  const bool skip = exclude_self && t < n_source;  // whether source t is excluded
  const int64_t available = n_source - (skip ? 1 : 0);
  // Maps a draw in [0, available) to a source, stepping over t when excluded.
  const auto source = [&](int64_t v) { return static_cast<int32_t>(skip && v >= t ? v + 1 : v); };
  RandomStream stream(key.seed, Purpose::kSources, key.projection, static_cast<uint64_t>(t));
  switch (spec.rule) {
    case ConnectionRule::kAllToAll:
      for (int64_t v = 0; v < available; ++v) out.push_back(source(v));
      break;
    case ConnectionRule::kFixedIndegree:
      if (spec.multapses) {
        for (int64_t k = 0; k < spec.indegree; ++k) out.push_back(source(stream.below(available)));
      } else {
        // Floyd's sampling of indegree distinct values, kept in draw order.
        std::unordered_set<int64_t> chosen;
        chosen.reserve(static_cast<size_t>(spec.indegree) * 2);
        for (int64_t j = available - spec.indegree; j < available; ++j) {
          const int64_t v = stream.below(static_cast<uint64_t>(j) + 1);
          const int64_t pick = chosen.count(v) ? j : v;
          chosen.insert(pick);
          out.push_back(source(pick));
        }
      }
      break;
    case ConnectionRule::kPairwiseBernoulli: {
      if (spec.p <= 0) break;
      // Geometric gaps between the chosen sources: O(synapses), not O(sources).
      const double log_q = std::log1p(-spec.p);
      for (int64_t v = -1;;) {
        const double gap = spec.p >= 1 ? 0.0 : std::floor(std::log(stream.uniform_open0()) / log_q);
        if (gap >= static_cast<double>(available - v)) break;
        v += static_cast<int64_t>(gap) + 1;
        if (v >= available) break;
        out.push_back(source(v));
      }
      break;
    }
    case ConnectionRule::kFixedTotalNumber:
      break;  // drawn for all targets at once (connect)
  }
}

// fixed_total_number: `total` pairs, pair i from its own stream; without
// multapses a repeated pair draws again from the same stream.
void draw_pairs(int64_t n_source, int64_t n_target, const ConnectionSpec& spec, ConnectKey key, bool exclude_self,
                std::vector<std::vector<int32_t>>& per_target) {
  std::unordered_set<uint64_t> seen;
  if (!spec.multapses) seen.reserve(static_cast<size_t>(spec.total) * 2);
  for (int64_t i = 0; i < spec.total; ++i) {
    RandomStream stream(key.seed, Purpose::kPairs, key.projection, static_cast<uint64_t>(i));
    for (;;) {
      const int64_t s = stream.below(n_source), t = stream.below(n_target);
      if (exclude_self && s == t) continue;
      if (!spec.multapses && !seen.insert(static_cast<uint64_t>(s) * static_cast<uint64_t>(n_target) + t).second) {
        continue;
      }
      per_target[t].push_back(static_cast<int32_t>(s));
      break;
    }
  }
}

void check_spec(int64_t n_source, int64_t n_target, const ConnectionSpec& spec, bool exclude_self) {
  if (n_source < 0 || n_target < 0 || n_source > std::numeric_limits<int32_t>::max() ||
      n_target > std::numeric_limits<int32_t>::max()) {
    throw Error("population sizes must be in [0, 2^31), got " + std::to_string(n_source) + " sources and " +
                std::to_string(n_target) + " targets");
  }
  const int64_t available = n_source - (exclude_self && n_source > 0 ? 1 : 0);
  switch (spec.rule) {
    case ConnectionRule::kAllToAll:
      break;
    case ConnectionRule::kFixedIndegree:
      if (spec.indegree < 0) throw Error("fixed_indegree: indegree must be >= 0, got " + std::to_string(spec.indegree));
      if (!spec.multapses && spec.indegree > available) {
        throw Error("fixed_indegree: indegree " + std::to_string(spec.indegree) + " is more than the " +
                    std::to_string(available) + " sources a target can have without multapses" +
                    (exclude_self ? " or autapses" : ""));
      }
      if (spec.indegree > 0 && available <= 0) {
        throw Error("fixed_indegree: indegree " + std::to_string(spec.indegree) + " from a population with no " +
                    "sources to draw");
      }
      break;
    case ConnectionRule::kFixedTotalNumber: {
      if (spec.total < 0) throw Error("fixed_total_number: N must be >= 0, got " + std::to_string(spec.total));
      const double pairs = static_cast<double>(n_source) * n_target - (exclude_self ? std::min(n_source, n_target) : 0);
      if (spec.total > 0 && pairs <= 0) throw Error("fixed_total_number: no pairs to draw from");
      if (!spec.multapses && static_cast<double>(spec.total) > pairs) {
        throw Error("fixed_total_number: N = " + std::to_string(spec.total) + " is more than the " + message_number(pairs) +
                    " pairs there are without multapses");
      }
      if (spec.total > std::numeric_limits<uint32_t>::max()) throw Error("fixed_total_number: N must be below 2^32");
      break;
    }
    case ConnectionRule::kPairwiseBernoulli:
      if (!(spec.p >= 0 && spec.p <= 1)) throw Error("pairwise_bernoulli: p must be in [0, 1], got " + message_number(spec.p));
      break;
  }
}

}  // namespace

void Distribution::validate(const std::string& what) const {
  if (!std::isfinite(a) || !std::isfinite(b)) throw Error(what + ": parameters must be finite");
  if (kind == Kind::kUniform && !(b > a)) {
    throw Error(what + ": uniform needs low < high, got low " + message_number(a) + ", high " + message_number(b));
  }
  if (kind == Kind::kNormal && !(b >= 0)) throw Error(what + ": normal needs std >= 0, got " + message_number(b));
}

int32_t Projection::max_delay() const {
  return delays.defined() && delays.numel() > 0 ? delays.max().item<int32_t>() : delay_steps;
}

int64_t Projection::bytes() const {
  int64_t total = 0;
  for (const auto* t : {&offsets, &targets, &weights, &delays}) {
    if (t->defined()) total += t->numel() * static_cast<int64_t>(t->element_size());
  }
  return total;
}

double expected_synapses(int64_t n_source, int64_t n_target, const ConnectionSpec& spec, bool same_population) {
  const bool exclude_self = same_population && !spec.autapses;
  const double pairs =
      static_cast<double>(n_source) * static_cast<double>(n_target) - (exclude_self ? std::min(n_source, n_target) : 0);
  switch (spec.rule) {
    case ConnectionRule::kAllToAll:
      return pairs;
    case ConnectionRule::kFixedIndegree:
      return static_cast<double>(n_target) * static_cast<double>(spec.indegree);
    case ConnectionRule::kFixedTotalNumber:
      return static_cast<double>(spec.total);
    case ConnectionRule::kPairwiseBernoulli:
      return spec.p * pairs;
  }
  return 0;
}

Projection connect(int64_t n_source, int64_t n_target, const ConnectionSpec& spec, const SynapseSpec& synapse,
                   ConnectKey key, double dt, bool same_population) {
  if (!(dt > 0) || !std::isfinite(dt)) throw Error("dt must be a positive number of ms, got " + message_number(dt));
  const bool exclude_self = same_population && !spec.autapses;
  check_spec(n_source, n_target, spec, exclude_self);
  synapse.weight.validate("weight");
  synapse.delay.validate("delay");
  if (synapse.delay.is_constant()) {
    delay_steps(synapse.delay.a, dt, /*exact=*/true);
  } else if (synapse.delay.kind == Distribution::Kind::kUniform) {
    // The smallest delay the distribution can give must round to a step.
    delay_steps(std::max(synapse.delay.a, 0.0), dt, /*exact=*/false);
  }

  // Each target's sources, weights and delays (in parallel: each target has its own streams).
  std::vector<std::vector<int32_t>> sources(static_cast<size_t>(n_target));
  if (spec.rule == ConnectionRule::kFixedTotalNumber) {
    draw_pairs(n_source, n_target, spec, key, exclude_self, sources);
  } else {
    at::parallel_for(0, n_target, 64, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) sources_of_target(t, n_source, spec, key, exclude_self, sources[t]);
    });
  }
  std::vector<int64_t> first(static_cast<size_t>(n_target) + 1, 0);  // a target's first synapse, in target order
  for (int64_t t = 0; t < n_target; ++t) first[t + 1] = first[t] + static_cast<int64_t>(sources[t].size());
  const int64_t count = first[n_target];
  std::vector<float> weight(static_cast<size_t>(count));
  std::vector<int16_t> delay(synapse.delay.is_constant() ? 0 : static_cast<size_t>(count));
  // A bad drawn delay throws inside; at::parallel_for rethrows it here.
  at::parallel_for(0, n_target, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      RandomStream ws(key.seed, Purpose::kWeights, key.projection, static_cast<uint64_t>(t));
      RandomStream ds(key.seed, Purpose::kDelays, key.projection, static_cast<uint64_t>(t));
      for (int64_t k = first[t]; k < first[t + 1]; ++k) {
        weight[k] = static_cast<float>(draw(synapse.weight, ws));
        if (!delay.empty()) delay[k] = static_cast<int16_t>(delay_steps(draw(synapse.delay, ds), dt, false));
      }
    }
  });

  // Rows by source: a stable counting sort keeps each source's synapses in target order.
  Projection p;
  p.n_source = n_source;
  p.n_target = n_target;
  p.offsets = torch::zeros({n_source + 1}, torch::kLong);
  p.targets = torch::empty({count}, torch::kInt);
  p.weights = torch::empty({count}, torch::kFloat);
  if (!delay.empty()) p.delays = torch::empty({count}, torch::kShort);
  p.delay_steps = synapse.delay.is_constant() ? delay_steps(synapse.delay.a, dt, true) : 1;
  int64_t* offsets = p.offsets.data_ptr<int64_t>();
  for (int64_t t = 0; t < n_target; ++t) {
    for (int32_t s : sources[t]) ++offsets[s + 1];
  }
  for (int64_t s = 0; s < n_source; ++s) offsets[s + 1] += offsets[s];
  std::vector<int64_t> cursor(offsets, offsets + n_source);
  int32_t* targets = p.targets.data_ptr<int32_t>();
  float* weights = p.weights.data_ptr<float>();
  int16_t* delays = p.delays.defined() ? p.delays.data_ptr<int16_t>() : nullptr;
  for (int64_t t = 0; t < n_target; ++t) {
    for (int64_t k = first[t]; k < first[t + 1]; ++k) {
      const int64_t at = cursor[sources[t][k - first[t]]]++;
      targets[at] = static_cast<int32_t>(t);
      weights[at] = weight[k];
      if (delays) delays[at] = delay[k];
    }
  }
  return p;
}

}  // namespace snn::populations
