#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "snn/encoders/detail/philox.h"
#include "snn/encoders/encoders.h"
#include "support/cpu_builds.h"
#include "support/test_util.h"

namespace snn {
namespace {

using encoders::detail::philox4x32_10;

TEST(Philox, MatchesPublishedKnownAnswerVectors) {
  // Random123's kat_vectors for philox4x32_10.
  auto r = philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

TEST(Philox, MatchesATensPhiloxEngine) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{0x123456789abcdefULL}}) {
    for (uint64_t subseq : {uint64_t{0}, uint64_t{7}, uint64_t{1} << 40}) {
      for (uint64_t offset : {uint64_t{0}, uint64_t{3}, uint64_t{1} << 33}) {
        at::Philox4_32 engine(seed, subseq, offset);
        const auto r = philox4x32_10(static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                                     static_cast<uint32_t>(subseq), static_cast<uint32_t>(subseq >> 32),
                                     static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
        for (int j = 0; j < 4; ++j) EXPECT_EQ(engine(), r.v[j]) << seed << " " << subseq << " " << offset;
      }
    }
  }
}

torch::Tensor samples(std::initializer_list<int64_t> ids) { return torch::tensor(std::vector<int64_t>(ids)); }

TEST(Poisson, SampleSpikesDoNotDependOnBatchComposition) {
  torch::manual_seed(1);
  const torch::Tensor data = torch::rand({100, 103});  // 103: a partial group of 4
  PoissonEncoderOptions o;
  o.seed(1234);
  const int64_t target = 57;
  const torch::Tensor alone = functional::poisson_encode(data[target].unsqueeze(0), samples({target}), 0, 10, o)
                                  .select(1, 0);
  for (int64_t batch : {7, 64}) {
    // The target sample at different positions among other samples.
    const torch::Tensor ids = torch::randperm(100).narrow(0, 0, batch);
    ids[batch / 2] = target;
    const torch::Tensor spikes = functional::poisson_encode(data.index_select(0, ids), ids, 0, 10, o);
    EXPECT_TRUE(torch::equal(spikes.select(1, batch / 2), alone)) << "batch " << batch;
  }
  // Steps encoded in pieces equal steps encoded at once.
  const torch::Tensor late = functional::poisson_encode(data[target].unsqueeze(0), samples({target}), 4, 6, o);
  EXPECT_TRUE(torch::equal(late.select(1, 0), alone.narrow(0, 4, 6)));
}

TEST(Poisson, OneAndTwoThreadsGiveIdenticalSpikes) {
  const torch::Tensor x = torch::rand({64, 784});
  const torch::Tensor ids = torch::arange(64);
  const int saved = at::get_num_threads();
  at::set_num_threads(1);
  const torch::Tensor one = functional::poisson_encode(x, ids, 0, 8);
  at::set_num_threads(2);
  const torch::Tensor two = functional::poisson_encode(x, ids, 0, 8);
  at::set_num_threads(saved);
  EXPECT_TRUE(torch::equal(one, two));
}

TEST(Poisson, ZeroNeverFiresAndOneAlwaysFires) {
  const torch::Tensor ids = torch::arange(4);
  EXPECT_EQ(functional::poisson_encode(torch::zeros({4, 1001}), ids, 0, 50).sum().item<double>(), 0.0);
  EXPECT_EQ(functional::poisson_encode(torch::ones({4, 1001}, torch::kDouble), ids, 0, 50).sum().item<double>(),
            4.0 * 1001 * 50);
}

TEST(Poisson, MeanRateIsWithinFiveStandardErrors) {
  // 10^6 draws: 1000 samples x 100 elements x 10 steps at p = 0.3.
  const torch::Tensor spikes = functional::poisson_encode(torch::full({1000, 100}, 0.3), torch::arange(1000), 0, 10);
  const double n = 1e6, p = 0.3;
  const double mean = spikes.sum().item<double>() / n;
  const double se = std::sqrt(p * (1 - p) / n);
  EXPECT_LT(std::abs(mean - p), 5 * se) << "mean " << mean;
}

TEST(Poisson, HertzInputUsesDt) {
  PoissonEncoderOptions o;
  o.unit(RateUnit::kHertz).dt_ms(0.5);
  // 600 Hz at dt = 0.5 ms: p = 0.3 per step.
  const torch::Tensor spikes = functional::poisson_encode(torch::full({500, 200}, 600.0), torch::arange(500), 0, 10, o);
  const double mean = spikes.mean().item<double>();
  EXPECT_LT(std::abs(mean - 0.3), 5 * std::sqrt(0.21 / 1e6));
  try {
    functional::poisson_encode(torch::full({1, 3}, 2500.0), torch::arange(1), 0, 1, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside [0, 2000]"), std::string::npos) << e.what();
  }
}

TEST(Poisson, SeedsAndStepsGiveDifferentStreams) {
  const torch::Tensor x = torch::full({2, 500}, 0.5);
  PoissonEncoderOptions a, b;
  b.seed(1);
  const torch::Tensor sa = functional::poisson_encode(x, torch::arange(2), 0, 2, a);
  const torch::Tensor sb = functional::poisson_encode(x, torch::arange(2), 0, 2, b);
  EXPECT_FALSE(torch::equal(sa, sb));
  EXPECT_FALSE(torch::equal(sa[0], sa[1]));
  EXPECT_FALSE(torch::equal(sa.select(1, 0), sa.select(1, 1)));
}

TEST(Poisson, OutOfRangeInputNamesCountAndFirstIndex) {
  const torch::Tensor x = torch::tensor({{0.5, 1.5, -0.1}, {std::nan(""), 0.2, 0.3}});
  try {
    functional::poisson_encode(x, torch::arange(2), 0, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("3 input values are outside [0, 1] or NaN"), std::string::npos) << msg;
    EXPECT_NE(msg.find("x[0, 1] = 1.5"), std::string::npos) << msg;
  }
  PoissonEncoderOptions clamp;
  clamp.clamp(true);
  const torch::Tensor ok = torch::tensor({{1.5, -0.1}});
  const torch::Tensor s = functional::poisson_encode(ok, torch::arange(1), 0, 20, clamp);
  EXPECT_TRUE(torch::equal(s.select(2, 0), torch::ones({20, 1})));
  EXPECT_TRUE(torch::equal(s.select(2, 1), torch::zeros({20, 1})));
  EXPECT_THROW(functional::poisson_encode(x, torch::arange(2), 0, 1, clamp), Error);  // NaN still rejected
}

TEST(Poisson, RejectsMismatchedSampleIndices) {
  EXPECT_THROW(functional::poisson_encode(torch::rand({3, 4}), torch::arange(2), 0, 1), c10::Error);
  EXPECT_THROW(functional::poisson_encode(torch::rand({3, 4}), torch::tensor({0, -1, 2}), 0, 1), c10::Error);
}

// A single-step encoder handed a pipeline stage's [K, B, ...] block (B
// sample indices) names the step mode, not "a batch of K" (issue 18: the
// README's pipeline snippet ended in that opaque error).
TEST(Poisson, SingleStepModuleGivenABlockNamesTheStepMode) {
  PoissonEncoder enc(PoissonEncoderOptions().seed(1));
  enc->set_time(0, torch::arange(16));
  try {
    enc->forward(torch::rand({8, 16, 784}));
    FAIL() << "a [8, 16, 784] block reached a single-step encoder without an error";
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    EXPECT_NE(what.find("single-step mode"), std::string::npos) << what;
    EXPECT_NE(what.find("step_mode(StepMode::kMulti)"), std::string::npos) << what;
  }
  // The same block in multi-step mode is fine.
  PoissonEncoder multi(PoissonEncoderOptions().seed(1).step_mode(StepMode::kMulti));
  multi->set_time(0, torch::arange(16));
  EXPECT_EQ(multi->forward(torch::rand({8, 16, 784})).sizes(), torch::IntArrayRef({8, 16, 784}));
}

TEST(Poisson, ModuleStepsThroughTime) {
  PoissonEncoder enc(PoissonEncoderOptions().seed(9).spike_dtype(torch::kBool));
  const torch::Tensor x = torch::rand({5, 30});
  const torch::Tensor s0 = enc->forward(x);
  const torch::Tensor s1 = enc->forward(x);
  const torch::Tensor both = enc->encode(x, torch::arange(5), 0, 2);
  EXPECT_EQ(both.scalar_type(), torch::kBool);
  EXPECT_TRUE(torch::equal(s0, both[0]));
  EXPECT_TRUE(torch::equal(s1, both[1]));
  enc->reset_state();
  EXPECT_TRUE(torch::equal(enc->forward(x), s0));
}

// The module checks an input once for all the blocks of a pipeline run
// (the same tensor and sample indices), and again after any change to them.
TEST(Poisson, ModuleChecksAnInputOnceAndAgainAfterAChange) {
  const PoissonEncoderOptions o = PoissonEncoderOptions().seed(5).step_mode(StepMode::kMulti);
  PoissonEncoder enc(o);
  torch::Tensor x = torch::rand({3, 40});
  torch::Tensor ids = torch::arange(10, 13);
  auto block = [&](int64_t first) {
    enc->set_time(first, ids);
    return enc->forward(x.unsqueeze(0).expand({4, 3, 40}));
  };
  const torch::Tensor blocks = torch::cat({block(0), block(4), block(8)});
  EXPECT_TRUE(torch::equal(blocks, functional::poisson_encode(x, ids, 0, 12, o)));
  x[1][7].fill_(std::nan(""));  // in place: the same tensor, a new version
  EXPECT_THROW(block(12), Error);
  x[1][7].fill_(1.5);
  EXPECT_THROW(block(12), Error);
  x[1][7].fill_(0.5);
  EXPECT_TRUE(torch::equal(block(12), functional::poisson_encode(x, ids, 12, 4, o)));
  ids[0].fill_(-1);
  EXPECT_ANY_THROW(block(16));
  ids = torch::arange(-1, 2);  // another tensor
  EXPECT_ANY_THROW(block(16));
}

TEST(Latency, ReproducesSpikingJellyGoldenValues) {
  const nlohmann::json doc = test::load_json("lif_golden.json");
  const auto& ref = doc["encoders"]["LatencyEncoder(T=8,linear)"];
  const torch::Tensor x = torch::tensor(ref["x"].get<std::vector<float>>());
  const torch::Tensor expected = test::json_matrix(ref["spikes"], torch::kFloat);
  EXPECT_TRUE(torch::equal(functional::latency_encode(x, LatencyEncoderOptions().steps(8)), expected));
}

TEST(Latency, LogFormSpansTheWindowAndRoundsHalfToEven) {
  const torch::Tensor x = torch::tensor({0.0, 1.0});
  const torch::Tensor s = functional::latency_encode(x, LatencyEncoderOptions().steps(6).form("log"));
  EXPECT_EQ(s[5][0].item<double>(), 1.0);  // x = 0 fires last
  EXPECT_EQ(s[0][1].item<double>(), 1.0);  // x = 1 fires first
  EXPECT_TRUE(torch::equal(s.sum(0), torch::ones({2})));
  // Linear, T = 6, x = 0.5: t_f = round(2.5) = 2 (half to even).
  const torch::Tensor half = functional::latency_encode(torch::tensor({0.5}), LatencyEncoderOptions().steps(6));
  EXPECT_EQ(half[2][0].item<float>(), 1.f);
  EXPECT_THROW(LatencyEncoder(LatencyEncoderOptions().form("cubic")), Error);
}

TEST(Regular, FiresFloorOfTTimesXEvenlySpaced) {
  const torch::Tensor x = torch::tensor({0.0, 0.25, 0.3, 1.0}, torch::kDouble);
  const torch::Tensor s = functional::regular_encode(x, 0, 20);
  EXPECT_TRUE(torch::equal(s.sum(0), torch::tensor({0.0, 5.0, 6.0, 20.0}, torch::kDouble)));
  // x = 0.25: every 4th step.
  EXPECT_EQ(s.select(1, 1).nonzero().flatten()[1].item<int64_t>() - s.select(1, 1).nonzero().flatten()[0].item<int64_t>(),
            4);
  EXPECT_THROW(functional::regular_encode(torch::tensor({1.2}), 0, 5), Error);
}

TEST(Poisson_CUDA, MatchesCpuBitForBit) {
  SNN_REQUIRE_CUDA();
  const torch::Tensor x = torch::rand({33, 785});
  const torch::Tensor ids = torch::arange(100, 133);
  for (auto dtype : {torch::kFloat, torch::kBool}) {
    PoissonEncoderOptions o;
    o.seed(77).spike_dtype(dtype);
    const torch::Tensor cpu = functional::poisson_encode(x, ids, 3, 9, o);
    const torch::Tensor gpu = functional::poisson_encode(x.cuda(), ids.cuda(), 3, 9, o);
    EXPECT_TRUE(torch::equal(cpu, gpu.cpu()));
  }
}

}  // namespace
}  // namespace snn

