#include "snn/pipeline/model_pipeline.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>

#include <algorithm>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "snn/core/build_info.h"
#include "snn/core/error.h"
#include "snn/core/frozen_weights.h"
#include "snn/pipeline/bounded_queue.h"

#if SNN_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace snn {
namespace {

std::string shape_string(const torch::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

// A block in flight between two stages. On CUDA, `ready` marks when the
// producer's stream has finished writing it; the consumer's stream waits for
// it (no host synchronisation per tick).
struct Handoff {
  torch::Tensor tensor;
#if SNN_WITH_CUDA
  std::shared_ptr<at::cuda::CUDAEvent> ready;
#endif
};

// Runs fn on every stage's thread; the first exception is kept, every
// queue is closed and every link cancelled, so that no stage waits forever
// on a failed neighbour (in this process or another).
class ErrorSlot {
 public:
  ErrorSlot(std::vector<std::unique_ptr<BoundedQueue<Handoff>>>& queues, const PipelineLinks& links)
      : queues_(queues), links_(links) {}
  void fail(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = e;
    }
    for (auto& q : queues_) q->close();
    if (links_.upstream) links_.upstream->cancel();
    if (links_.downstream) links_.downstream->cancel();
    if (links_.results) links_.results->cancel();
  }
  void rethrow() {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::vector<std::unique_ptr<BoundedQueue<Handoff>>>& queues_;
  const PipelineLinks& links_;
  std::mutex mutex_;
  std::exception_ptr error_;
};

// A Sequential as a module with a plain Tensor -> Tensor forward.
class SequentialStageImpl : public torch::nn::Module {
 public:
  explicit SequentialStageImpl(torch::nn::Sequential seq) : seq_(register_module("sequential", std::move(seq))) {}
  torch::Tensor forward(const torch::Tensor& x) { return seq_->forward(x); }

 private:
  torch::nn::Sequential seq_;
};
TORCH_MODULE(SequentialStage);

}  // namespace

void ModelPipeline::append(torch::nn::Sequential sequential, torch::Device device) {
  append_any(torch::nn::AnyModule(SequentialStage(std::move(sequential))), device);
}

void ModelPipeline::append_any(torch::nn::AnyModule module, torch::Device device) {
  if (module.is_empty()) throw Error("ModelPipeline::append: the module is empty");
  if (device.is_cuda()) {
#if SNN_WITH_CUDA
    // (Checked here, where the stages are placed, not where a config is
    // read: a checkpoint trained on a GPU is inspected and run elsewhere.)
    if (!torch::cuda::is_available() || device.index() >= static_cast<int>(torch::cuda::device_count())) {
      const auto gpus = torch::cuda::device_count();
      throw Error("device '" + device.str() + "' is not available: this machine has " + std::to_string(gpus) +
                  " CUDA device" + (gpus == 1 ? "" : "s"));
    }
    if (!device.has_index()) device = torch::Device(torch::kCUDA, 0);
#else
    throw Error("device '" + device.str() + "' needs CUDA, but snnsim was built without it");
#endif
  } else if (!device.is_cpu()) {
    throw Error("ModelPipeline::append: unsupported device " + device.str() + " (use cpu or cuda:N)");
  }
  module.ptr()->to(device);
  Stage stage{std::move(module), device, {}};
  for (const auto& m : stage.module.ptr()->modules(/*include_self=*/true)) {
    if (auto* t = dynamic_cast<Temporal*>(m.get())) stage.temporal.push_back(t);
  }
  stages_.push_back(std::move(stage));
}

void ModelPipeline::reset_state() {
  for (auto& s : stages_) {
    for (auto* t : s.temporal) t->reset_state();
  }
  next_step_ = 0;
}

std::vector<torch::Tensor> ModelPipeline::run(const std::vector<Job>& jobs, bool time_blocks) {
  // No parameter changes during a run: layers may keep derived weights
  // (snn::Linear's packing) across its blocks.
  const FrozenWeights frozen;
  const size_t n_stages = stages_.size();
  // One stage has nothing to overlap with: it runs on the caller's thread
  // (no thread start per call, warm thread-local buffers), and its results
  // wait in a queue long enough for all of them.
  // (Links need the stage on a thread of its own: the caller's thread
  // receives the results meanwhile.)
  const bool inline_stage = n_stages == 1 && !links_.any();
  if (links_.results && !links_.downstream) {
    throw Error("ModelPipeline: a results link needs a downstream link (the results come back from the last part)");
  }
  // queues[k] feeds stage k (queues[0] only from an upstream link);
  // queues[S] carries the last stage's outputs.
  std::vector<std::unique_ptr<BoundedQueue<Handoff>>> queues;
  for (size_t k = 0; k <= n_stages; ++k) {
    const size_t capacity = inline_stage && k == n_stages ? std::max<size_t>(1, jobs.size())
                                                          : static_cast<size_t>(options_.queue_capacity());
    queues.push_back(std::make_unique<BoundedQueue<Handoff>>(capacity));
  }
  ErrorSlot errors(queues, links_);

  // Intra-op threads: the caller's budget shared among the CPU stages.
  const int caller_threads = at::get_num_threads();
  const int cpu_stages = static_cast<int>(std::count_if(stages_.begin(), stages_.end(),
                                                        [](const Stage& s) { return s.device.is_cpu(); }));
  const int per_stage = options_.threads_per_stage() > 0
                            ? static_cast<int>(options_.threads_per_stage())
                            : std::max(1, caller_threads / std::max(1, cpu_stages));
  // Grad mode, inference mode and the like follow the caller into the workers.
  const at::ThreadLocalState caller_state;
  PipelineRunInfo info;
  info.stages = static_cast<int64_t>(n_stages);
  info.blocks = static_cast<int64_t>(jobs.size());
  info.stage_threads.assign(n_stages, 0);
  for (const Job& job : jobs) {
    if (time_blocks) info.largest_block = std::max(info.largest_block, job.input.size(0));
    if (!time_blocks) info.batch += job.input.size(0);  // micro-batches add up to the batch
    if (time_blocks) info.batch = std::max(info.batch, job.input.size(1));  // the largest of the batches
  }

  auto worker = [&](size_t k) {
    try {
      at::ThreadLocalStateGuard tls_guard(caller_state);
      Stage& stage = stages_[k];
      if (stage.device.is_cpu()) at::set_num_threads(per_stage);
      info.stage_threads[k] = at::get_num_threads();  // each stage writes its own slot
#if SNN_WITH_CUDA
      std::optional<c10::cuda::CUDAStreamGuard> stream_guard;
      if (stage.device.is_cuda()) {
        stream_guard.emplace(c10::cuda::getStreamFromPool(false, stage.device.index()));
      }
#endif
      // The sample indices on this stage's device, copied once per batch
      // (its blocks share one tensor): a copy to a GPU waits for it.
      torch::Tensor samples_src, samples_here;
      for (const Job& job : jobs) {
        torch::Tensor input;
        if (k == 0 && !links_.upstream) {
          input = job.input;
        } else {
          std::optional<Handoff> h = queues[k]->pop();
          if (!h) return;  // a neighbour failed
          input = std::move(h->tensor);
#if SNN_WITH_CUDA
          if (stage.device.is_cuda()) {
            const auto stream = c10::cuda::getCurrentCUDAStream(stage.device.index());
            if (h->ready) h->ready->block(stream);
            // The producer's allocation is now used on this stream too.
            c10::cuda::CUDACachingAllocator::recordStream(input.storage().data_ptr(), stream);
          }
#endif
        }
        if (job.reset) {
          for (auto* t : stage.temporal) t->reset_state();
        }
        if (!stage.temporal.empty()) {
          if (!samples_src.is_same(job.samples)) {
            samples_src = job.samples;
            samples_here = job.samples.to(stage.device);
          }
          for (auto* t : stage.temporal) t->set_time(job.first_step, samples_here);
        }
        torch::Tensor out = stage.module.forward(input);
        if (time_blocks && (out.dim() < 1 || out.size(0) != input.size(0))) {
          throw Error("pipeline stage " + std::to_string(k) + " returned shape " + shape_string(out) +
                      " for an input of shape " + shape_string(input) + "; stages must keep the time dimension " +
                      "first ([K, B, ...], K = " + std::to_string(input.size(0)) + ")");
        }
        const torch::Device next = k + 1 < n_stages ? stages_[k + 1].device : stage.device;
        Handoff h;
#if SNN_WITH_CUDA
        if (next.is_cuda() && next != stage.device) {
          // Allocate and order the copy on the consumer's side without
          // blocking the host.
          c10::cuda::CUDAGuard device_guard(next);
          h.tensor = out.to(next, /*non_blocking=*/true);
        } else {
          h.tensor = next == stage.device ? out : out.to(next);
        }
        if (stage.device.is_cuda()) {
          h.ready = std::make_shared<at::cuda::CUDAEvent>();
          h.ready->record(c10::cuda::getCurrentCUDAStream(stage.device.index()));
          if (next.is_cpu()) h.ready->synchronize();  // a CPU consumer reads the data
        }
#else
        h.tensor = next == stage.device ? out : out.to(next);
#endif
        if (!queues[k + 1]->push(std::move(h))) return;
      }
    } catch (...) {
      errors.fail(std::current_exception());
    }
  };

  // The links' threads: blocks from the previous part into queues[0], the
  // last stage's outputs to the next part. They hold no intra-op threads.
  auto receiver = [&] {
    try {
      for (const Job& job : jobs) {
        Handoff h;
        h.tensor = links_.upstream->receive();
        if (time_blocks && (h.tensor.dim() < 1 || h.tensor.size(0) != job.input.size(0))) {
          throw Error("pipeline: the previous part sent a block of shape " + shape_string(h.tensor) +
                      " where one of " + std::to_string(job.input.size(0)) + " steps was due");
        }
        if (h.tensor.device() != stages_.front().device) h.tensor = h.tensor.to(stages_.front().device);
        if (!queues[0]->push(std::move(h))) return;
      }
    } catch (...) {
      errors.fail(std::current_exception());
    }
  };
  auto sender = [&] {
    try {
      for (size_t j = 0; j < jobs.size(); ++j) {
        std::optional<Handoff> h = queues[n_stages]->pop();
        if (!h) return;
#if SNN_WITH_CUDA
        if (h->ready && h->tensor.is_cuda()) h->ready->synchronize();
#endif
        links_.downstream->send(h->tensor);
      }
    } catch (...) {
      errors.fail(std::current_exception());
    }
  };

  std::vector<std::thread> threads;
  if (inline_stage) {
    worker(0);
  } else {
    threads.reserve(n_stages + 2);
    if (links_.upstream) threads.emplace_back(receiver);
    for (size_t k = 0; k < n_stages; ++k) threads.emplace_back(worker, k);
    if (links_.downstream) threads.emplace_back(sender);
  }
  std::vector<torch::Tensor> outputs;
  outputs.reserve(jobs.size());
  const bool returns = !links_.downstream || links_.results;
  try {
    for (size_t j = 0; returns && j < jobs.size(); ++j) {
      if (links_.results) {
        outputs.push_back(links_.results->receive());
        continue;
      }
      std::optional<Handoff> h = queues[n_stages]->pop();
      if (!h) break;
#if SNN_WITH_CUDA
      if (h->ready && h->tensor.is_cuda()) h->ready->block(c10::cuda::getCurrentCUDAStream(h->tensor.device().index()));
#endif
      outputs.push_back(std::move(h->tensor));
    }
  } catch (...) {
    errors.fail(std::current_exception());
  }
  for (auto& t : threads) t.join();
  at::set_num_threads(caller_threads);
  errors.rethrow();
  if (returns && outputs.size() != jobs.size()) throw InternalError("pipeline lost blocks without an error");
  last_run_ = std::move(info);
  return outputs;
}

torch::Tensor ModelPipeline::constant_forward(const torch::Tensor& x, int64_t T, bool reduce,
                                              const torch::Tensor& sample_index) {
  std::vector<torch::Tensor> out = run_constant({x}, T, reduce, {sample_index}, "constant_forward");
  return out.empty() ? torch::Tensor() : out.front();
}

std::vector<torch::Tensor> ModelPipeline::constant_forward_batches(const std::vector<torch::Tensor>& xs, int64_t T,
                                                                   bool reduce,
                                                                   const std::vector<torch::Tensor>& sample_indices) {
  if (options_.keep_state()) {
    throw Error("ModelPipeline::constant_forward_batches starts every batch from reset state, but keep_state is set");
  }
  if (!sample_indices.empty() && sample_indices.size() != xs.size()) {
    throw Error("ModelPipeline::constant_forward_batches: " + std::to_string(sample_indices.size()) +
                " sample index tensors for " + std::to_string(xs.size()) + " batches");
  }
  if (xs.empty()) return {};
  return run_constant(xs, T, reduce, sample_indices, "constant_forward_batches");
}

std::vector<torch::Tensor> ModelPipeline::run_constant(const std::vector<torch::Tensor>& xs, int64_t T, bool reduce,
                                                       const std::vector<torch::Tensor>& sample_indices,
                                                       const char* caller) {
  const std::string name = std::string("ModelPipeline::") + caller;
  if (stages_.empty()) throw Error(name + ": the pipeline has no stages; append() some first");
  if (T < 1) throw Error(name + ": T must be >= 1 steps, got " + std::to_string(T));
  const int64_t K = options_.steps_per_tick();
  if (K < 1) throw Error("ModelPipeline: steps_per_tick must be >= 1, got " + std::to_string(K));
  if (options_.queue_capacity() < 1) {
    throw Error("ModelPipeline: queue_capacity must be >= 1, got " + std::to_string(options_.queue_capacity()));
  }
  const bool fresh = !options_.keep_state();
  const int64_t offset = fresh ? 0 : next_step_;
  // Every batch's blocks in time order, batch after batch: each stage runs
  // them in this order, and a batch's first block resets its state, so a
  // stage may start the next batch while the later stages finish this one.
  std::vector<Job> jobs;
  for (size_t b = 0; b < xs.size(); ++b) {
    const torch::Tensor& x = xs[b];
    TORCH_CHECK(x.dim() >= 1, name, ": x must be [B, ...], got a 0-dim tensor");
    const int64_t batch = x.size(0);
    const torch::Tensor& index = b < sample_indices.size() ? sample_indices[b] : torch::Tensor();
    const torch::Tensor samples =
        index.defined() ? index.to(torch::kCPU, torch::kLong) : torch::arange(batch, torch::kLong);
    TORCH_CHECK(samples.dim() == 1 && samples.size(0) == batch, "ModelPipeline: sample_index must be [", batch,
                "] for a batch of ", batch, ", got ", samples.sizes());
    const torch::Tensor x0 = x.to(stages_.front().device);
    for (int64_t first = 0; first < T; first += K) {
      const int64_t len = std::min(K, T - first);
      std::vector<int64_t> shape{len};
      for (auto s : x0.sizes()) shape.push_back(s);
      jobs.push_back(Job{x0.unsqueeze(0).expand(shape), offset + first, samples, fresh && first == 0});
    }
  }
  std::vector<torch::Tensor> blocks = run(jobs, /*time_blocks=*/true);
  next_step_ = offset + T;
  if (blocks.empty()) return {};  // a part whose results go on to another
  std::vector<torch::Tensor> results;
  const size_t per_batch = static_cast<size_t>((T + K - 1) / K);
  for (size_t b = 0; b < xs.size(); ++b) {
    const auto begin = blocks.begin() + static_cast<std::ptrdiff_t>(b * per_batch);
    const std::vector<torch::Tensor> mine(begin, begin + static_cast<std::ptrdiff_t>(per_batch));
    if (!reduce) {
      results.push_back(torch::cat(mine, 0));
      continue;
    }
    // Summed step by step in time order, so that the result is the same for
    // every K (a block-wise sum would round differently).
    torch::Tensor total;
    for (const auto& block : mine) {
      for (int64_t t = 0; t < block.size(0); ++t) total = total.defined() ? total + block[t] : block[t].clone();
    }
    results.push_back(total);
  }
  return results;
}

torch::Tensor ModelPipeline::forward(const torch::Tensor& x, int64_t split_size, const torch::Tensor& sample_index) {
  if (stages_.empty()) throw Error("ModelPipeline::forward: the pipeline has no stages; append() some first");
  if (split_size < 1) throw Error("ModelPipeline::forward: split_size must be >= 1, got " + std::to_string(split_size));
  TORCH_CHECK(x.dim() >= 1 && x.size(0) >= 1, "ModelPipeline::forward: x must be [B, ...] with B >= 1, got ",
              x.sizes());
  const int64_t batch = x.size(0);
  const torch::Tensor samples = sample_index.defined() ? sample_index.to(torch::kCPU, torch::kLong)
                                                       : torch::arange(batch, torch::kLong);
  TORCH_CHECK(samples.dim() == 1 && samples.size(0) == batch, "ModelPipeline: sample_index must be [", batch,
              "] for a batch of ", batch, ", got ", samples.sizes());
  const torch::Tensor x0 = x.to(stages_.front().device);
  std::vector<Job> jobs;
  for (int64_t b = 0; b < batch; b += split_size) {
    const int64_t len = std::min(split_size, batch - b);
    jobs.push_back(Job{x0.narrow(0, b, len), 0, samples.narrow(0, b, len), /*reset=*/true});
  }
  std::vector<torch::Tensor> outputs = run(jobs, /*time_blocks=*/false);
  if (outputs.empty()) return {};  // a part whose results go on to another
  return torch::cat(outputs, 0);
}

}  // namespace snn
