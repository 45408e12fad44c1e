// snn::dist::World: ranks as threads of one process (support/ranks.h).

#include "snn/dist/world.h"

#include <torch/nn/modules/container/functional.h>
#include <torch/nn/modules/linear.h>

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "snn/core/error.h"
#include "snn/dist/cores.h"
#include "snn/dist/pipeline_links.h"
#include "snn/pipeline/model_pipeline.h"
#include "support/ranks.h"
#include "support/test_util.h"

namespace snn::dist {
namespace {

using test::bound_socket;
using test::free_port;
using test::run_ranks;
using test::world_options;

TEST(World, GathersRowsOfEveryRankInRankOrder) {
  std::vector<torch::Tensor> got(3);
  // Rank r holds 2 - r rows (rank 2 none) of [rows, 2, 3] floats, and bools.
  const auto rows_of = [](int64_t r) {
    return torch::arange(6 * (2 - r), torch::kFloat).reshape({2 - r, 2, 3}) + 100.0 * static_cast<double>(r);
  };
  std::vector<torch::Tensor> flags(3);
  const auto errors = run_ranks(3, [&](World& w) {
    got[w.rank()] = w.all_gather_rows(rows_of(w.rank()));
    flags[w.rank()] = w.all_gather_rows(torch::full({w.rank() + 1}, w.rank() == 1, torch::kBool));
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  const torch::Tensor want = torch::cat({rows_of(0), rows_of(1), rows_of(2)});
  const torch::Tensor want_flags = torch::tensor({false, true, true, false, false, false});
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(got[r].defined());
    EXPECT_TRUE(got[r].equal(want)) << "rank " << r;
    EXPECT_TRUE(flags[r].equal(want_flags)) << "rank " << r;
  }
}

// all_gather_parts: rank r's part of split[r] doubles; every rank gets the
// parts in rank order, for equal parts (one buffer, no copy after) and
// unequal ones (an empty part included).
TEST(World, GathersPartsOfKnownSizesInRankOrder) {
  const auto part_of = [](int64_t r, int64_t n) { return torch::arange(n, torch::kDouble) + 1000.0 * r + 0.5; };
  for (const std::vector<int64_t>& split : {std::vector<int64_t>{4, 4, 4}, std::vector<int64_t>{3, 0, 5}}) {
    std::vector<torch::Tensor> got(3);
    const auto errors = run_ranks(3, [&](World& w) {
      got[w.rank()] = w.all_gather_parts(part_of(w.rank(), split[w.rank()]), split);
    });
    for (const auto& e : errors) EXPECT_EQ(e, "");
    const torch::Tensor want = torch::cat({part_of(0, split[0]), part_of(1, split[1]), part_of(2, split[2])});
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(got[r].defined());
      EXPECT_TRUE(got[r].equal(want)) << "rank " << r << ", parts " << split[0] << ", " << split[1] << ", " << split[2];
    }
  }
}

TEST(World, SumsInRankOrderBitForBitOnEveryRank) {
  // ((1e16 + 1) + -1e16) is 0 in double; any other order gives 1 or 2.
  const std::vector<double> parts = {1e16, 1.0, -1e16, 1.0};
  std::vector<torch::Tensor> got(4);
  const auto errors = run_ranks(4, [&](World& w) {
    got[w.rank()] = w.sum_in_rank_order(torch::full({2}, parts[w.rank()], torch::kDouble));
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(got[r][0].item<double>(), ((1e16 + 1.0) + -1e16) + 1.0) << "rank " << r;
    EXPECT_EQ(got[r][0].item<double>(), 1.0);
  }
}

TEST(World, SendsAndReceivesBetweenTwoRanks) {
  torch::Tensor received = torch::zeros({4}, torch::kInt);
  const auto errors = run_ranks(2, [&](World& w) {
    if (w.rank() == 0) w.send(torch::tensor({1, 2, 3, 4}, torch::kInt), 1, 7);
    if (w.rank() == 1) w.recv(received, 0, 7);
    w.barrier();
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_TRUE(received.equal(torch::tensor({1, 2, 3, 4}, torch::kInt)));
}

// Stage r of a small pipeline: a Linear layer and, but for the last, a
// threshold to bool spikes (the blocks between ranks are then bool, as a
// spiking network's are). Its weights come from torch's global generator,
// so it must be built before the rank threads start: built inside them, the
// threads' draws interleave and the stages differ from the one-process ones.
torch::nn::Sequential pipeline_stage(int64_t r, int64_t stages) {
  torch::manual_seed(r);
  const int64_t in = 6 + r, out = r + 1 < stages ? 7 + r : 3;
  torch::nn::Sequential seq(torch::nn::Functional([](const torch::Tensor& x) { return x.to(torch::kFloat); }),
                            torch::nn::Linear(in, out));
  if (r + 1 < stages) seq->push_back(torch::nn::Functional([](const torch::Tensor& x) { return x.gt(0.1); }));
  return seq;
}

TEST(World, APipelineOverRanksEqualsOneProcess) {
  const torch::Tensor x = torch::rand({4, 6});
  for (int64_t ranks : {2, 3}) {
    ModelPipeline whole(PipelineOptions().steps_per_tick(2));
    for (int64_t r = 0; r < ranks; ++r) whole.append(pipeline_stage(r, ranks), torch::kCPU);
    const torch::Tensor want = whole.constant_forward(x, 5, /*reduce=*/false);
    std::vector<torch::nn::Sequential> stages;
    for (int64_t r = 0; r < ranks; ++r) stages.push_back(pipeline_stage(r, ranks));
    std::vector<torch::Tensor> got(ranks);
    const auto errors = run_ranks(ranks, [&](World& w) {
      ModelPipeline part(PipelineOptions().steps_per_tick(2));
      part.append(stages[w.rank()], torch::kCPU);
      part.set_links(pipeline_links(w));
      for (int repeat = 0; repeat < 2; ++repeat) got[w.rank()] = part.constant_forward(x, 5, /*reduce=*/false);
    });
    for (const auto& e : errors) EXPECT_EQ(e, "");
    ASSERT_TRUE(got[0].defined());
    EXPECT_TRUE(got[0].equal(want)) << ranks << " ranks";
    for (int64_t r = 1; r < ranks; ++r) EXPECT_FALSE(got[r].defined()) << "rank " << r << " holds results";
  }
}

TEST(World, ACancelledReceiveEndsAtOnce) {
  const auto errors = run_ranks(2, [&](World& w) {
    if (w.rank() == 1) {
      Cancel cancel;
      std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        cancel.cancel();
      });
      torch::Tensor t = torch::zeros({3});
      const auto t0 = std::chrono::steady_clock::now();
      const std::string m = test::message_of([&] { w.recv(t, 0, 5, &cancel); });
      canceller.join();
      EXPECT_NE(m.find("a receive from rank 0 was cancelled"), std::string::npos) << m;
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
      // Later calls with it fail at once, without waiting for the peer.
      EXPECT_NE(test::message_of([&] { w.recv(t, 0, 5, &cancel); }).find("cancelled"), std::string::npos);
    }
    w.barrier();
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(World, DifferentSettingsFailOnEveryRankNamingTheFirstDifference) {
  const auto errors = run_ranks(3, [&](World& w) {
    w.check_same_settings(w.rank() == 2 ? R"({"limit": 100, "steps": 4})" : R"({"limit": 100, "steps": 8})");
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("different settings (steps: 8 on rank 0, 4 on rank 2)"), std::string::npos) << e;
  }
}

TEST(World, ARankThatNeverArrivesIsNamedAfterTheTimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto errors = run_ranks(3, [](World&) {}, /*timeout_s=*/1.0, /*ranks=*/{0, 1});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& e : errors) {
    EXPECT_NE(e.find("1 of the 3 ranks did not arrive"), std::string::npos) << e;
    EXPECT_NE(e.find("(rank 2 missing)"), std::string::npos) << e;
  }
  EXPECT_LT(s, 10.0);
}

TEST(World, AnotherWorldSizeOrATakenRankIsRefused) {
  const int port = free_port();
  std::string first, second, twice;
  std::thread a([&] { first = test::message_of([&] { World w(world_options(0, 2, port, 2.0)); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::thread b([&] { second = test::message_of([&] { World w(world_options(1, 3, port, 2.0)); }); });
  std::thread c([&] { twice = test::message_of([&] { World w(world_options(0, 2, port, 2.0)); }); });
  a.join();
  b.join();
  c.join();
  EXPECT_NE(second.find("rank 1 was started with world size 3, but the run at 127.0.0.1:" + std::to_string(port) +
                        " has 2"),
            std::string::npos)
      << second;
  // The second rank 0 cannot host the store; had it reached it, it would be refused as a duplicate.
  EXPECT_TRUE(twice.find("the port is in use") != std::string::npos || twice.find("joined the run") != std::string::npos)
      << twice;
  EXPECT_NE(first.find("rank 1 missing"), std::string::npos) << first;
}

TEST(World, APortInUseIsNamed) {
  int port = 0;
  const int fd = bound_socket(port);
  ASSERT_EQ(::listen(fd, 4), 0);
  const std::string m = test::message_of([&] { World w(world_options(0, 2, port, 2.0)); });
  ::close(fd);
  EXPECT_NE(m.find("rank 0 cannot host the run's store on 127.0.0.1:" + std::to_string(port) +
                   ": the port is in use"),
            std::string::npos)
      << m;
}

TEST(World, AReportedFailureReachesEveryOtherRank) {
  const int port = free_port();
  std::vector<std::promise<std::pair<std::string, int>>> heard(3);
  std::vector<std::thread> ranks;
  for (int64_t r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      World w(world_options(r, 3, port), [&, r](const std::string& m, int code) { heard[r].set_value({m, code}); });
      if (r == 1) {
        w.report_failure("the data file 'x.idx' is truncated", 2);
        return;
      }
      // The others are busy (not in a collective) when it happens.
      auto f = heard[r].get_future();
      ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "rank " << r;
      const auto [message, code] = f.get();
      EXPECT_EQ(message, "rank 1 failed: the data file 'x.idx' is truncated");
      EXPECT_EQ(code, 2);
    });
  }
  for (auto& t : ranks) t.join();
}

TEST(World, ACollectiveWithARankThatVanishedFailsAtOnce) {
  const int port = free_port();
  std::string message;
  double waited = 0;
  std::thread zero([&] {
    World w(world_options(0, 2, port, 60), [](const std::string&, int) {});
    w.barrier();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1 is gone by now
    const auto t0 = std::chrono::steady_clock::now();
    message = test::message_of([&] { w.all_gather_rows(torch::ones({3})); });
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  std::thread one([&] {
    World w(world_options(1, 2, port, 60), [](const std::string&, int) {});
    w.barrier();
  });  // leaves without finish() or a report: its sockets close, as a killed process's do
  one.join();
  zero.join();
  EXPECT_NE(message.find("rank 0: lost a peer during a gather"), std::string::npos) << message;
  EXPECT_LT(waited, 30.0);  // far below the 60 s timeout
}

TEST(WorldOptions, ComeFromTorchrunsEnvironment) {
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "3", 1);
  ::setenv("MASTER_ADDR", "node07", 1);
  ::setenv("MASTER_PORT", "29411", 1);
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  const auto o = options_from_environment();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->rank, 3);
  EXPECT_EQ(o->world_size, 4);
  EXPECT_EQ(o->master_addr, "node07");
  EXPECT_EQ(o->master_port, 29411);
  EXPECT_TRUE(o->agent_store);
  ::setenv("RANK", "three", 1);
  EXPECT_EQ(test::message_of([] { options_from_environment(); }),
            "environment variable RANK='three': expected a whole number");
  for (const char* v : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"}) {
    ::unsetenv(v);
  }
  EXPECT_FALSE(options_from_environment().has_value());
}

TEST(WorldOptions, MasterAndRanksAreChecked) {
  WorldOptions o;
  parse_master("[::1]:1234", o);
  EXPECT_EQ(o.master_addr, "::1");
  EXPECT_EQ(o.master_port, 1234);
  EXPECT_EQ(test::message_of([&] { parse_master("node:99999", o); }),
            "--master: expected HOST:PORT (e.g. 127.0.0.1:29500), got 'node:99999'");
  EXPECT_EQ(test::message_of([&] { parse_master("node", o); }),
            "--master: expected HOST:PORT (e.g. 127.0.0.1:29500), got 'node'");
  o = world_options(2, 2, 29500);
  EXPECT_EQ(test::message_of([&] { o.validate(); }), "rank 2 is outside the run's 2 ranks (0..1)");
  o = world_options(0, 0, 29500);
  EXPECT_EQ(test::message_of([&] { o.validate(); }), "world size: expected 1..65536 processes, got 0");
  o = world_options(0, 65537, 29500);
  EXPECT_EQ(test::message_of([&] { o.validate(); }), "world size: expected 1..65536 processes, got 65537");
  o = world_options(0, 2, 29500);
  o.timeout_s = 1e300;
  EXPECT_EQ(test::message_of([&] { o.validate(); }),
            "timeout: expected more than 0 and at most 604800 seconds (a week), got 1e+300");
  EXPECT_EQ(test::message_of([&] { parse_master("127.0.0.1:29500:1", o); }),
            "--master: expected HOST:PORT with one colon, or [IPv6]:PORT (e.g. [::1]:29500), got '127.0.0.1:29500:1'");
}

#ifdef __linux__
// Ranks as threads share this process, so each rank's binding moves all
// of its threads: the test looks at what each rank decided, then gives the
// process its cores back.
TEST(Cores, RanksSharingAMachineGetCoresOfTheirOwnWhereTheirThreadsFit) {
  cpu_set_t start;
  ASSERT_EQ(sched_getaffinity(0, sizeof(start), &start), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &start)) cpus.push_back(c);
  }
  const auto restore = [&] {
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      sched_setaffinity(static_cast<pid_t>(std::atol(task.path().filename().c_str())), sizeof(start), &start);
    }
  };
  const int64_t n = static_cast<int64_t>(cpus.size());
  for (const int64_t threads : {int64_t(1), n, std::max<int64_t>(1, n / 2)}) {
    std::vector<CoreBinding> got(2);
    const auto errors =
        test::run_ranks(2, [&](World& w) { got[static_cast<size_t>(w.rank())] = bind_to_cores(w, threads); });
    restore();
    for (const auto& e : errors) EXPECT_EQ(e, "");
    for (int64_t r = 0; r < 2; ++r) {
      const CoreBinding& b = got[static_cast<size_t>(r)];
      EXPECT_EQ(b.local_ranks, 2);
      EXPECT_EQ(b.local_rank, r);
      const std::string t = std::to_string(threads), c = std::to_string(n);
      if (2 * threads == n) {
        std::vector<int> mine(cpus.begin() + r * threads, cpus.begin() + (r + 1) * threads);
        EXPECT_EQ(b.cores, mine) << "rank " << r;
        EXPECT_EQ(describe(b, threads),
                  threads == 1 ? "each rank on a core of its own (2 ranks on this machine)"
                               : "each rank on " + t + " cores of its own (2 ranks on this machine)");
      } else if (2 * threads > n) {
        EXPECT_TRUE(b.cores.empty()) << "rank " << r;
        EXPECT_EQ(describe(b, threads),
                  "not bound (more threads than cores: 2 ranks of " + t + " threads, " + c + " cores)");
      } else {
        EXPECT_TRUE(b.cores.empty()) << "rank " << r;
        EXPECT_EQ(describe(b, threads),
                  "not bound (2 ranks of " + t + " threads leave cores free (" + c +
                      " cores): the system places them)");
      }
    }
  }
  // One rank alone on its machine: nothing to share.
  CoreBinding alone;
  const auto errors = test::run_ranks(1, [&](World& w) { alone = bind_to_cores(w, 1); });
  restore();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_TRUE(alone.cores.empty());
  EXPECT_EQ(describe(alone, 1), "not bound (the only rank on its machine)");
}
#endif

}  // namespace
}  // namespace snn::dist