namespace snn {
namespace {

TEST(Poisson, EveryBuildOfTheCpuLoopsGivesIdenticalSpikes) {
  const torch::Tensor x = torch::rand({9, 1000});  // 1000 = 31 tiles + a partial one
  const torch::Tensor ids = torch::arange(20, 29);
  set_cpu_isa(CpuIsa::kBaseline);
  const torch::Tensor base = functional::poisson_encode(x, ids, 5, 7);
  set_cpu_isa(CpuIsa::kAuto);
  const torch::Tensor fast = functional::poisson_encode(x, ids, 5, 7);
  EXPECT_TRUE(torch::equal(base, fast));
  for (CpuIsa isa : test::cpu_builds()) {
    test::CpuIsaScope scope(isa);
    EXPECT_TRUE(torch::equal(functional::poisson_encode(x, ids, 5, 7), base)) << "CpuIsa " << static_cast<int>(isa);
  }
  // And both equal the scalar reference draw, element by element.
  for (int64_t e : {0, 1, 7, 8, 31, 32, 999}) {
    const auto r = encoders::detail::draw_group(0, 23, 6, encoders::detail::group_of(e));
    const bool spike = encoders::detail::uniform01(r.v[encoders::detail::word_of(e)]) < x[3][e].item<float>();
    EXPECT_EQ(fast[1][3][e].item<float>(), spike ? 1.f : 0.f) << "element " << e;
  }
}

// Every element against the scalar reference draw: tiles that cannot spike
// (runs of zero probability, as an image's border, skipped by the loops), a
// partial last tile live and dead, constant and per-step inputs, both ISAs.
TEST(Poisson, EveryElementEqualsTheScalarReferenceDraw) {
  torch::manual_seed(12);
  torch::Tensor x = torch::rand({4, 3, 1000});
  x.narrow(2, 0, 96).zero_();
  x.narrow(2, 320, 64).zero_();
  x.select(1, 1).narrow(1, 992, 8).zero_();  // sample 1: the partial tile is dead
  x.select(1, 2).zero_();
  x[2][2][500] = 0.9;  // sample 2: one live element, at one step only
  const torch::Tensor ids = torch::tensor({5, 6, 7}, torch::kLong);
  auto reference = [&](const torch::Tensor& p_seq) {
    torch::Tensor out = torch::zeros({4, 3, 1000});
    auto o = out.accessor<float, 3>();
    auto p = p_seq.accessor<float, 3>();
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t b = 0; b < 3; ++b) {
        for (int64_t e = 0; e < 1000; ++e) {
          const auto r = encoders::detail::draw_group(0, 5 + b, static_cast<uint32_t>(3 + t), encoders::detail::group_of(e));
          o[t][b][e] = encoders::detail::uniform01(r.v[encoders::detail::word_of(e)]) < p[t][b][e] ? 1.f : 0.f;
        }
      }
    }
    return out;
  };
  const torch::Tensor constant = x[0].unsqueeze(0).expand({4, 3, 1000}).contiguous();
  const torch::Tensor want_seq = reference(x), want_constant = reference(constant);
  ASSERT_GT(want_seq.sum().item<float>(), 0);
  for (CpuIsa isa : test::cpu_builds()) {
    set_cpu_isa(isa);
    EXPECT_TRUE(torch::equal(functional::poisson_encode_sequence(x, ids, 3), want_seq));
    EXPECT_TRUE(torch::equal(functional::poisson_encode(x[0], ids, 3, 4), want_constant));
  }
  set_cpu_isa(CpuIsa::kAuto);
}

}  // namespace
}  // namespace snn

