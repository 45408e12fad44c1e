// snn::BatchNorm (batch_norm.h): per-step batch statistics while training,
// against LibTorch's batch_norm step by step; running statistics; gradients
// against autograd; results and gradients independent of the block size K.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "snn/core/error.h"
#include "support/cpu_builds.h"
#include "snn/neurons/batch_norm.h"

namespace snn {
namespace {

BatchNorm make(int64_t C) {
  BatchNorm bn(BatchNormOptions(C).eps(1e-4).momentum(0.2));
  torch::NoGradGuard no_grad;
  bn->weight.copy_(torch::linspace(0.5, 1.5, C));
  bn->bias.copy_(torch::linspace(-0.2, 0.3, C));
  return bn;
}

TEST(BatchNorm, TrainingNormalisesEachStepByItsOwnBatch) {
  torch::manual_seed(1);
  const torch::Tensor x = torch::randn({4, 6, 3, 5, 5}) * 2 + 0.5;  // [K, B, C, H, W]
  BatchNorm bn = make(3);
  const torch::Tensor y = bn->forward(x.requires_grad_());
  torch::Tensor rm = torch::zeros({3}, torch::kDouble), rv = torch::ones({3}, torch::kDouble);
  for (int64_t k = 0; k < 4; ++k) {
    const torch::Tensor want = torch::batch_norm(x[k].detach().to(torch::kDouble), bn->weight.detach().to(torch::kDouble),
                                                 bn->bias.detach().to(torch::kDouble), {}, {}, true, 0.0, 1e-4, false);
    EXPECT_TRUE(torch::allclose(y[k].to(torch::kDouble), want, 1e-6, 1e-6)) << "step " << k;
    const torch::Tensor xd = x[k].detach().to(torch::kDouble).transpose(0, 1).reshape({3, -1});
    rm = rm * 0.8 + xd.mean(1) * 0.2;
    rv = rv * 0.8 + xd.var(1, /*unbiased=*/true) * 0.2;
  }
  EXPECT_TRUE(torch::allclose(bn->running_mean.to(torch::kDouble), rm, 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(bn->running_var.to(torch::kDouble), rv, 1e-6, 1e-7));
}

TEST(BatchNorm, InferenceAppliesTheRunningStatistics) {
  BatchNorm bn = make(2);
  {
    torch::NoGradGuard no_grad;
    bn->running_mean.copy_(torch::tensor({0.5f, -1.0f}));
    bn->running_var.copy_(torch::tensor({4.0f, 0.25f}));
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::tensor({1.0f, 2.0f}).view({1, 1, 2});
  const torch::Tensor y = bn->forward(x);
  EXPECT_NEAR(y[0][0][0].item<double>(), (1.0 - 0.5) / std::sqrt(4.0 + 1e-4) * 0.5 - 0.2, 1e-6);
  EXPECT_NEAR(y[0][0][1].item<double>(), (2.0 + 1.0) / std::sqrt(0.25 + 1e-4) * 1.5 + 0.3, 1e-5);
  EXPECT_EQ(bn->running_mean[0].item<float>(), 0.5f);  // inference leaves the statistics alone
}

// The CPU passes' arithmetic, written out once more here as the scalar
// loops it was first written as: per (step, channel), four partial sums by
// position s mod 4 within each row, joined as (0 + 1) + (2 + 3), every
// value in double and rounded once. Every build of the loops (baseline,
// AVX2, AVX-512) must give these bits, outputs and input gradients alike,
// for rows whose length is and is not a multiple of 4.
struct ReferenceBn {
  torch::Tensor y, gx;  // [K, B, C, S] of x's dtype
};

template <typename T>
ReferenceBn reference_bn(const torch::Tensor& x4, const torch::Tensor& g4, const torch::Tensor& weight,
                         const torch::Tensor& bias, double eps) {
  const int64_t K = x4.size(0), B = x4.size(1), C = x4.size(2), S = x4.size(3);
  const double n = static_cast<double>(B * S);
  ReferenceBn r{torch::empty_like(x4), torch::empty_like(x4)};
  const T* x = x4.data_ptr<T>();
  const T* g = g4.data_ptr<T>();
  T* y = r.y.data_ptr<T>();
  T* gx = r.gx.data_ptr<T>();
  const auto join = [](const double (&a)[4]) { return (a[0] + a[1]) + (a[2] + a[3]); };
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      const double wc = weight[c].item<double>(), bc = bias[c].item<double>();
      const auto at = [&](int64_t b, int64_t s) { return ((k * B + b) * C + c) * S + s; };
      double a[4] = {0, 0, 0, 0};
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) a[s & 3] += static_cast<double>(x[at(b, s)]) - 0.0;
      const double m = join(a) / n;
      double q[4] = {0, 0, 0, 0};
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) {
          const double d = static_cast<double>(x[at(b, s)]) - m;
          q[s & 3] += d * d;
        }
      const double is = 1.0 / std::sqrt(join(q) / n + eps);
      double sp[4] = {0, 0, 0, 0}, spx[4] = {0, 0, 0, 0};
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) {
          y[at(b, s)] = static_cast<T>((static_cast<double>(x[at(b, s)]) - m) * is * wc + bc);
          const double xhat = (static_cast<double>(x[at(b, s)]) - m) * is;
          const double gp = static_cast<double>(g[at(b, s)]) * wc;
          sp[s & 3] += gp;
          spx[s & 3] += gp * xhat;
        }
      const double mean_gp = join(sp) / n, mean_gpx = join(spx) / n;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) {
          const double xhat = (static_cast<double>(x[at(b, s)]) - m) * is;
          const double gp = static_cast<double>(g[at(b, s)]) * wc;
          gx[at(b, s)] = static_cast<T>(is * (gp - mean_gp - xhat * mean_gpx));
        }
    }
  }
  return r;
}

