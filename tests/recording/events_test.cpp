#include <gtest/gtest.h>
#include <torch/torch.h>

#include "snn/core/error.h"
#include "snn/recording/events.h"

namespace snn::recording {
namespace {

// The reference: nonzero() of the sample-major view [B, T, N] enumerates
// spikes in exactly the documented order.
void expect_matches_nonzero(const SpikeEvents& e, const torch::Tensor& spikes) {
  const torch::Tensor nz = spikes.permute({1, 0, 2}).ne(0).nonzero().cpu();  // [E, 3]: b, t, n
  ASSERT_EQ(e.sample.size(0), nz.size(0));
  EXPECT_TRUE(torch::equal(e.sample, nz.select(1, 0)));
  EXPECT_TRUE(torch::equal(e.step, nz.select(1, 1)));
  EXPECT_TRUE(torch::equal(e.node, nz.select(1, 2)));
  EXPECT_TRUE(torch::equal(e.per_sample, spikes.ne(0).sum(std::vector<int64_t>{0, 2}).cpu().to(torch::kLong)));
}

TEST(SpikeEvents, SmallBlockByHand) {
  // [T = 2, B = 2, N = 3]
  const torch::Tensor s = torch::tensor({0, 1, 0, 1, 0, 0,    // t = 0: sample 0 fires n1, sample 1 fires n0
                                         1, 0, 1, 0, 0, 0},   // t = 1: sample 0 fires n0 and n2
                                        torch::kFloat)
                              .reshape({2, 2, 3});
  const SpikeEvents e = compact_spikes(s);
  EXPECT_TRUE(torch::equal(e.sample, torch::tensor({0, 0, 0, 1}, torch::kLong)));
  EXPECT_TRUE(torch::equal(e.step, torch::tensor({0, 1, 1, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(e.node, torch::tensor({1, 0, 2, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(e.per_sample, torch::tensor({3, 1}, torch::kLong)));
}

TEST(SpikeEvents, EveryDtypeGivesTheReferenceOrder) {
  torch::manual_seed(4);
  const torch::Tensor s = torch::rand({5, 7, 33}) < 0.2;
  for (auto dtype : {torch::kBool, torch::kFloat, torch::kDouble}) {
    expect_matches_nonzero(compact_spikes(s.to(dtype)), s);
  }
  // A strided (non-contiguous) block too.
  const torch::Tensor t = (torch::rand({7, 5, 33}) < 0.3).to(torch::kFloat).transpose(0, 1);
  expect_matches_nonzero(compact_spikes(t), t);
  // No spikes at all.
  const SpikeEvents none = compact_spikes(torch::zeros({3, 4, 5}));
  EXPECT_EQ(none.node.numel(), 0);
  EXPECT_TRUE(torch::equal(none.per_sample, torch::zeros({4}, torch::kLong)));
}

TEST(SpikeEvents, RecordsOnlyTheChosenNeurons) {
  torch::manual_seed(5);
  const torch::Tensor s = (torch::rand({4, 3, 20}) < 0.4).to(torch::kFloat);
  const torch::Tensor ids = torch::tensor({0, 5, 17}, torch::kLong);
  const SpikeEvents e = compact_spikes(s, ids);
  const SpikeEvents sub = compact_spikes(s.index_select(2, ids));
  EXPECT_TRUE(torch::equal(e.sample, sub.sample));
  EXPECT_TRUE(torch::equal(e.step, sub.step));
  EXPECT_TRUE(torch::equal(e.node, ids.index_select(0, sub.node)));
  EXPECT_THROW(compact_spikes(s, torch::tensor({5, 5}, torch::kLong)), Error);
  EXPECT_THROW(compact_spikes(s, torch::tensor({20}, torch::kLong)), Error);
  EXPECT_THROW(compact_spikes(s, torch::tensor({-1}, torch::kLong)), Error);
  EXPECT_THROW(compact_spikes(torch::zeros({3, 4})), Error);
  EXPECT_THROW(compact_spikes(torch::zeros({3, 4, 2}, torch::kInt)), Error);
}

TEST(SpikeEvents_CUDA, DeviceCompactionEqualsTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(6);
  const torch::Tensor s = torch::rand({16, 64, 1000}) < 0.1;
  for (auto dtype : {torch::kBool, torch::kFloat}) {
    const SpikeEvents gpu = compact_spikes(s.to(dtype).cuda());
    const SpikeEvents cpu = compact_spikes(s.to(dtype));
    EXPECT_TRUE(torch::equal(gpu.sample, cpu.sample));
    EXPECT_TRUE(torch::equal(gpu.step, cpu.step));
    EXPECT_TRUE(torch::equal(gpu.node, cpu.node));
    EXPECT_TRUE(torch::equal(gpu.per_sample, cpu.per_sample));
  }
}

}  // namespace
}  // namespace snn::recording
