// The Iaf layers (NEST's iaf_psc_delta and iaf_psc_exp) on their own:
// closed-form physics, state carried across calls, batch and thread
// invariance, per-neuron currents, the module's split of its input by sign,
// bad options, and the CPU against CUDA. NEST itself is the oracle of
// nest_test.cpp.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "snn/core/error.h"
#include "snn/neurons/iaf.h"
#include "support/test_util.h"

namespace snn {
namespace {

// Runs the options through iaf_multistep and returns spikes and V traces.
struct IafRun {
  torch::Tensor spikes, v;
};

IafRun run(const torch::Tensor& ex, const torch::Tensor& in, const torch::Tensor& current, const IafOptions& o,
        IafState* carried = nullptr) {
  IafState local;
  IafState& state = carried ? *carried : local;
  IafRun r;
  r.spikes = functional::iaf_multistep(ex, in, current, state, o, &r.v);
  return r;
}

// Random input spikes of the given weights: [T, B, N].
torch::Tensor spike_weights(int64_t T, int64_t B, int64_t N, double rate, double weight, uint64_t seed) {
  torch::manual_seed(seed);
  return (torch::rand({T, B, N}, torch::kDouble) < rate).to(torch::kDouble) * weight;
}

TEST(Iaf, FreeMembraneFollowsTheClosedForm) {
  // A constant current below rheobase: V(t) = E_L + I_e tau_m / C_m (1 - exp(-t / tau_m)).
  for (IafModel model : {IafModel::kPscDelta, IafModel::kPscExp}) {
    const IafOptions o = IafOptions(model).I_e(300.0);  // 300 pA * 40 MOhm = 12 mV < 15 mV
    const int64_t T = 2000;
    const torch::Tensor zero = torch::zeros({T, 1, 1}, torch::kDouble);
    const IafRun r = run(zero, {}, {}, o);
    EXPECT_EQ(r.spikes.sum().item<double>(), 0);
    double worst = 0;
    for (int64_t k = 0; k < T; ++k) {
      const double t = (k + 1) * o.dt();
      const double expected = o.E_L() + o.I_e() * o.tau_m() / o.C_m() * (1 - std::exp(-t / o.tau_m()));
      worst = std::max(worst, std::fabs(r.v[k][0][0].item<double>() - expected) / std::fabs(expected));
    }
    EXPECT_LT(worst, 1e-12) << to_string(model);
  }
}

TEST(Iaf, ExponentialSynapseGivesTheAlphaLikePostsynapticPotential) {
  // One excitatory spike of w pA arriving at the end of step 0:
  // V(t) - E_L = w / C_m tau_s tau_m / (tau_m - tau_s) (exp(-t / tau_m) - exp(-t / tau_s)).
  const IafOptions o = IafOptions(IafModel::kPscExp).tau_syn_ex(2.0).tau_m(10.0).C_m(250.0);
  const int64_t T = 500;
  const double w = 100.0;
  torch::Tensor ex = torch::zeros({T, 1, 1}, torch::kDouble);
  ex[0][0][0] = w;
  const IafRun r = run(ex, {}, {}, o);
  double worst = 0;
  for (int64_t k = 1; k < T; ++k) {
    const double t = k * o.dt();  // since the spike's arrival
    const double ts = o.tau_syn_ex(), tm = o.tau_m();
    const double expected = w / o.C_m() * ts * tm / (tm - ts) * (std::exp(-t / tm) - std::exp(-t / ts));
    worst = std::max(worst, std::fabs(r.v[k][0][0].item<double>() - o.E_L() - expected) / expected);
  }
  EXPECT_LT(worst, 1e-10);
  EXPECT_EQ(r.v[0][0][0].item<double>(), o.E_L()) << "a spike arriving at the end of a step acts from the next";
}

TEST(Iaf, RefractoryPeriodClampsAndSetsTheFiringPeriod) {
  // A strong constant current: the neuron fires, rests t_ref at V_reset, and
  // fires again with a period in steps of t_ref / dt plus the climb.
  const IafOptions o = IafOptions(IafModel::kPscDelta).I_e(1000.0).t_ref(2.0);
  const torch::Tensor zero = torch::zeros({3000, 1, 1}, torch::kDouble);
  const IafRun r = run(zero, {}, {}, o);
  std::vector<int64_t> steps;
  for (int64_t k = 0; k < r.spikes.size(0); ++k) {
    if (r.spikes[k][0][0].item<double>() != 0) steps.push_back(k);
  }
  ASSERT_GE(steps.size(), 5u);
  // Climb from V_reset to V_th: t = tau_m ln(I R / (I R - (V_th - V_reset))).
  const double ir = o.I_e() * o.tau_m() / o.C_m();
  const double climb = o.tau_m() * std::log(ir / (ir - (o.V_th() - o.V_reset())));
  const int64_t period = o.refractory_steps() + static_cast<int64_t>(std::ceil(climb / o.dt()));
  for (size_t j = 1; j < steps.size(); ++j) EXPECT_EQ(steps[j] - steps[j - 1], period) << "spike " << j;
  for (int64_t k = steps[0] + 1; k <= steps[0] + o.refractory_steps(); ++k) {
    EXPECT_EQ(r.v[k][0][0].item<double>(), o.V_reset()) << "step " << k << " is refractory";
  }
}

TEST(Iaf, StateCarriesAcrossCalls) {
  for (IafModel model : {IafModel::kPscDelta, IafModel::kPscExp}) {
    const double w = model == IafModel::kPscDelta ? 2.0 : 150.0;
    const IafOptions o = IafOptions(model).I_e(360.0).tau_syn_in(4.0);
    const torch::Tensor ex = spike_weights(400, 3, 5, 0.08, w, 1), in = spike_weights(400, 3, 5, 0.04, -w, 2);
    const torch::Tensor current = torch::rand({400, 3, 5}, torch::kDouble) * 100;
    const IafRun whole = run(ex, in, current, o);
    IafState state;
    const IafRun a = run(ex.slice(0, 0, 150), in.slice(0, 0, 150), current.slice(0, 0, 150), o, &state);
    const IafRun b = run(ex.slice(0, 150), in.slice(0, 150), current.slice(0, 150), o, &state);
    EXPECT_TRUE(torch::equal(whole.spikes, torch::cat({a.spikes, b.spikes}))) << to_string(model);
    EXPECT_TRUE(torch::equal(whole.v, torch::cat({a.v, b.v}))) << to_string(model);
    EXPECT_GT(whole.spikes.sum().item<double>(), 10) << to_string(model) << ": the case tests little";
  }
}

TEST(Iaf, SamplesAndThreadsDoNotChangeResults) {
  const IafOptions o = IafOptions(IafModel::kPscExp).I_e(300.0).tau_syn_ex(1.5).tau_syn_in(6.0);
  const torch::Tensor ex = spike_weights(300, 4, 3000, 0.05, 120.0, 3), in = spike_weights(300, 4, 3000, 0.05, -90.0, 4);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const IafRun one = run(ex, in, {}, o);
  at::set_num_threads(2);
  const IafRun two = run(ex, in, {}, o);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one.spikes, two.spikes));
  EXPECT_TRUE(torch::equal(one.v, two.v));
  const IafRun sample = run(ex.slice(1, 2, 3), in.slice(1, 2, 3), {}, o);  // sample 2 alone
  EXPECT_TRUE(torch::equal(sample.spikes, one.spikes.slice(1, 2, 3)));
  EXPECT_TRUE(torch::equal(sample.v, one.v.slice(1, 2, 3)));
}

