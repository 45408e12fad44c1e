#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "snn/core/frozen_weights.h"
#include "snn/neurons/linear.h"
#include "support/cpu_builds.h"
#include "support/test_util.h"

namespace snn {
namespace {

TEST(Linear, RowResultsDoNotDependOnBatchingThreadsOrIsa) {
  torch::manual_seed(1);
  Linear fc(784, 37);
  const torch::Tensor x = (torch::rand({32, 64, 784}) < 0.2).to(torch::kFloat);  // [T, B, in] spikes
  const torch::Tensor all = fc->forward(x);
  EXPECT_EQ(all.sizes(), (std::vector<int64_t>{32, 64, 37}));
  // One sample at one step alone, and blocks of other shapes.
  EXPECT_TRUE(torch::equal(fc->forward(x[5][17].unsqueeze(0))[0], all[5][17]));
  EXPECT_TRUE(torch::equal(fc->forward(x.narrow(1, 3, 7)), all.narrow(1, 3, 7)));
  EXPECT_TRUE(torch::equal(fc->forward(x.narrow(0, 2, 3)), all.narrow(0, 2, 3)));
  const int saved = at::get_num_threads();
  at::set_num_threads(1);
  const torch::Tensor one = fc->forward(x);
  at::set_num_threads(saved);
  EXPECT_TRUE(torch::equal(one, all));
  for (CpuIsa isa : test::cpu_builds()) {
    test::CpuIsaScope scope(isa);
    EXPECT_TRUE(torch::equal(fc->forward(x), all)) << "CpuIsa " << static_cast<int>(isa);
  }
}

TEST(Linear, AgreesWithTorchLinearAndItsGradients) {
  torch::manual_seed(2);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    Linear fc(50, 20);
    fc->to(dtype);
    const torch::Tensor x = torch::randn({6, 50}, dtype).requires_grad_();  // dense input too
    const torch::Tensor y = fc->forward(x);
    const torch::Tensor y_ref = torch::nn::functional::linear(x, fc->weight, fc->bias);
    const double tol = dtype == torch::kFloat ? 1e-5 : 1e-12;
    EXPECT_TRUE(torch::allclose(y, y_ref, tol, tol));
    const torch::Tensor g = torch::randn({6, 20}, dtype);
    const auto grads = torch::autograd::grad({y}, {x, fc->weight, fc->bias}, {g});
    const auto grads_ref = torch::autograd::grad({y_ref}, {x, fc->weight, fc->bias}, {g});
    for (size_t i = 0; i < grads.size(); ++i) EXPECT_TRUE(torch::allclose(grads[i], grads_ref[i], tol, tol)) << i;
  }
}

// With carried sums, a training step's gradients must not depend on how the
// steps were blocked into calls, nor on the thread count: the backbone of
// reproducible training for any steps_per_tick or stage partition.
TEST(Linear, CarriedGradientSumsDoNotDependOnBlockingOrThreads) {
  torch::manual_seed(3);
  const int64_t T = 6, B = 5, I = 40, O = 19;
  const torch::Tensor x = (torch::rand({T, B, I}) < 0.3).to(torch::kFloat);
  const torch::Tensor gy = torch::randn({T, B, O});
  Linear fc(LinearOptions(I, O).carry_grad_sums(true));
  auto grads_with = [&](std::vector<int64_t> blocks, int threads) {
    const int saved = at::get_num_threads();
    at::set_num_threads(threads);
    fc->zero_grad();
    std::vector<torch::Tensor> ys;
    int64_t t = 0;
    for (int64_t len : blocks) {
      ys.push_back(fc->forward(x.narrow(0, t, len)));
      t += len;
    }
    (torch::cat(ys) * gy).sum().backward();
    at::set_num_threads(saved);
    return std::make_pair(fc->weight.grad().clone(), fc->bias.grad().clone());
  };
  const auto ref = grads_with({6}, 2);
  // Reference in double: gy^T x summed over steps and samples.
  const torch::Tensor gw = gy.reshape({-1, O}).to(torch::kDouble).t().matmul(x.reshape({-1, I}).to(torch::kDouble));
  EXPECT_TRUE(torch::allclose(ref.first.to(torch::kDouble), gw, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(ref.second.to(torch::kDouble), gy.sum(std::vector<int64_t>{0, 1}).to(torch::kDouble), 1e-6, 1e-6));
  for (const auto& [blocks, threads] : std::vector<std::pair<std::vector<int64_t>, int>>{
           {{1, 1, 1, 1, 1, 1}, 2}, {{4, 2}, 1}, {{2, 3, 1}, 2}, {{6}, 1}}) {
    const auto g = grads_with(blocks, threads);
    EXPECT_TRUE(torch::equal(g.first, ref.first)) << blocks.size() << " blocks, " << threads << " threads";
    EXPECT_TRUE(torch::equal(g.second, ref.second)) << blocks.size() << " blocks, " << threads << " threads";
  }
  // Accumulating two backward passes without zero_grad adds, like autograd.
  (fc->forward(x) * gy).sum().backward();
  EXPECT_TRUE(torch::allclose(fc->weight.grad(), 2 * ref.first, 1e-6, 1e-6));
  // A gradient zeroed in place (zero_grad without set_to_none) restarts the sums.
  fc->weight.mutable_grad().zero_();
  fc->bias.mutable_grad().zero_();
  (fc->forward(x) * gy).sum().backward();
  EXPECT_TRUE(torch::equal(fc->weight.grad(), ref.first));
  EXPECT_TRUE(torch::equal(fc->bias.grad(), ref.second));
}

TEST(Linear, DroppedGradientTensorIsReusedOnlyWhenNothingHoldsIt) {
  // With carried sums the layer writes .grad itself; after zero_grad (set to
  // none) it reuses the tensor it wrote last, unless someone still holds it
  // (or a view of it): what they hold must never change under them.
  torch::manual_seed(4);
  const torch::Tensor x = (torch::rand({3, 4, 20}) < 0.3).to(torch::kFloat);
  const torch::Tensor gy = torch::randn({3, 4, 9});
  Linear fc(LinearOptions(20, 9).carry_grad_sums(true));
  (fc->forward(x) * gy).sum().backward();
  const torch::Tensor first = fc->weight.grad().clone();
  const void* storage = fc->weight.grad().data_ptr();
  fc->zero_grad();  // set to none, nothing holds the old tensor
  (fc->forward(x) * (2 * gy)).sum().backward();
  EXPECT_EQ(fc->weight.grad().data_ptr(), storage) << "the dropped gradient's tensor is reused";
  EXPECT_TRUE(torch::equal(fc->weight.grad(), 2 * first));
  EXPECT_TRUE(fc->weight.grad().is_contiguous());
  // Rewriting it in place (accumulation without zero_grad) bumps its version, as copy_ does.
  const auto version = fc->weight.grad()._version();
  (fc->forward(x) * gy).sum().backward();
  EXPECT_GT(fc->weight.grad()._version(), version);
  EXPECT_TRUE(torch::allclose(fc->weight.grad(), 3 * first, 1e-6, 1e-6));
  fc->zero_grad();
  (fc->forward(x) * (2 * gy)).sum().backward();
  const torch::Tensor held = fc->weight.grad();
  const torch::Tensor held_view = fc->bias.grad().view({3, 3});
  const torch::Tensor held_value = held.clone(), held_view_value = held_view.clone();
  fc->zero_grad();
  (fc->forward(x) * gy).sum().backward();
  EXPECT_NE(fc->weight.grad().data_ptr(), held.data_ptr());
  EXPECT_NE(fc->bias.grad().data_ptr(), held_view.data_ptr());
  EXPECT_TRUE(torch::equal(held, held_value)) << "a held gradient changed";
  EXPECT_TRUE(torch::equal(held_view, held_view_value)) << "a view of a held gradient changed";
  EXPECT_TRUE(torch::equal(fc->weight.grad(), first));
}

TEST(Linear, SumsOnlyModeCarriesTheSameSumsWithoutWritingGrad) {
  // keep_grad_sums_only (data-parallel training): the double sums are those
  // the default mode carries, call after call; .grad() stays empty; a
  // restart starts them from zero at the next backward call, and before it
  // carried_grad_sum() gives nothing.
  torch::manual_seed(5);
  const torch::Tensor x = (torch::rand({3, 4, 20}) < 0.3).to(torch::kFloat);
  const torch::Tensor gy = torch::randn({3, 4, 9});
  Linear plain(LinearOptions(20, 9).carry_grad_sums(true));
  const auto same_as_plain = [&] {
    Linear l(LinearOptions(20, 9).carry_grad_sums(true));
    torch::NoGradGuard no_grad;
    l->weight.copy_(plain->weight);
    l->bias.copy_(plain->bias);
    return l;
  };
  Linear only = same_as_plain();
  only->keep_grad_sums_only(true);
  EXPECT_FALSE(only->carried_grad_sum(only->weight).defined());
  for (int call = 0; call < 2; ++call) {  // two calls into the same sums
    (plain->forward(x) * (gy + call)).sum().backward();
    (only->forward(x) * (gy + call)).sum().backward();
  }
  EXPECT_FALSE(only->weight.grad().defined());
  EXPECT_FALSE(only->bias.grad().defined());
  ASSERT_TRUE(only->carried_grad_sum(only->weight).defined());
  EXPECT_TRUE(torch::equal(only->carried_grad_sum(only->weight), plain->carried_grad_sum(plain->weight)));
  EXPECT_TRUE(torch::equal(only->carried_grad_sum(only->bias), plain->carried_grad_sum(plain->bias)));
  only->restart_grad_sums();
  plain->zero_grad();
  EXPECT_FALSE(only->carried_grad_sum(only->weight).defined());
  EXPECT_FALSE(only->carried_grad_sum(only->bias).defined());
  (plain->forward(x) * gy).sum().backward();
  (only->forward(x) * gy).sum().backward();
  EXPECT_TRUE(torch::equal(only->carried_grad_sum(only->weight), plain->carried_grad_sum(plain->weight)));
  EXPECT_TRUE(torch::equal(only->carried_grad_sum(only->bias), plain->carried_grad_sum(plain->bias)));
  // Back to the default mode: .grad() is written again, from the restarted sums.
  only->keep_grad_sums_only(false);
  (only->forward(x) * gy).sum().backward();
  ASSERT_TRUE(only->weight.grad().defined());
  EXPECT_TRUE(torch::equal(only->weight.grad(), plain->weight.grad()));
  // A layer switched on with a gradient in .grad() and back off: the sums
  // restart from that gradient, not from the sums kept in between.
  Linear mixed = same_as_plain(), twice = same_as_plain();
  (mixed->forward(x) * gy).sum().backward();
  (twice->forward(x) * gy).sum().backward();
  mixed->keep_grad_sums_only(true);
  (mixed->forward(x) * (gy + 5)).sum().backward();  // kept in the sums only
  mixed->keep_grad_sums_only(false);
  (mixed->forward(x) * (gy - 1)).sum().backward();
  (twice->forward(x) * (gy - 1)).sum().backward();
  // .grad() held the first call's rounding, so the sums restart from float.
  EXPECT_TRUE(torch::allclose(mixed->weight.grad(), twice->weight.grad(), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(mixed->bias.grad(), twice->bias.grad(), 1e-5, 1e-6));
  Linear none(LinearOptions(20, 9));
  EXPECT_THROW(none->keep_grad_sums_only(true), Error);
}

// The dense and the event-driven kernels add the same products in the same
// order, so every path gives the same values, on every ISA and thread count,
// for spikes and for real-valued sparse inputs, and for layer sizes that
// leave partial SIMD groups and tiles.
TEST(Linear, DenseEventAndAutoPathsAgreeExactly) {
  torch::manual_seed(4);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{
             {784, 37}, {13, 1}, {100, 10}, {64, 16}, {257, 70}, {1024, 1024}}) {
      Linear dense(LinearOptions(in, out).path(LinearPath::kDense));
      dense->to(dtype);
      Linear event(LinearOptions(in, out).path(LinearPath::kEvent));
      event->to(dtype);
      Linear automatic(LinearOptions(in, out).time_kernels(false));  // the formula alone
      automatic->to(dtype);
      Linear timed(LinearOptions(in, out));  // and timing both kernels near the crossover
      timed->to(dtype);
      torch::NoGradGuard no_grad;
      for (Linear* m : {&event, &automatic, &timed}) {
        (*m)->weight.copy_(dense->weight);
        (*m)->bias.copy_(dense->bias);
      }
      for (double p : {0.0, 0.02, 0.3, 0.9}) {
        const torch::Tensor spikes = (torch::rand({3, 35, in}) < p).to(dtype);
        const torch::Tensor real = spikes * torch::randn({3, 35, in}, dtype);
        for (const torch::Tensor& x : {spikes, real}) {
          const torch::Tensor ref = dense->forward(x);
          const torch::Tensor ref_close = torch::nn::functional::linear(x, dense->weight, dense->bias);
          const double tol = dtype == torch::kFloat ? 1e-4 : 1e-10;
          ASSERT_TRUE(torch::allclose(ref, ref_close, tol, tol)) << in << "x" << out << " p " << p;
          EXPECT_TRUE(torch::equal(event->forward(x), ref)) << in << "x" << out << " p " << p;
          EXPECT_TRUE(torch::equal(automatic->forward(x), ref)) << in << "x" << out << " p " << p;
          EXPECT_EQ(automatic->last_path(), functional::choose_path(automatic->last_density(), kLinearEventCrossover, out));
          for (int call = 0; call < 5; ++call) {  // through a trial, where one runs
            EXPECT_TRUE(torch::equal(timed->forward(x), ref)) << in << "x" << out << " p " << p << " call " << call;
          }
          for (CpuIsa isa : test::cpu_builds()) {
            test::CpuIsaScope scope(isa);
            const int b = static_cast<int>(isa);
            EXPECT_TRUE(torch::equal(event->forward(x), ref)) << "CpuIsa " << b << " " << in << "x" << out << " p " << p;
            EXPECT_TRUE(torch::equal(dense->forward(x), ref)) << "CpuIsa " << b << " " << in << "x" << out << " p " << p;
          }
          const int saved = at::get_num_threads();
          at::set_num_threads(1);
          EXPECT_TRUE(torch::equal(event->forward(x), ref)) << "1 thread " << in << "x" << out;
          at::set_num_threads(saved);
        }
      }
    }
  }
}

// The weight gradient kernel works in tiles of 16 outputs, two at a time,
// with a path for spikes (no products): every layer width and input kind
// must give the double-precision reference.
TEST(Linear, WeightGradientsMatchADoubleReferenceForEveryWidth) {
  torch::manual_seed(6);
  const int64_t T = 3, B = 29, I = 45;  // 87 rows: two of the weight gradient's 64-row chunks
  for (int64_t O : {1, 10, 16, 19, 40, 300}) {
    for (bool spikes : {true, false}) {
      torch::Tensor x = (torch::rand({T, B, I}) < 0.3).to(torch::kFloat);
      if (!spikes) x = x * torch::randn({T, B, I});
      const torch::Tensor gy = torch::randn({T, B, O});
      Linear fc(LinearOptions(I, O).carry_grad_sums(true));
      (fc->forward(x) * gy).sum().backward();
      const torch::Tensor gw =
          gy.reshape({-1, O}).to(torch::kDouble).t().matmul(x.reshape({-1, I}).to(torch::kDouble));
      EXPECT_TRUE(torch::allclose(fc->weight.grad().to(torch::kDouble), gw, 1e-5, 1e-5))
          << "out " << O << (spikes ? " spikes" : " real inputs");
      EXPECT_TRUE(torch::allclose(fc->bias.grad().to(torch::kDouble), gy.reshape({-1, O}).to(torch::kDouble).sum(0),
                                  1e-5, 1e-5))
          << "bias, out " << O << (spikes ? " spikes" : " real inputs");
    }
  }
}

TEST(Linear, AutoChoosesByMeasuredDensity) {
  Linear fc(256, 512);
  torch::NoGradGuard no_grad;
  fc->forward(torch::zeros({8, 256}));
  EXPECT_EQ(fc->last_path(), LinearPath::kEvent);
  EXPECT_EQ(fc->last_density(), 0.0);
  fc->forward(torch::ones({8, 256}));
  EXPECT_EQ(fc->last_path(), LinearPath::kDense);
  EXPECT_EQ(fc->last_density(), 1.0);
  // Narrow layers amortise the event-driven lists less.
  EXPECT_EQ(functional::choose_path(0.3, 0.38, 1024), LinearPath::kEvent);
  EXPECT_EQ(functional::choose_path(0.3, 0.38, 10), LinearPath::kDense);
  EXPECT_THROW(Linear(LinearOptions(4, 3).event_crossover(1.5)), Error);
}

// kAuto near the crossover: each kernel timed twice, alternately, then the
// faster (the best of its times), per bin of density (25% wide) and rows
// per call (a factor 2); far from the crossover, the formula's guess untimed.
TEST(Linear, KernelTrialTimesBothKernelsNearTheCrossoverAndKeepsTheFaster) {
  const LinearPath kE = LinearPath::kEvent, kD = LinearPath::kDense;
  KernelTrial trial;
  bool timed = true;
  EXPECT_EQ(trial.choose(0.05, 640, 0.3, kE, timed), kE);  // below crossover / 3
  EXPECT_FALSE(timed);
  EXPECT_EQ(trial.choose(0.95, 640, 0.3, kD, timed), kD);  // above 3 crossover
  EXPECT_FALSE(timed);
  EXPECT_EQ(trial.choose(0.8, 640, 0.3, kD, timed), kD);  // within 3 crossover, but above 0.75
  EXPECT_FALSE(timed);
  EXPECT_EQ(trial.choose(0.0, 640, 0.0, kD, timed), kD);  // crossover 0: dense, as asked
  EXPECT_FALSE(timed);
  EXPECT_EQ(trial.bins(), 0u);
  EXPECT_THROW(trial.record(kE, 1.0), c10::Error);  // nothing being timed
  // Event-driven faster: 1.0 against 1.5 (a slow spell's 3.0 does not count).
  const std::vector<std::pair<LinearPath, double>> runs{{kE, 1.0}, {kD, 2.0}, {kE, 3.0}, {kD, 1.5}};
  for (const auto& [want, seconds] : runs) {
    ASSERT_EQ(trial.choose(0.4, 640, 0.3, kD, timed), want);
    ASSERT_TRUE(timed);
    trial.record(want, seconds);
  }
  for (const auto& [d, rows] : std::vector<std::pair<double, int64_t>>{{0.4, 640}, {0.34, 640}, {0.4, 1000}}) {
    EXPECT_EQ(trial.choose(d, rows, 0.3, kD, timed), kE) << d << " " << rows;  // the same bin: the winner, untimed
    EXPECT_FALSE(timed) << d << " " << rows;
  }
  EXPECT_EQ(trial.bins(), 1u);
  // Another bin of rows (the weights are read once per block of rows): its own trial.
  EXPECT_EQ(trial.choose(0.4, 64, 0.3, kD, timed), kE);
  EXPECT_TRUE(timed);
  trial.record(kE, 1.0);
  EXPECT_EQ(trial.bins(), 2u);
  // A density that moves back and forth between two bins (0.3 and 0.45):
  // each bin finishes its own trial; the dense kernel faster at 0.45.
  for (int call = 0; call < 2 * 2 * KernelTrial::kRuns; ++call) {
    const bool high = call % 2 == 1;
    const LinearPath got = trial.choose(high ? 0.45 : 0.3, 640, 0.3, kD, timed);
    ASSERT_TRUE(timed) << call;
    EXPECT_EQ(got, call / 2 % 2 == 0 ? kE : kD) << call;  // each bin alternates, event first
    trial.record(got, high ? (got == kE ? 2.0 : 1.0) : (got == kE ? 1.0 : 2.0));
  }
  EXPECT_EQ(trial.choose(0.3, 640, 0.3, kD, timed), kE);
  EXPECT_FALSE(timed);
  EXPECT_EQ(trial.choose(0.45, 640, 0.3, kE, timed), kD);
  EXPECT_FALSE(timed);
  EXPECT_EQ(trial.choose(0.4, 640, 0.3, kD, timed), kE);  // the first bin kept its result
  EXPECT_FALSE(timed);
  EXPECT_THROW(trial.record(LinearPath::kAuto, 1.0), c10::Error);
}

// A layer runs the trial on its own calls: both kernels in turn on forward
// and, separately, on forward_steps, with forward's values bit for bit;
// time_kernels(false) leaves the formula's choice.
TEST(Linear, LayerTimesBothKernelsOnItsFirstCallsNearTheCrossover) {
  torch::manual_seed(8);
  Linear fc(LinearOptions(784, 1024));
  Linear formula(LinearOptions(784, 1024).time_kernels(false));
  Linear dense(LinearOptions(784, 1024).path(LinearPath::kDense));
  torch::NoGradGuard no_grad;
  for (Linear* m : {&formula, &dense}) {
    (*m)->weight.copy_(fc->weight);
    (*m)->bias.copy_(fc->bias);
  }
  const torch::Tensor x = torch::rand({4, 16, 784}) < 0.4;  // near the formula's crossover
  const torch::Tensor ref = dense->forward(x);
  std::vector<LinearPath> paths;
  for (int call = 0; call < 2 * KernelTrial::kRuns + 2; ++call) {
    ASSERT_TRUE(torch::equal(fc->forward(x).view(torch::kInt), ref.view(torch::kInt))) << call;
    paths.push_back(fc->last_path());
    formula->forward(x);
    EXPECT_EQ(formula->last_path(), functional::choose_path(formula->last_density(), kLinearEventCrossover, 1024));
  }
  const std::vector<LinearPath> trial{LinearPath::kEvent, LinearPath::kDense, LinearPath::kEvent, LinearPath::kDense};
  EXPECT_TRUE(std::equal(trial.begin(), trial.end(), paths.begin()));
  EXPECT_EQ(paths[4], paths[5]);  // the winner stays
  // forward_steps has its own trial (its calls cost differently).
  std::vector<LinearPath> step_paths;
  for (int call = 0; call < 2 * KernelTrial::kRuns; ++call) {
    torch::Tensor got = torch::empty_like(ref);
    fc->forward_steps(x, [&](int64_t t, int64_t b0, int64_t b1, void* y) {
      std::memcpy(got[t][b0].data_ptr<float>(), y, (b1 - b0) * 1024 * sizeof(float));
    });
    ASSERT_TRUE(torch::equal(got.view(torch::kInt), ref.view(torch::kInt))) << call;
    step_paths.push_back(fc->last_path());
  }
  EXPECT_EQ(step_paths, trial);
}

// The packed weights are a cache: every change of the parameters (an
// optimiser step, a load, a dtype change) must reach the next forward.
TEST(Linear, PackedWeightsFollowEveryParameterChange) {
  torch::manual_seed(5);
  Linear fc(40, 19);
  const torch::Tensor x = (torch::rand({4, 40}) < 0.5).to(torch::kFloat);
  auto reference = [&](const torch::Tensor& in) { return torch::nn::functional::linear(in, fc->weight, fc->bias); };
  EXPECT_TRUE(torch::allclose(fc->forward(x), reference(x), 1e-5, 1e-5));
  {
    torch::NoGradGuard no_grad;
    fc->weight.mul_(-2.0);
  }
  EXPECT_TRUE(torch::allclose(fc->forward(x), reference(x), 1e-5, 1e-5));
  {
    torch::NoGradGuard no_grad;
    fc->bias.add_(1.0);
  }
  EXPECT_TRUE(torch::allclose(fc->forward(x), reference(x), 1e-5, 1e-5));
  torch::optim::SGD sgd(fc->parameters(), torch::optim::SGDOptions(0.5));
  fc->forward(x).sum().backward();
  sgd.step();
  EXPECT_TRUE(torch::allclose(fc->forward(x), reference(x), 1e-5, 1e-5));
  fc->to(torch::kDouble);
  const torch::Tensor xd = x.to(torch::kDouble);
  EXPECT_TRUE(torch::allclose(fc->forward(xd), reference(xd), 1e-12, 1e-12));
  // Within a FrozenWeights guard the packing is reused; a new guard repacks.
  {
    const FrozenWeights frozen;
    EXPECT_TRUE(torch::allclose(fc->forward(xd), reference(xd), 1e-12, 1e-12));
    EXPECT_TRUE(torch::allclose(fc->forward(xd), reference(xd), 1e-12, 1e-12));
  }
  {
    torch::NoGradGuard no_grad;
    fc->weight.data().mul_(3.0);  // unseen by the version counter
  }
  const FrozenWeights frozen;
  EXPECT_TRUE(torch::allclose(fc->forward(xd), reference(xd), 1e-12, 1e-12));
}

// Bool spikes (one byte each) are read by the event-driven kernel directly
// and converted for the dense one: every path gives what the same spikes as
// reals give, bit for bit, on both ISAs and any thread count; widths cover
// the byte kernel's 32-, 8- and 1-byte steps.
TEST(Linear, BoolSpikesGiveTheValuesOfRealSpikes) {
  torch::manual_seed(41);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{
             {784, 37}, {13, 1}, {100, 10}, {40, 16}, {257, 70}, {1024, 300}}) {
      Linear dense(LinearOptions(in, out).path(LinearPath::kDense));
      Linear event(LinearOptions(in, out).path(LinearPath::kEvent));
      Linear automatic(LinearOptions(in, out));
      for (Linear* m : {&dense, &event, &automatic}) (*m)->to(dtype);
      torch::NoGradGuard no_grad;
      for (Linear* m : {&event, &automatic}) {
        (*m)->weight.copy_(dense->weight);
        (*m)->bias.copy_(dense->bias);
      }
      for (double p : {0.0, 0.03, 0.3, 1.0}) {
        const torch::Tensor bits = torch::rand({3, 35, in}) < p;
        const torch::Tensor ref = dense->forward(bits.to(dtype));
        for (Linear* m : {&dense, &event, &automatic}) {
          const torch::Tensor y = (*m)->forward(bits);
          EXPECT_EQ(y.scalar_type(), dtype);
          EXPECT_TRUE(torch::equal(y, ref)) << in << "x" << out << " p " << p;
          for (CpuIsa isa : test::cpu_builds()) {
            test::CpuIsaScope scope(isa);
            EXPECT_TRUE(torch::equal((*m)->forward(bits), ref))
                << "CpuIsa " << static_cast<int>(isa) << " " << in << "x" << out << " p " << p;
          }
        }
        EXPECT_NEAR(functional::density_of(bits), functional::density_of(bits.to(dtype)), 1e-12);
        const int saved = at::get_num_threads();
        at::set_num_threads(1);
        EXPECT_TRUE(torch::equal(event->forward(bits), ref)) << "1 thread " << in << "x" << out;
        at::set_num_threads(saved);
      }
    }
  }
}

