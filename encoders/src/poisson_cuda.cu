// CUDA kernel of the Poisson encoder: one thread per (sample, Philox group),
// looping over the steps, around the same draw and element layout as the CPU.

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels.h"
#include "snn/encoders/detail/philox.h"

namespace snn::encoders::detail {
namespace {

template <typename T, typename S>
__global__ void poisson_kernel(PoissonArgs<T, S> a, int64_t groups) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.batch * groups) return;
  const int64_t b = i / groups;
  const uint32_t g = static_cast<uint32_t>(i % groups);
  const uint64_t sample = static_cast<uint64_t>(a.sample[b]);
  for (int64_t t = 0; t < a.steps; ++t) {
    const T* p = a.p + t * a.p_step_stride + b * a.features;
    const Philox4x32 r = draw_group(a.seed, sample, static_cast<uint32_t>(a.first_step + t), g);
    S* out = a.out + (t * a.batch + b) * a.features;
    for (int j = 0; j < 4; ++j) {
      const int64_t e = element_of(g, j);
      if (e < a.features) out[e] = static_cast<S>(static_cast<T>(uniform01(r.v[j])) < p[e] * a.scale);
    }
  }
}

}  // namespace

template <typename T, typename S>
void poisson_cuda(const PoissonArgs<T, S>& a, void* stream) {
  // Groups of whole tiles: the last tile's unused words are skipped.
  const int64_t groups = (a.features + kTile - 1) / kTile * kGroupsPerTile;
  const int64_t n = a.batch * groups;
  if (n == 0 || a.steps == 0) return;
  constexpr int kThreads = 256;
  poisson_kernel<T, S><<<static_cast<int>((n + kThreads - 1) / kThreads), kThreads, 0,
                         static_cast<cudaStream_t>(stream)>>>(a, groups);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("poisson kernel launch failed: ") + cudaGetErrorString(err));
}

template void poisson_cuda<float, float>(const PoissonArgs<float, float>&, void*);
template void poisson_cuda<float, uint8_t>(const PoissonArgs<float, uint8_t>&, void*);
template void poisson_cuda<double, double>(const PoissonArgs<double, double>&, void*);
template void poisson_cuda<double, uint8_t>(const PoissonArgs<double, uint8_t>&, void*);

}  // namespace snn::encoders::detail
