#pragma once
/// Simulation over several processes (snn::dist): each rank simulates a
/// contiguous share of the samples, the shares' results are put together
/// in sample order, equal bit for bit to one process's run.

#include <torch/optim/adam.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "snn/dist/world.h"
#include "snn/simulator/training.h"

namespace snn {

class RowsOverRanks;

/// Rank `rank`'s share of `samples` samples over `world_size` ranks:
/// [rank * samples / W, (rank + 1) * samples / W), so that shares differ by
/// at most one sample and follow each other in rank order. Throws
/// snn::Error when there are more ranks than samples (a rank would idle).
SampleRange rank_share(int64_t samples, int64_t rank, int64_t world_size);

/// Rank `rank`'s contiguous share of one batch of `size` samples, as
/// rank_share() but possibly empty (a last batch smaller than the world).
SampleRange batch_share(int64_t size, int64_t rank, int64_t world_size);

/// Data-parallel training's reduction: every parameter's gradient summed
/// over the ranks in rank order, then rounded once to the parameter's dtype
/// and written to its grad, the same bits on every rank. Where a synapse
/// layer carries its gradient as a double sum (snn::Linear on the CPU), the
/// double sums are added, so the result differs from one process's (which
/// adds every sample's term to one double sum) only by how the double
/// additions associate; other gradients (PLIF's w, CUDA layers) are added
/// as their float values in double. A parameter without a gradient on a
/// rank (an empty share) counts as zero. One exchange of all gradients.
void reduce_gradients(dist::World& world, const SpikingNetwork& net);

/// The flat double gradient of the network's parameters (parameters()
/// order): each layer's carried double sum where it has one, else the float
/// gradient in double, zeros where there is none. What reduce_gradients()
/// and ShardedAdam add over the ranks.
torch::Tensor flat_gradient(const SpikingNetwork& net);

/// Adam sharded over the ranks (ZeRO's stage 1): the parameters, flattened
/// in parameters() order, are cut into the ranks' consecutive slices; after
/// every rank's backward, step() gives rank r the r-th slice of every rank's
/// flat_gradient() (one all-to-all), adds them in rank order and rounds
/// once (reduce_gradients()' arithmetic, element for element), except
/// where a CPU snn::Linear's backward exchanged its rows this step
/// (GradRowsExchange, after begin_batch()): rank r then already holds
/// the whole batch's sums of the weight rows its slice touches, one
/// process's bit for bit, and only their bias sums go into the all-to-all
/// (from the lowest rank holding each row; zeros from the others, which
/// add exactly). Then it takes Adam's
/// step on that slice alone (fused_adam_step: element-wise, so a slice's
/// elements come out as in the whole), and gathers the updated slices into
/// every rank's parameters. So each rank does 1/N of the optimizer's work
/// and moves about 12 bytes per parameter per step instead of receiving
/// 8 (N - 1). All parameters must share one floating dtype (can_shard()).
/// While it lives, the network's CPU layers keep their gradients as double
/// sums only (LinearImpl::keep_grad_sums_only): their .grad() stays empty,
/// and each step() restarts the sums for the next batch.
class ShardedAdam {
 public:
  /// `state`: the moments to start from, per parameter (a resumed
  /// checkpoint's; empty entries or none: Adam's fresh state).
  ShardedAdam(dist::World& world, const SpikingNetwork& net, const torch::optim::AdamOptions& options,
              const std::vector<AdamMoments>& state);
  /// The network's layers write .grad() again (keep_grad_sums_only off).
  ~ShardedAdam();
  ShardedAdam(const ShardedAdam&) = delete;
  ShardedAdam& operator=(const ShardedAdam&) = delete;
  static bool can_shard(const SpikingNetwork& net);
  void set_lr(double lr);
  /// Before a batch's backward pass: the whole batch's samples (rank r
  /// holds batch_share(samples, r, size) of them) and its time steps (what
  /// a layer's calls in one step add up to, for the choice between rows
  /// and sums). The layers' backward calls exchange rows only where every
  /// rank has samples (it is a collective that a rank without samples
  /// would not join) and `exchange_rows`. Until the next begin_batch(),
  /// step() turns the exchange off.
  void begin_batch(int64_t samples, int64_t steps, bool exchange_rows = true);
  /// The Linear layers whose gradient the last step() took from exchanged
  /// rows, and those that can exchange rows.
  int64_t last_row_layers() const { return last_row_layers_; }
  int64_t row_layers() const { return static_cast<int64_t>(rows_layers_.size()); }
  /// What begin_batch() says of the batch (the layers' exchanges read it).
  struct Batch {
    bool every_rank_has_samples = false;
    int64_t samples = 0;
    int64_t steps = 1;
  };
  /// One optimizer step on every rank (a collective; see the class comment).
  void step();
  /// The gradient the last step() gave Adam: this rank's slice of the
  /// flattened parameters (rounded to their dtype) and the flat index of
  /// its first element.
  std::pair<int64_t, torch::Tensor> gradient_slice() const { return {begin_, shard_.grad()}; }
  /// Every rank's slices of the moments, gathered per parameter on every
  /// rank (a collective), e.g. for a checkpoint.
  std::vector<AdamMoments> gather_state();

 private:
  // A CPU snn::Linear whose backward exchanges rows (RowsOverRanks).
  struct RowsLayer {
    Linear fc{nullptr};
    size_t weight = 0, bias = 0;           // indices in params_ (bias: params_.size() if none)
    std::pair<int64_t, int64_t> owned;     // the bias entries whose sums this rank contributes
    std::shared_ptr<RowsOverRanks> exchange;
  };
  void add_row_exchanges();

  dist::World& world_;
  const SpikingNetwork& net_;
  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offsets_;  // each parameter's first element in the flat order; then the total
  std::vector<RowsLayer> rows_layers_;
  std::shared_ptr<Batch> batch_ = std::make_shared<Batch>();
  int64_t last_row_layers_ = 0;
  std::vector<int64_t> split_;  // elements per rank's slice
  int64_t begin_ = 0;           // this rank's first element
  torch::Tensor shard_;         // this rank's slice of the parameters (a leaf)
  std::unique_ptr<torch::optim::Adam> adam_;
};

/// evaluate() of the first `limit` samples over the ranks (each its
/// rank_share(), then gather_results()); evaluate() itself when world is null.
EvalResult evaluate_over(dist::World* world, SpikingNetwork& net, const LabeledImages& data, int64_t batch_size,
                         int64_t limit = -1);

/// Every rank's EvalResult of its share (evaluate() with rank_share()),
/// gathered on every rank into the result of the whole run: counts, labels
/// and predictions in sample order; accuracy, accuracy by step and firing
/// rates from the added integer totals, so they equal one process's bit
/// for bit. `samples` counts every rank's; `resumed_at` adds the ranks'
/// resumed samples; `execution` is rank 0's.
EvalResult gather_results(dist::World& world, const EvalResult& share, const NetworkConfig& config);

}  // namespace snn
