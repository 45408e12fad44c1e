// The graph model's two Conv2d paths for inference on the CPU: im2col
// (torch unfold, then snn::Linear with its own choice of kernel) and the
// event-driven kernel (snn::functional::conv2d_event), for each layer and
// input firing fraction p (spikes drawn with probability p), with the
// automatic choice (conv2d_event_pays, which measures no density: no
// crossover was found) and LibTorch's conv2d (oneDNN; not batch-invariant,
// the reference for speed only) in the same run, and the automatic
// choice's time over the faster path (the target is <= 1.2 everywhere).
// Then the event-driven kernel on each build of the CPU loops this machine
// can run (identical results), as ratios to the default build in the same
// run.
//
//   conv_bench [--threads N] [--images N] [--reps R]

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "best_of.h"
#include "snn/core/cpu_isa.h"
#include "snn/core/frozen_weights.h"
#include "snn/neurons/conv2d.h"
#include "snn/neurons/linear.h"
#include "snn/simulator/torch_config.h"

using snn::bench::seconds_best_of;

namespace {

struct Layer {
  const char* what;
  int64_t cin, size, cout, k, padding;
};

// The graph model's im2col path (simulator/src/graph_model.cpp).
torch::Tensor im2col(const torch::Tensor& x, snn::Linear& fc, const Layer& l) {
  const torch::Tensor cols = torch::nn::functional::unfold(
      x, torch::nn::functional::UnfoldFuncOptions({l.k, l.k}).padding({l.padding, l.padding}));
  const torch::Tensor y = fc->forward(cols.transpose(1, 2).reshape({-1, cols.size(1)}));
  const int64_t n = x.size(0), positions = cols.size(2);
  return y.reshape({n, positions, l.cout}).transpose(1, 2).reshape({n, l.cout, l.size, l.size});
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  int64_t images = 64;  // B = 64 samples, one step
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (flag == "--threads") threads = static_cast<int>(v);
    else if (flag == "--images") images = v;
    else if (flag == "--reps") reps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "conv_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if ((argc - 1) % 2 != 0) {
    std::fprintf(stderr, "conv_bench: flag %s has no value\n", argv[argc - 1]);
    return 2;
  }
  if (threads < 1 || images < 1 || reps < 1) {
    std::fprintf(stderr, "conv_bench: --threads, --images and --reps must be >= 1\n");
    return 2;
  }
  at::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  const snn::FrozenWeights frozen;  // as in a pipeline run: Linear packs its weights once
  std::printf("%s", snn::torch_config_summary(threads).c_str());
  std::printf("%lld images per call, best of %d; microseconds per image\n\n", static_cast<long long>(images), reps);
  std::printf("%-26s %6s %9s %9s %9s %9s %6s %7s\n", "layer", "p", "im2col", "event", "auto", "torch", "chose",
              "auto/best");
  const std::vector<Layer> layers = {
      {"c32k3 -> c64k3, 14x14", 32, 14, 64, 3, 1},       // the MNIST CNN's second conv
      {"c128k3 -> c128k3, 14x14", 128, 14, 128, 3, 1},   // SpikingJelly's conv_fashion_mnist, second block
      {"c16k5 -> c32k5, 28x28", 16, 28, 32, 5, 2},
  };
  const std::vector<double> rates{0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0};
  double worst = 0;
  for (const auto& l : layers) {
    torch::manual_seed(0);
    snn::Linear fc(snn::LinearOptions(l.cin * l.k * l.k, l.cout));
    const torch::Tensor w = fc->weight.view({l.cout, l.cin, l.k, l.k});
    for (double p : rates) {
      const torch::Tensor x = (torch::rand({images, l.cin, l.size, l.size}) < p).to(torch::kFloat);
      torch::Tensor yi, ye;
      const auto event = [&] {
        return snn::functional::conv2d_event(x, w, fc->bias, {1, 1}, {l.padding, l.padding}, {1, 1});
      };
      const std::vector<double> t = seconds_best_of(
          reps, {[&] { yi = im2col(x, fc, l); }, [&] { ye = event(); },
                 [&] { snn::functional::conv2d_event_pays(x) ? event() : im2col(x, fc, l); },
                 [&] { torch::conv2d(x, w, fc->bias, 1, l.padding); }});
      if (!torch::equal(yi, ye)) {
        std::fprintf(stderr, "conv_bench: im2col and event-driven results differ at %s p %g\n", l.what, p);
        return 1;
      }
      const double ratio = t[2] / std::min(t[0], t[1]);
      worst = std::max(worst, ratio);
      std::printf("%-26s %5.1f%% %9.1f %9.1f %9.1f %9.1f %6s %7.2f\n", l.what, 100 * p, t[0] / images * 1e6,
                  t[1] / images * 1e6, t[2] / images * 1e6, t[3] / images * 1e6,
                  snn::functional::conv2d_event_pays(x) ? "event" : "im2col", ratio);
    }
  }
  std::printf("\nworst auto / best: %.2f\n", worst);

  std::printf("\nc32k3 -> c64k3 event-driven per build of the CPU loops (default: %s); microseconds per image, and "
              "the time over the default build's\n",
              snn::cpu_loops_name(snn::cpu_loops()));
  std::printf("%-10s %9s %6s %9s %6s\n", "build", "p 5%", "", "p 20%", "");
  {
    torch::manual_seed(0);
    const torch::Tensor w = torch::randn({64, 32, 3, 3}), b = torch::randn({64});
    const torch::Tensor x5 = torch::rand({images, 32, 14, 14}) < 0.05, x20 = torch::rand({images, 32, 14, 14}) < 0.2;
    const std::vector<std::pair<snn::CpuIsa, snn::CpuLoops>> builds = {
        {snn::CpuIsa::kAuto, snn::cpu_loops()},
        {snn::CpuIsa::kBaseline, snn::CpuLoops::kBaseline},
        {snn::CpuIsa::kAvx2, snn::CpuLoops::kAvx2}};
    std::vector<double> first;
    for (const auto& [isa, loops] : builds) {
      snn::set_cpu_isa(isa);
      if (snn::cpu_loops() != loops || (isa != snn::CpuIsa::kAuto && loops == builds[0].second)) continue;
      const std::vector<double> t =
          seconds_best_of(reps, {[&] { snn::functional::conv2d_event(x5, w, b, {1, 1}, {1, 1}, {1, 1}); },
                                 [&] { snn::functional::conv2d_event(x20, w, b, {1, 1}, {1, 1}, {1, 1}); }});
      if (first.empty()) first = t;
      std::printf("%-10s", snn::cpu_loops_name(loops));
      for (size_t i = 0; i < t.size(); ++i) std::printf(" %9.1f %5.2fx", t[i] / images * 1e6, t[i] / first[i]);
      std::printf("\n");
    }
    snn::set_cpu_isa(snn::CpuIsa::kAuto);
  }
  return 0;
}
