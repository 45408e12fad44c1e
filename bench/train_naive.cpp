// The naive reference for training speed: the same network, data, loss and
// optimiser as `snnsim train`, written the way a LibTorch user would port a
// SpikingJelly script: torch::nn::Linear (BLAS GEMMs), a LIF step of
// separate tensor ops per time step (SpikingJelly's formulas), an ATan
// surrogate as an autograd function, torch::rand Poisson encoding, and
// autograd through every op. bench/train_bench.py runs it next to snnsim
// and SpikingJelly in one run.
//
//   train_naive DATA_DIR [--hidden H] [--T T] [--batch B] [--epochs E] [--threads N]
// Prints one line per epoch: "epoch E/N: ... test accuracy A, S s".

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "snn/datasets/idx.h"

namespace {

constexpr double kTau = 2.0, kThreshold = 1.0, kAlpha = 2.0;

// Heaviside forward, ATan surrogate backward (SpikingJelly's surrogate.ATan).
struct AtanSpike : torch::autograd::Function<AtanSpike> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    ctx->save_for_backward({x});
    return (x >= 0).to(x.scalar_type());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    const double a = M_PI / 2 * kAlpha;
    return {g[0] * (kAlpha / 2) / (1 + (a * x).pow(2))};
  }
};

// One LIF step, decay_input, hard reset to 0: h = v + (x - v) / tau.
torch::Tensor lif_step(const torch::Tensor& x, torch::Tensor& v) {
  const torch::Tensor h = v + (x - v) / kTau;
  const torch::Tensor s = AtanSpike::apply(h - kThreshold);
  v = h * (1 - s);
  return s;
}

struct Net : torch::nn::Module {
  Net(int64_t hidden) : fc1(register_module("fc1", torch::nn::Linear(784, hidden))),
                        fc2(register_module("fc2", torch::nn::Linear(hidden, 10))) {}
  // x [B, 784] intensities in [0, 1]; returns the output spike counts [B, 10].
  torch::Tensor forward(const torch::Tensor& x, int64_t T) {
    torch::Tensor v1 = torch::zeros({x.size(0), fc1->options.out_features()});
    torch::Tensor v2 = torch::zeros({x.size(0), 10});
    torch::Tensor counts = torch::zeros({x.size(0), 10});
    for (int64_t t = 0; t < T; ++t) {
      const torch::Tensor spikes_in = (torch::rand_like(x) < x).to(torch::kFloat);
      counts = counts + lif_step(fc2(lif_step(fc1(spikes_in), v1)), v2);
    }
    return counts;
  }
  torch::nn::Linear fc1, fc2;
};

int64_t flag(int argc, char** argv, const char* name, int64_t fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: train_naive DATA_DIR [--hidden H] [--T T] [--batch B] [--epochs E] [--threads N]\n");
    return 2;
  }
  const int64_t hidden = flag(argc, argv, "--hidden", 256), T = flag(argc, argv, "--T", 8);
  const int64_t batch = flag(argc, argv, "--batch", 64), epochs = flag(argc, argv, "--epochs", 1);
  const int64_t threads = flag(argc, argv, "--threads", 0);
  if (threads > 0) at::set_num_threads(static_cast<int>(threads));
  try {
    const snn::ImageDataset data = snn::load_image_dataset(argv[1]);
    auto images = [](const snn::LabeledImages& d) { return d.images.to(torch::kFloat).div(255.0).reshape({d.size(), -1}); };
    const torch::Tensor x_train = images(data.train), x_test = images(data.test);
    torch::manual_seed(0);
    Net net(hidden);
    torch::optim::Adam adam(net.parameters(), torch::optim::AdamOptions(1e-3));
    for (int64_t e = 0; e < epochs; ++e) {
      const auto t0 = std::chrono::steady_clock::now();
      for (const torch::Tensor& idx : snn::epoch_batches(data.train.size(), batch, true, 0, e)) {
        const torch::Tensor counts = net.forward(x_train.index_select(0, idx), T);
        const torch::Tensor target = torch::one_hot(data.train.labels.index_select(0, idx), 10).to(torch::kFloat);
        const torch::Tensor loss = torch::mse_loss(counts / static_cast<double>(T), target);
        adam.zero_grad();
        loss.backward();
        adam.step();
      }
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      torch::NoGradGuard no_grad;
      int64_t correct = 0;
      for (const torch::Tensor& idx : snn::epoch_batches(data.test.size(), 256, false, 0, 0)) {
        const torch::Tensor counts = net.forward(x_test.index_select(0, idx), T);
        correct += counts.argmax(1).eq(data.test.labels.index_select(0, idx)).sum().item<int64_t>();
      }
      std::printf("epoch %lld/%lld: test accuracy %.4f, %.2f s\n", static_cast<long long>(e + 1),
                  static_cast<long long>(epochs), static_cast<double>(correct) / static_cast<double>(data.test.size()),
                  seconds);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_naive: %s\n", e.what());
    return 1;
  }
  return 0;
}
