// The population network: validating the model, drawing its projections,
// and the event-driven loop of population_network.h's diagram, one trial
// per thread.

#include "snn/populations/population_network.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cmath>
#include <set>
#include <sstream>

#include "random_stream.h"
#include "snn/core/error.h"

namespace snn::populations {

using detail::Purpose;
using detail::RandomStream;
using neurons::detail::IafCoeffs;

namespace {

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Trials and steps share the 40-bit id of a Poisson stream.
constexpr int64_t kMaxSteps = int64_t{1} << 28;
constexpr int64_t kMaxTrials = int64_t{1} << 12;

}  // namespace

int64_t PopulationNetworkSpec::population_index(const std::string& name) const {
  for (size_t i = 0; i < populations.size(); ++i) {
    if (populations[i].name == name) return static_cast<int64_t>(i);
  }
  std::string known;
  for (const auto& p : populations) known += (known.empty() ? "" : ", ") + p.name;
  throw Error("population '" + name + "' is not defined (the model defines " + (known.empty() ? "none" : known) + ")");
}

void PopulationNetworkSpec::validate() const {
  if (!(dt > 0) || !std::isfinite(dt)) throw Error("dt must be a positive number of ms, got " + num(dt));
  if (populations.empty()) throw Error("the model defines no population");
  std::set<std::string> names;
  for (const auto& p : populations) {
    if (p.name.empty()) throw Error("a population has no name");
    if (!names.insert(p.name).second) throw Error("population '" + p.name + "' is defined twice");
    if (p.size <= 0 || p.size > (int64_t{1} << 31) - 1) {
      throw Error("population '" + p.name + "': size must be in [1, 2^31), got " + std::to_string(p.size));
    }
    try {
      p.neuron.validate();
    } catch (const Error& e) {
      throw Error("population '" + p.name + "': " + e.what());
    }
    if (std::fabs(p.neuron.dt() - dt) > 1e-12 * dt) {
      throw Error("population '" + p.name + "': its model's dt " + num(p.neuron.dt()) + " ms is not the network's " +
                  num(dt) + " ms");
    }
    if (p.neuron.I_e_neurons().defined() &&
        (p.neuron.I_e_neurons().dim() != 1 || p.neuron.I_e_neurons().size(0) != p.size)) {
      throw Error("population '" + p.name + "': I_e per neuron must have its " + std::to_string(p.size) + " values");
    }
  }
  for (size_t i = 0; i < projections.size(); ++i) {
    const auto& pr = projections[i];
    const std::string what = "projection " + std::to_string(i) + " (" + pr.source + " -> " + pr.target + ")";
    try {
      population_index(pr.source);
      population_index(pr.target);
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
  }
  for (const auto& d : drives) {
    const std::string what = "Poisson drive '" + d.name + "'";
    try {
      population_index(d.target);
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
    if (!(d.rate_hz >= 0) || !std::isfinite(d.rate_hz)) {
      throw Error(what + ": rate must be a finite number of Hz >= 0, got " + num(d.rate_hz));
    }
    if (!std::isfinite(d.weight)) throw Error(what + ": weight must be finite, got " + num(d.weight));
  }
}

PopulationNetwork::PopulationNetwork(PopulationNetworkSpec spec, uint64_t connectivity_seed) : spec_(std::move(spec)) {
  spec_.validate();
  for (const auto& p : spec_.populations) {
    first_.push_back(total_);
    total_ += p.size;
  }
  for (size_t i = 0; i < spec_.projections.size(); ++i) {
    const auto& pr = spec_.projections[i];
    const int64_t s = spec_.population_index(pr.source), t = spec_.population_index(pr.target);
    try {
      projections_.push_back(connect(spec_.populations[s].size, spec_.populations[t].size, pr.connection, pr.synapse,
                                     ConnectKey{connectivity_seed, static_cast<uint32_t>(i)}, spec_.dt, s == t));
    } catch (const Error& e) {
      throw Error("projection " + std::to_string(i) + " (" + pr.source + " -> " + pr.target + "): " + e.what());
    }
  }
}

int64_t PopulationNetwork::synapses() const {
  int64_t n = 0;
  for (const auto& p : projections_) n += p.synapses();
  return n;
}

int64_t PopulationNetwork::synapse_bytes() const {
  int64_t n = 0;
  for (const auto& p : projections_) n += p.bytes();
  return n;
}

namespace {

// A projection as the loop reads it: plain pointers and global target ids.
struct Route {
  const int64_t* offsets;
  const int32_t* targets;
  const float* weights;
  const int16_t* delays;  // null: every synapse has `delay`
  int32_t delay;
  int64_t target_first;
};

struct Population {
  int64_t first, size;
  IafCoeffs<double> c;
  std::vector<double> i_e;  // each neuron's constant current (c.i_e plus its own)
  std::vector<Route> out;   // projections leaving it
};

// One trial's spikes of one step, by global neuron id (ascending).
struct TrialRecord {
  std::vector<std::vector<int32_t>> step, neuron;  // per population
  std::vector<int64_t> count;                      // per population
  int64_t spikes = 0, events = 0;
};

}  // namespace

PopulationRunResult PopulationNetwork::simulate(const PopulationRunOptions& o) const {
  if (o.steps <= 0 || o.steps > kMaxSteps) {
    throw Error("the run must have between 1 and 2^28 steps, got " + std::to_string(o.steps));
  }
  if (o.trials <= 0 || o.trials > kMaxTrials) {
    throw Error("trials must be between 1 and 4096, got " + std::to_string(o.trials));
  }
  const int64_t n_pop = static_cast<int64_t>(spec_.populations.size());
  std::vector<bool> record(n_pop, o.record_spikes.empty()), voltmeter(n_pop, false);
  for (const auto& name : o.record_spikes) record[spec_.population_index(name)] = true;
  for (const auto& name : o.record_v) voltmeter[spec_.population_index(name)] = true;
  if (!o.record_v.empty() && o.voltmeter_neurons <= 0) {
    throw Error("voltmeters need a number of neurons to record (>= 1), got " + std::to_string(o.voltmeter_neurons));
  }

  std::vector<Population> pops(n_pop);
  int32_t max_delay = 1;
  for (int64_t p = 0; p < n_pop; ++p) {
    const auto& spec = spec_.populations[p];
    pops[p].first = first_[p];
    pops[p].size = spec.size;
    pops[p].c = iaf_coefficients(spec.neuron);
    pops[p].i_e.assign(spec.size, pops[p].c.i_e);
    if (spec.neuron.I_e_neurons().defined()) {
      const torch::Tensor own = spec.neuron.I_e_neurons().to(torch::kDouble).contiguous();
      for (int64_t i = 0; i < spec.size; ++i) pops[p].i_e[i] += own.data_ptr<double>()[i];
    }
  }
  for (size_t j = 0; j < projections_.size(); ++j) {
    const Projection& pr = projections_[j];
    const int64_t s = spec_.population_index(spec_.projections[j].source);
    const int64_t t = spec_.population_index(spec_.projections[j].target);
    pops[s].out.push_back(Route{pr.offsets.data_ptr<int64_t>(), pr.targets.data_ptr<int32_t>(),
                                pr.weights.data_ptr<float>(),
                                pr.delays.defined() ? pr.delays.data_ptr<int16_t>() : nullptr, pr.delay_steps,
                                first_[t]});
    max_delay = std::max(max_delay, pr.max_delay());
  }
  struct Drive {
    int64_t first, size;
    double lambda, weight;
  };
  std::vector<Drive> drives;
  for (const auto& d : spec_.drives) {
    const int64_t p = spec_.population_index(d.target);
    drives.push_back(Drive{first_[p], spec_.populations[p].size, d.rate_hz * spec_.dt * 1e-3, d.weight});
  }

  const int64_t D = max_delay + 1, N = total_, T = o.steps;
  PopulationRunResult result;
  for (const auto& p : spec_.populations) result.populations.push_back(p.name);
  result.steps = T;
  result.trials = o.trials;
  result.spikes.resize(n_pop);
  result.v.resize(n_pop);
  const int64_t vn = o.voltmeter_neurons;
  for (int64_t p = 0; p < n_pop; ++p) {
    if (voltmeter[p]) result.v[p] = torch::empty({o.trials, T, std::min(vn, pops[p].size)}, torch::kDouble);
  }
  std::vector<TrialRecord> records(o.trials);

  const auto start = std::chrono::steady_clock::now();
  // Trials are independent: one thread each, so results never depend on threads.
  at::parallel_for(0, o.trials, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      std::vector<double> v(N, 0.0), i_ex(N, 0.0), i_in(N, 0.0), ring_ex(D * N, 0.0), ring_in(D * N, 0.0);
      std::vector<int32_t> ref(N, 0);
      std::vector<int32_t> fired;  // global ids of this step's spikes
      TrialRecord& rec = records[b];
      rec.step.resize(n_pop);
      rec.neuron.resize(n_pop);
      rec.count.assign(n_pop, 0);
      for (int64_t t = 0; t < T; ++t) {
        double* ex = ring_ex.data() + (t % D) * N;
        double* in = ring_in.data() + (t % D) * N;
        // 1. Poisson drives: stream (trial, step) of each drive, drawn over its neurons in order.
        for (size_t d = 0; d < drives.size(); ++d) {
          const Drive& dr = drives[d];
          if (dr.lambda <= 0) continue;
          RandomStream stream(o.input_seed, Purpose::kPoisson, static_cast<uint32_t>(d),
                              (static_cast<uint64_t>(b) << 28) | static_cast<uint64_t>(t));
          double* target = dr.weight >= 0 ? ex : in;
          for (int64_t i = 0; i < dr.size; ++i) {
            const int64_t count = stream.poisson(dr.lambda);
            if (count) target[dr.first + i] += static_cast<double>(count) * dr.weight;
          }
        }
        // 2. Every population advances one step.
        fired.clear();
        for (int64_t p = 0; p < n_pop; ++p) {
          const Population& pop = pops[p];
          double* vt = voltmeter[p] ? result.v[p].data_ptr<double>() + (b * T + t) * result.v[p].size(2) : nullptr;
          for (int64_t i = 0; i < pop.size; ++i) {
            const int64_t g = pop.first + i;
            double h, i0 = 0.0;
            const bool spike = neurons::detail::iaf_step<double>(ex[g], in[g], 0.0, pop.i_e[i], v[g], i_ex[g], i_in[g],
                                                                 i0, ref[g], h, pop.c);
            if (spike) {
              fired.push_back(static_cast<int32_t>(g));
              ++rec.count[p];
              if (record[p]) {
                rec.step[p].push_back(static_cast<int32_t>(t));
                rec.neuron[p].push_back(static_cast<int32_t>(i));
              }
            }
            if (vt && i < vn) vt[i] = v[g] + spec_.populations[p].neuron.E_L();
            ex[g] = 0.0;
            in[g] = 0.0;
          }
        }
        rec.spikes += static_cast<int64_t>(fired.size());
        // 3. Deliver: each spike's synapses into the slots of their delays.
        size_t k = 0;
        for (int64_t p = 0; p < n_pop && k < fired.size(); ++p) {
          const Population& pop = pops[p];
          for (; k < fired.size() && fired[k] < pop.first + pop.size; ++k) {
            const int64_t s = fired[k] - pop.first;
            for (const Route& r : pop.out) {
              const int64_t lo_k = r.offsets[s], hi_k = r.offsets[s + 1];
              rec.events += hi_k - lo_k;
              if (!r.delays) {
                const int64_t base = ((t + r.delay) % D) * N + r.target_first;
                for (int64_t q = lo_k; q < hi_k; ++q) {
                  const double w = r.weights[q];
                  (w >= 0 ? ring_ex : ring_in)[base + r.targets[q]] += w;
                }
              } else {
                for (int64_t q = lo_k; q < hi_k; ++q) {
                  const double w = r.weights[q];
                  const int64_t at = ((t + r.delays[q]) % D) * N + r.target_first + r.targets[q];
                  (w >= 0 ? ring_ex : ring_in)[at] += w;
                }
              }
            }
          }
        }
      }
    }
  });
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int64_t p = 0; p < n_pop; ++p) {
    SpikeList& list = result.spikes[p];
    for (int64_t b = 0; b < o.trials; ++b) {
      const auto& steps = records[b].step[p];
      list.trial.insert(list.trial.end(), steps.size(), static_cast<int32_t>(b));
      list.step.insert(list.step.end(), steps.begin(), steps.end());
      list.neuron.insert(list.neuron.end(), records[b].neuron[p].begin(), records[b].neuron[p].end());
    }
  }
  result.population_spikes.assign(n_pop, 0);
  for (const auto& r : records) {
    for (int64_t p = 0; p < n_pop; ++p) result.population_spikes[p] += r.count[p];
    result.spike_count += r.spikes;
    result.synaptic_events += r.events;
  }
  return result;
}

}  // namespace snn::populations
