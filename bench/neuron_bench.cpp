// Throughput of the fused neuron passes and the Poisson encoder, each as a
// ratio against a reference measured in the same run:
//   - fused LIF single-step and multi-step (T = 32) vs the naive tensor-op LIF
//     v = v + (x - v) / tau; s = v >= th; v = where(s, v_reset, v)
//   - the same vs an in-process memory-bandwidth reference (triad
//     a = b + s c), counting 13 bytes per neuron-step for a single step
//     (x 4, spike 1, v read and written 8) and 4 + 1 + 8/T for multi-step
//   - the Poisson encoder vs torch::rand + compare.
//   - on the CPU, the multi-step LIF once per build of the CPU loops this
//     machine can run (baseline, AVX2, AVX-512), each as a ratio to the
//     default build's time.
// Prints LibTorch's BLAS / oneDNN configuration and the thread count.
// With --device cuda everything runs on the GPU, and the bandwidth reference
// is the same triad as one LibTorch kernel on the device (torch::add_out).
//
//   neuron_bench [--threads N] [--neurons N] [--steps T] [--reps R] [--device cpu|cuda]

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "snn/core/cpu_isa.h"
#include "snn/encoders/encoders.h"
#include "snn/neurons/functional.h"
#include "snn/simulator/torch_config.h"

namespace {

// On a GPU the clock only means something once the device has finished.
bool g_sync_cuda = false;

void sync() {
  if (g_sync_cuda) torch::cuda::synchronize();
}

double seconds_best_of(int reps, const std::function<void()>& fn) {
  fn();  // warm-up: page faults, allocator
  sync();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    sync();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  int64_t n = 1 << 18;  // 262,144 neurons
  int64_t steps = 32;
  int reps = 5;
  std::string device_name = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long value = std::atoll(argv[i + 1]);
    if (flag == "--device") device_name = argv[i + 1];
    else if (flag == "--threads") threads = static_cast<int>(value);
    else if (flag == "--neurons") n = value;
    else if (flag == "--steps") steps = value;
    else if (flag == "--reps") reps = static_cast<int>(value);
    else {
      std::fprintf(stderr, "neuron_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (threads < 1 || n < 1 || steps < 1 || reps < 1) {
    std::fprintf(stderr, "neuron_bench: --threads, --neurons, --steps and --reps must be >= 1\n");
    return 2;
  }
  if (device_name != "cpu" && device_name != "cuda") {
    std::fprintf(stderr, "neuron_bench: --device must be cpu or cuda, got '%s'\n", device_name.c_str());
    return 2;
  }
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "neuron_bench: --device cuda, but no CUDA device is available\n");
    return 2;
  }
  const torch::Device device(device_name == "cuda" ? torch::kCUDA : torch::kCPU);
  g_sync_cuda = device.is_cuda();
  const auto on = torch::TensorOptions().device(device);
  at::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  std::printf("%s", snn::torch_config_summary(threads).c_str());
  std::printf("N = %lld neurons, T = %lld steps, best of %d runs, device %s\n\n", static_cast<long long>(n),
              static_cast<long long>(steps), reps, device.str().c_str());

  // Memory-bandwidth reference: triad over arrays far larger than the caches
  // (64 MiB each; 4x that on a GPU, whose L2 holds tens of MiB).
  double triad_gbs = 0;
  if (device.is_cuda()) {
    const int64_t m = int64_t{1} << 26;
    torch::Tensor a = torch::empty({m}, on), b = torch::ones({m}, on), c = torch::full({m}, 2.0f, on);
    const double t_triad = seconds_best_of(reps, [&] { torch::add_out(a, b, c, 3.0); });
    triad_gbs = 12.0 * m / t_triad / 1e9;
    std::printf("%-38s %9.2f GB/s (12 bytes per element, one device kernel)\n", "triad a = b + s*c", triad_gbs);
  } else {
    const int64_t m = 1 << 24;
    std::vector<float> a(m), b(m, 1.0f), c(m, 2.0f);
    const double t_triad = seconds_best_of(reps, [&] {
      float* __restrict__ pa = a.data();
      const float* __restrict__ pb = b.data();
      const float* __restrict__ pc = c.data();
#pragma omp simd
      for (int64_t i = 0; i < m; ++i) pa[i] = pb[i] + 3.0f * pc[i];
    });
    triad_gbs = 12.0 * m / t_triad / 1e9;
    std::printf("%-38s %9.2f GB/s (12 bytes per element, 1 thread)\n", "triad a = b + s*c", triad_gbs);
  }

