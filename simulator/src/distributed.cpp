#include "snn/simulator/distributed.h"

#include <fmt/format.h>

#include "snn/core/error.h"
#include "snn/neurons/linear.h"
#include "snn/simulator/fused_adam.h"

namespace snn {

SampleRange rank_share(int64_t samples, int64_t rank, int64_t world_size) {
  if (world_size > samples) {
    throw Error(fmt::format("{} ranks for {} samples: every rank needs at least one sample; use at most {} ranks, "
                            "or more samples (--limit)",
                            world_size, samples, samples));
  }
  SampleRange r;
  r.begin = rank * samples / world_size;
  r.end = (rank + 1) * samples / world_size;
  return r;
}

SampleRange batch_share(int64_t size, int64_t rank, int64_t world_size) {
  SampleRange r;
  r.begin = rank * size / world_size;
  r.end = (rank + 1) * size / world_size;
  return r;
}

torch::Tensor flat_gradient(const SpikingNetwork& net) {
  const std::vector<Linear> layers = net.linear_layers();
  const std::vector<torch::Tensor> params = net.parameters();
  int64_t total = 0;
  for (const auto& p : params) total += p.numel();
  // Each part copied once, straight into its place: a carried weight sum is
  // a transposed view, and reshaping it first, then concatenating, copied
  // every gradient twice (a data-parallel step's largest copies).
  torch::Tensor flat = torch::empty({total}, torch::kDouble);
  int64_t at = 0;
  for (const auto& p : params) {
    torch::Tensor part;
    for (const auto& fc : layers) {
      if (p.is_same(fc->weight) || (fc->bias.defined() && p.is_same(fc->bias))) part = fc->carried_grad_sum(p);
    }
    torch::Tensor place = flat.narrow(0, at, p.numel()).view(p.sizes());
    at += p.numel();
    if (part.defined() && part.dim() == 2 && part.scalar_type() == torch::kDouble && part.t().is_contiguous()) {
      // A carried weight sum, the transpose of a contiguous [in, out]: the
      // layers' own transposing pass (LibTorch's transposed copy took
      // twice as long, 2 ms a step for a 784 x 1024 weight here).
      functional::round_transposed(part.t(), place);
    } else if (part.defined()) {
      place.copy_(part);
    } else if (p.grad().defined()) {
      place.copy_(p.grad());  // to double on the CPU, as it copies
    } else {
      place.zero_();
    }
  }
  return flat;
}

void reduce_gradients(dist::World& world, const SpikingNetwork& net) {
  const torch::Tensor sum = world.sum_in_rank_order(flat_gradient(net));
  int64_t at = 0;
  for (auto p : net.parameters()) {
    const int64_t n = p.numel();
    const torch::Tensor mine = sum.narrow(0, at, n).reshape(p.sizes()).to(p.options().requires_grad(false));
    at += n;
    torch::Tensor& g = p.mutable_grad();
    if (g.defined()) {
      g.copy_(mine);
    } else {
      g = mine.clone();
    }
  }
}

namespace {
torch::Tensor flat_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.detach().to(torch::kCPU).reshape({-1}));
  return torch::cat(flat);
}
}  // namespace

bool ShardedAdam::can_shard(const SpikingNetwork& net) {
  const auto params = net.parameters();
  if (params.empty()) return false;
  for (const auto& p : params) {
    if (p.scalar_type() != params[0].scalar_type() || !p.is_floating_point()) return false;
  }
  return true;
}

ShardedAdam::ShardedAdam(dist::World& world, const SpikingNetwork& net, const torch::optim::AdamOptions& options,
                         const std::vector<AdamMoments>& state)
    : world_(world), net_(net), params_(net.parameters()) {
  if (!can_shard(net)) throw InternalError("ShardedAdam: the parameters do not share one floating dtype");
  int64_t total = 0;
  for (const auto& p : params_) total += p.numel();
  for (int64_t r = 0; r < world.size(); ++r) {
    const SampleRange part = batch_share(total, r, world.size());
    split_.push_back(part.end - part.begin);
    if (r == world.rank()) begin_ = part.begin;
  }
  // The layers' double sums are what step() exchanges: nothing reads
  // their rounding into .grad() (see the destructor).
  for (Linear fc : net.linear_layers()) {
    if (fc->grad_sums()) fc->keep_grad_sums_only(true);
  }
  const int64_t mine = split_[static_cast<size_t>(world.rank())];
  shard_ = flat_of(params_).narrow(0, begin_, mine).clone().requires_grad_(true);
  adam_ = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{shard_}, options);
  // A resumed state: this rank's slice of every parameter's moments.
  bool resumed = !state.empty();
  for (const auto& m : state) resumed = resumed && m.exp_avg.defined();
  if (resumed) {
    std::vector<torch::Tensor> avg, avg_sq;
    for (const auto& m : state) {
      avg.push_back(m.exp_avg);
      avg_sq.push_back(m.exp_avg_sq);
    }
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(state[0].step);
    s->exp_avg(flat_of(avg).narrow(0, begin_, mine).to(shard_.scalar_type()).clone());
    s->exp_avg_sq(flat_of(avg_sq).narrow(0, begin_, mine).to(shard_.scalar_type()).clone());
    adam_->state()[shard_.unsafeGetTensorImpl()] = std::move(s);
  }
}

