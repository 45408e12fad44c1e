#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "snn/neurons/lif.h"
#include "snn/neurons/linear.h"
#include "snn/neurons/linear_neuron.h"
#include "snn/neurons/windows.h"
#include "support/cpu_builds.h"
#include "support/test_util.h"

namespace snn {
namespace {

// A spread of the option space: models, decay_input, thresholds, hard resets
// at several values, soft reset, detach_reset, refractory periods, surrogates.
std::vector<NeuronParams> option_space() {
  std::vector<NeuronParams> out;
  for (NeuronModel model : {NeuronModel::kLIF, NeuronModel::kIF, NeuronModel::kParametricLIF}) {
    for (bool decay : {true, false}) {
      for (std::optional<double> vr : {std::optional<double>(0.0), std::optional<double>(-0.3),
                                       std::optional<double>(0.25), std::optional<double>()}) {
        for (bool detach : {false, true}) {
          NeuronParams p;
          p.model = model;
          p.tau = model == NeuronModel::kLIF ? 3.7 : 2.5;
          p.decay_input = decay;
          p.v_threshold = decay ? 0.8 : 1.1;
          p.v_reset = vr;
          p.detach_reset = detach;
          p.surrogate = detach ? Surrogate::atan(2.5) : Surrogate::sigmoid(4.0);
          p.refractory = (decay && !detach) ? 2 : 0;
          out.push_back(p);
        }
      }
    }
  }
  return out;
}

std::string describe(const NeuronParams& p) {
  std::ostringstream os;
  os << to_string(p.model) << " tau=" << p.tau << " decay=" << p.decay_input << " vth=" << p.v_threshold
     << " vr=" << (p.v_reset ? std::to_string(*p.v_reset) : "soft") << " detach=" << p.detach_reset
     << " refr=" << p.refractory << " sg=" << p.surrogate.str();
  return os.str();
}

TEST(LIF, DefaultsAreSpikingJellys) {
  LIF lif;
  const NeuronParams p = lif->params();
  EXPECT_EQ(p.tau, 2.0);
  EXPECT_TRUE(p.decay_input);
  EXPECT_EQ(p.v_threshold, 1.0);
  ASSERT_TRUE(p.v_reset.has_value());
  EXPECT_EQ(*p.v_reset, 0.0);
  EXPECT_FALSE(p.detach_reset);
  EXPECT_EQ(p.surrogate.kind, SurrogateKind::kSigmoid);
  EXPECT_EQ(p.surrogate.alpha, 4.0);
  EXPECT_EQ(p.refractory, 0);
}

TEST(LIF, FiresWhenPotentialReachesThresholdExactly) {
  IF layer(IFOptions().v_threshold(0.75));
  const torch::Tensor s = layer->step(torch::tensor({0.75f, 0.7499999f}));
  EXPECT_TRUE(torch::equal(s, torch::tensor({1.0f, 0.0f})));
}

TEST(LIF, InitialPotentialIsResetValueForHardAndZeroForSoftReset) {
  LIF hard(LIFOptions().v_reset(-0.5));
  hard->step(torch::zeros({3}));
  // h = v + (x - (v - v_reset)) / tau = -0.5 when v starts at v_reset and x = 0.
  EXPECT_TRUE(torch::equal(hard->state().v, torch::full({3}, -0.5f)));
  LIF soft(LIFOptions().v_reset(std::nullopt));
  soft->step(torch::zeros({3}));
  EXPECT_TRUE(torch::equal(soft->state().v, torch::zeros({3})));
}

TEST(LIF, ChangingBatchShapeWithoutResetIsAClearError) {
  LIF lif;
  lif->step(torch::rand({2, 5}));
  try {
    lif->step(torch::rand({3, 5}));
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    EXPECT_NE(msg.find("[2, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reset_state()"), std::string::npos) << msg;
  }
  lif->reset_state();
  EXPECT_EQ(lif->step(torch::rand({3, 5})).sizes(), (std::vector<int64_t>{3, 5}));
}

TEST(LIF, RejectsNonFloatInputAndBadOptions) {
  LIF lif;
  EXPECT_THROW(lif->step(torch::ones({4}, torch::kInt)), c10::Error);
  EXPECT_THROW(LIF(LIFOptions().tau(0.5)), Error);
  EXPECT_THROW(LIF(LIFOptions().v_threshold(NAN)), Error);
  EXPECT_THROW(LIF(LIFOptions().refractory(-1)), Error);
  EXPECT_THROW(ParametricLIF(ParametricLIFOptions().init_tau(1.0)), Error);
}

TEST(LIF, MultiStepEqualsSingleStepsBitForBit) {
  torch::manual_seed(1);
  for (const auto& p : option_space()) {
    const torch::Tensor x = torch::randn({16, 4, 33}) * 0.8 + 0.4;
    const torch::Tensor rate = torch::tensor(0.31f);
    NeuronState multi, single;
    const torch::Tensor s_multi = functional::neuron_multistep(x, multi, p, rate);
    std::vector<torch::Tensor> steps;
    for (int64_t t = 0; t < x.size(0); ++t) steps.push_back(functional::neuron_step(x[t], single, p, rate));
    EXPECT_TRUE(torch::equal(s_multi, torch::stack(steps))) << describe(p);
    EXPECT_TRUE(torch::equal(multi.v, single.v)) << describe(p);
    EXPECT_TRUE(torch::equal(multi.refractory, single.refractory)) << describe(p);
  }
}

TEST(LIF, FusedForwardEqualsTensorOpReferenceBitForBit) {
  torch::manual_seed(2);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& p : option_space()) {
      const torch::Tensor x = (torch::randn({24, 3, 50}) * 0.9 + 0.45).to(dtype);
      const torch::Tensor rate = torch::tensor(0.27f);
      NeuronState fused_state, ref_state;
      NeuronTrace fused_trace, ref_trace;
      const torch::Tensor s = functional::neuron_multistep(x, fused_state, p, rate, &fused_trace);
      const torch::Tensor s_ref = functional::neuron_multistep_reference(x, ref_state, p, rate, &ref_trace);
      ASSERT_GT(s.sum().item<double>(), 0) << describe(p);
      EXPECT_TRUE(torch::equal(s, s_ref)) << describe(p);
      EXPECT_TRUE(torch::equal(fused_trace.h, ref_trace.h)) << describe(p);
      EXPECT_TRUE(torch::equal(fused_trace.v, ref_trace.v)) << describe(p);
      EXPECT_TRUE(torch::equal(fused_state.refractory, ref_state.refractory)) << describe(p);
    }
  }
}

