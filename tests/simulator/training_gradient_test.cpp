// One training step of a whole network, snnsim's way (SpikingNetwork and
// Trainer: encoder, snn::Linear + LIF layers in a pipeline, BPTT through
// the fused kernels, the fused Adam step) against an independent reference
// written with plain LibTorch tensor ops and autograd: SpikingJelly's LIF
// formulas (activation_based/neuron.py), the spike as
// heaviside(u).detach() + (sg(u) - sg(u).detach()), the reset through the
// spike or its detached copy (detach_reset), and torch::optim::Adam.
//
// Both see the same weights and the same input spikes (the encoder's, taken
// from the network and fed to the reference). The reference's synapse adds
// each input's weight column in ascending input order, which is the order
// snn::Linear promises, so the forward passes agree bit for bit (no spike
// can flip on a last-bit difference at the threshold) and the gradients
// differ only by float rounding: snnsim sums the weight gradients in double
// over steps and samples, autograd in float.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "snn/datasets/idx.h"
#include "snn/simulator/network.h"
#include "snn/simulator/training.h"
#include "support/source_path.h"

namespace snn {
namespace {

const std::string kFixture = test::test_data_dir() + "/mnist-fixture";

struct Case {
  const char* name;
  Loss loss;
  NeuronParams neuron;
  std::vector<int64_t> layers;
};

NeuronParams lif(double tau, std::optional<double> v_reset, bool detach_reset, bool decay_input, Surrogate sg) {
  NeuronParams p;
  p.tau = tau;
  p.v_reset = v_reset;
  p.detach_reset = detach_reset;
  p.decay_input = decay_input;
  p.surrogate = sg;
  p.v_threshold = 0.05;  // untrained weights are small: a low threshold keeps every layer spiking
  return p;
}

// The surrogate spike function sg(u) whose derivative replaces the
// Heaviside's (SpikingJelly's surrogate.ATan and surrogate.Sigmoid).
torch::Tensor surrogate_primitive(const Surrogate& s, const torch::Tensor& u) {
  if (s.kind == SurrogateKind::kATan) return torch::atan(u * (M_PI / 2 * s.alpha)) / M_PI + 0.5;
  return torch::sigmoid(u * s.alpha);
}

// SpikingJelly's multi-step LIF node on currents x [T, B, N], v starting
// from reset. Returns the spikes [T, B, N] (0/1 floats carrying the
// surrogate's gradient).
torch::Tensor reference_lif(const NeuronParams& p, const torch::Tensor& x) {
  const double vr = p.v_reset.value_or(0.0);
  torch::Tensor v = torch::full_like(x[0], vr);
  std::vector<torch::Tensor> out;
  for (int64_t t = 0; t < x.size(0); ++t) {
    // neuronal_charge in SpikingJelly's operation order.
    torch::Tensor h;
    if (p.decay_input) {
      h = vr == 0.0 ? v + (x[t] - v) / p.tau : v + (x[t] - (v - vr)) / p.tau;
    } else {
      h = vr == 0.0 ? v * (1.0 - 1.0 / p.tau) + x[t] : v - (v - vr) / p.tau + x[t];
    }
    // neuronal_fire: forward is the Heaviside step, backward sg'(u).
    const torch::Tensor u = h - p.v_threshold;
    const torch::Tensor sg = surrogate_primitive(p.surrogate, u);
    const torch::Tensor s = (u >= 0).to(torch::kFloat) + (sg - sg.detach());
    // neuronal_reset.
    const torch::Tensor sr = p.detach_reset ? s.detach() : s;
    v = p.v_reset ? (1.0 - sr) * h + sr * vr : h - sr * p.v_threshold;
    out.push_back(s);
  }
  return torch::stack(out);
}

// y = b + sum of x[..., f] w[:, f] in ascending f: snn::Linear's order.
torch::Tensor reference_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(0);
  torch::Tensor y = b.expand(shape);
  for (int64_t f = 0; f < w.size(1); ++f) y = y + x.narrow(-1, f, 1) * w.select(1, f);
  return y;
}

struct Reference {
  torch::Tensor counts, loss;
};

Reference reference_forward(const Case& c, int64_t T, const torch::Tensor& input_spikes,
                            const std::vector<torch::Tensor>& params, const torch::Tensor& labels) {
  torch::Tensor s = input_spikes.to(torch::kFloat);
  for (size_t l = 0; l + 1 < c.layers.size(); ++l) {
    s = reference_lif(c.neuron, reference_linear(s, params[2 * l], params[2 * l + 1]));
  }
  Reference r;
  r.counts = s.sum(0);
  if (c.loss == Loss::kMse) {
    const torch::Tensor target = torch::one_hot(labels, c.layers.back()).to(torch::kFloat);
    r.loss = (r.counts / static_cast<double>(T) - target).pow(2).mean();
  } else {
    const torch::Tensor logp = torch::log_softmax(r.counts, 1);
    r.loss = -logp.gather(1, labels.unsqueeze(1)).mean();
  }
  return r;
}

void expect_one_step_matches(const Case& c) {
  SCOPED_TRACE(c.name);
  const ImageDataset data = load_image_dataset(kFixture);
  constexpr int64_t kSamples = 24, kT = 6;
  constexpr double kLr = 2e-3;
  NetworkConfig config;
  config.layers = c.layers;
  config.neuron = c.neuron;
  config.steps = kT;
  config.seed = 11;
  SpikingNetwork net(config);
  TrainOptions options;
  options.batch_size = kSamples;  // one batch: one optimiser step
  options.limit = kSamples;
  options.lr = kLr;
  options.loss = c.loss;
  options.shuffle_seed = 5;
  Trainer trainer(net, options);

  // The batch as train_epoch forms it: samples in shuffled order, the
  // encoder keyed by their global indices.
  const torch::Tensor idx = epoch_batches(kSamples, kSamples, true, options.shuffle_seed, 0).at(0);
  const torch::Tensor x = net.prepare_input(data.train.images.index_select(0, idx));
  const torch::Tensor labels = data.train.labels.index_select(0, idx);
  const torch::Tensor input_spikes = net.encoder()->encode(x, idx, 0, kT);
  ASSERT_EQ(input_spikes.scalar_type(), torch::kBool);

  std::vector<torch::Tensor> before;
  for (const auto& p : net.parameters()) before.push_back(p.detach().clone());
  ASSERT_EQ(before.size(), 2 * (c.layers.size() - 1));

  // snnsim's forward alone (no gradient): the output counts.
  torch::Tensor counts;
  {
    torch::NoGradGuard no_grad;
    counts = net.make_pipeline().constant_forward(x, kT, true, idx);
  }

  // The reference, on copies of the same weights.
  std::vector<torch::Tensor> ref_params;
  for (const auto& p : before) ref_params.push_back(p.clone().requires_grad_(true));
  const Reference ref = reference_forward(c, kT, input_spikes, ref_params, labels);
  ASSERT_TRUE(torch::equal(counts, ref.counts.detach()))
      << "output spike counts differ: snnsim\n" << counts << "\nreference\n" << ref.counts;
  // Every layer must matter: output spikes, and (checked below) gradients
  // reaching the first layer.
  ASSERT_GT(counts.sum().item<double>(), kSamples) << "too few output spikes for a meaningful gradient";
  ref.loss.backward();

  // snnsim's training step.
  const EpochStats stats = trainer.train_epoch(data.train, 0);
  ASSERT_EQ(stats.samples, kSamples);
  EXPECT_NEAR(stats.loss, ref.loss.item<double>(), 1e-6 * std::abs(ref.loss.item<double>()));

  const auto named = net.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    SCOPED_TRACE(named[i].first);
    const torch::Tensor g = named[i].second.grad();
    const torch::Tensor gr = ref_params[i].grad();
    ASSERT_TRUE(g.defined() && gr.defined());
    const double scale = gr.abs().max().item<double>();
    ASSERT_GT(scale, 0) << "a zero gradient tests nothing";
    // Float rounding: autograd sums in float over up to T * B terms per
    // weight, snnsim in double rounded once.
    const double diff = (g - gr).abs().max().item<double>();
    EXPECT_LE(diff, 2e-5 * scale) << "gradient differs by " << diff << " (largest " << scale << ")";
    // Exact zeros (inputs that never spiked) stay exact.
    EXPECT_TRUE(torch::equal(g == 0, gr == 0) || diff <= 1e-9 * scale);
  }

