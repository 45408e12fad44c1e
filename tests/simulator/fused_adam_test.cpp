#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "snn/simulator/fused_adam.h"

namespace {

// Runs `steps` Adam steps on the same parameters and gradients with
// torch::optim::Adam and with snn::fused_adam_step; every parameter and
// moment must be equal bit for bit after every step.
void expect_same_steps(torch::ScalarType dtype, const std::vector<int64_t>& sizes, torch::optim::AdamOptions options,
                       int steps) {
  torch::manual_seed(7);
  std::vector<torch::Tensor> ref, fused;
  for (int64_t n : sizes) {
    const torch::Tensor init = torch::randn({n}, torch::dtype(dtype)) * 0.1;
    ref.push_back(init.clone().requires_grad_(true));
    fused.push_back(init.clone().requires_grad_(true));
  }
  torch::optim::Adam a(ref, options), b(fused, options);
  for (int step = 0; step < steps; ++step) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      // Gradients of very different scales, exact zeros among them.
      torch::Tensor g = torch::randn({sizes[k]}, torch::dtype(dtype)) * std::pow(10.0, (step % 5) - 4);
      g.masked_fill_(torch::rand({sizes[k]}) < 0.2, 0.0);
      ref[k].mutable_grad() = g.clone();
      fused[k].mutable_grad() = g.clone();
    }
    a.step();
    snn::fused_adam_step(b);
    for (size_t k = 0; k < sizes.size(); ++k) {
      ASSERT_TRUE(torch::equal(ref[k], fused[k])) << "parameter " << k << " (" << sizes[k] << " values, "
                                                   << dtype << ") after step " << step + 1 << ": max difference "
                                                   << (ref[k] - fused[k]).abs().max().item<double>();
      const auto& sa = static_cast<torch::optim::AdamParamState&>(*a.state().at(ref[k].unsafeGetTensorImpl()));
      const auto& sb = static_cast<torch::optim::AdamParamState&>(*b.state().at(fused[k].unsafeGetTensorImpl()));
      ASSERT_EQ(sa.step(), sb.step());
      ASSERT_TRUE(torch::equal(sa.exp_avg(), sb.exp_avg())) << "exp_avg " << k << " after step " << step + 1;
      ASSERT_TRUE(torch::equal(sa.exp_avg_sq(), sb.exp_avg_sq())) << "exp_avg_sq " << k << " after step " << step + 1;
    }
  }
}

// Sizes: shorter than a vector pair, tails of every length of AVX2's and
// AVX-512's vectors, one thread's chunk (ATen's grain is 32768 values) and
// several, odd splits among them.
const std::vector<int64_t> kSizes = {1, 7, 10, 15, 16, 17, 31, 33, 47, 63, 256, 2560, 32768, 32769, 100003, 784 * 256};

// Runs wherever it is built, never skips: on ATen's AVX2 and AVX512
// capabilities the fused loop must run (and equal torch), on DEFAULT (no
// FMA) the step must go to torch (and so equal it). CTest also runs it with
// ATEN_CPU_CAPABILITY=avx2 and =default (tests/CMakeLists.txt), so an
// AVX-512 CPU checks all three. Which one ran is in the test's properties.
TEST(FusedAdam, EqualsTorchAdamBitForBit) {
  const std::string capability = at::get_cpu_capability();
  RecordProperty("aten_cpu_capability", capability);
  if (capability == "AVX2" || capability == "AVX512") {
    ASSERT_TRUE(snn::fused_adam_available()) << "ATen's CPU capability is " << capability
                                             << ": fused_adam_step must fuse there, not hand the step to torch";
  } else {
    ASSERT_FALSE(snn::fused_adam_available()) << "ATen's CPU capability is " << capability
                                              << ": its kernels round without FMA, which the fused loop does not";
  }
  const int threads = at::get_num_threads();
  for (int t : {1, 2}) {
    at::set_num_threads(t);
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(testing::Message() << t << " threads, " << dtype);
      expect_same_steps(dtype, kSizes, torch::optim::AdamOptions(1e-3), 12);
      expect_same_steps(dtype, kSizes, torch::optim::AdamOptions(0.05).betas({0.8, 0.95}).eps(1e-6), 6);
    }
  }
  at::set_num_threads(threads);
}

TEST(FusedAdam, SettingsItDoesNotFuseGoToTorch) {
  // Weight decay and AMSGrad: the whole step is torch's own, so equal too.
  expect_same_steps(torch::kFloat, {10, 300}, torch::optim::AdamOptions(1e-3).weight_decay(1e-2), 4);
  expect_same_steps(torch::kFloat, {10, 300}, torch::optim::AdamOptions(1e-3).amsgrad(true), 4);
}

}  // namespace
