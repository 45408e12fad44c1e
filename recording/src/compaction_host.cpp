// CPU backend of the spike compaction: thrust::copy_if with the host
// policy over the same enumeration and predicate as the CUDA backend.
// Torch-free, so that Thrust's headers and LibTorch's never meet.

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>

#include "snn/recording/detail/compaction.h"

namespace snn::recording::detail {

template <typename S>
int64_t count_spikes_host(const S* spikes, SampleMajorOffset shape) {
  const int64_t total = shape.steps * shape.batch * shape.neurons;
  thrust::counting_iterator<int64_t> first(0);
  return thrust::count_if(thrust::host, first, first + total, IsSpikeAt<S>{spikes, shape});
}

template <typename S>
void compact_spikes_host(const S* spikes, SampleMajorOffset shape, int64_t* positions) {
  const int64_t total = shape.steps * shape.batch * shape.neurons;
  thrust::counting_iterator<int64_t> first(0);
  thrust::copy_if(thrust::host, first, first + total, positions, IsSpikeAt<S>{spikes, shape});
}

#define SNN_INSTANTIATE(S)                                                    \
  template int64_t count_spikes_host<S>(const S*, SampleMajorOffset);        \
  template void compact_spikes_host<S>(const S*, SampleMajorOffset, int64_t*);
SNN_INSTANTIATE(uint8_t)
SNN_INSTANTIATE(float)
SNN_INSTANTIATE(double)
#undef SNN_INSTANTIATE

}  // namespace snn::recording::detail
