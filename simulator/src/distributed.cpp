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
