#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "snn/core/error.h"
#include "snn/encoders/encoders.h"
#include "snn/neurons/lif.h"
#include "snn/neurons/linear.h"
#include "snn/pipeline/bounded_queue.h"
#include "snn/pipeline/model_pipeline.h"
#include "support/test_util.h"

namespace snn {
namespace {

// A spiking network as a list of layers: Poisson encoder, then
// (Linear, LIF) pairs, all in multi-step mode on [K, B, ...] blocks.
std::vector<torch::nn::AnyModule> make_layers(const std::vector<int64_t>& sizes, uint64_t seed) {
  torch::manual_seed(static_cast<int64_t>(seed));
  std::vector<torch::nn::AnyModule> layers;
  layers.emplace_back(PoissonEncoder(PoissonEncoderOptions().seed(seed).step_mode(StepMode::kMulti)));
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    Linear fc(sizes[i], sizes[i + 1]);
    {
      torch::NoGradGuard no_grad;
      fc->weight.mul_(4.0).add_(0.15);  // enough drive to spike in every layer
    }
    layers.emplace_back(fc);
    layers.emplace_back(LIF(LIFOptions().tau(2.0).step_mode(StepMode::kMulti)));
  }
  return layers;
}

std::vector<Temporal*> temporal_of(const std::vector<torch::nn::AnyModule>& layers) {
  std::vector<Temporal*> out;
  for (const auto& l : layers) {
    if (auto* t = dynamic_cast<Temporal*>(l.ptr().get())) out.push_back(t);
  }
  return out;
}

// The plain sequential loop the pipeline must reproduce: one step at a time.
torch::Tensor sequential(const std::vector<torch::nn::AnyModule>& layers, const torch::Tensor& x, int64_t T,
                         bool reduce, const torch::Tensor& samples) {
  for (auto* t : temporal_of(layers)) t->reset_state();
  std::vector<torch::Tensor> outs;
  torch::Tensor total;
  for (int64_t t = 0; t < T; ++t) {
    for (auto* m : temporal_of(layers)) m->set_time(t, samples);
    torch::Tensor h = x.unsqueeze(0);
    for (auto l : layers) h = l.forward(h);
    outs.push_back(h[0]);
    total = total.defined() ? total + h[0] : h[0].clone();
  }
  return reduce ? total : torch::stack(outs);
}

// Splits the layers into S stages as evenly as possible, all on the CPU.
ModelPipeline make_pipeline(const std::vector<torch::nn::AnyModule>& layers, size_t S, int64_t K) {
  ModelPipeline pipe(PipelineOptions().steps_per_tick(K));
  size_t next = 0;
  for (size_t s = 0; s < S; ++s) {
    const size_t count = (layers.size() - next) / (S - s);
    torch::nn::Sequential seq;
    for (size_t i = 0; i < count; ++i) seq->push_back(layers[next + i]);
    next += count;
    pipe.append(seq, torch::kCPU);
  }
  return pipe;
}

TEST(Pipeline, ConstantForwardEqualsSequentialForAnyPartitionAndStepsPerTick) {
  const auto layers = make_layers({12, 20, 16, 10}, 7);  // 7 layers
  for (int64_t batch : {1, 5}) {
    const torch::Tensor x = torch::rand({batch, 12});
    const torch::Tensor samples = torch::arange(100, 100 + batch);
    for (int64_t T : {1, 3, 7}) {
      const torch::Tensor ref_sum = sequential(layers, x, T, true, samples);
      const torch::Tensor ref_all = sequential(layers, x, T, false, samples);
      if (T > 1) ASSERT_GT(ref_sum.sum().item<float>(), 0) << "the test network must spike";
      for (size_t S = 1; S <= 4; ++S) {
        for (int64_t K : {int64_t{1}, int64_t{2}, int64_t{3}, T}) {
          ModelPipeline pipe = make_pipeline(layers, S, K);
          const torch::Tensor sum = pipe.constant_forward(x, T, true, samples);
          const torch::Tensor all = pipe.constant_forward(x, T, false, samples);
          EXPECT_TRUE(torch::equal(sum, ref_sum)) << "B " << batch << " T " << T << " S " << S << " K " << K;
          EXPECT_TRUE(torch::equal(all, ref_all)) << "B " << batch << " T " << T << " S " << S << " K " << K;
          EXPECT_EQ(all.sizes(), (std::vector<int64_t>{T, batch, 10}));
        }
      }
    }
  }
}

TEST(Pipeline, SampleSpikesDoNotDependOnBatchComposition) {
  const auto layers = make_layers({12, 20, 10}, 3);
  const torch::Tensor x = torch::rand({9, 12});
  const torch::Tensor ids = torch::arange(40, 49);
  ModelPipeline pipe = make_pipeline(layers, 2, 3);
  const torch::Tensor all = pipe.constant_forward(x, 8, false, ids);
  ASSERT_GT(all.select(1, 4).sum().item<float>(), 0);
  const torch::Tensor one = pipe.constant_forward(x.narrow(0, 4, 1), 8, false, ids.narrow(0, 4, 1));
  EXPECT_TRUE(torch::equal(one.select(1, 0), all.select(1, 4)));
}

// Records every call: which stage saw which steps, and when.
struct Call {
  int64_t first_step;
  int64_t steps;
  std::chrono::steady_clock::time_point start, end;
  int threads;
};
class RecorderImpl : public torch::nn::Module, public Temporal {
 public:
  explicit RecorderImpl(int sleep_ms = 0) : sleep_ms_(sleep_ms) {}
  torch::Tensor forward(const torch::Tensor& x) {
    Call c{first_step_, x.size(0), std::chrono::steady_clock::now(), {}, at::get_num_threads()};
    if (sleep_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms_));
    c.end = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    calls.push_back(c);
    return x;
  }
  void reset_state() override { ++resets; }
  std::vector<torch::Tensor> save_state() const override { return {}; }
  void load_state(const std::vector<torch::Tensor>&) override {}
  void set_time(int64_t first_step, const torch::Tensor&) override { first_step_ = first_step; }
  std::vector<Call> calls;
  int resets = 0;

