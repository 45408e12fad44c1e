#pragma once
/// The multi-device model pipeline: the simulator's core temporal loop.
///
/// A network is split into stages, each a LibTorch module on a device (CPU
/// or cuda:N), run in the order appended. constant_forward(x, T) feeds the
/// constant input x for T steps; each stage runs on its own worker thread
/// (a lone stage on the caller's) and hands blocks of K = steps_per_tick
/// steps ([K, B, ...], time first) to the next through a bounded queue, so
/// the stages overlap in wall time:
///
///   tick:     0     1     2     3     4     5          (S = 3 stages,
///   stage 0:  b0    b1    b2    b3                     4 blocks b0..b3)
///   stage 1:        b0    b1    b2    b3
///   stage 2:              b0    b1    b2    b3
///
/// Stage k works on block n - k at tick n: every stage sees its inputs in
/// time order and runs exactly ceil(T / K) times per call. (The seed, the
/// Python ModelPipeline of SpikingJelly, ran early stages up to S - 2 extra
/// steps and concatenated outputs to [T*B, ...].)
///
/// Stateful submodules (those implementing snn::Temporal: neuron layers,
/// encoders) start every call from reset state, unless keep_state is set,
/// and are told the steps and global sample indices of each block, so a
/// counter-based encoder in the first stage draws the same spikes as a
/// plain sequential loop. Outputs are bit-identical to running the stages
/// sequentially on one device of the same type, for any partition and any K,
/// provided the stages themselves are batch-invariant (snn::Linear is;
/// BLAS-backed torch::nn::Linear is not).
///
/// A pipeline may be one part of a pipeline spanning processes
/// (stage_link.h): set_links() names where its first stage's blocks come
/// from and where its last stage's go; the blocks and their order are the
/// same, so are the results.
///
/// Depends on LibTorch only (and the snn::Temporal interface).

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "snn/core/temporal.h"
#include "snn/pipeline/stage_link.h"

namespace snn {

/// Options of the model pipeline.
struct PipelineOptions {
  /// Steps per block handed between stages (K). 1 is the seed's schedule,
  /// T runs layer by layer. Results are identical for every K. Default 1.
  TORCH_ARG(int64_t, steps_per_tick) = 1;
  /// Keep the stages' state across constant_forward calls (continuing a
  /// simulation: steps are then numbered on from the last call). Default false.
  TORCH_ARG(bool, keep_state) = false;
  /// Blocks that may wait between two stages. Default 2.
  TORCH_ARG(int64_t, queue_capacity) = 2;
  /// Intra-op threads of each CPU stage; 0 = the caller's intra-op thread
  /// count divided among the CPU stages (at least 1), so S CPU stages do not
  /// oversubscribe the cores. Default 0.
  TORCH_ARG(int64_t, threads_per_stage) = 0;
};

/// What the last constant_forward or forward call actually ran: the
/// measured schedule, not the options asked for, so that callers (run
/// summaries, tests) can show that a placement took effect.
struct PipelineRunInfo {
  int64_t stages = 0;         ///< stages the call ran through
  int64_t blocks = 0;         ///< jobs (blocks of steps, or micro-batches) each stage ran
  int64_t largest_block = 0;  ///< the most steps in one block (K, or T when T < K); 0 for forward()
  int64_t batch = 0;          ///< samples in the call's input (B)
  /// Intra-op threads each stage's thread ran with (read back from LibTorch
  /// inside the stage; CUDA stages report theirs too).
  std::vector<int> stage_threads;
};

class ModelPipeline {
 public:
  explicit ModelPipeline(PipelineOptions options = {}) : options_(std::move(options)) {}

  /// Appends a stage: any module torch::nn::AnyModule can hold (a
  /// ModuleHolder such as torch::nn::Sequential, or a shared_ptr), moved to
  /// `device`. Stages run in the order appended.
  template <typename ModuleType>
  void append(ModuleType module, torch::Device device) {
    append_any(torch::nn::AnyModule(std::move(module)), device);
  }
  /// A torch::nn::Sequential stage (whose templated forward AnyModule cannot
  /// hold directly) runs Tensor -> Tensor.
  void append(torch::nn::Sequential sequential, torch::Device device);
  void append_any(torch::nn::AnyModule module, torch::Device device);

