#pragma once
/// Simulation over several processes (snn::dist): each rank simulates a
/// contiguous share of the samples, the shares' results are put together
/// in sample order, equal bit for bit to one process's run.

#include <cstdint>

#include "snn/dist/world.h"
#include "snn/simulator/training.h"

namespace snn {

/// Rank `rank`'s share of `samples` samples over `world_size` ranks:
/// [rank * samples / W, (rank + 1) * samples / W), so that shares differ by
/// at most one sample and follow each other in rank order. Throws
/// snn::Error when there are more ranks than samples (a rank would idle).
SampleRange rank_share(int64_t samples, int64_t rank, int64_t world_size);

/// Every rank's EvalResult of its share (evaluate() with rank_share()),
/// gathered on every rank into the result of the whole run: counts, labels
/// and predictions in sample order; accuracy, accuracy by step and firing
/// rates from the added integer totals, so they equal one process's bit
/// for bit. `samples` counts every rank's; `resumed_at` adds the ranks'
/// resumed samples; `execution` is rank 0's.
EvalResult gather_results(dist::World& world, const EvalResult& share, const NetworkConfig& config);

}  // namespace snn