ShardedAdam::~ShardedAdam() {
  try {
    for (Linear fc : net_.linear_layers()) {
      if (fc->grad_sums()) fc->keep_grad_sums_only(false);
    }
  } catch (...) {
    // Nothing to do in a destructor (linear_layers() allocates): the layers
    // then stay in sums-only mode, which only a later step would read.
  }
}

void ShardedAdam::set_lr(double lr) {
  for (auto& group : adam_->param_groups()) group.options().set_lr(lr);
}

void ShardedAdam::step() {
  // Rank r's slice of every rank's gradient, added in rank order.
  const torch::Tensor parts = world_.exchange_parts(flat_gradient(net_), split_);
  // The next backward call starts the sums afresh (zero_grad's part).
  for (Linear fc : net_.linear_layers()) fc->restart_grad_sums();
  torch::Tensor sum = parts[0].clone();
  for (int64_t r = 1; r < parts.size(0); ++r) sum.add_(parts[r]);
  shard_.mutable_grad() = sum.to(shard_.scalar_type());
  fused_adam_step(*adam_);
  // Every rank's updated slice, into every rank's parameters.
  const torch::Tensor all = world_.all_gather_parts(shard_.detach(), split_);
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (auto& p : params_) {
    const int64_t n = p.numel();
    p.copy_(all.narrow(0, at, n).reshape(p.sizes()));
    at += n;
  }
}

std::vector<AdamMoments> ShardedAdam::gather_state() {
  const auto it = adam_->state().find(shard_.unsafeGetTensorImpl());
  std::vector<AdamMoments> out(params_.size());
  // Before the first step there is no state on any rank (all step together).
  if (it == adam_->state().end()) return out;
  const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
  const torch::Tensor avg = world_.all_gather_rows(s.exp_avg()), avg_sq = world_.all_gather_rows(s.exp_avg_sq());
  int64_t at = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t n = params_[i].numel();
    out[i].step = s.step();
    out[i].exp_avg = avg.narrow(0, at, n).reshape(params_[i].sizes()).clone();
    out[i].exp_avg_sq = avg_sq.narrow(0, at, n).reshape(params_[i].sizes()).clone();
    at += n;
  }
  return out;
}

EvalResult evaluate_over(dist::World* world, SpikingNetwork& net, const LabeledImages& data, int64_t batch_size,
                         int64_t limit) {
  if (!world) return evaluate(net, data, batch_size, limit);
  const int64_t n = limit < 0 ? data.size() : std::min(limit, data.size());
  const EvalResult mine =
      evaluate(net, data, batch_size, limit, nullptr, {}, rank_share(n, world->rank(), world->size()));
  return gather_results(*world, mine, net.config());
}

EvalResult gather_results(dist::World& world, const EvalResult& share, const NetworkConfig& config) {
  EvalResult r;
  r.execution = share.execution;
  r.first_sample = world.all_gather_rows(torch::tensor({share.first_sample}, torch::kLong))[0].item<int64_t>();
  r.counts = world.all_gather_rows(share.counts.to(torch::kFloat));
  r.labels = world.all_gather_rows(share.labels.to(torch::kLong));
  r.samples = r.counts.size(0);
  r.resumed_at = world.sum_in_rank_order(torch::tensor({share.resumed_at}, torch::kLong))[0].item<int64_t>();
  // Whole numbers in int64 and double: their sums are exact in any order.
  r.correct_by_step = world.sum_in_rank_order(share.correct_by_step);
  const torch::Tensor spikes = world.sum_in_rank_order(torch::tensor(share.layer_spikes, torch::kDouble));
  r.layer_spikes.assign(spikes.data_ptr<double>(), spikes.data_ptr<double>() + spikes.numel());
  // Each rank's recorder bytes are its own; the run's are their sum.
  r.record_total_bytes = world.sum_in_rank_order(torch::tensor({share.record_total_bytes}, torch::kLong))[0].item<int64_t>();
  r.record_peak_bytes = share.record_peak_bytes;
  finish_result(r, config);
  return r;
}

}  // namespace snn
