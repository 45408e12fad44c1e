// The population network: validating the model, drawing its projections,
// and the event-driven loop of population_network.h's diagram, one trial
// per thread.

#include "snn/populations/population_network.h"

#include <ATen/Parallel.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "population_loops.h"
#include "random_stream.h"
#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "snn/core/memory_limit.h"
#include "snn/core/message_number.h"

namespace snn::populations {

using detail::Purpose;
using detail::RandomStream;
using detail::draw;
using detail::IafUpdate;
using neurons::detail::IafKind;
using neurons::detail::IafCoeffs;

namespace {

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

int64_t whole_steps(double ms, double dt, const std::string& what) {
  const double steps = ms / dt;
  // (Beyond 9e15 steps a double no longer tells whole numbers apart: say
  // that it is too long, not that it is off the grid.)
  if (std::isfinite(steps) && steps > 9.0e15) {
    throw Error(what + " " + message_number(ms) + " ms is " + message_number(steps) + " steps of dt = " +
                message_number(dt) + " ms, more than a run can count");
  }
  if (!(steps >= 0) || std::fabs(steps - std::round(steps)) > 1e-9 * std::max(1.0, steps) || steps > 9.0e15) {
    throw Error(what + " " + message_number(ms) + " ms is not a whole number of steps of dt = " + message_number(dt) +
                " ms");
  }
  return std::llround(steps);
}

void PopulationNetworkSpec::validate() const {
  if (!(dt > 0) || !std::isfinite(dt)) throw Error("dt must be a positive number of ms, got " + message_number(dt));
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
      throw Error("population '" + p.name + "': its model's dt " + message_number(p.neuron.dt()) + " ms is not the network's " +
                  message_number(dt) + " ms");
    }
    if (p.v_init) {
      try {
        p.v_init->validate("V_m");
      } catch (const Error& e) {
        throw Error("population '" + p.name + "': " + e.what());
      }
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
      throw Error(what + ": rate must be a finite number of Hz >= 0, got " + message_number(d.rate_hz));
    }
    if (!std::isfinite(d.weight)) throw Error(what + ": weight must be finite, got " + message_number(d.weight));
  }
  for (const auto& c : currents) {
    const std::string what = "DC current '" + c.name + "'";
    try {
      population_index(c.target);
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
    if (!std::isfinite(c.amplitude_pa)) throw Error(what + ": amplitude must be finite, got " + message_number(c.amplitude_pa));
    whole_steps(c.start_ms, dt, what + ": start");
    if (std::isfinite(c.stop_ms)) whole_steps(c.stop_ms, dt, what + ": stop");
    if (!(c.stop_ms > c.start_ms)) {
      throw Error(what + ": stop " + message_number(c.stop_ms) + " ms is not after start " + message_number(c.start_ms) +
                  " ms");
    }
    if (c.delay_ms != 0 && (c.delay_ms < dt * (1 - 1e-9) || whole_steps(c.delay_ms, dt, what + ": delay") < 1)) {
      throw Error(what + ": a delay of " + message_number(c.delay_ms) + " ms is below one step of dt = " +
                  message_number(dt) + " ms");
    }
  }
}


PopulationNetwork::PopulationNetwork(PopulationNetworkSpec spec, uint64_t connectivity_seed) : spec_(std::move(spec)) {
  spec_.validate();
  for (const auto& p : spec_.populations) {
    first_.push_back(total_);
    total_ += p.size;
  }
  check_memory();
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

void PopulationNetwork::check_memory() const {
  // Before drawing anything: a model of 10^10 synapses would otherwise fill
  // the memory until the system kills the process. 12 bytes per synapse
  // (target id, weight, a delay), 8 per source (offsets) and a generous 64
  // per neuron (state, ring buffers of one trial).
  double synapses = 0, sources = 0;
  for (const auto& pr : spec_.projections) {
    const int64_t s = spec_.population_index(pr.source), t = spec_.population_index(pr.target);
    synapses += expected_synapses(spec_.populations[s].size, spec_.populations[t].size, pr.connection, s == t);
    sources += static_cast<double>(spec_.populations[s].size);
  }
  const double need = 12.0 * synapses + 8.0 * sources + 64.0 * static_cast<double>(total_);
  const std::string beyond = beyond_memory(need);
  if (!beyond.empty()) {
    // (Not fmt: this library does not link it.)
    char text[320];
    std::snprintf(text, sizeof text,
                  "the model's %lld neurons and about %.3g synapses need about %.3g GiB of memory, %s: make it smaller",
                  static_cast<long long>(total_), synapses, need / double(int64_t{1} << 30), beyond.c_str());
    throw Error(text);
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

// Which ring buffer a synapse adds into: the excitatory one (every input of
// an iaf_psc_delta target; iaf_psc_exp's positive weights), the inhibitory
// one, or by the sign of each weight.
enum class Buffer { kEx, kIn, kBySign };

// A projection as the loop reads it: plain pointers and global target ids.
struct Route {
  const int64_t* offsets;
  const int32_t* targets;
  const float* weights;
  const int16_t* delays;  // null: every synapse has `delay`
  int32_t delay;
  int64_t target_first, target_size;
  Buffer buffer;
};

struct Population {
  int64_t first, size;
  std::optional<Distribution> v_init;  // absolute mV
  IafCoeffs<double> c;
  double e_l;
  std::vector<double> i_e;  // each neuron's constant current (c.i_e plus its own)
  bool own_i_e = false;     // some neurons have their own (otherwise all have c.i_e)
  std::vector<Route> out;   // projections leaving it
  // DC generators onto it: (first step given, first step not given, pA);
  // a current given at step k acts from step k + 1.
  struct Dc {
    int64_t from, to;
    double amplitude;
  };
  std::vector<Dc> dc;
};

// A Poisson drive: its target's neurons each draw a count per step by
// inverting the cumulative distribution with one 32-bit uniform.
struct Drive {
  int64_t first, size;
  std::vector<double> cdf;  // P(X <= k), k = 0, 1, ... up to 1 - 2^-40
  double weight;
  Buffer buffer;
};

std::vector<double> poisson_cdf(double lambda, const std::string& name) {
  if (lambda > 500) {
    throw Error("Poisson drive '" + name + "': rate x dt = " + message_number(lambda) +
                " spikes per step is too many (at most 500); use a larger weight and a lower rate");
  }
  std::vector<double> cdf;
  double p = std::exp(-lambda), f = p;
  for (int64_t k = 0; f < 1 - 0x1.0p-40 && k < 100000; ++k) {
    cdf.push_back(f);
    p *= lambda / static_cast<double>(k + 1);
    f += p;
  }
  cdf.push_back(f);
  return cdf;
}

// One trial's spikes, counts and events.
struct TrialRecord {
  std::vector<std::vector<int32_t>> step, neuron;  // per recorded population
  std::vector<int64_t> count;                      // per population
  int64_t spikes = 0, events = 0;
  int64_t alone_steps = 0;  // of a trial shared by a team: steps one thread ran alone
};

// How a team of threads sharing one trial runs its next block of steps:
// together (two barriers a step) or one thread alone (one barrier a
// block). The team runs the first two blocks (the first, slower while
// caches and pages warm up, is not compared), one thread the third, and
// the faster of the last two goes on; the other is tried again every
// `interval` blocks (16, doubling up to 1024 while it keeps losing), since
// the load from other programs changes. Called by one thread between blocks.
class BlockPace {
 public:
  static constexpr int64_t kSteps = 256;  // steps per block (25 ms at dt = 0.1 ms)
  int64_t alone_steps = 0;

  bool alone() const { return alone_; }
  // After a block of `steps` steps.
  void next(int64_t steps) {
    const auto now = std::chrono::steady_clock::now();
    const double per_step = std::chrono::duration<double>(now - start_).count() / static_cast<double>(steps);
    start_ = now;
    if (alone_) alone_steps += steps;
    if (block_ == probe_at_) {  // this block tried the other way
      if (per_step < best_per_step_) {
        best_alone_ = alone_;
        best_per_step_ = per_step;
        interval_ = 16;
      } else {
        interval_ = std::min<int64_t>(2 * interval_, 1024);
      }
      probe_at_ = block_ + interval_;
    } else {
      best_per_step_ = per_step;
    }
    ++block_;
    alone_ = block_ == probe_at_ ? !best_alone_ : best_alone_;
  }

 private:
  bool alone_ = false, best_alone_ = false;
  int64_t block_ = 0, probe_at_ = 2, interval_ = 16;
  double best_per_step_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The state of one trial and the three phases of a step, each over a range
// of global neuron ids [lo, hi) so that a team of threads can share a trial:
// neurons are independent, Poisson counts are keyed by neuron, and each
// target receives its synapses in spike order whatever the ranges, so the
// result does not depend on how the ranges are cut.
class Trial {
 public:
  // `trial` keys the random streams; `row` is its index in this run's
  // voltmeter traces (they differ when the run starts at a later trial).
  Trial(const std::vector<Population>& pops, const std::vector<Drive>& drives, int64_t n, int64_t d, int64_t trial,
        int64_t row, uint64_t input_seed)
      : pops_(pops), drives_(drives), d_(d), trial_(trial), row_(row), seed_(input_seed),
        stride_((n + 7) / 8 * 8), v_(zeros(n, torch::kDouble)), i0_(zeros(any_dc(pops) ? n : 0, torch::kDouble)),
        i_ex_(zeros(any_exp(pops) ? n : 0, torch::kDouble)), i_in_(zeros(any_exp(pops) ? n : 0, torch::kDouble)),
        ring_ex_(zeros(d * stride_, torch::kDouble)), ring_in_(zeros(any_exp(pops) ? d * stride_ : 0, torch::kDouble)),
        ref_(zeros(n, torch::kLong)), flags_(zeros(n, torch::kLong)), ids_(n, 0), loops_(cpu_loops()) {
    // Initial potentials: neuron i of population p takes words 4i.. of stream (trial; p).
    for (size_t p = 0; p < pops.size(); ++p) {
      const auto& init = pops[p].v_init;
      if (!init) continue;
      RandomStream stream(seed_, Purpose::kInitial, static_cast<uint32_t>(p), static_cast<uint64_t>(trial));
      for (int64_t i = 0; i < pops[p].size; ++i) {
        stream.seek(static_cast<uint64_t>(4 * i));  // whatever the draws before took
        v_.data_ptr<double>()[pops[p].first + i] = draw(*init, stream) - pops[p].e_l;
      }
    }
  }

  // Phase 1 and 2 over [lo, hi): Poisson counts into slot t, then the
  // neurons' step; their spikes are appended to `fired` in id order.
  // traces[p]: population p's voltmeter [trials, steps, width] and its width, or null.
  void update(int64_t t, int64_t lo, int64_t hi, std::vector<int32_t>& fired,
              const std::vector<std::pair<double*, int64_t>>& traces, int64_t steps) {
    double* ex = ring_ex_.data_ptr<double>() + (t % d_) * stride_;
    double* in = ring_in_.data_ptr<double>() + (t % d_) * stride_;
    for (size_t k = 0; k < drives_.size(); ++k) {
      const Drive& dr = drives_[k];
      const int64_t a = std::max(lo, dr.first) - dr.first, b = std::min(hi, dr.first + dr.size) - dr.first;
      if (a >= b) continue;
      RandomStream stream(seed_, Purpose::kPoisson, static_cast<uint32_t>(k),
                          (static_cast<uint64_t>(trial_) << 28) | static_cast<uint64_t>(t));
      stream.seek(static_cast<uint64_t>(a));
      double* target = dr.buffer == Buffer::kIn ? in : ex;
      const double* cdf = dr.cdf.data();
      const size_t len = dr.cdf.size();
      for (int64_t i = a; i < b; ++i) {
        const double u = stream.uniform32();
        if (u < cdf[0]) continue;  // no spike: the common case
        const int64_t count = std::upper_bound(cdf, cdf + len, u) - cdf;
        target[dr.first + i] += static_cast<double>(count) * dr.weight;
      }
    }
    for (size_t p = 0; p < pops_.size(); ++p) {
      const Population& pop = pops_[p];
      const int64_t a = std::max(lo, pop.first), b = std::min(hi, pop.first + pop.size);
      const int64_t trace_width = traces[p].second;
      double* trace = traces[p].first ? traces[p].first + (row_ * steps + t) * trace_width : nullptr;
      IafUpdate u;
      u.c = pop.c;
      u.ex = ex;
      u.in = in;
      u.has_dc = !pop.dc.empty();
      for (const auto& d : pop.dc) u.dc += t >= d.from && t < d.to ? d.amplitude : 0.0;  // the currents given at this step
      u.own_i_e = pop.own_i_e;
      u.i_e = pop.i_e.data() - pop.first;
      u.v = v_.data_ptr<double>();
      u.i_ex = i_ex_.data_ptr<double>();
      u.i_in = i_in_.data_ptr<double>();
      u.i0 = i0_.data_ptr<double>();
      u.ref = ref_.data_ptr<int64_t>();
      u.flags = flags_.data_ptr<int64_t>();
      if (a < b) {
        // Ranges of threads sharing the trial are disjoint, and so are their parts of ids_.
        int32_t* ids = ids_.data() + a;
        const int64_t count = SNN_ISA_CALL(loops_, snn::populations::detail, iaf_update(u, a, b, ids));
        fired.insert(fired.end(), ids, ids + count);
      }
      if (trace) {
        for (int64_t g = a; g < std::min(b, pop.first + trace_width); ++g) trace[g - pop.first] = u.v[g] + pop.e_l;
      }
    }
  }

  // Phase 3 over targets [lo, hi): every spike of step t adds its synapses'
  // weights to the slots of their delays. Returns the synapses it went through.
  int64_t deliver(int64_t t, const std::vector<int32_t>& fired, int64_t lo, int64_t hi) {
    int64_t events = 0;
    size_t k = 0;
    for (size_t p = 0; p < pops_.size() && k < fired.size(); ++p) {
      const Population& pop = pops_[p];
      for (; k < fired.size() && fired[k] < pop.first + pop.size; ++k) {
        const int64_t s = fired[k] - pop.first;
        for (const Route& r : pop.out) {
          const int64_t a = std::max(lo - r.target_first, int64_t{0});
          const int64_t b = std::min(hi - r.target_first, r.target_size);
          if (a >= b) continue;
          int64_t q0 = r.offsets[s], q1 = r.offsets[s + 1];
          if (a > 0 || b < r.target_size) {  // a part of the targets: rows hold them ascending
            q0 = std::lower_bound(r.targets + q0, r.targets + q1, static_cast<int32_t>(a)) - r.targets;
            q1 = std::lower_bound(r.targets + q0, r.targets + q1, static_cast<int32_t>(b)) - r.targets;
          }
          events += q1 - q0;
          if (!r.delays && r.buffer != Buffer::kBySign) {
            double* base = (r.buffer == Buffer::kEx ? ring_ex_ : ring_in_).data_ptr<double>() + ((t + r.delay) % d_) * stride_ +
                           r.target_first;
            for (int64_t q = q0; q < q1; ++q) base[r.targets[q]] += static_cast<double>(r.weights[q]);
          } else {
            for (int64_t q = q0; q < q1; ++q) {
              const double w = r.weights[q];
              const int64_t slot = (t + (r.delays ? r.delays[q] : r.delay)) % d_;
              const bool inhibitory = r.buffer == Buffer::kIn || (r.buffer == Buffer::kBySign && w < 0);
              (inhibitory ? ring_in_ : ring_ex_).data_ptr<double>()[slot * stride_ + r.target_first + r.targets[q]] += w;
            }
          }
        }
      }
    }
    return events;
  }

 private:
  const std::vector<Population>& pops_;
  const std::vector<Drive>& drives_;
  int64_t d_, trial_, row_;
  uint64_t seed_;
  // LibTorch's CPU allocator aligns to 64 bytes: the neuron loop's
  // AVX-512 loads and stores then stay within a cache line each (they
  // would straddle two with std::vector's 16-byte alignment).
  static torch::Tensor zeros(int64_t n, torch::ScalarType dtype) { return torch::zeros({n}, dtype); }
  // What only some models use is allocated only where one of them is in the
  // network (the neuron loop touches it only for those): synaptic currents
  // and the inhibitory ring for iaf_psc_exp (iaf_psc_delta sums every input
  // into the excitatory ring), the DC current in effect for [[dc]] targets.
  static bool any_exp(const std::vector<Population>& pops) {
    return std::any_of(pops.begin(), pops.end(), [](const Population& p) { return p.c.kind == IafKind::kPscExp; });
  }
  static bool any_dc(const std::vector<Population>& pops) {
    return std::any_of(pops.begin(), pops.end(), [](const Population& p) { return !p.dc.empty(); });
  }
  int64_t stride_;  // a ring slot's length: n rounded up to 8 doubles, so every slot is aligned too
  torch::Tensor v_, i0_, i_ex_, i_in_, ring_ex_, ring_in_;  // double; i0_: the DC current in effect
  torch::Tensor ref_;           // int64 (population_loops.h says why)
  torch::Tensor flags_;         // int64: this step's spikes, before they are collected
  std::vector<int32_t> ids_;    // and their ids
  CpuLoops loops_;              // the build of population_loops.cpp that runs
};

}  // namespace

void check_run_size(int64_t steps, int64_t trials, int64_t first_trial) {
  if (steps <= 0 || steps > kMaxSteps) {
    throw Error("the run must have between 1 and 2^28 steps, got " + std::to_string(steps));
  }
  if (trials <= 0 || trials > kMaxTrials) {
    throw Error("trials must be between 1 and 4096, got " + std::to_string(trials));
  }
  if (first_trial < 0 || first_trial > kMaxTrials - trials) {
    throw Error("the first trial must be between 0 and " + std::to_string(kMaxTrials - trials) + " for " +
                std::to_string(trials) + " trials (at most 4096 in all), got " + std::to_string(first_trial));
  }
}

PopulationRunResult PopulationNetwork::simulate(const PopulationRunOptions& o) const {
  check_run_size(o.steps, o.trials, o.first_trial);
  const int64_t n_pop = static_cast<int64_t>(spec_.populations.size());
  std::vector<bool> record(n_pop, o.record_spikes.empty()), voltmeter(n_pop, false);
  for (const auto& name : o.record_spikes) record[spec_.population_index(name)] = true;
  for (const auto& name : o.record_v) voltmeter[spec_.population_index(name)] = true;
  if (!o.record_v.empty() && o.voltmeter_neurons <= 0) {
    throw Error("voltmeters need a number of neurons to record (>= 1), got " + std::to_string(o.voltmeter_neurons));
  }

  std::vector<Population> pops(n_pop);
  for (int64_t p = 0; p < n_pop; ++p) {
    const auto& spec = spec_.populations[p];
    pops[p].first = first_[p];
    pops[p].size = spec.size;
    pops[p].c = iaf_coefficients(spec.neuron);
    pops[p].e_l = spec.neuron.E_L();
    pops[p].v_init = spec.v_init;
    pops[p].i_e.assign(spec.size, pops[p].c.i_e);
    if (spec.neuron.I_e_neurons().defined()) {
      const torch::Tensor own = spec.neuron.I_e_neurons().to(torch::kDouble).contiguous();
      for (int64_t i = 0; i < spec.size; ++i) pops[p].i_e[i] += own.data_ptr<double>()[i];
      pops[p].own_i_e = true;
    }
  }
  // psc_delta sums every input into one buffer; psc_exp keeps the signs apart.
  const auto buffer_of = [&](int64_t target, double lowest, double highest) {
    if (spec_.populations[target].neuron.model() == IafModel::kPscDelta || lowest >= 0) return Buffer::kEx;
    return highest < 0 ? Buffer::kIn : Buffer::kBySign;
  };
  int32_t max_delay = 1;
  for (size_t j = 0; j < projections_.size(); ++j) {
    const Projection& pr = projections_[j];
    const int64_t s = spec_.population_index(spec_.projections[j].source);
    const int64_t t = spec_.population_index(spec_.projections[j].target);
    const bool any = pr.synapses() > 0;
    const double lowest = any ? pr.weights.min().item<double>() : 0.0;
    const double highest = any ? pr.weights.max().item<double>() : 0.0;
    pops[s].out.push_back(Route{pr.offsets.data_ptr<int64_t>(), pr.targets.data_ptr<int32_t>(),
                                pr.weights.data_ptr<float>(),
                                pr.delays.defined() ? pr.delays.data_ptr<int16_t>() : nullptr, pr.delay_steps,
                                first_[t], spec_.populations[t].size, buffer_of(t, lowest, highest)});
    max_delay = std::max(max_delay, pr.max_delay());
  }
  for (const auto& c : spec_.currents) {
    // NEST: active at generator steps [start, stop), but never at step 0
    // (measured: NEST 3.10 gives a generator that starts at 0 from its
    // second step), arriving `delay` steps later, where the neuron takes it
    // for its next step.
    const int64_t delay = c.delay_ms == 0 ? 1 : std::llround(c.delay_ms / spec_.dt);
    const int64_t from = std::max<int64_t>(std::llround(c.start_ms / spec_.dt), 1) + delay - 1;
    const int64_t to = std::isfinite(c.stop_ms) ? std::llround(c.stop_ms / spec_.dt) + delay - 1
                                               : std::numeric_limits<int64_t>::max();
    pops[spec_.population_index(c.target)].dc.push_back({from, to, c.amplitude_pa});
  }
  std::vector<Drive> drives;
  for (const auto& d : spec_.drives) {
    const int64_t p = spec_.population_index(d.target);
    drives.push_back(Drive{first_[p], spec_.populations[p].size, poisson_cdf(d.rate_hz * spec_.dt * 1e-3, d.name),
                           d.weight, buffer_of(p, d.weight, d.weight)});
  }

  const int64_t D = max_delay + 1, N = total_, T = o.steps;
  PopulationRunResult result;
  for (const auto& p : spec_.populations) result.populations.push_back(p.name);
  result.steps = T;
  result.trials = o.trials;
  result.spikes.resize(n_pop);
  result.v.resize(n_pop);
  const int64_t vn = o.voltmeter_neurons;
  std::vector<std::pair<double*, int64_t>> traces(n_pop, {nullptr, 0});
  for (int64_t p = 0; p < n_pop; ++p) {
    if (!voltmeter[p]) continue;
    result.v[p] = torch::empty({o.trials, T, std::min(vn, pops[p].size)}, torch::kDouble);
    traces[p] = {result.v[p].data_ptr<double>(), result.v[p].size(2)};
  }
  std::vector<TrialRecord> records(o.trials);

  // A stop request ends every trial at its next poll (every 128 steps).
  std::atomic<bool> stopped{false};
  const auto poll = [&](int64_t t) {
    if ((t & 127) == 0 && o.stop_requested && !stopped.load(std::memory_order_relaxed) && o.stop_requested()) {
      stopped.store(true);
    }
    return stopped.load(std::memory_order_relaxed);
  };

  // Runs trial b with `team` ranges of neurons (a team of threads when > 1).
  const auto run_trial = [&](int64_t b, int64_t team) {
    Trial trial(pops, drives, N, D, o.first_trial + b, b, o.input_seed);
    TrialRecord& rec = records[b];
    rec.step.assign(n_pop, {});
    rec.neuron.assign(n_pop, {});
    rec.count.assign(n_pop, 0);
    std::vector<std::vector<int32_t>> part(team);
    std::vector<int64_t> part_events(team, 0);
    std::vector<int32_t> fired;
    // The step's spikes, in id order, into the trial's record.
    const auto record_step = [&](int64_t t) {
      size_t k = 0;
      for (int64_t p = 0; p < n_pop; ++p) {
        for (; k < fired.size() && fired[k] < pops[p].first + pops[p].size; ++k) {
          ++rec.count[p];
          if (record[p]) {
            rec.step[p].push_back(static_cast<int32_t>(t));
            rec.neuron[p].push_back(static_cast<int32_t>(fired[k] - pops[p].first));
          }
        }
      }
      rec.spikes += static_cast<int64_t>(fired.size());
    };
    if (team == 1) {
      for (int64_t t = 0; t < T && !poll(t); ++t) {
        fired.clear();
        trial.update(t, 0, N, fired, traces, T);
        record_step(t);
        if (!fired.empty()) rec.events += trial.deliver(t, fired, 0, N);
      }
    } else {
      // One parallel region for the whole run (a fork per step would cost
      // more than a small network's step): thread c owns neurons [lo, hi)
      // for the update and as targets for the delivery, so only the merge
      // of the step's spikes needs the others. Two barriers a step: where
      // another program holds a core, each can wait for a descheduled
      // thread's time slice (25-120x slower, measured), so the steps go in
      // blocks, some run by one thread alone (one barrier a block) to see
      // which is faster now (BlockPace). Either way, the same spikes.
      bool stop = false;  // decided by one thread, read by all after the same barrier
      BlockPace pace;
      // Whether there is a next block: written only in the single between
      // blocks, so every thread reads the same value after its barrier (stop
      // itself may change in an alone block while others test the loop).
      bool more = T > 0;
#pragma omp parallel num_threads(static_cast<int>(team))
      {
        const int64_t c = omp_get_thread_num();
        const int64_t lo = N * c / team, hi = N * (c + 1) / team;
        for (int64_t t0 = 0; more; t0 += BlockPace::kSteps) {
          const int64_t t1 = std::min(T, t0 + BlockPace::kSteps);
          if (pace.alone()) {
#pragma omp single
            for (int64_t t = t0; t < t1 && !stop; ++t) {
              fired.clear();
              trial.update(t, 0, N, fired, traces, T);
              record_step(t);
              if (!fired.empty()) part_events[0] += trial.deliver(t, fired, 0, N);
              stop = poll(t + 1);
            }  // implicit barrier: every thread sees stop
          } else {
            for (int64_t t = t0; t < t1; ++t) {
              part[c].clear();
              trial.update(t, lo, hi, part[c], traces, T);
#pragma omp barrier
#pragma omp single
              {
                fired.clear();
                for (const auto& p : part) fired.insert(fired.end(), p.begin(), p.end());
                record_step(t);
                stop = poll(t + 1);
              }  // implicit barrier: every thread sees the merged spikes (and stop)
              if (!fired.empty()) part_events[c] += trial.deliver(t, fired, lo, hi);
              if (stop) break;
            }
          }
#pragma omp single
          {
            pace.next(t1 - t0);
            more = !stop && t1 < T;
          }  // implicit barrier: every thread sees the next block's mode and whether there is one
        }
      }
      rec.alone_steps = pace.alone_steps;
    }
    for (int64_t e : part_events) rec.events += e;
  };

  const auto start = std::chrono::steady_clock::now();
  const int64_t threads = at::get_num_threads();
  if (o.trials >= threads || threads == 1) {
    // A thread per trial.
    at::parallel_for(0, o.trials, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) run_trial(b, 1);
    });
  } else {
    // Fewer trials than threads: the threads share each trial's neurons
    // (at least 512 each, below which the barriers cost more than they save).
    for (int64_t b = 0; b < o.trials; ++b) run_trial(b, std::min<int64_t>(threads, std::max<int64_t>(N / 512, 1)));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (stopped.load()) throw Interrupted("interrupted: the run was asked to stop before its trials ended");
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
    result.trial_population_spikes.insert(result.trial_population_spikes.end(), r.count.begin(), r.count.end());
    result.spike_count += r.spikes;
    result.synaptic_events += r.events;
    result.alone_steps += r.alone_steps;
  }
  return result;
}

void append_trials(PopulationRunResult& into, const PopulationRunResult& more) {
  if (into.trials == 0) {
    into = more;
    return;
  }
  if (into.populations != more.populations || into.steps != more.steps) {
    throw Error("append_trials: the runs differ in populations or steps (" + std::to_string(into.steps) + " and " +
                std::to_string(more.steps) + " steps)");
  }
  for (size_t p = 0; p < into.populations.size(); ++p) {
    SpikeList& a = into.spikes[p];
    const SpikeList& b = more.spikes[p];
    for (int32_t t : b.trial) a.trial.push_back(t + static_cast<int32_t>(into.trials));
    a.step.insert(a.step.end(), b.step.begin(), b.step.end());
    a.neuron.insert(a.neuron.end(), b.neuron.begin(), b.neuron.end());
    into.population_spikes[p] += more.population_spikes[p];
    if (into.v[p].defined() != more.v[p].defined()) throw Error("append_trials: the runs differ in their voltmeters");
    if (into.v[p].defined()) into.v[p] = torch::cat({into.v[p], more.v[p]}, 0);
  }
  into.trial_population_spikes.insert(into.trial_population_spikes.end(), more.trial_population_spikes.begin(),
                                      more.trial_population_spikes.end());
  into.trials += more.trials;
  into.spike_count += more.spike_count;
  into.synaptic_events += more.synaptic_events;
  into.alone_steps += more.alone_steps;
  into.seconds += more.seconds;
}

}  // namespace snn::populations