TEST(Iaf, PerNeuronCurrentsAddToTheLayersOwn) {
  // Neuron j with I_e_neurons[j] runs bit-identically to a layer whose I_e is that value.
  const torch::Tensor currents = torch::tensor({0.0, 200.0, 380.0, 500.0}, torch::kDouble);
  const torch::Tensor ex = spike_weights(500, 2, 4, 0.1, 1.0, 5);
  const IafRun all = run(ex, {}, {}, IafOptions().I_e_neurons(currents));
  for (int64_t j = 0; j < 4; ++j) {
    const IafRun alone = run(ex.slice(2, j, j + 1), {}, {}, IafOptions().I_e(currents[j].item<double>()));
    EXPECT_TRUE(torch::equal(alone.v, all.v.slice(2, j, j + 1))) << "neuron " << j;
  }
  EXPECT_GT(all.spikes.sum().item<double>(), 5);
  EXPECT_NE(test::message_of([&] { run(ex, {}, {}, IafOptions().I_e_neurons(torch::zeros({3}, torch::kDouble))); })
                .find("I_e_neurons must have one sample's neuron shape [4]"),
            std::string::npos);
}

TEST(Iaf, ModuleSplitsItsInputBySign) {
  // Summed input x: positive values to the excitatory synapses, negative to the inhibitory.
  const IafOptions o = IafOptions(IafModel::kPscExp).I_e(280.0).tau_syn_ex(2.0).tau_syn_in(5.0);
  const torch::Tensor x = spike_weights(200, 2, 6, 0.1, 150.0, 6) - spike_weights(200, 2, 6, 0.1, 120.0, 7);
  Iaf layer(o);
  const torch::Tensor a = layer->forward(x.slice(0, 0, 120)), b = layer->forward(x.slice(0, 120));
  IafState state;
  const torch::Tensor expected = functional::iaf_multistep(x.clamp_min(0), x.clamp_max(0), {}, state, o);
  EXPECT_TRUE(torch::equal(torch::cat({a, b}), expected));
  layer->reset_state();
  EXPECT_TRUE(torch::equal(layer->forward(x), expected)) << "reset_state starts from rest";
  const auto saved = layer->save_state();
  ASSERT_EQ(saved.size(), 5u);
  layer->reset_state();
  layer->load_state(saved);
  EXPECT_EQ(layer->save_state()[0].data_ptr(), saved[0].data_ptr());
  EXPECT_NE(test::message_of([&] { layer->forward(x.clone().requires_grad_()); }).find("no gradient"), std::string::npos);
}

