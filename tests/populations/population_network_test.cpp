// The population network's loop: spikes delivered through delays equal the
// Iaf layer driven by the same input, trials independent of threads and of
// each other, Poisson drives at their rate, a Brunel network in its
// asynchronous irregular state, and one line naming each bad model.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>

#include "snn/core/error.h"
#include "support/cpu_builds.h"
#include "support/test_util.h"
#include "snn/populations/population_network.h"

namespace snn::populations {
namespace {

// A pacemaker (I_e above rheobase) projecting all-to-all with a 1.5 ms
// delay onto two neurons of the given model.
PopulationNetworkSpec pacemaker(IafModel model, double weight) {
  PopulationNetworkSpec spec;
  spec.populations.push_back({"pace", 1, IafOptions(IafModel::kPscDelta).I_e(600.0)});
  spec.populations.push_back({"post", 2, IafOptions(model).I_e(330.0).tau_syn_ex(1.0)});
  ProjectionSpec pr{"pace", "post", ConnectionSpec{}, SynapseSpec{Distribution::constant(weight), Distribution::constant(1.5)}};
  spec.projections.push_back(pr);
  return spec;
}

TEST(PopulationNetwork, DeliveryThroughDelaysEqualsTheLayerDrivenByTheSameSpikes) {
  for (IafModel model : {IafModel::kPscDelta, IafModel::kPscExp}) {
    const double w = model == IafModel::kPscDelta ? 4.0 : 1500.0;
    const PopulationNetwork net(pacemaker(model, w), 1);
    PopulationRunOptions o;
    o.steps = 3000;
    o.record_v = {"post"};
    o.voltmeter_neurons = 2;
    const PopulationRunResult r = net.simulate(o);
    ASSERT_GE(r.spikes[0].size(), 10) << "the pacemaker should fire";
    // The pacemaker's spike at step t arrives at the end of step t + 15.
    torch::Tensor ex = torch::zeros({o.steps, 1, 2}, torch::kDouble);
    for (int64_t k = 0; k < r.spikes[0].size(); ++k) {
      const int64_t at = r.spikes[0].step[k] + 15;
      if (at < o.steps) ex.index_put_({at, 0}, w);
    }
    IafState state;
    torch::Tensor v;
    const torch::Tensor s = functional::iaf_multistep(ex, {}, {}, state, net.spec().populations[1].neuron, &v);
    EXPECT_TRUE(torch::equal(v.squeeze(1), r.v[1][0])) << to_string(model) << ": V_m differs from the layer's";
    EXPECT_EQ(s.sum().item<double>(), static_cast<double>(r.spikes[1].size())) << to_string(model);
    EXPECT_GT(r.spikes[1].size(), 10) << to_string(model) << ": the case tests little";
    EXPECT_EQ(r.synaptic_events, 2 * r.spikes[0].size());
  }
}

PopulationNetworkSpec brunel(int64_t n_e, double g, double eta) {
  // Brunel (2000) / NEST's brunel_delta_nest, scaled: epsilon 0.1, J 0.1 mV, delay 1.5 ms.
  const int64_t n_i = n_e / 4, c_e = n_e / 10, c_i = n_i / 10;
  const double J = 0.1, tau_m = 20.0, theta = 20.0;
  const IafOptions neuron = IafOptions(IafModel::kPscDelta).C_m(1.0).tau_m(tau_m).t_ref(2.0).E_L(0.0).V_th(theta)
                                .V_reset(10.0);
  const double nu_th = theta / (J * c_e * tau_m), p_rate = 1000.0 * eta * nu_th * c_e;
  PopulationNetworkSpec spec;
  spec.populations = {{"E", n_e, neuron}, {"I", n_i, neuron}};
  ConnectionSpec ce, ci;
  ce.rule = ci.rule = ConnectionRule::kFixedIndegree;
  ce.indegree = c_e;
  ci.indegree = c_i;
  const SynapseSpec exc{Distribution::constant(J), Distribution::constant(1.5)};
  const SynapseSpec inh{Distribution::constant(-g * J), Distribution::constant(1.5)};
  for (const char* target : {"E", "I"}) {
    spec.projections.push_back({"E", target, ce, exc});
    spec.projections.push_back({"I", target, ci, inh});
    spec.drives.push_back({std::string("noise_") + target, target, p_rate, J});
  }
  return spec;
}

// The spikes of trial b of a run, as (step, neuron) pairs in order.
std::vector<std::pair<int32_t, int32_t>> trial_spikes(const SpikeList& list, int32_t b) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (int64_t k = 0; k < list.size(); ++k) {
    if (list.trial[k] == b) out.emplace_back(list.step[k], list.neuron[k]);
  }
  return out;
}

TEST(PopulationNetwork, TrialsAreIndependentOfThreadsAndOfEachOther) {
  // 2,000 neurons: with 2 threads and one trial, the threads share the
  // trial's neurons (at least 512 each); with three trials, a thread each.
  const PopulationNetwork net(brunel(1600, 5.0, 2.0), 3);
  PopulationRunOptions o;
  o.steps = 1000;
  o.trials = 3;
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const PopulationRunResult one = net.simulate(o);
  o.trials = 1;
  const PopulationRunResult single_serial = net.simulate(o);
  at::set_num_threads(2);
  const PopulationRunResult single_shared = net.simulate(o);
  o.trials = 3;
  const PopulationRunResult two = net.simulate(o);
  at::set_num_threads(threads);
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(one.spikes[p].step, two.spikes[p].step);
    EXPECT_EQ(one.spikes[p].neuron, two.spikes[p].neuron);
    EXPECT_EQ(one.spikes[p].trial, two.spikes[p].trial);
    // Two threads sharing one trial's neurons give one thread's spikes.
    EXPECT_EQ(single_shared.spikes[p].step, single_serial.spikes[p].step);
    EXPECT_EQ(single_shared.spikes[p].neuron, single_serial.spikes[p].neuron);
    EXPECT_GT(single_serial.spikes[p].size(), 100) << "the case tests little";
    // Its first two blocks of steps ran shared, its third alone (the
    // pace's probe): both ways in one trial, the spikes as one thread's.
    EXPECT_GE(single_shared.alone_steps, 256);
    EXPECT_LE(single_shared.alone_steps, 1000 - 2 * 256);
    // Trial 0 of three is the single trial; trials 1 and 2 differ from it.
    const auto first = trial_spikes(one.spikes[p], 0);
    EXPECT_EQ(first, trial_spikes(single_serial.spikes[p], 0));
    EXPECT_NE(first, trial_spikes(one.spikes[p], 1));
    EXPECT_NE(first, trial_spikes(one.spikes[p], 2));
  }
}