// Bool spikes train like 0/1 reals: the weight gradient kernel lists them
// from the bytes and gives the same gradients bit for bit, per call and
// with sums carried across calls, on every build, for partial output tiles
// and inputs wider than one 32-byte group.
TEST(Linear, BoolSpikesTrainLikeRealSpikes) {
  torch::manual_seed(42);
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{{60, 20}, {300, 37}, {13, 16}}) {
    for (bool carry : {false, true}) {
      for (CpuIsa isa : test::cpu_builds()) {
        set_cpu_isa(isa);
        Linear a(LinearOptions(in, out).carry_grad_sums(carry)), b(LinearOptions(in, out).carry_grad_sums(carry));
        {
          torch::NoGradGuard no_grad;
          b->weight.copy_(a->weight);
          b->bias.copy_(a->bias);
        }
        for (int call = 0; call < 2; ++call) {
          const torch::Tensor bits = torch::rand({5, 4, in}) < 0.2;
          const torch::Tensor ya = a->forward(bits), yb = b->forward(bits.to(torch::kFloat));
          EXPECT_TRUE(torch::equal(ya, yb));
          (ya * ya).sum().backward();
          (yb * yb).sum().backward();
        }
        set_cpu_isa(CpuIsa::kAuto);
        EXPECT_TRUE(torch::equal(a->weight.grad(), b->weight.grad())) << in << "x" << out << " carry " << carry;
        EXPECT_TRUE(torch::equal(a->bias.grad(), b->bias.grad())) << in << "x" << out << " carry " << carry;
      }
    }
  }
}