// Gradients of a weighted sum of spikes and final potentials, through the
// fused backward and through autograd over the tensor-op reference.
TEST(LIF, FusedBackwardEqualsAutogradOfReference) {
  torch::manual_seed(3);
  for (const auto& p : option_space()) {
    const torch::Tensor x0 = torch::randn({20, 2, 40}, torch::kDouble) * 0.9 + 0.45;
    const torch::Tensor v00 = torch::rand({2, 40}, torch::kDouble) * 0.5;
    const torch::Tensor gs = torch::randn({20, 2, 40}, torch::kDouble);
    const torch::Tensor gv = torch::randn({2, 40}, torch::kDouble);
    std::array<torch::Tensor, 2> gx, gv0, gw;
    for (int variant = 0; variant < 2; ++variant) {
      const torch::Tensor x = x0.clone().requires_grad_();
      const torch::Tensor w = torch::tensor(-0.4, torch::kDouble).requires_grad_();
      NeuronState state{v00.clone().requires_grad_(), torch::zeros({2, 40}, torch::kInt)};
      const torch::Tensor v_start = state.v;
      const torch::Tensor rate = w.sigmoid();
      const torch::Tensor s = variant == 0 ? functional::neuron_multistep(x, state, p, rate)
                                           : functional::neuron_multistep_reference(x, state, p, rate);
      ((s * gs).sum() + (state.v * gv).sum()).backward();
      gx[variant] = x.grad();
      gv0[variant] = v_start.grad();
      gw[variant] = w.grad();
    }
    EXPECT_TRUE(torch::allclose(gx[0], gx[1], 1e-9, 1e-12)) << describe(p) << " max |d| "
                                                            << (gx[0] - gx[1]).abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(gv0[0], gv0[1], 1e-9, 1e-12)) << describe(p);
    if (p.model == NeuronModel::kParametricLIF) {
      ASSERT_TRUE(gw[0].defined() && gw[1].defined()) << describe(p);
      EXPECT_NEAR(gw[0].item<double>(), gw[1].item<double>(), 1e-9 * (1 + std::abs(gw[1].item<double>())))
          << describe(p);
    }
  }
}

