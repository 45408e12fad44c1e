// The crossover between snn::Linear's dense and event-driven CPU kernels:
// for each layer size and input firing fraction p (spikes drawn with
// probability p), the time per row of the dense kernel, the event-driven
// kernel, the automatic choice and LibTorch's BLAS GEMM (at::linear, the
// naive loops' product) in the same run, and the automatic choice's time
// over the faster of the two kernels (the target is <= 1.2 everywhere).
// Then both kernels of a 784-1024 layer on each build of the CPU loops this
// machine can run (baseline, AVX2, AVX-512; identical results), as ratios
// to the default build in the same run. The event-driven kernels' bound is
// the core's rate of float additions (their fixed-order sums are one
// addition per spike and output, no fused multiply-add): it is measured
// too, and the spike tables give each kernel's additions as a fraction of it.
//
//   linear_bench [--threads N] [--rows R] [--reps R]

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "best_of.h"
#include "snn/core/cpu_isa.h"
#include "snn/core/frozen_weights.h"
#include "snn/neurons/linear.h"
#include "snn/simulator/torch_config.h"

using snn::bench::seconds_best_of;

namespace {

// Float additions per second of one core at a vector width: 16 independent
// sums in registers (enough to cover the adds' latency on every x86 core
// seen), each adding a constant kSteps times; the best of 3. The empty asm
// keeps the sums in registers and stops the compiler from merging them. One
// definition per vector width, each compiled for its instruction set (a
// template would be compiled for the baseline).
#if defined(__x86_64__)
constexpr long kSteps = 4'000'000;
#define SNN_ADDITIONS_PER_SECOND(NAME, TARGET, V, SPLAT, ADD)                                              \
  __attribute__((target(TARGET))) double NAME() {                                                            \
    V a0 = SPLAT(0.f), a1 = SPLAT(1.f), a2 = SPLAT(2.f), a3 = SPLAT(3.f), a4 = SPLAT(4.f), a5 = SPLAT(5.f);      \
    V a6 = SPLAT(6.f), a7 = SPLAT(7.f), a8 = SPLAT(8.f), a9 = SPLAT(9.f), a10 = SPLAT(10.f), a11 = SPLAT(11.f);  \
    V a12 = SPLAT(12.f), a13 = SPLAT(13.f), a14 = SPLAT(14.f), a15 = SPLAT(15.f);                              \
    const V w = SPLAT(1e-30f);                                                                               \
    double best = 1e30;                                                                                      \
    for (int r = 0; r < 3; ++r) {                                                                            \
      const auto t0 = std::chrono::steady_clock::now();                                                      \
      for (long i = 0; i < kSteps; ++i) {                                                                    \
        a0 = ADD(a0, w), a1 = ADD(a1, w), a2 = ADD(a2, w), a3 = ADD(a3, w), a4 = ADD(a4, w);                 \
        a5 = ADD(a5, w), a6 = ADD(a6, w), a7 = ADD(a7, w), a8 = ADD(a8, w), a9 = ADD(a9, w);                 \
        a10 = ADD(a10, w), a11 = ADD(a11, w), a12 = ADD(a12, w), a13 = ADD(a13, w), a14 = ADD(a14, w);       \
        a15 = ADD(a15, w);                                                                                   \
        asm volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7));  \
        asm volatile("" : "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11), "+v"(a12), "+v"(a13), "+v"(a14),         \
                     "+v"(a15));                                                                             \
      }                                                                                                      \
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); \
    }                                                                                                        \
    const V sum = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                          \
    const V sum2 = ADD(ADD(ADD(a8, a9), ADD(a10, a11)), ADD(ADD(a12, a13), ADD(a14, a15)));                  \
    float sink[sizeof(V) / sizeof(float)];                                                                   \
    std::memcpy(sink, &sum, sizeof sink);                                                                    \
    volatile float keep = sink[0];                                                                           \
    std::memcpy(sink, &sum2, sizeof sink);                                                                   \
    keep = sink[0];                                                                                          \
    (void)keep;                                                                                              \
    return 16.0 * kSteps * (sizeof(V) / sizeof(float)) / best;                                               \
  }
SNN_ADDITIONS_PER_SECOND(avx512_additions_per_second, "avx512f", __m512, _mm512_set1_ps, _mm512_add_ps)
SNN_ADDITIONS_PER_SECOND(avx2_additions_per_second, "avx2", __m256, _mm256_set1_ps, _mm256_add_ps)
SNN_ADDITIONS_PER_SECOND(sse_additions_per_second, "sse2", __m128, _mm_set1_ps, _mm_add_ps)
#undef SNN_ADDITIONS_PER_SECOND

// The peak for the build of the CPU loops that runs (0: not measured on
// this architecture).
double peak_additions_per_second() {
  switch (snn::cpu_loops()) {
    case snn::CpuLoops::kAvx512:
      return avx512_additions_per_second();
    case snn::CpuLoops::kAvx2:
      return avx2_additions_per_second();
    case snn::CpuLoops::kBaseline:
      break;
  }
  return sse_additions_per_second();
}
#else
double peak_additions_per_second() { return 0; }
#endif

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  int64_t rows = 640;  // B = 64 samples x K = 10 steps
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (flag == "--threads") threads = static_cast<int>(v);
    else if (flag == "--rows") rows = v;
    else if (flag == "--reps") reps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "linear_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (threads < 1 || rows < 1 || reps < 1) {
    std::fprintf(stderr, "linear_bench: --threads, --rows and --reps must be >= 1\n");
    return 2;
  }
  at::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  // As in a pipeline run: the layers pack their weights once.
  const snn::FrozenWeights frozen;
  std::printf("%s", snn::torch_config_summary(threads).c_str());
  std::printf("rows = %lld per call, best of %d; times in microseconds per row; crossover %.3f\n\n",
              static_cast<long long>(rows), reps, snn::kLinearEventCrossover);
  std::printf("%5s %5s %7s %9s %9s %9s %9s %6s %7s\n", "in", "out", "p", "dense", "event", "auto", "blas",
              "chose", "auto/best");
  double worst = 0;
  const std::vector<double> rates{0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5};
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{{784, 256}, {784, 1024}, {256, 256}, {1024, 1024}, {1024, 10}}) {
    torch::manual_seed(0);
    snn::Linear dense(snn::LinearOptions(in, out).path(snn::LinearPath::kDense));
    snn::Linear event(snn::LinearOptions(in, out).path(snn::LinearPath::kEvent));
    snn::Linear automatic(snn::LinearOptions(in, out));
    event->weight.copy_(dense->weight);
    event->bias.copy_(dense->bias);
    automatic->weight.copy_(dense->weight);
    automatic->bias.copy_(dense->bias);
    for (double p : rates) {
      const torch::Tensor x = (torch::rand({rows, in}) < p).to(torch::kFloat);
      torch::Tensor yd, ye;
      const std::vector<double> t = seconds_best_of(
          reps, {[&] { yd = dense->forward(x); }, [&] { ye = event->forward(x); }, [&] { automatic->forward(x); },
                 [&] { torch::nn::functional::linear(x, dense->weight, dense->bias); }});
      const double td = t[0], te = t[1], ta = t[2], tb = t[3];
      if (!torch::equal(yd, ye)) {
        std::fprintf(stderr, "linear_bench: dense and event-driven results differ at in %lld out %lld p %g\n",
                     static_cast<long long>(in), static_cast<long long>(out), p);
        return 1;
      }
      const double ratio = ta / std::min(td, te);
      worst = std::max(worst, ratio);
      const bool chose_event = automatic->last_path() == snn::LinearPath::kEvent;
      std::printf("%5lld %5lld %6.1f%% %9.3f %9.3f %9.3f %9.3f %6s %7.2f\n", static_cast<long long>(in),
                  static_cast<long long>(out), 100 * p, td / rows * 1e6, te / rows * 1e6, ta / rows * 1e6,
                  tb / rows * 1e6, chose_event ? "event" : "dense", ratio);
    }
  }
  std::printf("\nworst auto / best: %.2f\n", worst);