// The weight gradient kernel (its listing of nonzero inputs, its SIMD sums)
// and the rounding of the sums give the same gradients on every build of the
// CPU loops, for bool spikes, 0/1 reals and real inputs; widths that leave
// a remainder for each vector width and a partial output tile.
TEST(Linear, GradientsAreIdenticalOnEveryBuildOfTheCpuLoops) {
  torch::manual_seed(43);
  // Widths of 3, 4 (the last partial) and 5 tiles, so that the weight
  // gradient's passes take 1 to 4 tiles on one build or another; 6 x 13 rows
  // are two masks of rows.
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{{300, 37}, {90, 60}, {1000, 70}}) {
    const torch::Tensor bits = torch::rand({6, 13, in}) < 0.15;
    const torch::Tensor real = bits.to(torch::kFloat) * torch::randn({6, 13, in});
    Linear ref(LinearOptions(in, out));
    for (const torch::Tensor& x : {bits, bits.to(torch::kFloat), real}) {
      std::vector<torch::Tensor> gw, gb, gx;
      for (CpuIsa isa : test::cpu_builds()) {
        test::CpuIsaScope scope(isa);
        Linear fc(LinearOptions(in, out));
        {
          torch::NoGradGuard no_grad;
          fc->weight.copy_(ref->weight);
          fc->bias.copy_(ref->bias);
        }
        const torch::Tensor xg = x.is_floating_point() ? x.clone().requires_grad_() : x;
        const torch::Tensor y = fc->forward(xg);
        (y * y).sum().backward();
        gw.push_back(fc->weight.grad().clone());
        gb.push_back(fc->bias.grad().clone());
        if (x.is_floating_point()) gx.push_back(xg.grad().clone());
      }
      for (size_t i = 1; i < gw.size(); ++i) {
        EXPECT_TRUE(torch::equal(gw[i], gw[0])) << in << "x" << out << " build " << i << " " << x.scalar_type();
        EXPECT_TRUE(torch::equal(gb[i], gb[0])) << in << "x" << out << " build " << i << " " << x.scalar_type();
        if (!gx.empty()) EXPECT_TRUE(torch::equal(gx[i], gx[0])) << in << "x" << out << " build " << i;
      }
    }
  }
}