TEST(LIF, DetachResetChangesOnlyTheResetPathOfTheGradient) {
  torch::manual_seed(4);
  const torch::Tensor x0 = torch::rand({10, 30}, torch::kDouble) * 1.5;
  std::array<torch::Tensor, 2> g;
  for (int detach = 0; detach < 2; ++detach) {
    LIF lif(LIFOptions().detach_reset(detach == 1).step_mode(StepMode::kMulti));
    lif->to(torch::kDouble);
    const torch::Tensor x = x0.clone().requires_grad_();
    lif->forward(x).sum().backward();
    g[detach] = x.grad();
  }
  EXPECT_FALSE(torch::allclose(g[0], g[1]));
  // The last step has no later reset to flow through: same gradient.
  EXPECT_TRUE(torch::allclose(g[0][9], g[1][9]));
}

TEST(LIF, RefractoryNeuronNeitherIntegratesNorFires) {
  IF layer(IFOptions().refractory(2).step_mode(StepMode::kMulti));
  NeuronTrace trace;
  const torch::Tensor s = layer->multi_step(torch::full({8, 1}, 1.0), &trace);
  EXPECT_TRUE(torch::equal(s.flatten(), torch::tensor({1.f, 0.f, 0.f, 1.f, 0.f, 0.f, 1.f, 0.f})));
  // During the two refractory steps v is held at v_reset and h equals it.
  EXPECT_EQ(trace.h[1].item<float>(), 0.f);
  EXPECT_EQ(trace.h[2].item<float>(), 0.f);
  EXPECT_EQ(layer->state().refractory.item<int>(), 1);
}

TEST(LIF, ZeroRefractoryIsSpikingJellysDynamics) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::rand({30, 100}) * 2;
  NeuronParams p;
  NeuronState a, b;
  p.refractory = 0;
  const torch::Tensor s0 = functional::neuron_multistep(x, a, p);
  p.refractory = 1;
  const torch::Tensor s1 = functional::neuron_multistep(x, b, p);
  EXPECT_GT(s0.sum().item<float>(), s1.sum().item<float>());
  // No neuron fires on two consecutive steps with a refractory period of 1.
  EXPECT_EQ((s1.slice(0, 1) * s1.slice(0, 0, -1)).sum().item<float>(), 0.f);
}

TEST(LIF, BoolSpikesEqualFloatSpikes) {
  torch::manual_seed(6);
  const torch::Tensor x = torch::rand({12, 1000}) * 1.5;
  NeuronParams p;
  NeuronState a, b;
  const torch::Tensor sf = functional::neuron_multistep(x, a, p);
  const torch::Tensor sb = functional::neuron_multistep(x, b, p, {}, nullptr, torch::kBool);
  EXPECT_EQ(sb.scalar_type(), torch::kBool);
  EXPECT_TRUE(torch::equal(sf, sb.to(torch::kFloat)));
  EXPECT_TRUE(torch::equal(a.v, b.v));
}