// A stop asked for while one thread runs a shared trial's block alone: every
// thread leaves at the same barrier (a thread that read `stop` early left
// the others waiting at a barrier it never reached) and the run says so.
TEST(PopulationNetwork, AStopDuringABlockRunAloneEndsEveryThread) {
  const PopulationNetwork net(brunel(1600, 5.0, 2.0), 3);
  PopulationRunOptions o;
  o.steps = 2000;
  o.trials = 1;
  // Polled every 128 steps: the 5th poll is at step 640, within the third
  // block of 256 steps, the first one run alone.
  int polls = 0;
  o.stop_requested = [&] { return ++polls >= 5; };
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  EXPECT_THROW(net.simulate(o), Interrupted);
  at::set_num_threads(threads);
  EXPECT_EQ(polls, 5);
}

TEST(PopulationNetwork, TrialsSplitAcrossRunsJoinToOneRun) {
  // Trials [1, 3) as their own run (first_trial = 1), then appended to
  // trial 0's run: the spikes, counts and voltmeters of one 3-trial run.
  const PopulationNetwork net(brunel(400, 5.0, 2.0), 3);
  PopulationRunOptions o;
  o.steps = 600;
  o.trials = 3;
  o.record_v = {"E"};
  o.voltmeter_neurons = 2;
  const PopulationRunResult all = net.simulate(o);
  o.trials = 1;
  PopulationRunResult joined = net.simulate(o);
  o.trials = 2;
  o.first_trial = 1;
  append_trials(joined, net.simulate(o));
  EXPECT_EQ(joined.trials, 3);
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(joined.spikes[p].trial, all.spikes[p].trial);
    EXPECT_EQ(joined.spikes[p].step, all.spikes[p].step);
    EXPECT_EQ(joined.spikes[p].neuron, all.spikes[p].neuron);
    EXPECT_EQ(joined.population_spikes[p], all.population_spikes[p]);
    EXPECT_GT(trial_spikes(all.spikes[p], 2).size(), 10u) << "the case tests little";
  }
  EXPECT_TRUE(torch::equal(joined.v[0], all.v[0]));
  EXPECT_EQ(joined.synaptic_events, all.synaptic_events);
  o.first_trial = 4095;
  EXPECT_THROW(net.simulate(o), Error);  // trials 4095 and 4096: past the 4096 streams
}