// forward_steps hands out forward()'s values a block of samples at a time,
// each sample's steps in order on one thread, for every kernel and input kind.
TEST(Linear, ForwardStepsHandsOutForwardsValuesBlockByBlock) {
  torch::manual_seed(43);
  const int64_t T = 5, B = 70, in = 100, out = 37;
  for (LinearPath path : {LinearPath::kDense, LinearPath::kEvent, LinearPath::kAuto}) {
    Linear fc(LinearOptions(in, out).path(path));
    torch::NoGradGuard no_grad;
    const torch::Tensor bits = torch::rand({T, B, in}) < 0.1;
    for (const torch::Tensor& x : {bits, bits.to(torch::kFloat), torch::randn({T, B, in})}) {
      const torch::Tensor ref = fc->forward(x);
      for (int threads : {1, 2}) {
        const int saved = at::get_num_threads();
        at::set_num_threads(threads);
        torch::Tensor got = torch::full({T, B, out}, std::nan(""));
        std::vector<int64_t> last_step(B, -1);
        std::atomic<bool> in_order{true};
        fc->forward_steps(x, [&](int64_t t, int64_t b0, int64_t b1, void* y) {
          for (int64_t b = b0; b < b1; ++b) {
            if (last_step[b] != t - 1) in_order = false;
            last_step[b] = t;
          }
          got[t].narrow(0, b0, b1 - b0).copy_(torch::from_blob(y, {b1 - b0, out}, torch::kFloat));
        });
        at::set_num_threads(saved);
        EXPECT_TRUE(in_order.load());
        EXPECT_TRUE(torch::equal(got, ref)) << "threads " << threads << " path " << static_cast<int>(path);
      }
    }
  }
  Linear fc(in, out);
  auto noop = [](int64_t, int64_t, int64_t, void*) {};
  EXPECT_THROW(fc->forward_steps(torch::zeros({T, B, in}), noop), Error);  // a gradient is being recorded
  torch::NoGradGuard no_grad;
  EXPECT_THROW(fc->forward_steps(torch::zeros({B, in}), noop), Error);
  EXPECT_THROW(fc->forward_steps(torch::zeros({T, B, in + 1}), noop), Error);
  EXPECT_THROW(fc->forward_steps(torch::zeros({T, B, in}, torch::kDouble), noop), Error);
}