// An input that is the same at every step, expanded over time (stride 0,
// as the graph model passes a direct input's first layer), is read in place
// and gives what its copy gives, bit for bit: every model and reset,
// refractory periods, both spike dtypes, state carried across calls, 1 and
// 2 threads; traced passes (which copy it) give the same too.
TEST(LIF, InputConstantInTimeGivesWhatItsCopyGives) {
  torch::manual_seed(8);
  const int saved = at::get_num_threads();
  for (const auto& p : option_space()) {
    for (int threads = 1; threads <= 2; ++threads) {
      at::set_num_threads(threads);
      const torch::Tensor one = torch::randn({1, 3, 4099}) * 0.8 + 0.4;
      const torch::Tensor constant = one.expand({9, 3, 4099});
      ASSERT_EQ(constant.stride(0), 0);
      const torch::Tensor rate = torch::tensor(0.31f);
      NeuronState a, b;
      for (int call = 0; call < 2; ++call) {
        for (auto dtype : {torch::kFloat, torch::kBool}) {
          const torch::Tensor sa = functional::neuron_multistep(constant, a, p, rate, nullptr, dtype);
          const torch::Tensor sb = functional::neuron_multistep(constant.contiguous(), b, p, rate, nullptr, dtype);
          EXPECT_TRUE(torch::equal(sa, sb)) << describe(p) << " threads " << threads;
          EXPECT_TRUE(torch::equal(a.v, b.v)) << describe(p) << " threads " << threads;
          EXPECT_TRUE(torch::equal(a.refractory, b.refractory)) << describe(p);
        }
      }
      NeuronTrace ta, tb;
      NeuronState c, d;
      EXPECT_TRUE(torch::equal(functional::neuron_multistep(constant, c, p, rate, &ta),
                               functional::neuron_multistep(constant.contiguous(), d, p, rate, &tb)));
      EXPECT_TRUE(torch::equal(ta.h, tb.h)) << describe(p);
    }
  }
  at::set_num_threads(saved);
}