TEST(PopulationNetwork, PoissonDriveHasItsRate) {
  // A drive of 5 kHz into neurons that never fire (threshold far away): each
  // neuron's mean input per step is rate dt weight; its count is Poisson.
  PopulationNetworkSpec spec;
  spec.populations.push_back({"n", 200, IafOptions().V_th(1e6).tau_m(1e9)});
  spec.drives.push_back({"noise", "n", 5000.0, 0.001});
  const PopulationNetwork net(spec, 1);
  PopulationRunOptions o;
  o.steps = 10000;  // 1 s
  o.record_v = {"n"};
  o.voltmeter_neurons = 200;
  const PopulationRunResult r = net.simulate(o);
  // V after 1 s with no leak = E_L + weight x (spikes received): 5000 +- 71 per neuron.
  const torch::Tensor received = (r.v[0][0][-1] - IafOptions().E_L()) / 0.001;
  EXPECT_NEAR(received.mean().item<double>(), 5000, 5 * 71 / std::sqrt(200.0));
  EXPECT_NEAR(received.std().item<double>(), std::sqrt(5000.0), 0.2 * std::sqrt(5000.0));
}

TEST(PopulationNetwork, BrunelAsynchronousIrregularState) {
  // g = 5, eta = 2: asynchronous irregular firing; Brunel's theory and NEST's
  // brunel_delta_nest give about 20-40 Hz at this scale.
  const PopulationNetwork net(brunel(2000, 5.0, 2.0), 1);
  EXPECT_EQ(net.synapses(), 2500 * 250);
  PopulationRunOptions o;
  o.steps = 5000;  // 500 ms
  const PopulationRunResult r = net.simulate(o);
  const double rate_e = r.spikes[0].size() / (2000 * 0.5), rate_i = r.spikes[1].size() / (500 * 0.5);
  std::cout << "Brunel 2500 neurons, 500 ms: E " << rate_e << " Hz, I " << rate_i << " Hz, " << r.synaptic_events
            << " synaptic events in " << r.seconds << " s\n";
  EXPECT_GT(rate_e, 5);
  EXPECT_LT(rate_e, 150);
  EXPECT_NEAR(rate_i, rate_e, 0.3 * rate_e) << "E and I receive the same input statistics";
  // In-degrees are fixed, out-degrees drawn: on average 250 synapses per spike.
  EXPECT_NEAR(static_cast<double>(r.synaptic_events) / r.spike_count, 250, 2.5);
}

// CUBA's shape (psc_exp, both signs, random initial potentials, a DC
// window) beside a psc_delta population with a floor, a drive and
// per-neuron currents: sizes that leave a remainder in every vector width.
PopulationNetworkSpec mixed_network() {
  PopulationNetworkSpec spec;
  const IafOptions exp_neuron = IafOptions(IafModel::kPscExp).tau_m(20.0).t_ref(5.0).E_L(-49.0).V_th(-50.0)
                                    .V_reset(-60.0).tau_syn_ex(5.0).tau_syn_in(10.0);
  spec.populations.push_back({"E", 403, exp_neuron, Distribution::uniform(-60.0, -50.0)});
  spec.populations.push_back({"I", 101, exp_neuron, Distribution::uniform(-60.0, -50.0)});
  const torch::Tensor own = torch::linspace(0.0, 50.0, 77, torch::kDouble);
  spec.populations.push_back({"D", 77, IafOptions(IafModel::kPscDelta).V_min(-72.0).I_e_neurons(own)});
  ConnectionSpec p;
  p.rule = ConnectionRule::kPairwiseBernoulli;
  p.p = 0.1;
  for (const char* target : {"E", "I"}) {
    spec.projections.push_back({"E", target, p, SynapseSpec{Distribution::constant(20.25), Distribution::constant(0.1)}});
    spec.projections.push_back({"I", target, p, SynapseSpec{Distribution::constant(-112.5), Distribution::constant(0.3)}});
  }
  spec.projections.push_back({"E", "D", p, SynapseSpec{Distribution::uniform(-3.0, 4.0), Distribution::uniform(0.1, 1.0)}});
  spec.drives.push_back({"noise", "D", 8000.0, 0.4});
  spec.currents.push_back({"pulse", "E", 40.0, 20.0, 40.0, 0.0});
  return spec;
}

