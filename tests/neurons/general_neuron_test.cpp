// GeneralNeuron (general_neuron.h): NIR's neuron kinds with per-neuron
// parameters, against the fused SpikingJelly layers where the two meet and
// against the equations written out step by step in float64 elsewhere.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "snn/core/error.h"
#include "snn/neurons/general_neuron.h"
#include "snn/neurons/lif.h"
#include "support/test_util.h"

namespace snn {
namespace {

torch::Tensor scalar(double v) { return torch::tensor(v, torch::kDouble); }

GeneralNeuronOptions lif_like(const NeuronParams& p) {
  // SpikingJelly's decay_input LIF in the general form: r = 1, v_leak = v_reset.
  const double vr = p.v_reset.value_or(0.0);
  return GeneralNeuronOptions(GeneralNeuronKind::kLIF)
      .tau(scalar(p.tau))
      .r(scalar(1.0))
      .v_leak(scalar(vr))
      .v_threshold(scalar(p.v_threshold))
      .v_reset(scalar(vr))
      .soft_reset(!p.v_reset)
      .detach_reset(p.detach_reset)
      .surrogate(p.surrogate)
      .refractory(p.refractory);
}

TEST(GeneralNeuron, LifInSpikingJellysFormEqualsTheFusedLifBitForBit) {
  torch::manual_seed(11);
  for (std::optional<double> vr : {std::optional<double>(0.0), std::optional<double>(-0.3), std::optional<double>()}) {
    for (bool detach : {false, true}) {
      for (int64_t refractory : {0, 2}) {
        NeuronParams p;
        p.tau = 3.7;
        p.v_threshold = 0.8;
        p.v_reset = vr;
        p.detach_reset = detach;
        p.refractory = refractory;
        const torch::Tensor x = torch::randn({24, 3, 50}) * 0.9 + 0.45;
        NeuronState fused_state, general_state;
        NeuronTrace fused_trace, general_trace;
        const torch::Tensor s = functional::neuron_multistep(x, fused_state, p, {}, &fused_trace);
        const torch::Tensor g = functional::general_neuron_multistep(x, general_state, lif_like(p), &general_trace);
        ASSERT_GT(s.sum().item<double>(), 0);
        EXPECT_TRUE(torch::equal(s, g)) << "v_reset " << vr.value_or(NAN) << " detach " << detach;
        EXPECT_TRUE(torch::equal(fused_trace.h, general_trace.h));
        EXPECT_TRUE(torch::equal(fused_trace.v, general_trace.v));
        EXPECT_TRUE(torch::equal(fused_state.v, general_state.v));
      }
    }
  }
}

TEST(GeneralNeuron, IfWithUnitGainEqualsTheFusedIfBitForBit) {
  torch::manual_seed(12);
  NeuronParams p;
  p.model = NeuronModel::kIF;
  p.v_threshold = 1.3;
  p.v_reset = -0.2;
  const torch::Tensor x = torch::randn({16, 4, 30}) * 0.5 + 0.2;
  NeuronState a, b;
  const torch::Tensor s = functional::neuron_multistep(x, a, p);
  const auto o = GeneralNeuronOptions(GeneralNeuronKind::kIF).v_threshold(scalar(1.3)).v_reset(scalar(-0.2));
  const torch::Tensor g = functional::general_neuron_multistep(x, b, o);
  ASSERT_GT(s.sum().item<double>(), 0);
  EXPECT_TRUE(torch::equal(s, g));
  EXPECT_TRUE(torch::equal(a.v, b.v));
}

// The gradient through autograd of the general layer equals the fused
// layer's own backward pass (the same surrogate, the same reset paths).
TEST(GeneralNeuron, GradientEqualsTheFusedLifs) {
  torch::manual_seed(13);
  for (int variant_options = 0; variant_options < 8; ++variant_options) {
    NeuronParams p;
    p.tau = 2.5;
    p.v_threshold = 0.7;
    p.v_reset = (variant_options & 2) ? std::optional<double>() : std::optional<double>(0.1);
    p.detach_reset = variant_options & 1;
    p.refractory = (variant_options & 4) ? 2 : 0;
    p.surrogate = (variant_options & 1) ? Surrogate::atan(2.0) : Surrogate::sigmoid(4.0);
    const torch::Tensor x0 = torch::randn({12, 2, 20}, torch::kDouble) * 0.8 + 0.4;
    const torch::Tensor gs = torch::randn({12, 2, 20}, torch::kDouble);
    std::array<torch::Tensor, 2> gx;
    for (int variant = 0; variant < 2; ++variant) {
      const torch::Tensor x = x0.clone().requires_grad_();
      NeuronState state;
      const torch::Tensor s = variant == 0 ? functional::neuron_multistep(x, state, p)
                                           : functional::general_neuron_multistep(x, state, lif_like(p));
      ((s * gs).sum() + (state.v * gs[0]).sum()).backward();  // the carried state's gradient too
      gx[variant] = x.grad();
    }
    EXPECT_TRUE(torch::allclose(gx[0], gx[1], 1e-9, 1e-12))
        << "options " << variant_options << ": max |d| " << (gx[0] - gx[1]).abs().max().item<double>();
    EXPECT_GT(gx[0].abs().sum().item<double>(), 0);
  }
}

// Per-neuron parameters: each neuron behaves as a fused layer of its own
// scalar parameters would.
TEST(GeneralNeuron, PerNeuronParametersActAsOneLayerPerNeuron) {
  torch::manual_seed(14);
  const int64_t n = 6;
  const torch::Tensor tau = torch::tensor({1.5, 2.0, 3.0, 4.5, 6.0, 10.0}, torch::kDouble);
  const torch::Tensor vth = torch::tensor({0.5, 0.7, 0.9, 1.0, 0.6, 0.3}, torch::kDouble);
  const torch::Tensor vr = torch::tensor({0.0, -0.1, 0.2, 0.0, -0.5, 0.1}, torch::kDouble);
  const auto o =
      GeneralNeuronOptions(GeneralNeuronKind::kLIF).tau(tau).r(scalar(1.0)).v_leak(vr).v_threshold(vth).v_reset(vr);
  const torch::Tensor x = torch::rand({30, 5, n}) * 1.6;
  NeuronState state;
  const torch::Tensor g = functional::general_neuron_multistep(x, state, o);
  for (int64_t i = 0; i < n; ++i) {
    NeuronParams p;
    p.tau = tau[i].item<double>();
    p.v_threshold = vth[i].item<double>();
    p.v_reset = vr[i].item<double>();
    NeuronState s1;
    const torch::Tensor s = functional::neuron_multistep(x.select(2, i).contiguous(), s1, p);
    EXPECT_TRUE(torch::equal(s, g.select(2, i))) << "neuron " << i;
    EXPECT_GT(s.sum().item<double>(), 0) << "neuron " << i;
  }
}

// The equations of general_neuron.h, written out in float64, one neuron.
struct Reference {
  double tau = 2, tau_syn = 2, r = 1, v_leak = 0, v_th = 1, v_reset = 0, w_in = 1;
  double v = 0, i = 0;
};

TEST(GeneralNeuron, LeakyIntegratorFollowsItsEquationAndEmitsItsPotential) {
  torch::manual_seed(15);
  const torch::Tensor x = torch::randn({20, 3, 4}, torch::kDouble);
  const auto o =
      GeneralNeuronOptions(GeneralNeuronKind::kLI).tau(scalar(3.0)).r(scalar(0.5)).v_leak(scalar(-0.25));
  GeneralNeuron li(o);
  EXPECT_FALSE(li->spiking());
  li->set_count_spikes(true);
  const torch::Tensor out = li->forward(x);
  EXPECT_EQ(li->spikes_counted(), 0.0);  // a potential is not spikes
  for (int64_t b = 0; b < 3; ++b) {
    for (int64_t k = 0; k < 4; ++k) {
      double v = -0.25;  // LI starts at v_leak
      for (int64_t t = 0; t < 20; ++t) {
        v = v + ((-0.25 - v) + 0.5 * x[t][b][k].item<double>()) / 3.0;
        EXPECT_DOUBLE_EQ(out[t][b][k].item<double>(), v);
      }
    }
  }
}

TEST(GeneralNeuron, CurrentBasedLifFollowsItsEquations) {
  torch::manual_seed(16);
  const torch::Tensor x = (torch::rand({40, 2, 3}, torch::kDouble) < 0.4).to(torch::kDouble) * 1.5;
  Reference ref;
  ref.tau = 4.0;
  ref.tau_syn = 2.5;
  ref.r = 1.2;
  ref.v_leak = 0.1;
  ref.v_th = 0.6;
  ref.v_reset = -0.1;
  ref.w_in = 0.8;
  const auto o = GeneralNeuronOptions(GeneralNeuronKind::kCubaLIF)
                     .tau(scalar(ref.tau))
                     .tau_syn(scalar(ref.tau_syn))
                     .r(scalar(ref.r))
                     .v_leak(scalar(ref.v_leak))
                     .v_threshold(scalar(ref.v_th))
                     .v_reset(scalar(ref.v_reset))
                     .w_in(scalar(ref.w_in));
  NeuronState state;
  NeuronTrace trace;
  const torch::Tensor s = functional::general_neuron_multistep(x, state, o, &trace);
  int64_t spikes = 0;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t k = 0; k < 3; ++k) {
      double v = ref.v_reset, i = 0;
      for (int64_t t = 0; t < 40; ++t) {
        i = i + (ref.w_in * x[t][b][k].item<double>() - i) / ref.tau_syn;
        const double h = v + ((ref.v_leak - v) + ref.r * i) / ref.tau;
        const bool fire = h >= ref.v_th;
        v = fire ? ref.v_reset : h;
        spikes += fire;
        EXPECT_DOUBLE_EQ(trace.h[t][b][k].item<double>(), h) << "t " << t;
        EXPECT_EQ(s[t][b][k].item<double>(), fire ? 1.0 : 0.0) << "t " << t;
      }
      EXPECT_DOUBLE_EQ(state.i[b][k].item<double>(), i);
    }
  }
  EXPECT_GT(spikes, 5);
}

