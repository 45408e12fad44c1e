// CUDA backend of the spike compaction: the same predicate and enumeration
// as the CPU (thrust::host) path, run by thrust::copy_if on the device.

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>

#include "snn/recording/detail/compaction.h"

namespace snn::recording::detail {

template <typename S>
int64_t count_spikes_cuda(const S* spikes, SampleMajorOffset shape, void* stream) {
  const int64_t total = shape.steps * shape.batch * shape.neurons;
  thrust::counting_iterator<int64_t> first(0);
  return thrust::count_if(thrust::cuda::par.on(static_cast<cudaStream_t>(stream)), first, first + total,
                          IsSpikeAt<S>{spikes, shape});
}

template <typename S>
void compact_spikes_cuda(const S* spikes, SampleMajorOffset shape, int64_t* positions, void* stream) {
  const int64_t total = shape.steps * shape.batch * shape.neurons;
  thrust::counting_iterator<int64_t> first(0);
  thrust::copy_if(thrust::cuda::par.on(static_cast<cudaStream_t>(stream)), first, first + total, positions,
                  IsSpikeAt<S>{spikes, shape});
}

#define SNN_INSTANTIATE(S)                                                            \
  template int64_t count_spikes_cuda<S>(const S*, SampleMajorOffset, void*);         \
  template void compact_spikes_cuda<S>(const S*, SampleMajorOffset, int64_t*, void*);
SNN_INSTANTIATE(uint8_t)
SNN_INSTANTIATE(float)
SNN_INSTANTIATE(double)
#undef SNN_INSTANTIATE

}  // namespace snn::recording::detail
