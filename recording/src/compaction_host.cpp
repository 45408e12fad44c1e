// CPU backend of the spike compaction: thrust::copy_if with the host
// policy over the same enumeration and predicate as the CUDA backend.
// Torch-free, so that Thrust's headers and LibTorch's never meet.

#include <thrust/copy.h>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>

#include "snn/recording/detail/compaction.h"

namespace snn::recording::detail {

template <typename S>
struct NonZero {
  bool operator()(S v) const { return v != S(0); }
};

template <typename S>
int64_t compact_spikes_host(const S* spikes, SampleMajorOffset shape, int64_t* positions) {
  int64_t* out = positions;
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t t = 0; t < shape.steps; ++t) {
      const S* row = spikes + (t * shape.batch + b) * shape.neurons;
      thrust::counting_iterator<int64_t> first((b * shape.steps + t) * shape.neurons);  // sample-major position
      out = thrust::copy_if(thrust::host, first, first + shape.neurons, row, out, NonZero<S>{});
    }
  }
  return out - positions;
}

#define SNN_INSTANTIATE(S)                                                    \
  template int64_t compact_spikes_host<S>(const S*, SampleMajorOffset, int64_t*);
SNN_INSTANTIATE(uint8_t)
SNN_INSTANTIATE(float)
SNN_INSTANTIATE(double)
#undef SNN_INSTANTIATE

}  // namespace snn::recording::detail