// The neuron pass with its 2 x 2 max pool fused (only pooled spikes
// stored) gives the two passes' pooled spikes, state and spike count bit
// for bit: every model and reset, refractory periods, float and double,
// float and bool spikes, planes of widths 2 to 1,024 (blocks of one or
// many row pairs, row pairs split between threads), a constant input,
// state carried across calls, 1 and 2 threads, every CPU build. Odd or
// wider planes and gradients take the two passes.
TEST(LIF, MaxPooledPassEqualsThePassThenThePool) {
  torch::manual_seed(83);
  const int saved = at::get_num_threads();
  struct Shape {
    int64_t B, C, H, W;
  };
  // Pooled rows of 1, 14, 16, 17, 50 and 512 windows (narrower than the
  // 16 lanes, exactly 16, wider with an overlapping last group), then odd
  // and too wide planes.
  const std::vector<Shape> shapes{{3, 5, 6, 2},  {2, 7, 28, 28}, {2, 2, 6, 32},   {1, 3, 4, 34},
                                  {1, 2, 2, 100}, {1, 3, 4, 1024}, {2, 3, 5, 6}, {1, 2, 2, 1026}};
  for (const CpuIsa isa : test::cpu_builds()) {
    test::CpuIsaScope scope(isa);
    for (const auto& p : option_space()) {
      if (p.detach_reset) continue;  // forward only: detach_reset changes nothing here
      const torch::Tensor rate = torch::tensor(0.31f);
      for (const Shape& sh : shapes) {
        for (auto dtype : {torch::kFloat, torch::kDouble}) {
          const torch::Tensor x = (torch::randn({10, sh.B, sh.C, sh.H, sh.W}) * 0.8 + 0.5).to(dtype);
          const torch::Tensor constant = x[0].expand({5, sh.B, sh.C, sh.H, sh.W});
          for (const torch::Tensor& in : {x, constant}) {
            for (std::optional<torch::ScalarType> sdt : {std::optional<torch::ScalarType>(), std::optional(torch::kBool)}) {
              for (int threads : {1, 2}) {
                at::set_num_threads(threads);
                NeuronState a, b;
                for (int64_t call = 0; call < 2; ++call) {  // the second call starts from the first's state
                  const torch::Tensor xc = in.narrow(0, call * in.size(0) / 2, in.size(0) / 2);
                  const torch::Tensor spikes = functional::neuron_multistep(xc, a, p, rate, nullptr);
                  torch::Tensor want = functional::spike_max_pool2x2(spikes);
                  if (sdt) want = want.to(*sdt);
                  int64_t fired = -1;
                  const torch::Tensor got = functional::neuron_max_pool_multistep(xc, b, p, rate, sdt, &fired);
                  const std::string where = describe(p) + " isa " + std::to_string(static_cast<int>(isa)) + " shape " +
                                            c10::str(xc.sizes()) + " threads " + std::to_string(threads) + " call " +
                                            std::to_string(call);
                  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << where;
                  EXPECT_TRUE(torch::equal(got, want)) << where;
                  EXPECT_TRUE(torch::equal(a.v, b.v)) << where;
                  EXPECT_TRUE(torch::equal(a.refractory, b.refractory)) << where;
                  EXPECT_EQ(fired, spikes.sum().item<int64_t>()) << where;
                }
              }
            }
          }
        }
      }
    }
  }
  at::set_num_threads(saved);
  // The pooled spikes' gradient is the two passes' (training keeps them).
  NeuronParams p;
  const torch::Tensor x = (torch::randn({4, 2, 3, 6, 8}) + 0.6).requires_grad_();
  NeuronState a, b;
  functional::spike_max_pool2x2(functional::neuron_multistep(x, a, p)).sum().backward();
  const torch::Tensor want = x.grad().clone();
  x.grad().zero_();
  const torch::Tensor got = functional::neuron_max_pool_multistep(x, b, p);
  ASSERT_TRUE(got.requires_grad());
  got.sum().backward();
  EXPECT_TRUE(torch::equal(x.grad(), want));
}

// A call that fails after a fresh state was allocated for the kernels to
// fill (a wrong input width, a parametric LIF without its rate) leaves the
// state undefined, not holding uninitialised potentials for the next call.
TEST(LIF, AFailedCallLeavesAFreshStateUndefined) {
  torch::NoGradGuard no_grad;
  Linear fc(6, 4);
  NeuronParams p;
  NeuronState s;
  EXPECT_THROW(functional::linear_neuron_multistep(*fc, torch::rand({3, 2, 7}), s, p), std::exception);
  EXPECT_FALSE(s.defined());
  p.model = NeuronModel::kParametricLIF;
  EXPECT_THROW(functional::neuron_multistep(torch::rand({3, 2, 4}), s, p), std::exception);
  EXPECT_FALSE(s.defined());
  EXPECT_THROW(functional::neuron_max_pool_multistep(torch::rand({3, 2, 4, 4}), s, p), std::exception);
  EXPECT_FALSE(s.defined());
}

// The layer's pooled pass: the fused kernel without observers, counting
// the neurons' spikes; with an observer, the observer sees every spike
// and the pooled result is the same.
TEST(LIF, LayerMaxPooledPassCountsAndObservesTheNeuronsSpikes) {
  torch::manual_seed(84);
  const torch::Tensor x = torch::rand({6, 2, 4, 8, 10}) * 1.6;
  LIF plain(LIFOptions().step_mode(StepMode::kMulti)), pooled(LIFOptions().step_mode(StepMode::kMulti)),
      observed(LIFOptions().step_mode(StepMode::kMulti));
  plain->set_count_spikes(true);
  pooled->set_count_spikes(true);
  torch::NoGradGuard no_grad;
  const torch::Tensor spikes = plain->forward(x);
  const torch::Tensor want = functional::spike_max_pool2x2(spikes);
  EXPECT_TRUE(torch::equal(pooled->multi_step_max_pooled(x), want));
  EXPECT_EQ(pooled->spikes_counted(), plain->spikes_counted());
  EXPECT_GT(pooled->spikes_counted(), 0);
  EXPECT_TRUE(torch::equal(pooled->state().v, plain->state().v));
  torch::Tensor seen;
  observed->set_observer([&](const torch::Tensor& s, const torch::Tensor&) { seen = s; });
  EXPECT_TRUE(torch::equal(observed->multi_step_max_pooled(x), want));
  EXPECT_TRUE(torch::equal(seen, spikes));
}