TEST(GeneralNeuron, CurrentBasedLeakyIntegratorFollowsItsEquations) {
  const torch::Tensor x = torch::tensor({1.0, 0.0, 0.0, 1.0, 1.0, 0.0}, torch::kDouble).reshape({6, 1, 1});
  const auto o = GeneralNeuronOptions(GeneralNeuronKind::kCubaLI)
                     .tau(scalar(2.0))
                     .tau_syn(scalar(4.0))
                     .r(scalar(2.0))
                     .v_leak(scalar(0.0))
                     .w_in(scalar(3.0));
  NeuronState state;
  const torch::Tensor out = functional::general_neuron_multistep(x, state, o);
  double v = 0, i = 0;
  for (int64_t t = 0; t < 6; ++t) {
    i = i + (3.0 * x[t][0][0].item<double>() - i) / 4.0;
    v = v + ((0.0 - v) + 2.0 * i) / 2.0;
    EXPECT_DOUBLE_EQ(out[t][0][0].item<double>(), v);
  }
}

TEST(GeneralNeuron, ThresholdFiresWhereTheInputReachesItAndHasNoState) {
  const torch::Tensor x = torch::tensor({0.2, 0.5, 0.7, 0.5, -1.0, 0.49}, torch::kFloat).reshape({6, 1, 1}).requires_grad_();
  const auto o = GeneralNeuronOptions(GeneralNeuronKind::kThreshold).v_threshold(scalar(0.5)).surrogate(Surrogate::atan(2.0));
  NeuronState state;
  const torch::Tensor s = functional::general_neuron_multistep(x, state, o);
  EXPECT_TRUE(torch::equal(s.reshape({6}), torch::tensor({0.f, 1.f, 1.f, 1.f, 0.f, 0.f})));
  s.sum().backward();
  // atan surrogate at u = 0: alpha / 2.
  EXPECT_FLOAT_EQ(x.grad().reshape({6})[1].item<float>(), 1.0f);
}

