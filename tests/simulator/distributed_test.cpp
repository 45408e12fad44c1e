// Data-parallel training's two reductions on ranks as threads
// (support/ranks.h): reduce_gradients(), the fallback for networks whose
// parameters do not share one dtype, and ShardedAdam, which training uses
// otherwise. The CLI tests (dist_train_test.sh) only ever reach ShardedAdam,
// so here the two are held to each other: same gradients in, same weights
// out, bit for bit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "snn/simulator/distributed.h"
#include "snn/simulator/fused_adam.h"
#include "snn/simulator/network.h"
#include "support/ranks.h"

namespace snn {
namespace {

NetworkConfig rank_test_config() {
  NetworkConfig c;
  c.layers = {6, 5, 3};  // 53 parameters: the ranks' slices differ in length
  c.seed = 11;
  return c;
}

// Rank r's gradient of parameter k at step s: float values of every
// magnitude, some exactly zero, different on every rank.
torch::Tensor gradient(const torch::Tensor& p, int64_t r, int64_t k, int64_t s) {
  const torch::Tensor i = torch::arange(p.numel(), torch::kDouble);
  torch::Tensor g = torch::sin(i * static_cast<double>(r + 1) + static_cast<double>(3 * k + s)) *
                    std::pow(10.0, static_cast<double>((r + s) % 4) - 3);
  g.masked_fill_(i.fmod(5 + r).eq(0), 0.0);
  return g.to(p.scalar_type()).reshape(p.sizes());
}

void set_gradients(const SpikingNetwork& net, int64_t rank, int64_t step) {
  int64_t k = 0;
  for (auto p : net.parameters()) p.mutable_grad() = gradient(p, rank, k++, step);
}

TEST(ReduceGradients, GivesEveryRankTheRankOrderSumRoundedOnceAndCountsAMissingGradientAsZero) {
  constexpr int64_t kRanks = 3;
  // Built here, not in the rank threads: torch's global generator is shared.
  std::vector<std::unique_ptr<SpikingNetwork>> nets;
  for (int64_t r = 0; r < kRanks; ++r) nets.push_back(std::make_unique<SpikingNetwork>(rank_test_config()));
  // Ranks 0 and 1 hold gradients, rank 2 an empty share (no gradient at all).
  set_gradients(*nets[0], 0, 0);
  set_gradients(*nets[1], 1, 0);
  const auto errors = test::run_ranks(kRanks, [&](dist::World& w) { reduce_gradients(w, *nets[w.rank()]); });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  const auto params = nets[0]->parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    const torch::Tensor p = params[k];
    const torch::Tensor want = (gradient(p, 0, static_cast<int64_t>(k), 0).to(torch::kDouble) +
                                gradient(p, 1, static_cast<int64_t>(k), 0).to(torch::kDouble))
                                   .to(p.scalar_type());
    for (int64_t r = 0; r < kRanks; ++r) {
      const torch::Tensor got = nets[static_cast<size_t>(r)]->parameters()[k].grad();
      ASSERT_TRUE(got.defined()) << "rank " << r << ", parameter " << k;
      EXPECT_TRUE(torch::equal(got, want)) << "rank " << r << ", parameter " << k;
    }
  }
}

TEST(ShardedAdam, TakesTheStepsOfReduceGradientsAndAdamBitForBit) {
  for (int64_t ranks : {2, 3}) {
    std::vector<std::unique_ptr<SpikingNetwork>> sharded_nets, whole_nets;
    for (int64_t r = 0; r < ranks; ++r) {
      sharded_nets.push_back(std::make_unique<SpikingNetwork>(rank_test_config()));
      whole_nets.push_back(std::make_unique<SpikingNetwork>(rank_test_config()));
    }
    ASSERT_TRUE(ShardedAdam::can_shard(*sharded_nets[0]));
    const auto options = torch::optim::AdamOptions(0.01);
    const auto errors = test::run_ranks(ranks, [&](dist::World& w) {
      const SpikingNetwork& a = *sharded_nets[static_cast<size_t>(w.rank())];
      const SpikingNetwork& b = *whole_nets[static_cast<size_t>(w.rank())];
      ShardedAdam sharded(w, a, options, {});
      torch::optim::Adam whole(b.parameters(), options);
      for (int64_t step = 0; step < 3; ++step) {
        set_gradients(a, w.rank(), step);
        set_gradients(b, w.rank(), step);
        sharded.step();
        reduce_gradients(w, b);
        fused_adam_step(whole);
      }
    });
    for (const auto& e : errors) EXPECT_EQ(e, "");
    for (int64_t r = 0; r < ranks; ++r) {
      const auto a = sharded_nets[static_cast<size_t>(r)]->parameters();
      const auto b = whole_nets[static_cast<size_t>(r)]->parameters();
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        EXPECT_TRUE(torch::equal(a[k], b[k]))
            << ranks << " ranks, rank " << r << ", parameter " << k << ": max difference "
            << (a[k] - b[k]).abs().max().item<double>();
      }
      // The steps moved the weights (the comparison is not of untouched copies).
      EXPECT_FALSE(torch::equal(a[0], SpikingNetwork(rank_test_config()).parameters()[0]));
    }
  }
}