 private:
  int sleep_ms_;
  int64_t first_step_ = -1;
  std::mutex mutex_;
};
TORCH_MODULE(Recorder);

TEST(Pipeline, EveryStageRunsExactlyOncePerBlockInTimeOrder) {
  for (int64_t K : {1, 3}) {
    std::vector<Recorder> rec{Recorder(), Recorder(), Recorder(), Recorder()};
    ModelPipeline pipe(PipelineOptions().steps_per_tick(K));
    for (auto& r : rec) pipe.append(r, torch::kCPU);
    pipe.constant_forward(torch::zeros({2, 3}), 10);
    for (auto& r : rec) {
      const int64_t blocks = (10 + K - 1) / K;
      ASSERT_EQ(static_cast<int64_t>(r->calls.size()), blocks) << "K " << K;
      for (int64_t j = 0; j < blocks; ++j) {
        EXPECT_EQ(r->calls[j].first_step, j * K);
        EXPECT_EQ(r->calls[j].steps, std::min(K, 10 - j * K));
      }
      EXPECT_EQ(r->resets, 1);
    }
  }
}

TEST(Pipeline, CpuStagesOverlapInWallTime) {
  std::vector<Recorder> rec{Recorder(30), Recorder(30), Recorder(30)};
  ModelPipeline pipe;
  for (auto& r : rec) pipe.append(r, torch::kCPU);
  pipe.constant_forward(torch::zeros({1, 1}), 6);
  // While stage 1 works on block j, stage 0 is already working on block j + 1.
  int overlaps = 0;
  for (size_t j = 0; j + 1 < 6; ++j) {
    const Call& later = rec[0]->calls[j + 1];
    const Call& now = rec[1]->calls[j];
    if (later.start < now.end && now.start < later.end) ++overlaps;
  }
  EXPECT_GE(overlaps, 3);
}