  // Adam. On snnsim's own gradients torch's Adam gives snnsim's step bit
  // for bit (fused or not); on the reference gradients, values within the
  // step's rounding (the first step moves each weight by about lr * sign(g)).
  std::vector<torch::Tensor> same_grads;
  for (size_t i = 0; i < before.size(); ++i) {
    same_grads.push_back(before[i].clone().requires_grad_(true));
    same_grads.back().mutable_grad() = named[i].second.grad().clone();
  }
  torch::optim::Adam adam_same(same_grads, torch::optim::AdamOptions(kLr));
  adam_same.step();
  torch::optim::Adam adam_ref(ref_params, torch::optim::AdamOptions(kLr));
  adam_ref.step();
  for (size_t i = 0; i < named.size(); ++i) {
    SCOPED_TRACE(named[i].first);
    const torch::Tensor after = named[i].second.detach();
    EXPECT_FALSE(torch::equal(after, before[i])) << "the training step did not move the parameter";
    EXPECT_TRUE(torch::equal(after, same_grads[i].detach()))
        << "max difference " << (after - same_grads[i]).abs().max().item<double>();
    const torch::Tensor moved_ref = ref_params[i].detach() - before[i];
    const torch::Tensor moved = after - before[i];
    // Where |g| is far above eps the first step is lr * sign(g) up to
    // rounding; where snnsim's and the reference's g differ in sign (tiny
    // gradients cancelling), so may the step.
    const torch::Tensor g = named[i].second.grad();
    const torch::Tensor sure = g.abs() > 1e-4 * g.abs().max();
    const double diff = (moved - moved_ref).abs().masked_select(sure).max().item<double>();
    EXPECT_LE(diff, 1e-3 * kLr) << "Adam step differs from the reference's";
  }
}

const std::vector<int64_t> kLayers = {784, 40, 24, 10};  // two hidden layers

TEST(TrainingStep, MseHardResetMatchesAutogradReference) {
  expect_one_step_matches({"mse, hard reset, atan", Loss::kMse, lif(2.0, 0.0, false, true, Surrogate::atan()),
                           kLayers});
}

TEST(TrainingStep, CrossEntropySoftResetDetachedMatchesAutogradReference) {
  expect_one_step_matches({"ce, soft reset, detach_reset, atan, tau 3", Loss::kCrossEntropy,
                           lif(3.0, std::nullopt, true, true, Surrogate::atan()), kLayers});
}

TEST(TrainingStep, OtherChargeFormsAndSigmoidMatchAutogradReference) {
  expect_one_step_matches({"mse, hard reset to -0.1, detach_reset, no decay_input, sigmoid", Loss::kMse,
                           lif(2.5, -0.1, true, false, Surrogate::sigmoid()), kLayers});
  expect_one_step_matches({"ce, soft reset, atan 3", Loss::kCrossEntropy,
                           lif(2.0, std::nullopt, false, true, Surrogate::atan(3.0)), kLayers});
}

}  // namespace
}  // namespace snn