// A sample's result does not depend on the batch around it, and a sequence
// split into two calls (the state carried, the synaptic current too) equals
// one call.
TEST(GeneralNeuron, BatchInvariantAndResumableAcrossCalls) {
  torch::manual_seed(17);
  const auto o = GeneralNeuronOptions(GeneralNeuronKind::kCubaLIF)
                     .tau(torch::rand({2, 3, 3}, torch::kDouble) * 4 + 1)
                     .tau_syn(scalar(3.0))
                     .r(scalar(2.0))
                     .v_leak(scalar(0.0))
                     .v_threshold(torch::rand({2, 3, 3}, torch::kDouble) + 0.3)
                     .v_reset(scalar(0.0))
                     .w_in(scalar(1.0));
  const torch::Tensor x = torch::rand({10, 5, 2, 3, 3});
  NeuronState all;
  const torch::Tensor s = functional::general_neuron_multistep(x, all, o);
  for (int64_t b = 0; b < 5; ++b) {
    NeuronState one;
    EXPECT_TRUE(torch::equal(functional::general_neuron_multistep(x.narrow(1, b, 1), one, o), s.narrow(1, b, 1)));
  }
  NeuronState split;
  const torch::Tensor first = functional::general_neuron_multistep(x.narrow(0, 0, 4), split, o);
  const torch::Tensor second = functional::general_neuron_multistep(x.narrow(0, 4, 6), split, o);
  EXPECT_TRUE(torch::equal(torch::cat({first, second}), s));
  EXPECT_TRUE(torch::equal(split.i, all.i));
  EXPECT_GT(s.sum().item<double>(), 0);
  // The module keeps the current between calls and through save/load.
  GeneralNeuron layer(o);
  layer->forward(x.narrow(0, 0, 4));
  const auto saved = layer->save_state();
  ASSERT_EQ(saved.size(), 3u);
  layer->reset_state();
  layer->load_state(saved);
  EXPECT_TRUE(torch::equal(layer->forward(x.narrow(0, 4, 6)), second));
}