TEST(Pipeline, SharesIntraOpThreadsAmongCpuStagesAndRestoresThem) {
  const int saved = at::get_num_threads();
  at::set_num_threads(2);
  std::vector<Recorder> rec{Recorder(), Recorder()};
  ModelPipeline pipe;
  for (auto& r : rec) pipe.append(r, torch::kCPU);
  pipe.constant_forward(torch::zeros({1, 1}), 2);
  EXPECT_EQ(rec[0]->calls[0].threads, 1);
  EXPECT_EQ(rec[1]->calls[0].threads, 1);
  EXPECT_EQ(at::get_num_threads(), 2);
  at::set_num_threads(saved);
}

TEST(Pipeline, SeveralBatchesInOneCallEqualOneCallEach) {
  const auto layers = make_layers({12, 20, 16, 10}, 11);
  const std::vector<torch::Tensor> xs{torch::rand({5, 12}), torch::rand({3, 12}), torch::rand({5, 12})};
  const std::vector<torch::Tensor> idx{torch::arange(0, 5), torch::arange(5, 8), torch::arange(8, 13)};
  for (size_t S : {1, 2, 3}) {
    for (int64_t K : {int64_t{1}, int64_t{2}, int64_t{5}}) {
      ModelPipeline pipe = make_pipeline(layers, S, K);
      for (bool reduce : {true, false}) {
        const std::vector<torch::Tensor> got = pipe.constant_forward_batches(xs, 5, reduce, idx);
        ASSERT_EQ(got.size(), xs.size());
        for (size_t b = 0; b < xs.size(); ++b) {
          EXPECT_TRUE(torch::equal(got[b], sequential(layers, xs[b], 5, reduce, idx[b])))
              << "S " << S << " K " << K << " batch " << b << " reduce " << reduce;
        }
      }
      EXPECT_EQ(pipe.last_run().blocks, static_cast<int64_t>(3 * ((5 + K - 1) / K)));
      EXPECT_EQ(pipe.last_run().batch, 5);
    }
  }
  ModelPipeline keeping(PipelineOptions().keep_state(true));
  keeping.append(Recorder(), torch::kCPU);
  EXPECT_THROW(keeping.constant_forward_batches(xs, 2), Error);
  EXPECT_THROW(make_pipeline(layers, 1, 1).constant_forward_batches(xs, 2, true, {idx[0]}), Error);
}

TEST(Pipeline, KeepStateContinuesTheSimulation) {
  const auto layers = make_layers({12, 20, 10}, 5);
  const torch::Tensor x = torch::rand({3, 12});
  const torch::Tensor ref = sequential(layers, x, 9, false, torch::arange(3));
  ASSERT_GT(ref.sum().item<float>(), 0);
  ModelPipeline pipe = make_pipeline(layers, 3, 2);
  pipe.options().keep_state(true);
  pipe.reset_state();
  const torch::Tensor a = pipe.constant_forward(x, 4, false);
  const torch::Tensor b = pipe.constant_forward(x, 5, false);
  EXPECT_TRUE(torch::equal(torch::cat({a, b}), ref));
  // Without keep_state every call starts afresh.
  pipe.options().keep_state(false);
  EXPECT_TRUE(torch::equal(pipe.constant_forward(x, 4, false), a));
}

