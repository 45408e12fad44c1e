// CPU loop of the Poisson encoder: parallel over (sample, group of 4
// elements); one Philox call gives the 4 uniforms of a group at one step.

#include <ATen/Parallel.h>

#include <algorithm>

#include "kernels.h"
#include "snn/encoders/detail/philox.h"

namespace snn::encoders::detail {

template <typename T, typename S>
void poisson_cpu(const PoissonArgs<T, S>& a) {
  const int64_t groups = (a.features + 3) / 4;
  // Rows of groups: a row is one sample's groups, the inner SIMD-friendly loop.
  at::parallel_for(0, a.batch, 1, [&a, groups](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const uint64_t sample = static_cast<uint64_t>(a.sample[b]);
      const T* p = a.p + b * a.features;
      for (int64_t t = 0; t < a.steps; ++t) {
        const uint32_t step = static_cast<uint32_t>(a.first_step + t);
        S* out = a.out + (t * a.batch + b) * a.features;
        const int64_t full = a.features / 4;
#pragma omp simd
        for (int64_t g = 0; g < full; ++g) {
          const Philox4x32 r = draw_group(a.seed, sample, step, static_cast<uint32_t>(g));
          for (int j = 0; j < 4; ++j) {
            out[4 * g + j] = static_cast<S>(static_cast<T>(uniform01(r.v[j])) < p[4 * g + j] * a.scale);
          }
        }
        if (full < groups) {
          const Philox4x32 r = draw_group(a.seed, sample, step, static_cast<uint32_t>(full));
          for (int64_t e = 4 * full; e < a.features; ++e) {
            out[e] = static_cast<S>(static_cast<T>(uniform01(r.v[e - 4 * full])) < p[e] * a.scale);
          }
        }
      }
    }
  });
}

template void poisson_cpu<float, float>(const PoissonArgs<float, float>&);
template void poisson_cpu<float, bool>(const PoissonArgs<float, bool>&);
template void poisson_cpu<double, double>(const PoissonArgs<double, double>&);
template void poisson_cpu<double, bool>(const PoissonArgs<double, bool>&);

}  // namespace snn::encoders::detail
