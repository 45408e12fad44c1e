#include "snn/simulator/distributed.h"

#include <fmt/format.h>

#include "snn/core/error.h"

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

void reduce_gradients(dist::World& world, const SpikingNetwork& net) {
  const std::vector<torch::Tensor> params = net.parameters();
  const std::vector<Linear> layers = net.linear_layers();
  std::vector<torch::Tensor> parts;
  for (const auto& p : params) {
    torch::Tensor part;
    for (const auto& fc : layers) {
      if (p.is_same(fc->weight) || (fc->bias.defined() && p.is_same(fc->bias))) part = fc->carried_grad_sum(p);
    }
    if (!part.defined()) {
      part = p.grad().defined() ? p.grad().to(torch::kCPU, torch::kDouble) : torch::zeros(p.sizes(), torch::kDouble);
    }
    parts.push_back(part.to(torch::kCPU).reshape({-1}));
  }
  const torch::Tensor sum = world.sum_in_rank_order(torch::cat(parts));
  int64_t at = 0;
  for (auto p : params) {
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