TEST(Pipeline, MicroBatchForwardEqualsWholeBatch) {
  // Single-step layers on [B, ...]: each micro-batch starts from reset state.
  torch::manual_seed(4);
  Linear fc1(8, 16), fc2(16, 6);
  LIF lif1(LIFOptions().v_threshold(0.1)), lif2(LIFOptions().v_threshold(0.1));
  torch::nn::Sequential whole(fc1, lif1, fc2, lif2);
  const torch::Tensor x = torch::rand({10, 8}) * 2;
  lif1->reset_state();
  lif2->reset_state();
  const torch::Tensor ref = whole->forward(x);
  ASSERT_GT(ref.sum().item<float>(), 0);
  for (int64_t split : {1, 3, 4, 10, 16}) {
    ModelPipeline pipe;
    pipe.append(torch::nn::Sequential(fc1, lif1), torch::kCPU);
    pipe.append(torch::nn::Sequential(fc2, lif2), torch::kCPU);
    EXPECT_TRUE(torch::equal(pipe.forward(x, split), ref)) << "split " << split;
  }
}

struct ThrowingImpl : torch::nn::Cloneable<ThrowingImpl> {
  void reset() override {}
  torch::Tensor forward(const torch::Tensor&) { throw Error("stage exploded"); }
};
TORCH_MODULE(Throwing);

struct DropTimeImpl : torch::nn::Cloneable<DropTimeImpl> {
  void reset() override {}
  torch::Tensor forward(const torch::Tensor& x) { return x.sum(0); }
};
TORCH_MODULE(DropTime);

TEST(Pipeline, ErrorsAreClearAndNeverHang) {
  ModelPipeline empty;
  EXPECT_THROW(empty.constant_forward(torch::zeros({1, 1}), 3), Error);
  ModelPipeline pipe;
  pipe.append(Recorder(), torch::kCPU);
  EXPECT_THROW(pipe.constant_forward(torch::zeros({1, 1}), 0), Error);
  EXPECT_THROW(pipe.constant_forward(torch::zeros({1, 1}), -2), Error);
  EXPECT_THROW(pipe.forward(torch::zeros({2, 1}), 0), Error);
  EXPECT_THROW(pipe.constant_forward(torch::zeros({2, 1}), 3, true, torch::arange(3)), c10::Error);
  EXPECT_THROW(pipe.append(Recorder(), torch::Device("cuda:7")), Error);
  // A stage that throws, in the middle of a long pipeline with full queues.
  ModelPipeline failing(PipelineOptions().queue_capacity(1));
  failing.append(Recorder(), torch::kCPU);
  failing.append(Throwing(), torch::kCPU);
  failing.append(Recorder(), torch::kCPU);
  try {
    failing.constant_forward(torch::zeros({1, 1}), 50);
    FAIL() << "expected the stage's error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "stage exploded");
  }
  ModelPipeline dropping;
  dropping.append(DropTime(), torch::kCPU);
  try {
    dropping.constant_forward(torch::zeros({2, 3}), 4);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keep the time dimension"), std::string::npos) << e.what();
  }
}

// A link between two pipeline parts in one process: a queue of one block
// (a send waits until the block is taken, as a c10d send may), closed by
// cancel() on either side.
class QueueLink : public BlockSource, public BlockSink {
 public:
  torch::Tensor receive() override {
    std::optional<torch::Tensor> t = queue_.pop();
    if (!t) throw Error("link cancelled");
    return *t;
  }
  void send(const torch::Tensor& block) override {
    if (!queue_.push(block.clone())) throw Error("link cancelled");
  }
  void cancel() noexcept override { queue_.close(); }

 private:
  BoundedQueue<torch::Tensor> queue_{1};
};

