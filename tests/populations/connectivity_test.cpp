// Projections drawn by NEST's rules: exact counts where the rule fixes
// them, binomial statistics where it draws them, no autapses or multapses
// when they are off, rows by source, the same synapses for any thread
// count, and one line naming each bad spec.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "snn/core/error.h"
#include "support/test_util.h"
#include "snn/populations/connectivity.h"

namespace snn::populations {
namespace {

// (source, target) of every synapse, in storage order.
std::vector<std::pair<int64_t, int64_t>> pairs_of(const Projection& p) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const auto off = p.offsets.accessor<int64_t, 1>();
  const auto tg = p.targets.accessor<int32_t, 1>();
  for (int64_t s = 0; s < p.n_source; ++s) {
    for (int64_t k = off[s]; k < off[s + 1]; ++k) out.emplace_back(s, tg[k]);
  }
  return out;
}

std::vector<int64_t> indegrees(const Projection& p) {
  std::vector<int64_t> in(p.n_target, 0);
  for (const auto& [s, t] : pairs_of(p)) ++in[t];
  return in;
}

ConnectionSpec indegree(int64_t k, bool autapses = true, bool multapses = true) {
  ConnectionSpec c;
  c.rule = ConnectionRule::kFixedIndegree;
  c.indegree = k;
  c.autapses = autapses;
  c.multapses = multapses;
  return c;
}

const SynapseSpec kSynapse{Distribution::constant(0.1), Distribution::constant(1.5)};

TEST(Connectivity, FixedIndegreeGivesEveryTargetItsSources) {
  for (bool multapses : {true, false}) {
    const Projection p = connect(100, 100, indegree(30, false, multapses), kSynapse, {7, 0}, 0.1, true);
    EXPECT_EQ(p.synapses(), 3000);
    for (int64_t d : indegrees(p)) EXPECT_EQ(d, 30);
    std::set<std::pair<int64_t, int64_t>> distinct;
    for (const auto& [s, t] : pairs_of(p)) {
      EXPECT_NE(s, t) << "an autapse although autapses are off";
      distinct.insert({s, t});
    }
    if (!multapses) EXPECT_EQ(distinct.size(), 3000u) << "a multapse although multapses are off";
    EXPECT_EQ(p.delays.defined(), false);
    EXPECT_EQ(p.delay_steps, 15);
    EXPECT_TRUE(torch::all(p.weights == 0.1f).item<bool>());
  }
  // Every source can be drawn: the in-degree equals the sources without autapses.
  const Projection all = connect(20, 20, indegree(19, false, false), kSynapse, {7, 0}, 0.1, true);
  EXPECT_EQ(all.synapses(), 380);
}

TEST(Connectivity, SourcesAreDrawnUniformly) {
  // 1000 targets x 50 draws from 100 sources: each source's out-degree is
  // binomial(50000, 0.01), mean 500, sd 22.
  const Projection p = connect(100, 1000, indegree(50), kSynapse, {3, 1}, 0.1, false);
  const auto off = p.offsets.accessor<int64_t, 1>();
  for (int64_t s = 0; s < 100; ++s) {
    const int64_t out = off[s + 1] - off[s];
    EXPECT_NEAR(out, 500, 5 * 22) << "source " << s;
  }
}

TEST(Connectivity, PairwiseBernoulliDrawsEachPairWithP) {
  ConnectionSpec c;
  c.rule = ConnectionRule::kPairwiseBernoulli;
  c.p = 0.1;
  const Projection p = connect(400, 300, c, kSynapse, {5, 2}, 0.1, false);
  const double mean = 400 * 300 * 0.1, sd = std::sqrt(mean * 0.9);
  EXPECT_NEAR(p.synapses(), mean, 5 * sd);
  std::set<std::pair<int64_t, int64_t>> distinct;
  for (const auto& pr : pairs_of(p)) distinct.insert(pr);
  EXPECT_EQ(static_cast<int64_t>(distinct.size()), p.synapses()) << "a pair drawn twice";
  c.p = 1;
  c.autapses = false;
  EXPECT_EQ(connect(30, 30, c, kSynapse, {5, 2}, 0.1, true).synapses(), 30 * 29);
  c.p = 0;
  EXPECT_EQ(connect(30, 30, c, kSynapse, {5, 2}, 0.1, true).synapses(), 0);
}

TEST(Connectivity, FixedTotalNumberAndAllToAll) {
  ConnectionSpec c;
  c.rule = ConnectionRule::kFixedTotalNumber;
  c.total = 5000;
  c.multapses = false;
  c.autapses = false;
  const Projection p = connect(100, 100, c, kSynapse, {9, 3}, 0.1, true);
  EXPECT_EQ(p.synapses(), 5000);
  std::set<std::pair<int64_t, int64_t>> distinct;
  for (const auto& [s, t] : pairs_of(p)) {
    EXPECT_NE(s, t);
    distinct.insert({s, t});
  }
  EXPECT_EQ(distinct.size(), 5000u);
  c.total = 9900;  // every pair but the diagonal
  EXPECT_EQ(connect(100, 100, c, kSynapse, {9, 3}, 0.1, true).synapses(), 9900);
  ConnectionSpec all;
  EXPECT_EQ(connect(7, 11, all, kSynapse, {9, 4}, 0.1, false).synapses(), 77);
}

TEST(Connectivity, RowsBySourceHoldAscendingTargets) {
  const Projection p = connect(200, 150, indegree(20), kSynapse, {11, 0}, 0.1, false);
  const auto off = p.offsets.accessor<int64_t, 1>();
  const auto tg = p.targets.accessor<int32_t, 1>();
  EXPECT_EQ(off[0], 0);
  EXPECT_EQ(off[200], p.synapses());
  for (int64_t s = 0; s < 200; ++s) {
    for (int64_t k = off[s] + 1; k < off[s + 1]; ++k) EXPECT_LE(tg[k - 1], tg[k]);
  }
  // Memory: 4 bytes of target and 4 of weight per synapse (a constant delay), plus the row offsets.
  EXPECT_EQ(p.bytes(), p.synapses() * 8 + 201 * 8);
}

TEST(Connectivity, SameKeySameSynapsesWhateverTheThreads) {
  SynapseSpec syn{Distribution::normal(0.1, 0.02), Distribution::uniform(1.0, 3.0)};
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const Projection a = connect(500, 500, indegree(50, false), syn, {42, 1}, 0.1, true);
  at::set_num_threads(2);
  const Projection b = connect(500, 500, indegree(50, false), syn, {42, 1}, 0.1, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(a.offsets, b.offsets));
  EXPECT_TRUE(torch::equal(a.targets, b.targets));
  EXPECT_TRUE(torch::equal(a.weights, b.weights));
  EXPECT_TRUE(torch::equal(a.delays, b.delays));
  const Projection other = connect(500, 500, indegree(50, false), syn, {42, 2}, 0.1, true);
  EXPECT_FALSE(torch::equal(a.targets, other.targets)) << "another projection index drew the same synapses";
  const Projection reseeded = connect(500, 500, indegree(50, false), syn, {43, 1}, 0.1, true);
  EXPECT_FALSE(torch::equal(a.targets, reseeded.targets));
}

TEST(Connectivity, DrawnWeightsAndDelaysFollowTheirDistributions) {
  SynapseSpec syn{Distribution::normal(0.1, 0.02), Distribution::uniform(1.0, 3.0)};
  const Projection p = connect(1000, 1000, indegree(100), syn, {1, 0}, 0.1, false);
  const torch::Tensor w = p.weights.to(torch::kDouble);
  EXPECT_NEAR(w.mean().item<double>(), 0.1, 0.001);
  EXPECT_NEAR(w.std().item<double>(), 0.02, 0.001);
  ASSERT_TRUE(p.delays.defined());
  EXPECT_EQ(p.delays.scalar_type(), torch::kShort);
  EXPECT_EQ(p.delays.min().item<int64_t>(), 10);
  EXPECT_EQ(p.delays.max().item<int64_t>(), 30);
  EXPECT_NEAR(p.delays.to(torch::kDouble).mean().item<double>(), 20, 0.05);
  EXPECT_EQ(p.max_delay(), 30);
  EXPECT_EQ(p.bytes(), p.synapses() * 10 + 1001 * 8);
  SynapseSpec u{Distribution::uniform(-0.5, 0.5), Distribution::constant(0.1)};
  const Projection q = connect(100, 100, indegree(100), u, {1, 0}, 0.1, false);
  EXPECT_GE(q.weights.min().item<float>(), -0.5f);
  EXPECT_LT(q.weights.max().item<float>(), 0.5f);
  EXPECT_EQ(q.delay_steps, 1);
}

TEST(Connectivity, BadSpecsNameTheProblem) {
  const auto fails_with = [](const std::function<void()>& f, const std::string& expected) {
    const std::string what = test::message_of(f);
    EXPECT_NE(what.find(expected), std::string::npos) << "got: " << what;
  };
  ConnectionSpec bern;
  bern.rule = ConnectionRule::kPairwiseBernoulli;
  bern.p = 1.5;
  fails_with([&] { connect(10, 10, bern, kSynapse, {}, 0.1, false); }, "pairwise_bernoulli: p must be in [0, 1], got 1.5");
  fails_with([&] { connect(10, 10, indegree(11, true, false), kSynapse, {}, 0.1, false); },
             "fixed_indegree: indegree 11 is more than the 10 sources a target can have without multapses");
  fails_with([&] { connect(10, 10, indegree(10, false, false), kSynapse, {}, 0.1, true); },
             "indegree 10 is more than the 9 sources a target can have without multapses or autapses");
  fails_with([&] { connect(10, 10, indegree(-1), kSynapse, {}, 0.1, false); }, "indegree must be >= 0, got -1");
  ConnectionSpec total;
  total.rule = ConnectionRule::kFixedTotalNumber;
  total.total = 101;
  total.multapses = false;
  fails_with([&] { connect(10, 10, total, kSynapse, {}, 0.1, false); },
             "fixed_total_number: N = 101 is more than the 100 pairs there are without multapses");
  fails_with([&] { connect(10, 10, ConnectionSpec{}, {Distribution::constant(1), Distribution::constant(0.05)}, {}, 0.1, false); },
             "a delay of 0.05 ms is below one step of dt = 0.1 ms");
  fails_with([&] { connect(10, 10, ConnectionSpec{}, {Distribution::constant(1), Distribution::constant(0.25)}, {}, 0.1, false); },
             "a delay of 0.25 ms is not a whole number of steps of dt = 0.1 ms");
  fails_with([&] { connect(10, 10, ConnectionSpec{}, {Distribution::constant(1), Distribution::normal(0.1, 1.0)}, {}, 0.1, false); },
             "is below one step of dt = 0.1 ms");
  fails_with([&] { connect(10, 10, ConnectionSpec{}, {Distribution::uniform(1, 1), Distribution::constant(1)}, {}, 0.1, false); },
             "weight: uniform needs low < high, got low 1, high 1");
  fails_with([] { parse_connection_rule("random"); },
             "unknown connection rule 'random': expected all_to_all, fixed_indegree, fixed_total_number or pairwise_bernoulli");
  EXPECT_EQ(parse_connection_rule(to_string(ConnectionRule::kFixedTotalNumber)), ConnectionRule::kFixedTotalNumber);
}

}  // namespace
}  // namespace snn::populations