TEST(LIF, OneAndTwoThreadsGiveIdenticalResults) {
  torch::manual_seed(7);
  const torch::Tensor x = torch::rand({8, 200003}) * 1.5;
  NeuronParams p;
  p.refractory = 1;
  std::array<torch::Tensor, 2> s, v, gx;
  const int saved = at::get_num_threads();
  for (int threads = 1; threads <= 2; ++threads) {
    at::set_num_threads(threads);
    NeuronState state;
    const torch::Tensor xg = x.clone().requires_grad_();
    s[threads - 1] = functional::neuron_multistep(xg, state, p);
    v[threads - 1] = state.v;
    s[threads - 1].sum().backward();
    gx[threads - 1] = xg.grad();
  }
  at::set_num_threads(saved);
  EXPECT_TRUE(torch::equal(s[0], s[1]));
  EXPECT_TRUE(torch::equal(v[0], v[1]));
  EXPECT_TRUE(torch::equal(gx[0], gx[1]));
}

// The synapse and neuron passes fused (no currents stored) give the two
// passes' spikes and state bit for bit: every model and reset, refractory
// periods, real and bool inputs, both spike dtypes, blocks of samples that
// do not divide the batch, state carried across calls, 1 and 2 threads.
TEST(LinearNeuron, FusedPassEqualsTheTwoPassesBitForBit) {
  torch::manual_seed(61);
  const int64_t T = 7, B = 70, in = 90, out = 45;
  for (const NeuronParams& p : option_space()) {
    if (p.detach_reset) continue;  // forward only: detach_reset changes nothing here
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      Linear fc(in, out);
      fc->to(dtype);
      const torch::Tensor w = torch::full({}, -std::log(p.tau - 1.0), dtype);
      const torch::Tensor rate = p.model == NeuronModel::kParametricLIF ? w.sigmoid() : torch::Tensor();
      torch::NoGradGuard no_grad;
      fc->weight.mul_(4.0);  // enough current to fire often
      const torch::Tensor bits = torch::rand({2 * T, B, in}) < 0.3;
      for (const torch::Tensor& x : {bits, bits.to(dtype)}) {
        for (std::optional<torch::ScalarType> sdt : {std::optional<torch::ScalarType>(), std::optional(torch::kBool)}) {
          for (int threads : {1, 2}) {
            const int saved = at::get_num_threads();
            at::set_num_threads(threads);
            NeuronState ref_state, fused_state;
            for (int64_t call = 0; call < 2; ++call) {  // the second call starts from the first's state
              const torch::Tensor xc = x.narrow(0, call * T, T);
              const torch::Tensor ref = functional::neuron_multistep(fc->forward(xc), ref_state, p, rate, nullptr, sdt);
              const torch::Tensor got = functional::linear_neuron_multistep(*fc, xc, fused_state, p, rate, sdt);
              ASSERT_EQ(got.scalar_type(), ref.scalar_type());
              EXPECT_TRUE(torch::equal(got, ref)) << describe(p) << " threads " << threads << " call " << call;
              EXPECT_TRUE(torch::equal(fused_state.v, ref_state.v)) << describe(p);
              EXPECT_TRUE(torch::equal(fused_state.refractory, ref_state.refractory)) << describe(p);
            }
            at::set_num_threads(saved);
          }
        }
      }
    }
  }
}