// The row exchange (ShardedAdam after begin_batch()): each rank sums
// the whole batch's gradient for its own weight rows, the rows in one
// process's order, so the weights after a step are one process's bit for
// bit, where adding the ranks' partial double sums (the exchange of sums)
// associates differently. Layer 0 reads bool spikes (sent as bits), layer 1
// reals of every magnitude, so that the association shows (or spikes as
// reals, or both: below).
TEST(ShardedAdam, ExchangedRowsGiveOneProcesssStepBitForBit) {
  constexpr int64_t kSteps = 3, kBatch = 7;
  NetworkConfig c;
  c.layers = {37, 40, 21};  // slices cut weight rows, and a bias between ranks
  c.seed = 5;
  const SpikingNetwork shape(c);
  const auto fcs = shape.linear_layers();
  // The whole batch's inputs and output gradients, [steps, batch, features].
  torch::manual_seed(3);
  const torch::Tensor x0 = torch::rand({kSteps, kBatch, 37}).lt(0.3);
  const torch::Tensor reals =
      (torch::randn({kSteps, kBatch, 40}) * torch::exp2(torch::randint(-20, 20, {kSteps, kBatch, 40})))
          .masked_fill_(torch::rand({kSteps, kBatch, 40}).lt(0.2), 0.0);
  const torch::Tensor spikes_as_reals = torch::rand({kSteps, kBatch, 40}).lt(0.3).to(torch::kFloat);
  // Two optimizer steps with different output gradients: Adam's first step
  // moves every weight by the learning rate times the gradient's sign alone.
  std::vector<torch::Tensor> g0, g1;
  for (int step = 0; step < 2; ++step) {
    g0.push_back(torch::randn({kSteps, kBatch, 40}) * torch::exp2(torch::randint(-20, 20, {kSteps, kBatch, 40})));
    g1.push_back(torch::randn({kSteps, kBatch, 21}) * torch::exp2(torch::randint(-20, 20, {kSteps, kBatch, 21})));
  }
  // A large term and its negation in the first and last sample of step 0
  // (added last in BPTT order): what each sum loses to them depends on
  // which terms it holds when they arrive, so the ranks' partial sums
  // added give other bits than one process's sum.
  reals[0][0].mul_(std::pow(2.0, 50));
  reals[0][kBatch - 1].copy_(-reals[0][0]);
  for (auto& g : g1) g[0][kBatch - 1].copy_(g[0][0]);
  // Layer 1's input: those reals; spikes as reals (sent as bits); or
  // spikes in samples 0-3 and reals after, so that some ranks send bits
  // and others values (2 ranks: samples 0-2 and 3-6; 3 ranks: 0-1, 2-3, 4-6).
  torch::Tensor x1;
  // Forward and backward of both layers on samples [b0, b1) of the batch,
  // the steps in one call or in two (steps 0-1, then 2: a layer's calls
  // in one optimizer step, as --steps-per-tick makes them).
  const auto backward = [&](const SpikingNetwork& net, int64_t b0, int64_t b1, int step, int calls) {
    auto layers = net.linear_layers();
    torch::Tensor loss = torch::zeros({});
    for (const auto& [s0, s1] : calls == 1 ? std::vector<std::pair<int64_t, int64_t>>{{0, kSteps}}
                                           : std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, kSteps}}) {
      const auto part = [&](const torch::Tensor& t) { return t.narrow(0, s0, s1 - s0).narrow(1, b0, b1 - b0); };
      loss = loss + (layers[0]->forward(part(x0)) * part(g0[step])).sum() +
             (layers[1]->forward(part(x1)) * part(g1[step])).sum();
    }
    loss.backward();
  };
  const auto options = torch::optim::AdamOptions(0.01);
  for (const std::string kind : {"reals", "spikes", "mixed"}) {
    x1 = kind == "reals" ? reals : kind == "spikes" ? spikes_as_reals : reals.clone();
    if (kind == "mixed") x1.narrow(1, 0, 4).copy_(spikes_as_reals.narrow(1, 0, 4));
    for (int calls : {1, 2}) {
      SpikingNetwork whole(c);
      torch::optim::Adam adam(whole.parameters(), options);
      std::vector<torch::Tensor> whole_grads;  // per step, flattened
      for (int step = 0; step < 2; ++step) {
        adam.zero_grad();
        backward(whole, 0, kBatch, step, calls);
        std::vector<torch::Tensor> flat;
        for (const auto& p : whole.parameters()) flat.push_back(p.grad().reshape({-1}));
        whole_grads.push_back(torch::cat(flat));
        fused_adam_step(adam);
      }
      for (int64_t ranks : {2, 3}) {
        for (bool rows : {true, false}) {
          std::vector<std::unique_ptr<SpikingNetwork>> nets;
          for (int64_t r = 0; r < ranks; ++r) nets.push_back(std::make_unique<SpikingNetwork>(c));
          std::vector<std::string> grad_differences(static_cast<size_t>(ranks));
          const auto errors = test::run_ranks(ranks, [&](dist::World& w) {
            const SpikingNetwork& net = *nets[static_cast<size_t>(w.rank())];
            ShardedAdam sharded(w, net, options, {});
            const SampleRange share = batch_share(kBatch, w.rank(), w.size());
            for (int step = 0; step < 2; ++step) {
              sharded.begin_batch(kBatch, kSteps, rows);
              const int64_t before = w.traffic().calls;
              backward(net, share.begin, share.end, step, calls);
              // One all-to-all per layer and backward call where the rows
              // are spikes; a second for layer 1's values where they are
              // reals (rank 0 sends them to rank 1 or 2, which has columns).
              const int64_t made = w.traffic().calls - before;
              const int64_t want_calls = kind == "spikes" ? 2 * calls : 3 * calls;
              if (rows && kind != "mixed" && made != want_calls) {
                grad_differences[static_cast<size_t>(w.rank())] += " step " + std::to_string(step) + ": " +
                                                                   std::to_string(made) + " collectives, not " +
                                                                   std::to_string(want_calls);
              }
              sharded.step();
              if (sharded.last_row_layers() != (rows ? 2 : 0)) {
                grad_differences[static_cast<size_t>(w.rank())] +=
                    " step " + std::to_string(step) + ": " + std::to_string(sharded.last_row_layers()) +
                    " layers from rows";
              }
              // Adam's step does not change when a gradient is scaled: the
              // gradients themselves are compared too.
              const auto [begin, g] = sharded.gradient_slice();
              const torch::Tensor want = whole_grads[static_cast<size_t>(step)].narrow(0, begin, g.numel());
              if (rows && !torch::equal(g, want)) {
                grad_differences[static_cast<size_t>(w.rank())] +=
                    " step " + std::to_string(step) + ": " + std::to_string(g.ne(want).sum().item<int64_t>()) +
                    " of " + std::to_string(g.numel()) + " differ";
              }
            }
          });
          for (const auto& e : errors) EXPECT_EQ(e, "");
          for (int64_t r = 0; r < ranks; ++r) {
            EXPECT_EQ(grad_differences[static_cast<size_t>(r)], "")
                << kind << ", " << ranks << " ranks, rank " << r << "'s gradient, " << calls << " calls a step";
          }
          bool all_equal = true;
          for (int64_t r = 0; r < ranks; ++r) {
            const auto a = nets[static_cast<size_t>(r)]->parameters(), b = whole.parameters();
            for (size_t k = 0; k < a.size(); ++k) {
              const bool same = torch::equal(a[k], b[k]);
              all_equal = all_equal && same;
              if (rows) {
                EXPECT_TRUE(same) << kind << ", " << ranks << " ranks, rank " << r << ", parameter " << k << ": max difference "
                                  << (a[k] - b[k]).abs().max().item<double>();
              }
            }
          }
          // Without the rows, the ranks' sums added associate differently: the
          // comparison above can fail.
          if (!rows && kind == "reals") EXPECT_FALSE(all_equal) << ranks << " ranks, " << calls << " calls a step";
        }
      }
    }
  }
}

}  // namespace
}  // namespace snn