namespace snn {
namespace {

TEST(Poisson, SequenceInputUsesEachStepsValues) {
  const torch::Tensor x = torch::rand({3, 40});
  const torch::Tensor ids = torch::tensor({5, 9, 2});
  // A constant input expanded over time is the constant encoding.
  const torch::Tensor expanded = functional::poisson_encode_sequence(x.unsqueeze(0).expand({6, 3, 40}), ids, 2);
  EXPECT_TRUE(torch::equal(expanded, functional::poisson_encode(x, ids, 2, 6)));
  // A time-varying input: step t draws against x_seq[t].
  const torch::Tensor seq = torch::stack({torch::zeros({3, 40}), torch::ones({3, 40}), x});
  const torch::Tensor s = functional::poisson_encode_sequence(seq, ids, 0);
  EXPECT_EQ(s[0].sum().item<float>(), 0.f);
  EXPECT_EQ(s[1].sum().item<float>(), 120.f);
  EXPECT_TRUE(torch::equal(s[2], functional::poisson_encode(x, ids, 2, 1)[0]));
}

TEST(Poisson, ModuleInMultiStepModeFollowsSetTime) {
  PoissonEncoder enc(PoissonEncoderOptions().seed(3).step_mode(StepMode::kMulti));
  const torch::Tensor x = torch::rand({4, 25});
  const torch::Tensor ids = torch::tensor({10, 11, 12, 13});
  enc->set_time(7, ids);
  const torch::Tensor block = enc->forward(x.unsqueeze(0).expand({3, 4, 25}));
  EXPECT_TRUE(torch::equal(block, functional::poisson_encode(x, ids, 7, 3, enc->options)));
  EXPECT_EQ(enc->step_count(), 10);
  const auto saved = enc->save_state();
  enc->reset_state();
  EXPECT_EQ(enc->step_count(), 0);
  enc->load_state(saved);
  EXPECT_EQ(enc->step_count(), 10);
}

}  // namespace
}  // namespace snn