// While a gradient is recorded the fused call is the two passes, and
// differentiable; the module (LinearNeuron) fuses only without one, and
// hands its observers the spikes either way (and v where they ask for it).
TEST(LinearNeuron, ModuleFusesOnlyWithoutGradientAndFeedsObservers) {
  torch::manual_seed(62);
  Linear fc(30, 12);
  LIF lif(LIFOptions().step_mode(StepMode::kMulti));
  std::shared_ptr<NeuronLayer> layer = lif.ptr();
  LinearNeuron both(fc, torch::nn::AnyModule(lif), layer);
  EXPECT_EQ(both->parameters().size(), 2u);
  const torch::Tensor x = (torch::rand({6, 5, 30}) < 0.4).to(torch::kFloat);

  const torch::Tensor trained = both->forward(x);
  EXPECT_TRUE(trained.requires_grad());
  trained.sum().backward();
  EXPECT_TRUE(fc->weight.grad().defined());

  torch::NoGradGuard no_grad;
  layer->reset_state();
  const torch::Tensor ref = lif->forward(fc->forward(x));
  std::vector<torch::Tensor> seen, seen_v;
  layer->set_observer([&](const torch::Tensor& s, const torch::Tensor& v) {
    seen.push_back(s);
    seen_v.push_back(v);
  });
  layer->reset_state();
  EXPECT_TRUE(torch::equal(both->forward(x), ref));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(torch::equal(seen[0], ref));
  EXPECT_FALSE(seen_v[0].defined());
  layer->set_observer([&](const torch::Tensor& s, const torch::Tensor& v) {
    seen.push_back(s);
    seen_v.push_back(v);
  }, /*with_v=*/true);
  layer->reset_state();
  EXPECT_TRUE(torch::equal(both->forward(x), ref));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen_v[1].defined());
  EXPECT_EQ(seen_v[1].sizes(), ref.sizes());
  layer->set_observer({});
  EXPECT_THROW(LinearNeuron(fc, torch::nn::AnyModule(LIF()), layer), Error);  // not the same neuron layer
}

// A layer asked for bool spikes without a gradient gives them only then.
TEST(LIF, BoolSpikesWithoutGradOnlyWithoutGrad) {
  LIF lif(LIFOptions().step_mode(StepMode::kMulti));
  lif->set_bool_spikes_without_grad(true);
  const torch::Tensor x = torch::rand({4, 3, 20}) * 2;
  const torch::Tensor with_grad = lif->forward(x);
  EXPECT_EQ(with_grad.scalar_type(), torch::kFloat);
  lif->reset_state();
  torch::NoGradGuard no_grad;
  const torch::Tensor without = lif->forward(x);
  EXPECT_EQ(without.scalar_type(), torch::kBool);
  EXPECT_TRUE(torch::equal(without.to(torch::kFloat), with_grad));
  lif->reset_state();
  EXPECT_EQ(lif->multi_step(x, nullptr, torch::kFloat).scalar_type(), torch::kFloat);  // an explicit dtype wins
}

TEST(ParametricLIF, InitialisesWFromInitTauAndLearnsIt) {
  ParametricLIF plif(ParametricLIFOptions().init_tau(3.0).step_mode(StepMode::kMulti));
  EXPECT_FLOAT_EQ(plif->w.item<float>(), static_cast<float>(-std::log(2.0)));
  EXPECT_NEAR(plif->tau(), 3.0, 1e-6);
  EXPECT_EQ(plif->parameters().size(), 1u);
  torch::manual_seed(8);
  plif->forward(torch::rand({6, 50}) * 2).sum().backward();
  ASSERT_TRUE(plif->w.grad().defined());
  EXPECT_NE(plif->w.grad().item<float>(), 0.f);
}