  const torch::Tensor x_seq = torch::rand({steps, n}, on) * 1.5;
  snn::NeuronParams lif;  // SpikingJelly defaults: tau 2, v_threshold 1, v_reset 0
  const double neuron_steps = static_cast<double>(n) * steps;

  // Naive tensor-op LIF, one step at a time.
  const double t_naive = seconds_best_of(reps, [&] {
    torch::Tensor v = torch::zeros({n}, on);
    for (int64_t t = 0; t < steps; ++t) {
      v = v + (x_seq[t] - v) / 2.0;
      const torch::Tensor s = v >= 1.0;
      v = torch::where(s, torch::zeros_like(v), v);
    }
  });

  // Fused, one call per step (single-step mode).
  const double t_single = seconds_best_of(reps, [&] {
    snn::NeuronState state;
    for (int64_t t = 0; t < steps; ++t) {
      snn::functional::neuron_multistep(x_seq.narrow(0, t, 1), state, lif, {}, nullptr, torch::kBool);
    }
  });

  // Fused, all T steps in one pass.
  const double t_multi = seconds_best_of(reps, [&] {
    snn::NeuronState state;
    snn::functional::neuron_multistep(x_seq, state, lif, {}, nullptr, torch::kBool);
  });

  auto report = [&](const char* name, double t, double bytes_per_step) {
    const double ns = t / neuron_steps * 1e9;
    const double gbs = bytes_per_step * neuron_steps / t / 1e9;
    std::printf("%-38s %7.3f ns/neuron-step  %6.1fx naive  %5.2f of triad (%.1f GB/s at %.2f B/step)\n", name, ns,
                t_naive / t, gbs / triad_gbs, gbs, bytes_per_step);
  };
  std::printf("%-38s %7.3f ns/neuron-step\n", "naive tensor-op LIF", t_naive / neuron_steps * 1e9);
  report("fused LIF single-step (bool spikes)", t_single, 13.0);
  report("fused LIF multi-step  (bool spikes)", t_multi, 4.0 + 1.0 + 8.0 / static_cast<double>(steps));
  if (!device.is_cuda()) {
    // The same pass on each build of the CPU loops (identical results).
    const snn::CpuLoops best = snn::cpu_loops();
    std::printf("CPU loops: %s by default\n", snn::cpu_loops_name(best));
    const std::vector<std::pair<snn::CpuIsa, snn::CpuLoops>> builds = {
        {snn::CpuIsa::kBaseline, snn::CpuLoops::kBaseline},
        {snn::CpuIsa::kAvx2, snn::CpuLoops::kAvx2},
        {snn::CpuIsa::kAuto, snn::CpuLoops::kAvx512}};
    for (const auto& [isa, loops] : builds) {
      snn::set_cpu_isa(isa);
      if (snn::cpu_loops() != loops) continue;  // not on this CPU
      const double t = seconds_best_of(reps, [&] {
        snn::NeuronState state;
        snn::functional::neuron_multistep(x_seq, state, lif, {}, nullptr, torch::kBool);
      });
      const std::string name = std::string("  multi-step, ") + snn::cpu_loops_name(loops) + " build";
      std::printf("%-38s %7.3f ns/neuron-step  %6.2fx the default build's time\n", name.c_str(),
                  t / neuron_steps * 1e9, t / t_multi);
    }
    snn::set_cpu_isa(snn::CpuIsa::kAuto);
  }

  // Poisson encoder vs torch::rand + compare, T steps of an [N] input.
  const torch::Tensor p = torch::rand({1, n}, on);
  const torch::Tensor ids = torch::zeros({1}, on.dtype(torch::kLong));
  snn::PoissonEncoderOptions enc;
  enc.spike_dtype(torch::kBool);
  const double t_enc = seconds_best_of(reps, [&] { snn::functional::poisson_encode(p, ids, 0, steps, enc); });
  const double t_rand = seconds_best_of(reps, [&] {
    for (int64_t t = 0; t < steps; ++t) {
      const torch::Tensor s = torch::rand_like(p) < p;
    }
  });
  std::printf("%-38s %7.3f ns/element-step\n", "torch::rand + compare", t_rand / neuron_steps * 1e9);
  std::printf("%-38s %7.3f ns/element-step  %6.1fx rand+compare\n", "Poisson encoder (Philox, bool spikes)",
              t_enc / neuron_steps * 1e9, t_rand / t_enc);
  return 0;
}