  // Bool spikes [T, B, in] through forward_steps and forward, which take a
  // sample's consecutive steps together where they share their spikes,
  // against forward on the rows as [T B, in], one by one (the same values):
  // rate-coded rows (each input fires at its own rate at every step, as an
  // encoded image; half of them silent) and independent spikes of a hidden
  // layer.
  std::printf("\nbool spikes [T = %lld, B = 32, in] by forward_steps and forward (a sample's steps together) and "
              "by forward on [T B, in] (row by row); microseconds per row\n",
              static_cast<long long>(std::max<int64_t>(1, rows / 32)));
  // One core's peak times the threads the kernels run on.
  const double peak = peak_additions_per_second() * threads;
  std::printf("(adds/peak: forward_steps' float additions, one per spike and output, per second over the peak of "
              "%d core(s), %.3g)\n", threads, peak);
  std::printf("%5s %5s %-22s %9s %9s %9s %10s %9s\n", "in", "out", "spikes", "steps", "forward", "rows", "rows/steps",
              "adds/peak");
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{{784, 1024}, {1024, 1024}}) {
    torch::manual_seed(0);
    snn::Linear fc(snn::LinearOptions(in, out).path(snn::LinearPath::kEvent));
    const int64_t T = std::max<int64_t>(1, rows / 32), B = 32;
    const torch::Tensor rate = torch::rand({1, B, in}) * (torch::rand({1, B, in}) < 0.5).to(torch::kFloat);
    std::vector<std::pair<std::string, torch::Tensor>> inputs{{"rate-coded, mean 25%", torch::rand({T, B, in}) < rate}};
    for (double p : {0.02, 0.05, 0.1, 0.17, 0.3}) {
      char name[32];
      std::snprintf(name, sizeof name, "independent %g%%", 100 * p);
      inputs.emplace_back(name, torch::rand({T, B, in}) < p);
    }
    for (const auto& [name, x] : inputs) {
      torch::Tensor got = torch::empty({T, B, out}), whole, ref;
      const std::vector<double> t = seconds_best_of(
          reps, {[&] {
                   fc->forward_steps(x, [&](int64_t step, int64_t b0, int64_t b1, void* y) {
                     std::memcpy(got.data_ptr<float>() + (step * B + b0) * out, y, (b1 - b0) * out * sizeof(float));
                   });
                 },
                 [&] { whole = fc->forward(x); }, [&] { ref = fc->forward(x.reshape({T * B, in})).view({T, B, out}); }});
      // Bits: the sign of zero too.
      if (!torch::equal(got.view(torch::kInt), ref.view(torch::kInt)) ||
          !torch::equal(whole.view(torch::kInt), ref.view(torch::kInt))) {
        std::fprintf(stderr, "linear_bench: forward_steps or forward differ from the rows at in %lld out %lld, %s\n",
                     static_cast<long long>(in), static_cast<long long>(out), name.c_str());
        return 1;
      }
      const double additions = x.sum().item<double>() * static_cast<double>(out);
      std::printf("%5lld %5lld %-22s %9.3f %9.3f %9.3f %10.2f %9.2f\n", static_cast<long long>(in),
                  static_cast<long long>(out), name.c_str(), t[0] / (T * B) * 1e6, t[1] / (T * B) * 1e6,
                  t[2] / (T * B) * 1e6, t[2] / t[0], peak > 0 ? additions / t[0] / peak : 0.0);
    }
  }

  std::printf("\n784-1024 per build of the CPU loops (default: %s); microseconds per row, and the time over the "
              "default build's\n", snn::cpu_loops_name(snn::cpu_loops()));
  std::printf("%-10s %9s %6s %9s %6s %9s %6s\n", "build", "event 2%", "", "event 10%", "", "dense 50%", "");
  {
    torch::manual_seed(0);
    snn::Linear event(snn::LinearOptions(784, 1024).path(snn::LinearPath::kEvent));
    snn::Linear dense(snn::LinearOptions(784, 1024).path(snn::LinearPath::kDense));
    dense->weight.copy_(event->weight);
    dense->bias.copy_(event->bias);
    const torch::Tensor x2 = torch::rand({rows, 784}) < 0.02, x10 = torch::rand({rows, 784}) < 0.1;
    const torch::Tensor x50 = (torch::rand({rows, 784}) < 0.5).to(torch::kFloat);
    const std::vector<std::pair<snn::CpuIsa, snn::CpuLoops>> builds = {
        {snn::CpuIsa::kAuto, snn::cpu_loops()},
        {snn::CpuIsa::kBaseline, snn::CpuLoops::kBaseline},
        {snn::CpuIsa::kAvx2, snn::CpuLoops::kAvx2}};
    std::vector<double> first;
    for (const auto& [isa, loops] : builds) {
      snn::set_cpu_isa(isa);
      if (snn::cpu_loops() != loops || (isa != snn::CpuIsa::kAuto && loops == builds[0].second)) continue;
      const std::vector<double> t = seconds_best_of(
          reps, {[&] { event->forward(x2); }, [&] { event->forward(x10); }, [&] { dense->forward(x50); }});
      if (first.empty()) first = t;
      std::printf("%-10s", snn::cpu_loops_name(loops));
      for (size_t i = 0; i < t.size(); ++i) std::printf(" %9.3f %5.2fx", t[i] / rows * 1e6, t[i] / first[i]);
      std::printf("\n");
    }
    snn::set_cpu_isa(snn::CpuIsa::kAuto);
  }
  return 0;
}