// The bits of a float or double tensor, so that equality also sees the
// sign of zero.
torch::Tensor bits_of(const torch::Tensor& t) {
  return t.contiguous().view(t.scalar_type() == torch::kDouble ? torch::kLong : torch::kInt);
}

// Rate-coded spikes, as the first layer reads them: each sample's steps
// fall on the same inputs (a pixel fires with its own probability), so
// forward_steps and forward on [T, B, in] take a sample's consecutive steps
// together (the kernel's grouped path; independent spikes go row by row, as
// in the test above). Their values are still the row-by-row kernel's
// (forward on the rows as [T B, in]) bit for bit, on every build of the CPU
// loops, in float and double, with and without a bias (of -0 too), for
// batches that leave a part block and step counts that leave a part group.
TEST(Linear, ForwardStepsOnRateCodedSpikesGivesForwardsBits) {
  torch::manual_seed(44);
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{{100, 37}, {300, 150}, {64, 16}, {40, 60}, {512, 256}}) {
    for (const auto& [T, B] : std::vector<std::pair<int64_t, int64_t>>{{9, 70}, {8, 1}, {5, 33}, {13, 3}, {8, 66}}) {
      // Half the inputs silent, the others firing at 30-100%; and (where
      // B > 1) a last sample of independent sparse spikes, which goes row
      // by row, as do the others of its block when it comes first in it.
      const torch::Tensor rate = torch::rand({1, B, in}) * (torch::rand({1, B, in}) < 0.5).to(torch::kFloat);
      torch::Tensor spikes = torch::rand({T, B, in}) < (rate * 0.7 + 0.3 * (rate > 0).to(torch::kFloat));
      if (B > 1) spikes.select(1, B - 1).copy_(torch::rand({T, in}) < 0.05);
      // A silent step within a grouped sample: its masked row must keep
      // the bias's -0. And one sample whose four steps are the same spikes,
      // grouped by construction.
      spikes[1].select(0, 0).zero_();
      if (B > 2) spikes.select(1, 1).copy_(spikes.select(1, 1)[0].expand({T, in}));
      // B = 66: the independent sample first in the last block, whose other
      // sample then goes row by row.
      if (B == 66) spikes.select(1, 64).copy_(torch::rand({T, in}) < 0.05);
      for (torch::ScalarType dtype : {torch::kFloat, torch::kDouble}) {
        for (int bias : {0, 1, 2}) {
          Linear fc(LinearOptions(in, out).bias(bias > 0).path(LinearPath::kEvent));
          torch::NoGradGuard no_grad;
          fc->to(dtype);
          if (bias == 2) fc->bias.fill_(-0.0);
          // Row by row: the rows as a 2-D input, with no steps to group.
          const torch::Tensor ref = bits_of(fc->forward(spikes.reshape({T * B, in})).reshape({T, B, out}));
          for (CpuIsa isa : test::cpu_builds()) {
            test::CpuIsaScope scope(isa);
            for (int threads : {1, 2}) {
              const int saved = at::get_num_threads();
              at::set_num_threads(threads);
              torch::Tensor got = torch::full({T, B, out}, std::nan(""), dtype);
              fc->forward_steps(spikes, [&](int64_t t, int64_t b0, int64_t b1, void* y) {
                got[t].narrow(0, b0, b1 - b0).copy_(torch::from_blob(y, {b1 - b0, out}, dtype));
              });
              // forward on [T, B, in] groups the steps too.
              const torch::Tensor whole = fc->forward(spikes);
              at::set_num_threads(saved);
              EXPECT_TRUE(torch::equal(bits_of(got), ref))
                  << in << "x" << out << " T " << T << " B " << B << " " << dtype << " bias " << bias << " isa "
                  << static_cast<int>(isa) << " threads " << threads;
              EXPECT_TRUE(torch::equal(bits_of(whole), ref))
                  << "forward: " << in << "x" << out << " T " << T << " B " << B << " " << dtype << " bias " << bias
                  << " isa " << static_cast<int>(isa) << " threads " << threads;
            }
          }
        }
      }
    }
  }
}

