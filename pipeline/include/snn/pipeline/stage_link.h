#pragma once
/// The ends of a model pipeline whose stages span processes (or anything
/// else that carries blocks in order): where its first stage's blocks come
/// from and where its last stage's go. snn::dist implements them over c10d
/// point-to-point messages; tests implement them with in-process queues.
///
/// A pipeline of S stages over P processes, one part per process:
///
///     process 0:  encoder, stages ...  --send-->  process 1:  stages ...  --send--> ...
///        ^                                                                       |
///        +------------------- results (the last part's outputs) ----------------+
///
/// Every process calls constant_forward with the same x, T and samples; the
/// parts overlap in wall time as the stages of one process do, a block of
/// K steps at a time, and the results come back to the process whose
/// PipelineLinks have `results` (the first, by convention).
///
/// Depends on LibTorch only.

#include <torch/types.h>

#include <memory>

namespace snn {

/// Blocks arriving in order (a previous process's last stage outputs).
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  /// The next block; blocks in the order they were sent. Throws on failure
  /// (a lost peer, a timeout): the pipeline ends with that error.
  virtual torch::Tensor receive() = 0;
  /// Ends a receive in progress, and any later one, with an exception: the
  /// pipeline failed elsewhere and its threads must not wait on a peer.
  /// Called from another thread.
  virtual void cancel() noexcept {}
};

/// Where blocks go, in order (the next process's first stage).
class BlockSink {
 public:
  virtual ~BlockSink() = default;
  /// Sends one block; may return before the receiver has it, but must not
  /// let a later block overtake it.
  virtual void send(const torch::Tensor& block) = 0;
  /// Ends a send in progress, and any later one, with an exception (as
  /// BlockSource::cancel).
  virtual void cancel() noexcept {}
};

/// A pipeline part's connections. All null (default): the pipeline is whole.
struct PipelineLinks {
  /// Set: the first stage's inputs are received from here, one per block,
  /// instead of the constant input (which then only sets the block shapes).
  std::shared_ptr<BlockSource> upstream;
  /// Set: the last stage's outputs are sent here instead of returned.
  std::shared_ptr<BlockSink> downstream;
  /// Set (with downstream): the pipeline's results, one per block, arrive
  /// here (from the last part) and are what constant_forward returns.
  /// Without it, a part with a downstream returns an undefined tensor.
  std::shared_ptr<BlockSource> results;

  bool any() const { return upstream || downstream || results; }
};

}  // namespace snn
