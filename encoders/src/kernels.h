#pragma once
// Launchers of the Poisson encoder: plain pointers, no LibTorch (see
// neurons/src/kernels.h for why). functional.cpp picks the backend.

#include <cstdint>

#include "snn/core/build_info.h"

namespace snn::encoders::detail {

/// Poisson spikes for `steps` steps from first_step on: out[t, b, e] =
/// (uniform(seed, sample[b], first_step + t, e) < p[t, b, e] * scale).
template <typename T, typename S>
struct PoissonArgs {
  const T* p = nullptr;            ///< [steps or 1, batch, features] probability (or rate)
  int64_t p_step_stride = 0;       ///< elements between steps of p; 0 = the same input every step
  const int64_t* sample = nullptr; ///< [batch] global sample index
  S* out = nullptr;                ///< [steps, batch, features]
  int64_t batch = 0;
  int64_t features = 0;
  int64_t steps = 0;
  int64_t first_step = 0;
  uint64_t seed = 0;
  T scale = T(1);                  ///< multiplies p (Hz * dt); 1 for probabilities
};

template <typename T, typename S>
void poisson_cpu(const PoissonArgs<T, S>& args);
#if SNN_WITH_CUDA
template <typename T, typename S>
void poisson_cuda(const PoissonArgs<T, S>& args, void* stream);
#endif

}  // namespace snn::encoders::detail