TEST(PopulationNetwork, EveryCpuBuildGivesTheSameSpikesAndPotentials) {
  const PopulationNetwork net(mixed_network(), 5);
  PopulationRunOptions o;
  o.steps = 2000;
  o.trials = 2;
  o.record_v = {"E", "I", "D"};
  o.voltmeter_neurons = 1000;
  std::vector<PopulationRunResult> runs;
  for (const CpuIsa isa : test::cpu_builds()) {
    const test::CpuIsaScope scope(isa);
    runs.push_back(net.simulate(o));
  }
  for (size_t k = 1; k < runs.size(); ++k) {
    for (size_t p = 0; p < 3; ++p) {
      const std::string what = "build " + std::to_string(k) + ", population " + std::to_string(p);
      EXPECT_EQ(runs[k].spikes[p].trial, runs[0].spikes[p].trial) << what;
      EXPECT_EQ(runs[k].spikes[p].step, runs[0].spikes[p].step) << what;
      EXPECT_EQ(runs[k].spikes[p].neuron, runs[0].spikes[p].neuron) << what;
      EXPECT_TRUE(torch::equal(runs[k].v[p], runs[0].v[p])) << what;
    }
  }
  for (size_t p = 0; p < 3; ++p) EXPECT_GT(runs[0].spikes[p].size(), 50) << "population " << p << " tests little";
}

TEST(PopulationNetwork, BadModelsNameTheEntry) {
  const auto fails_with = [](const std::function<void()>& f, const std::string& expected) {
    const std::string what = test::message_of(f);
    EXPECT_NE(what.find(expected), std::string::npos) << "got: " << what;
  };
  PopulationNetworkSpec spec = pacemaker(IafModel::kPscDelta, 1.0);
  spec.projections[0].target = "posts";
  fails_with([&] { PopulationNetwork(spec, 1); },
             "projection 0 (pace -> posts): population 'posts' is not defined (the model defines pace, post)");
  spec = pacemaker(IafModel::kPscDelta, 1.0);
  spec.populations.push_back(spec.populations[0]);
  fails_with([&] { PopulationNetwork(spec, 1); }, "population 'pace' is defined twice");
  spec = pacemaker(IafModel::kPscDelta, 1.0);
  spec.drives.push_back({"noise", "post", -5.0, 0.1});
  fails_with([&] { PopulationNetwork(spec, 1); }, "Poisson drive 'noise': rate must be a finite number of Hz >= 0, got -5");
  spec = pacemaker(IafModel::kPscDelta, 1.0);
  spec.populations[1].neuron.dt(0.2);
  fails_with([&] { PopulationNetwork(spec, 1); }, "population 'post': its model's dt 0.2 ms is not the network's 0.1 ms");
  spec = pacemaker(IafModel::kPscDelta, 1.0);
  spec.projections[0].synapse.delay = Distribution::constant(0.05);
  fails_with([&] { PopulationNetwork(spec, 1); },
             "projection 0 (pace -> post): a delay of 0.05 ms is below one step of dt = 0.1 ms");
  spec = pacemaker(IafModel::kPscDelta, 1.0);
  spec.populations[1].size = 0;
  fails_with([&] { PopulationNetwork(spec, 1); }, "population 'post': size must be in [1, 2^31), got 0");
  const PopulationNetwork net(pacemaker(IafModel::kPscDelta, 1.0), 1);
  PopulationRunOptions o;
  fails_with([&] { net.simulate(o); }, "the run must have between 1 and 2^28 steps, got 0");
  o.steps = 10;
  o.record_spikes = {"pre"};
  fails_with([&] { net.simulate(o); }, "population 'pre' is not defined");
}

}  // namespace
}  // namespace snn::populations