TEST(LIF, ModulePrintsItsOptions) {
  std::ostringstream os;
  os << *LIF(LIFOptions().tau(4).v_reset(std::nullopt));
  EXPECT_NE(os.str().find("tau=4"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("soft"), std::string::npos) << os.str();
}

TEST(LIF_CUDA, MatchesCpuBitForBit) {
  SNN_REQUIRE_CUDA();
  torch::manual_seed(9);
  for (const auto& p : option_space()) {
    const torch::Tensor x = torch::randn({16, 4, 777}) * 0.8 + 0.4;
    const torch::Tensor rate = torch::tensor(0.31f);
    NeuronState cpu, gpu;
    NeuronTrace tc, tg;
    const torch::Tensor sc = functional::neuron_multistep(x, cpu, p, rate, &tc);
    const torch::Tensor sg = functional::neuron_multistep(x.cuda(), gpu, p, rate, &tg);
    EXPECT_TRUE(torch::equal(sc, sg.cpu())) << describe(p);
    EXPECT_TRUE(torch::equal(tc.h, tg.h.cpu())) << describe(p);
    EXPECT_TRUE(torch::equal(cpu.v, gpu.v.cpu())) << describe(p);
    // An input constant in time, read in place on both.
    const torch::Tensor one = x.narrow(0, 0, 1);
    NeuronState cpu_c, gpu_c;
    EXPECT_TRUE(torch::equal(functional::neuron_multistep(one.expand({16, 4, 777}), cpu_c, p, rate),
                             functional::neuron_multistep(one.cuda().expand({16, 4, 777}), gpu_c, p, rate).cpu()))
        << describe(p);
    EXPECT_TRUE(torch::equal(cpu_c.v, gpu_c.v.cpu())) << describe(p);
  }
}

TEST(LIF_CUDA, BackwardMatchesCpu) {
  SNN_REQUIRE_CUDA();
  torch::manual_seed(10);
  for (const auto& p : option_space()) {
    const torch::Tensor x0 = torch::randn({12, 2, 300}, torch::kDouble) * 0.9 + 0.45;
    std::array<torch::Tensor, 2> gx;
    for (int dev = 0; dev < 2; ++dev) {
      const torch::Tensor x = (dev ? x0.cuda() : x0).clone().requires_grad_();
      NeuronState state;
      const torch::Tensor w = torch::tensor(-0.4, x.options()).requires_grad_();
      functional::neuron_multistep(x, state, p, w.sigmoid()).sum().backward();
      gx[dev] = x.grad().cpu();
    }
    EXPECT_TRUE(torch::allclose(gx[0], gx[1], 1e-12, 1e-12)) << describe(p);
  }
}

}  // namespace
}  // namespace snn

namespace snn {
namespace {

// Baseline, AVX2 and (where the CPU has it) AVX-512: 1001 neurons leave a
// remainder for every vector width.
TEST(LIF, EveryBuildOfTheCpuLoopsGivesIdenticalResults) {
  torch::manual_seed(11);
  const std::vector<CpuIsa> builds = test::cpu_builds();
  for (const auto& p : option_space()) {
    const torch::Tensor x = torch::randn({10, 3, 1001}) * 0.9 + 0.45;
    std::vector<torch::Tensor> s(builds.size()), v(builds.size()), gx(builds.size());
    for (size_t i = 0; i < builds.size(); ++i) {
      test::CpuIsaScope scope(builds[i]);
      NeuronState state;
      const torch::Tensor xg = x.clone().requires_grad_();
      s[i] = functional::neuron_multistep(xg, state, p, torch::tensor(0.3f));
      v[i] = state.v.detach();
      s[i].sum().backward();
      gx[i] = xg.grad();
    }
    for (size_t i = 1; i < builds.size(); ++i) {
      EXPECT_TRUE(torch::equal(s[0], s[i])) << describe(p) << " build " << i;
      EXPECT_TRUE(torch::equal(v[0], v[i])) << describe(p) << " build " << i;
      EXPECT_TRUE(torch::equal(gx[0], gx[i])) << describe(p) << " build " << i;
    }
  }
}

}  // namespace
}  // namespace snn