TEST(Iaf, Float32StaysCloseToFloat64) {
  const IafOptions o = IafOptions(IafModel::kPscDelta).I_e(370.0);
  const torch::Tensor ex = spike_weights(1000, 1, 50, 0.05, 0.5, 8);
  const IafRun d = run(ex, {}, {}, o), f = run(ex.to(torch::kFloat), {}, {}, o);
  ASSERT_EQ(f.v.scalar_type(), torch::kFloat);
  // Float32 rounding moves a rare threshold crossing by a step; the membranes agree to float precision until then.
  const double agree = (d.spikes == f.spikes.to(torch::kDouble)).to(torch::kDouble).mean().item<double>();
  EXPECT_GT(agree, 0.999);
  EXPECT_LT((d.v.slice(0, 0, 50) - f.v.slice(0, 0, 50).to(torch::kDouble)).abs().max().item<double>(), 1e-4);
}

TEST(Iaf, BadOptionsAndInputsNameTheValue) {
  const torch::Tensor x = torch::zeros({10, 1, 2}, torch::kDouble);
  const auto fails_with = [&](const IafOptions& o, const std::string& expected) {
    const std::string what = test::message_of([&] { run(x, {}, {}, o); });
    EXPECT_NE(what.find(expected), std::string::npos) << "got: " << what;
  };
  fails_with(IafOptions().dt(0), "dt must be a positive number of ms, got 0");
  fails_with(IafOptions().C_m(-1), "C_m must be a positive number of pF, got -1");
  fails_with(IafOptions().tau_m(NAN), "tau_m must be a positive number of ms");
  fails_with(IafOptions(IafModel::kPscExp).tau_syn_in(0), "tau_syn_in must be a positive number of ms, got 0");
  fails_with(IafOptions().V_reset(-50), "V_reset (-50 mV) must be below V_th (-55 mV)");
  fails_with(IafOptions().t_ref(0.25), "t_ref must be a whole number (>= 0) of steps of dt = 0.1 ms, got 0.25 ms");
  fails_with(IafOptions().t_ref(-1), "t_ref must be a whole number");
  fails_with(IafOptions().I_e(INFINITY), "I_e must be finite");
  EXPECT_EQ(IafOptions().t_ref(1.5).refractory_steps(), 15);
  EXPECT_EQ(IafOptions().dt(0.25).t_ref(0.0).refractory_steps(), 0);
  EXPECT_NE(test::message_of([] { parse_iaf_model("iaf_cond_exp"); })
                .find("unknown NEST model 'iaf_cond_exp': expected iaf_psc_delta or iaf_psc_exp"),
            std::string::npos);
  EXPECT_EQ(parse_iaf_model(to_string(IafModel::kPscExp)), IafModel::kPscExp);
  EXPECT_NE(test::message_of([&] { run(x, torch::zeros({10, 1, 3}, torch::kDouble), {}, IafOptions()); })
                .find("Iaf inputs must agree: in is [10, 1, 3]"),
            std::string::npos);
  EXPECT_NE(test::message_of([&] { run(x.to(torch::kInt), {}, {}, IafOptions()); }).find("float32 or float64"),
            std::string::npos);
  IafState state;
  run(x, {}, {}, IafOptions(), &state);
  EXPECT_NE(test::message_of([&] { run(torch::zeros({10, 2, 2}, torch::kDouble), {}, {}, IafOptions(), &state); })
                .find("reset the state first"),
            std::string::npos);
}

