#pragma once
/// Spikes compacted to events where they are produced: the first stage of
/// the recording path (the events, not the dense spike tensors, travel to
/// the file writer). Thrust stream compaction on the CPU and, in a CUDA
/// build, on the device; both give the same events in the same order.

#include <torch/types.h>

namespace snn::recording {

/// One block's spikes as events, sample-major: each sample's events
/// contiguous, in step order, ascending neuron id within a step.
struct SpikeEvents {
  torch::Tensor sample;      ///< int64 [E]: batch position of the sample
  torch::Tensor step;        ///< int64 [E]: step within the block (0-based)
  torch::Tensor node;        ///< int64 [E]: neuron id within the layer
  torch::Tensor per_sample;  ///< int64 [B]: number of events of each sample
};

/// Compacts spikes [T, B, N] (bool, float32 or float64; any non-zero value
/// is a spike; CPU or CUDA) into events on the CPU. `node_ids` (int64 [M],
/// strictly ascending ids in [0, N)) keeps only those neurons; undefined
/// keeps all. Throws snn::Error on a bad shape, dtype or id list.
SpikeEvents compact_spikes(const torch::Tensor& spikes, const torch::Tensor& node_ids = {});

}  // namespace snn::recording