// The layers split into `parts` pipelines (part p holds layers [cut[p],
// cut[p+1]), in stages_per_part stages), linked in a ring as processes are:
// part p sends to p + 1, the last part's outputs come back to part 0.
std::vector<ModelPipeline> make_parts(const std::vector<torch::nn::AnyModule>& layers, const std::vector<size_t>& cut,
                                      size_t stages_per_part, int64_t K) {
  const size_t P = cut.size() - 1;
  std::vector<std::shared_ptr<QueueLink>> links;
  for (size_t p = 0; p < P; ++p) links.push_back(std::make_shared<QueueLink>());  // links[p]: out of part p
  std::vector<ModelPipeline> parts;
  for (size_t p = 0; p < P; ++p) {
    const std::vector<torch::nn::AnyModule> mine(layers.begin() + static_cast<int64_t>(cut[p]),
                                                 layers.begin() + static_cast<int64_t>(cut[p + 1]));
    ModelPipeline part = make_pipeline(mine, std::min(stages_per_part, mine.size()), K);
    PipelineLinks l;
    l.upstream = p > 0 ? links[p - 1] : nullptr;
    l.downstream = links[p];
    l.results = p == 0 ? links[P - 1] : nullptr;
    part.set_links(l);
    parts.push_back(std::move(part));
  }
  return parts;
}