TEST(Iaf, ModulePrintsItsModelAndUnits) {
  std::ostringstream os;
  Iaf(IafOptions(IafModel::kPscExp).I_e(5))->pretty_print(os);
  EXPECT_NE(os.str().find("snn::Iaf(iaf_psc_exp, dt=0.1 ms"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("I_e=5 pA, tau_syn_ex=2 ms"), std::string::npos) << os.str();
}

TEST(Iaf_CUDA, MatchesCpuBitForBit) {
  SNN_REQUIRE_CUDA();
  for (IafModel model : {IafModel::kPscDelta, IafModel::kPscExp}) {
    const double w = model == IafModel::kPscDelta ? 2.0 : 150.0;
    const IafOptions o =
        IafOptions(model).I_e(200.0).tau_syn_in(4.0).I_e_neurons(torch::linspace(0, 200, 7, torch::kDouble));
    for (auto dtype : {torch::kDouble, torch::kFloat}) {
      const torch::Tensor ex = spike_weights(300, 3, 7, 0.08, w, 9).to(dtype),
                          in = spike_weights(300, 3, 7, 0.04, -w, 10).to(dtype);
      const torch::Tensor current = (torch::rand({300, 3, 7}, torch::kDouble) * 50).to(dtype);
      IafState cpu_state, gpu_state;
      torch::Tensor cpu_v, gpu_v;
      const torch::Tensor cpu = functional::iaf_multistep(ex, in, current, cpu_state, o, &cpu_v);
      const torch::Tensor gpu =
          functional::iaf_multistep(ex.cuda(), in.cuda(), current.cuda(), gpu_state, o, &gpu_v);
      EXPECT_TRUE(torch::equal(cpu, gpu.cpu())) << to_string(model) << " " << dtype;
      EXPECT_TRUE(torch::equal(cpu_v, gpu_v.cpu())) << to_string(model) << " " << dtype;
      EXPECT_TRUE(torch::equal(cpu_state.i_ex, gpu_state.i_ex.cpu())) << to_string(model) << " " << dtype;
    }
  }
}

}  // namespace
}  // namespace snn
