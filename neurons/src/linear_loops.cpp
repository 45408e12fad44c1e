// CPU loop of snn::Linear over a range of rows, compiled per instruction set
// (see neuron_cpu_loops.cpp). Each output is summed over the inputs in
// ascending order; the SIMD lanes run across outputs, so the order per
// output is the same on every ISA and for every batching.

#include <cstdint>

namespace snn::neurons::detail::SNN_ISA {

template <typename T>
void linear_rows(const T* x, const T* wt, const T* bias, T* y, int64_t in, int64_t out, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    T* __restrict__ acc = y + r * out;
#pragma omp simd
    for (int64_t o = 0; o < out; ++o) acc[o] = bias ? bias[o] : T(0);
    const T* xr = x + r * in;
    for (int64_t f = 0; f < in; ++f) {
      const T xv = xr[f];
      if (xv == T(0)) continue;  // events only: spikes are mostly zeros
      const T* __restrict__ w = wt + f * out;
#pragma omp simd
      for (int64_t o = 0; o < out; ++o) acc[o] = acc[o] + xv * w[o];
    }
  }
}

template void linear_rows<float>(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);
template void linear_rows<double>(const double*, const double*, const double*, double*, int64_t, int64_t, int64_t,
                                  int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
