#pragma once
// Stream compaction of a step block's spikes into events, shared by the CPU
// (thrust::host) and CUDA (thrust::cuda) backends. Torch-free: nvcc sees
// only this header.
//
// Events come out sample-major (sample, then step, then neuron id), the
// order the recording file stores them in: each sample's spikes contiguous,
// in time order, ascending ids within a step. The order is fixed by the
// position in that enumeration, not by threads, so both backends and every
// thread count give the same events.

#include <cstdint>

#include "snn/core/host_device.h"

namespace snn::recording::detail {

/// Position i in sample-major order (b, t, n) -> offset in a [T, B, N] block.
struct SampleMajorOffset {
  int64_t steps, batch, neurons;
  SNN_HOST_DEVICE int64_t operator()(int64_t i) const {
    const int64_t n = i % neurons;
    const int64_t bt = i / neurons;
    const int64_t t = bt % steps;
    const int64_t b = bt / steps;
    return (t * batch + b) * neurons + n;
  }
};

/// Whether position i holds a spike (any non-zero value).
template <typename S>
struct IsSpikeAt {
  const S* spikes;
  SampleMajorOffset offset;
  SNN_HOST_DEVICE bool operator()(int64_t i) const { return spikes[offset(i)] != S(0); }
};

/// CPU backend (thrust::host): writes the sample-major positions of the
/// block's spikes to `positions`, which has room for steps * batch * neurons
/// entries, and returns how many it wrote. It compacts row by row (one
/// (sample, step) row is N contiguous values), so no element costs a
/// division. Defined in compaction_host.cpp for S = uint8_t (bool), float,
/// double.
template <typename S>
int64_t compact_spikes_host(const S* spikes, SampleMajorOffset shape, int64_t* positions);

/// CUDA backend: the number of spikes in the block, then their sample-major
/// positions written to `positions` (device memory, that many entries), on
/// `stream`. Defined in compaction_cuda.cu for S = uint8_t (bool), float, double.
template <typename S>
int64_t count_spikes_cuda(const S* spikes, SampleMajorOffset shape, void* stream);
template <typename S>
void compact_spikes_cuda(const S* spikes, SampleMajorOffset shape, int64_t* positions, void* stream);

}  // namespace snn::recording::detail