TEST(Linear, WithoutBiasAndBadShapes) {
  Linear fc(LinearOptions(4, 3).bias(false));
  EXPECT_FALSE(fc->bias.defined());
  EXPECT_EQ(fc->parameters().size(), 1u);
  EXPECT_TRUE(torch::equal(fc->forward(torch::zeros({2, 4})), torch::zeros({2, 3})));
  EXPECT_THROW(fc->forward(torch::zeros({2, 5})), c10::Error);
  EXPECT_THROW(fc->forward(torch::zeros({2, 4}, torch::kDouble)), c10::Error);
  EXPECT_THROW(fc->forward(torch::zeros({2, 4}, torch::kInt)), c10::Error);
  EXPECT_THROW(Linear(0, 3), Error);
}

// The GPU's ordered kernel (kAuto, kEvent) gives the CPU's values bit for
// bit: spikes and real values, wide inputs (several shared-memory chunks),
// outputs over several blocks, with and without bias; cuBLAS (kDense) to
// rounding. Also through a module whose transposed weights are cached under
// FrozenWeights and must follow a weight change.
TEST(Linear_CUDA, GpuKernelGivesTheCpuValuesBitForBit) {
  SNN_REQUIRE_CUDA();
  torch::manual_seed(8);
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& [in, out, bias] : std::vector<std::tuple<int64_t, int64_t, bool>>{
             {784, 1024, true}, {13, 1, true}, {3000, 1100, false}, {257, 70, true}, {1024, 10, false}}) {
      Linear cpu(LinearOptions(in, out).bias(bias));
      cpu->to(dtype);
      for (double p : {0.0, 0.02, 0.3, 1.0}) {
        const torch::Tensor spikes = (torch::rand({3, 35, in}) < p).to(dtype);
        const torch::Tensor real = spikes * torch::randn({3, 35, in}, dtype);
        for (const torch::Tensor& x : {spikes, real}) {
          torch::NoGradGuard no_grad;
          const torch::Tensor ref = cpu->forward(x);
          const torch::Tensor w = cpu->weight.cuda(), b = bias ? cpu->bias.cuda() : torch::Tensor();
          for (LinearPath path : {LinearPath::kAuto, LinearPath::kEvent}) {
            const torch::Tensor y = functional::linear(x.cuda(), w, b, {}, path);
            EXPECT_TRUE(y.is_cuda());
            EXPECT_TRUE(torch::equal(y.cpu(), ref)) << in << "x" << out << " p " << p;
          }
          const torch::Tensor dense = functional::linear(x.cuda(), w, b, {}, LinearPath::kDense).cpu();
          const double tol = dtype == torch::kFloat ? 1e-4 : 1e-10;
          EXPECT_TRUE(torch::allclose(dense, ref, tol, tol)) << "cuBLAS " << in << "x" << out << " p " << p;
        }
      }
    }
  }
  // The module on the GPU: cached transposed weights follow a change.
  Linear gpu(LinearOptions(100, 40));
  gpu->to(torch::kCUDA);
  const torch::Tensor x = (torch::rand({8, 100}) < 0.2).to(torch::kFloat).cuda();
  const FrozenWeights frozen;
  const torch::Tensor before = gpu->forward(x);
  {
    torch::NoGradGuard no_grad;
    gpu->weight.mul_(2);
  }
  const torch::Tensor after = gpu->forward(x);
  const torch::Tensor expected = functional::linear(x.cpu(), gpu->weight.cpu(), gpu->bias.cpu());
  EXPECT_TRUE(torch::equal(after.cpu(), expected));
  EXPECT_FALSE(torch::equal(after, before));
}

}  // namespace
}  // namespace snn