TEST(GeneralNeuron, BadParametersAreClearErrors) {
  const auto expect_error = [](const GeneralNeuronOptions& o, const std::string& part) {
    try {
      GeneralNeuron layer(o);
      ADD_FAILURE() << "no error, expected one naming " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(GeneralNeuronOptions(GeneralNeuronKind::kLIF).tau(scalar(0.0)), "tau must be > 0");
  expect_error(GeneralNeuronOptions(GeneralNeuronKind::kCubaLI).tau_syn(torch::tensor({1.0, -1.0}, torch::kDouble)),
               "tau_syn must be > 0");
  expect_error(GeneralNeuronOptions(GeneralNeuronKind::kLIF).v_threshold(scalar(NAN)), "v_threshold holds NaN");
  expect_error(GeneralNeuronOptions(GeneralNeuronKind::kLIF)
                   .tau(torch::full({3}, 2.0, torch::kDouble))
                   .v_reset(torch::zeros({4}, torch::kDouble)),
               "v_reset has shape [4] but tau has [3]");
}

TEST(GeneralNeuron, ModulePrintsItsParameters) {
  std::ostringstream os;
  GeneralNeuron layer(GeneralNeuronOptions(GeneralNeuronKind::kCubaLIF).v_threshold(torch::ones({3}, torch::kDouble)));
  layer->pretty_print(os);
  EXPECT_NE(os.str().find("CubaLIF"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("v_threshold=[[3] per neuron]"), std::string::npos) << os.str();
}

TEST(GeneralNeuron_CUDA, MatchesCpuBitForBit) {
  SNN_REQUIRE_CUDA();
  torch::manual_seed(18);
  const auto o = GeneralNeuronOptions(GeneralNeuronKind::kCubaLIF)
                     .tau(torch::rand({8}, torch::kDouble) * 4 + 1)
                     .v_threshold(scalar(0.5));
  const torch::Tensor x = torch::rand({16, 4, 8});
  NeuronState cpu, gpu;
  const torch::Tensor a = functional::general_neuron_multistep(x, cpu, o);
  const torch::Tensor b = functional::general_neuron_multistep(x.cuda(), gpu, o);
  EXPECT_TRUE(torch::equal(a, b.cpu()));
}

}  // namespace
}  // namespace snn