// Runs every part on a thread of its own, as processes would; part 0's result.
torch::Tensor run_parts(std::vector<ModelPipeline>& parts, const torch::Tensor& x, int64_t T, bool reduce,
                        const torch::Tensor& samples, std::vector<std::string>* errors = nullptr) {
  std::vector<torch::Tensor> results(parts.size());
  std::vector<std::string> messages(parts.size());
  std::vector<std::thread> threads;
  for (size_t p = 0; p < parts.size(); ++p) {
    threads.emplace_back([&, p] {
      try {
        results[p] = parts[p].constant_forward(x, T, reduce, samples);
      } catch (const std::exception& e) {
        messages[p] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t p = 1; p < parts.size(); ++p) EXPECT_FALSE(results[p].defined()) << "part " << p << " returned results";
  if (errors) *errors = messages;
  for (size_t p = 0; !errors && p < parts.size(); ++p) EXPECT_EQ(messages[p], "") << "part " << p;
  return results[0];
}

TEST(Pipeline, PartsLinkedAcrossProcessesEqualOnePipelineForAnyCutAndK) {
  const auto layers = make_layers({12, 20, 16, 10}, 7);  // encoder + 3 x (Linear, LIF): 7 layers
  const torch::Tensor x = torch::rand({5, 12});
  const torch::Tensor samples = torch::arange(40, 45);
  for (int64_t T : {1, 6}) {
    const torch::Tensor ref_sum = sequential(layers, x, T, true, samples);
    const torch::Tensor ref_all = sequential(layers, x, T, false, samples);
    for (const std::vector<size_t>& cut : {std::vector<size_t>{0, 3, 7}, std::vector<size_t>{0, 1, 7},
                                           std::vector<size_t>{0, 3, 5, 7}, std::vector<size_t>{0, 2, 4, 6, 7}}) {
      for (size_t stages : {1, 2}) {
        for (int64_t K : {int64_t{1}, int64_t{4}, T}) {
          std::vector<ModelPipeline> parts = make_parts(layers, cut, stages, K);
          const std::string where = "T " + std::to_string(T) + " parts " + std::to_string(cut.size() - 1) +
                                    " stages " + std::to_string(stages) + " K " + std::to_string(K);
          EXPECT_TRUE(torch::equal(run_parts(parts, x, T, true, samples), ref_sum)) << where;
          EXPECT_TRUE(torch::equal(run_parts(parts, x, T, false, samples), ref_all)) << where;
        }
      }
    }
  }
}

TEST(Pipeline, AFailingPartEndsEveryPartWithoutHanging) {
  auto layers = make_layers({4, 6, 3}, 1);  // 5 layers
  layers.insert(layers.begin() + 3, torch::nn::AnyModule(Throwing()));
  for (const std::vector<size_t>& cut : {std::vector<size_t>{0, 2, 6}, std::vector<size_t>{0, 4, 6},
                                         std::vector<size_t>{0, 2, 4, 6}}) {
    std::vector<ModelPipeline> parts = make_parts(layers, cut, 1, 1);
    std::vector<std::string> errors;
    run_parts(parts, torch::rand({2, 4}), 20, true, torch::arange(2), &errors);
    size_t exploded = 0;
    for (size_t p = 0; p < errors.size(); ++p) {
      EXPECT_NE(errors[p], "") << "part " << p << " ended without an error";
      exploded += errors[p] == "stage exploded";
    }
    EXPECT_EQ(exploded, 1u) << "the failing part reports the stage's own error";
  }
  ModelPipeline orphan;
  orphan.append(Recorder(), torch::kCPU);
  PipelineLinks l;
  l.results = std::make_shared<QueueLink>();
  orphan.set_links(l);
  EXPECT_THROW(orphan.constant_forward(torch::zeros({1, 1}), 2), Error);
}

TEST(Pipeline_CUDA, TwoStreamsOnOneGpuAndCpuToGpuEqualSequential) {
  SNN_REQUIRE_CUDA();
  const auto layers = make_layers({12, 20, 16, 10}, 9);
  const torch::Tensor x = torch::rand({5, 12});
  const torch::Tensor ids = torch::arange(5);
  // Reference: the same layers, sequentially on the CPU, then on cuda:0;
  // the GPU's kernels give the CPU's values bit for bit.
  const torch::Tensor cpu_ref = sequential(layers, x, 6, false, ids);
  ASSERT_GT(cpu_ref.sum().item<float>(), 0) << "the test network must spike";
  for (const auto& l : layers) l.ptr()->to(torch::kCUDA);
  const torch::Tensor ref = sequential(layers, x.cuda(), 6, false, ids.cuda());
  EXPECT_TRUE(torch::equal(ref.cpu(), cpu_ref));
  for (bool first_on_cpu : {false, true}) {
    ModelPipeline pipe(PipelineOptions().steps_per_tick(2));
    torch::nn::Sequential a, b;
    for (size_t i = 0; i < 3; ++i) a->push_back(layers[i]);
    for (size_t i = 3; i < layers.size(); ++i) b->push_back(layers[i]);
    pipe.append(a, first_on_cpu ? torch::Device(torch::kCPU) : torch::Device("cuda:0"));
    pipe.append(b, torch::Device("cuda:0"));
    const torch::Tensor out = pipe.constant_forward(x, 6, false, ids);
    EXPECT_TRUE(out.is_cuda());
    EXPECT_TRUE(torch::equal(out, ref)) << (first_on_cpu ? "cpu,cuda:0" : "cuda:0,cuda:0");
  }
}

}  // namespace
}  // namespace snn

namespace snn {
namespace {

TEST(Pipeline, GradientsFlowThroughConstantForward) {
  // Surrogate-gradient BPTT through the pipeline equals BPTT through the
  // sequential loop (to float rounding: the backward matmuls see other shapes).
  const auto layers = make_layers({12, 20, 10}, 11);
  const torch::Tensor x = torch::rand({4, 12});
  auto weights = [&] {
    std::vector<torch::Tensor> w;
    for (const auto& l : layers) {
      for (const auto& p : l.ptr()->parameters()) w.push_back(p);
    }
    return w;
  };
  for (auto& w : weights()) w.mutable_grad() = torch::Tensor();
  sequential(layers, x, 6, true, torch::arange(4)).sum().backward();
  std::vector<torch::Tensor> ref;
  for (auto& w : weights()) ref.push_back(w.grad().clone());
  for (int64_t K : {1, 4}) {
    for (auto& w : weights()) w.mutable_grad() = torch::Tensor();
    ModelPipeline pipe = make_pipeline(layers, 3, K);
    pipe.constant_forward(x, 6, true).sum().backward();
    const auto w = weights();
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_TRUE(w[i].grad().defined()) << "parameter " << i << " K " << K;
      EXPECT_TRUE(torch::allclose(w[i].grad(), ref[i], 1e-4, 1e-5)) << "parameter " << i << " K " << K;
    }
  }
  EXPECT_GT(ref[0].abs().sum().item<float>(), 0);
}

}  // namespace
}  // namespace snn
