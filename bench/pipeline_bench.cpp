// Wall time of the model pipeline on a rate-coded MNIST-sized network
// (Poisson encoder, 784-256-10 snn::Linear + LIF), against the plain
// sequential step loop measured in the same run: the schedule, time chunking
// (steps_per_tick K) and the overlap of two CPU stages.
//
//   pipeline_bench [--threads N] [--batch B] [--steps T] [--reps R]

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "snn/encoders/encoders.h"
#include "snn/neurons/lif.h"
#include "snn/neurons/linear.h"
#include "snn/pipeline/model_pipeline.h"

namespace {

double best_of(int reps, const std::function<void()>& fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int64_t batch = 64, steps = 32;
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (flag == "--threads") threads = static_cast<int>(v);
    else if (flag == "--batch") batch = v;
    else if (flag == "--steps") steps = v;
    else if (flag == "--reps") reps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "pipeline_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (threads < 1 || batch < 1 || steps < 1 || reps < 1) {
    std::fprintf(stderr, "pipeline_bench: every value must be >= 1\n");
    return 2;
  }
  at::set_num_threads(threads);
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  snn::PoissonEncoder enc(snn::PoissonEncoderOptions().seed(1).step_mode(snn::StepMode::kMulti));
  snn::Linear fc1(784, 256), fc2(256, 10);
  snn::LIF lif1(snn::LIFOptions().step_mode(snn::StepMode::kMulti));
  snn::LIF lif2(snn::LIFOptions().step_mode(snn::StepMode::kMulti));
  {
    fc1->weight.mul_(8.0);  // firing rates of a trained network: some 10-20 % per step
    fc2->weight.mul_(4.0);
  }
  const torch::Tensor x = torch::rand({batch, 784});
  const torch::Tensor ids = torch::arange(batch);
  std::printf("LibTorch intra-op threads: %d; B = %lld, T = %lld, 784-256-10 LIF, best of %d\n", threads,
              static_cast<long long>(batch), static_cast<long long>(steps), reps);

  std::vector<snn::Temporal*> temporal{enc.get(), lif1.get(), lif2.get()};
  const double t_seq = best_of(reps, [&] {
    for (auto* t : temporal) t->reset_state();
    torch::Tensor counts;
    for (int64_t t = 0; t < steps; ++t) {
      for (auto* m : temporal) m->set_time(t, ids);
      const torch::Tensor out = lif2(fc2(lif1(fc1(enc(x.unsqueeze(0))))))[0];
      counts = counts.defined() ? counts + out : out.clone();
    }
  });
  std::printf("%-44s %8.1f ms  1.00x\n", "sequential step loop (reference)", t_seq * 1e3);

  for (int stages : {1, 2}) {
    for (int64_t K : {int64_t{1}, int64_t{8}, steps}) {
      snn::ModelPipeline pipe(snn::PipelineOptions().steps_per_tick(K));
      if (stages == 1) {
        pipe.append(torch::nn::Sequential(enc, fc1, lif1, fc2, lif2), torch::kCPU);
      } else {
        pipe.append(torch::nn::Sequential(enc, fc1, lif1), torch::kCPU);
        pipe.append(torch::nn::Sequential(fc2, lif2), torch::kCPU);
      }
      const double t = best_of(reps, [&] { pipe.constant_forward(x, steps, true, ids); });
      char name[96];
      std::snprintf(name, sizeof name, "pipeline, %d CPU stage%s, K = %lld", stages, stages > 1 ? "s" : "",
                    static_cast<long long>(K));
      std::printf("%-44s %8.1f ms  %.2fx\n", name, t * 1e3, t_seq / t);
    }
  }
  return 0;
}