TEST(BatchNorm, EveryCpuBuildGivesTheReferenceArithmeticBitForBit) {
  torch::manual_seed(9);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    // Rows of 4 x 4, 7 x 7 (49: a tail of 1), 2 x 3 (a tail of 2), 3 x 5
    // (15: a tail of 3) and 1; some inputs exactly -0.
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
             {2, 5, 3, 4, 4}, {2, 3, 2, 7, 7}, {2, 4, 2, 2, 3}, {3, 4, 2, 3, 5}, {2, 6, 3}}) {
      torch::Tensor x0 = torch::randn(shape, torch::dtype(dtype)) * 2 + 0.3;
      x0.masked_fill_(torch::rand(shape) < 0.1, -0.0);
      const torch::Tensor g0 = torch::randn(shape, torch::dtype(dtype));
      const int64_t K = shape[0], B = shape[1], C = shape[2];
      const torch::Tensor x4 = x0.reshape({K, B, C, -1}).contiguous(), g4 = g0.reshape({K, B, C, -1}).contiguous();
      std::vector<torch::Tensor> wgrads;
      for (const CpuIsa isa : test::cpu_builds()) {
        test::CpuIsaScope scope(isa);
        BatchNorm bn = make(C);
        bn->to(dtype);
        const ReferenceBn want = dtype == torch::kFloat
                                     ? reference_bn<float>(x4, g4, bn->weight.detach(), bn->bias.detach(), 1e-4)
                                     : reference_bn<double>(x4, g4, bn->weight.detach(), bn->bias.detach(), 1e-4);
        const torch::Tensor x = x0.clone().requires_grad_();
        const torch::Tensor y = bn->forward(x);
        (y * g0).sum().backward();
        const std::string what = std::string(cpu_loops_name(cpu_loops())) + " " + c10::toString(dtype) + " " +
                                 c10::str(torch::IntArrayRef(shape));
        EXPECT_TRUE(torch::equal(y.detach().reshape(x4.sizes()), want.y)) << what;
        EXPECT_TRUE(torch::equal(x.grad().reshape(x4.sizes()), want.gx)) << what;
        wgrads.push_back(torch::cat({bn->weight.grad(), bn->bias.grad()}));
      }
      for (size_t i = 1; i < wgrads.size(); ++i) EXPECT_TRUE(torch::equal(wgrads[0], wgrads[i]));
    }
  }
}