  /// Feeds the constant input x [B, ...] for T >= 1 steps. reduce = true:
  /// the sum of the T outputs (spike counts for spiking outputs), [B, ...];
  /// reduce = false: the T outputs stacked [T, B, ...] (the seed
  /// concatenated them to [T*B, ...]). Stage 0 receives x expanded to
  /// [K, B, ...] (a view, no copy). sample_index: [B] global sample indices
  /// for encoders (default 0 .. B-1). The result is on the last stage's
  /// device. A part with links (set_links) returns the results its
  /// `results` link receives, or an undefined tensor without one.
  torch::Tensor constant_forward(const torch::Tensor& x, int64_t T, bool reduce = true,
                                 const torch::Tensor& sample_index = {});

  /// constant_forward on each of several batches, in one pass through the
  /// stages: a stage starts the next batch while the later stages finish
  /// this one, so the pipeline fills and drains once per call rather than
  /// once per batch. Every batch starts from reset state (keep_state must
  /// be off); the results, one per batch, equal constant_forward's on each
  /// in turn. sample_indices: empty, or one [B_b] tensor per batch. A part
  /// without a results link returns an empty vector.
  std::vector<torch::Tensor> constant_forward_batches(const std::vector<torch::Tensor>& xs, int64_t T,
                                                      bool reduce = true,
                                                      const std::vector<torch::Tensor>& sample_indices = {});

  /// Splits x along dim 0 into micro-batches of split_size (the last may be
  /// smaller) that flow through the stages GPipe-style; returns the outputs
  /// concatenated along dim 0, equal to running the stages in sequence on
  /// the whole batch. Each micro-batch starts from reset state (its own
  /// neuron state) and is told its samples' global indices.
  torch::Tensor forward(const torch::Tensor& x, int64_t split_size, const torch::Tensor& sample_index = {});

  /// Resets every stage's stateful submodules.
  void reset_state();

  /// Makes this pipeline one part of a pipeline over processes (see
  /// stage_link.h); default links (all null) make it whole again. Each
  /// link runs on a thread of its own, so that messages overlap the work.
  void set_links(PipelineLinks links) { links_ = std::move(links); }
  const PipelineLinks& links() const { return links_; }

  size_t size() const { return stages_.size(); }
  torch::Device device(size_t stage) const { return stages_.at(stage).device; }
  torch::nn::AnyModule& module(size_t stage) { return stages_.at(stage).module; }
  PipelineOptions& options() { return options_; }
  const PipelineOptions& options() const { return options_; }
  /// What the last call ran (all zero before the first).
  const PipelineRunInfo& last_run() const { return last_run_; }

 private:
  struct Stage {
    torch::nn::AnyModule module;
    torch::Device device;
    std::vector<Temporal*> temporal;  // stateful submodules, owned by module
  };
  // One unit of work for every stage: the input of stage 0, and what to tell
  // the stateful modules before it runs.
  struct Job {
    torch::Tensor input;         // stage 0's input
    int64_t first_step = 0;      // set_time()
    torch::Tensor samples;       // set_time(), on the CPU
    bool reset = false;          // reset_state() first
  };
  // Runs the jobs through all stages; returns the last stage's outputs.
  // time_blocks: every output must keep its input's first dimension (K).
  std::vector<torch::Tensor> run(const std::vector<Job>& jobs, bool time_blocks);
  // Both constant forwards: the batches' blocks, batch after batch.
  std::vector<torch::Tensor> run_constant(const std::vector<torch::Tensor>& xs, int64_t T, bool reduce,
                                          const std::vector<torch::Tensor>& sample_indices, const char* caller);

  PipelineOptions options_;
  PipelineLinks links_;
  std::vector<Stage> stages_;
  PipelineRunInfo last_run_;
  int64_t next_step_ = 0;  // first step of the next call when keep_state
};

}  // namespace snn
