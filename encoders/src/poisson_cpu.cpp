// CPU entry of the Poisson encoder: samples spread over LibTorch's intra-op
// threads, each running the loop compiled for the best instruction set this
// CPU has (poisson_cpu_loops.cpp).

#include <ATen/Parallel.h>

#include "kernels.h"
#include "snn/core/cpu_isa.h"

namespace snn::encoders::detail {
namespace base {
template <typename T, typename S>
void poisson_range(const PoissonArgs<T, S>& a, int64_t b0, int64_t b1);
}
namespace avx2 {
template <typename T, typename S>
void poisson_range(const PoissonArgs<T, S>& a, int64_t b0, int64_t b1);
}
namespace avx512 {
template <typename T, typename S>
void poisson_range(const PoissonArgs<T, S>& a, int64_t b0, int64_t b1);
}

template <typename T, typename S>
void poisson_cpu(const PoissonArgs<T, S>& a) {
  const CpuLoops loops = cpu_loops();
  // Grain: about 16K element-steps per task.
  const int64_t per_sample = a.features * (a.steps > 0 ? a.steps : 1);
  const int64_t grain = per_sample > 0 ? (16384 + per_sample - 1) / per_sample : 1;
  at::parallel_for(0, a.batch, grain, [&](int64_t b0, int64_t b1) {
    SNN_ISA_CALL(loops, snn::encoders::detail, poisson_range(a, b0, b1));
  });
}

template void poisson_cpu<float, float>(const PoissonArgs<float, float>&);
template void poisson_cpu<float, uint8_t>(const PoissonArgs<float, uint8_t>&);
template void poisson_cpu<double, double>(const PoissonArgs<double, double>&);
template void poisson_cpu<double, uint8_t>(const PoissonArgs<double, uint8_t>&);

}  // namespace snn::encoders::detail