// The CPU loop of inference against the tensor formula it replaces:
// double(x) * scale + shift, rounded once; float and double, bool spikes,
// any thread count.
TEST(BatchNorm, InferenceLoopGivesTheTensorFormulasValuesBitForBit) {
  torch::manual_seed(5);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    BatchNorm bn = make(3);
    {
      torch::NoGradGuard no_grad;
      bn->to(dtype);
      bn->running_mean.copy_(torch::tensor({0.3, -0.7, 0.01}));
      bn->running_var.copy_(torch::tensor({0.5, 2.0, 1e-3}));
    }
    torch::NoGradGuard no_grad;
    const auto [scale, shift] = bn->inference_affine();
    for (const bool spikes : {false, true}) {
      const torch::Tensor r = torch::randn({3, 5, 3, 7, 9}, torch::dtype(dtype)) * 3;
      const torch::Tensor x = spikes ? r > 0.5 : r;
      const torch::Tensor want = (x.to(torch::kDouble) * scale.view({1, 1, 3, 1, 1}) + shift.view({1, 1, 3, 1, 1}))
                                     .to(dtype);
      const int threads = at::get_num_threads();
      for (const int t : {1, 2}) {
        at::set_num_threads(t);
        const torch::Tensor y = bn->forward(x);
        EXPECT_EQ(y.scalar_type(), dtype);
        EXPECT_TRUE(torch::equal(y, want)) << c10::toString(dtype) << (spikes ? " spikes" : "") << ", threads " << t;
      }
      at::set_num_threads(threads);
      // A [K, B, C] input (after a Linear) too.
      const torch::Tensor v = r.select(4, 0).select(3, 0);
      EXPECT_TRUE(torch::equal(bn->forward(v), (v.to(torch::kDouble) * scale + shift).to(dtype)));
    }
  }
}

TEST(BatchNorm, GradientsEqualAutogradOfLibTorchsBatchNorm) {
  torch::manual_seed(2);
  const torch::Tensor x0 = torch::randn({3, 5, 4, 3}, torch::kDouble);
  const torch::Tensor probe = torch::randn({3, 5, 4, 3}, torch::kDouble);
  BatchNorm bn(BatchNormOptions(4));
  bn->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    bn->weight.copy_(torch::linspace(0.5, 1.5, 4, torch::kDouble));
  }
  const torch::Tensor x = x0.clone().requires_grad_();
  (bn->forward(x) * probe).sum().backward();
  const torch::Tensor w = bn->weight.detach().clone().requires_grad_(), b = bn->bias.detach().clone().requires_grad_();
  const torch::Tensor xr = x0.clone().requires_grad_();
  torch::Tensor loss = torch::zeros({}, torch::kDouble);
  for (int64_t k = 0; k < 3; ++k) {
    loss = loss + (torch::batch_norm(xr[k], w, b, {}, {}, true, 0.0, 1e-5, false) * probe[k]).sum();
  }
  loss.backward();
  EXPECT_TRUE(torch::allclose(x.grad(), xr.grad(), 1e-9, 1e-10));
  EXPECT_TRUE(torch::allclose(bn->weight.grad(), w.grad(), 1e-9, 1e-10));
  EXPECT_TRUE(torch::allclose(bn->bias.grad(), b.grad(), 1e-9, 1e-10));
}

// Blocks of K steps (each its own forward and backward, backward in reverse
// block order as backpropagation through time runs them) give the outputs,
// running statistics and gradients of one block of all steps, bit for bit.
TEST(BatchNorm, BlocksOfAnySizeGiveTheSameResultsAndGradients) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({6, 7, 3, 4, 4});
  const torch::Tensor probe = torch::randn({6, 7, 3, 4, 4});
  const auto run = [&](int64_t K) {
    BatchNorm bn = make(3);
    std::vector<torch::Tensor> xs, ys;
    for (int64_t t = 0; t < 6; t += K) {
      xs.push_back(x.narrow(0, t, K).clone().requires_grad_());
      ys.push_back(bn->forward(xs.back()));
    }
    for (int64_t i = static_cast<int64_t>(ys.size()) - 1; i >= 0; --i) {
      (ys[i] * probe.narrow(0, i * K, K)).sum().backward();
    }
    std::vector<torch::Tensor> gx;
    for (auto& xi : xs) gx.push_back(xi.grad());
    return std::vector<torch::Tensor>{torch::cat(ys).detach(), torch::cat(gx), bn->weight.grad().clone(),
                                      bn->bias.grad().clone(), bn->running_mean.clone(), bn->running_var.clone()};
  };
  const auto all = run(6);
  for (int64_t K : {1, 2, 3}) {
    const auto blocks = run(K);
    for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(torch::equal(all[i], blocks[i])) << "K " << K << ", item " << i;
  }
}

TEST(BatchNorm, BadOptionsAndShapesAreClearErrors) {
  EXPECT_THROW(BatchNorm(BatchNormOptions(0)), Error);
  EXPECT_THROW(BatchNorm(BatchNormOptions(3).eps(0)), Error);
  EXPECT_THROW(BatchNorm(BatchNormOptions(3).momentum(1.5)), Error);
  BatchNorm bn(BatchNormOptions(3));
  try {
    bn->forward(torch::zeros({2, 4, 5}));
    FAIL() << "a [2, 4, 5] input to 3 channels was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("BatchNorm of 3 channels takes [K, B, 3, ...], got [2, 4, 5]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace snn
