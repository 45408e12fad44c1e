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

// Adds a block's weight gradient to double running sums for the inputs f in
// [f0, f1): sum_t[f, o] += x[r, f] * gy[r, o]. The rows are visited in the
// order backpropagation through time visits the steps (steps descending,
// samples ascending), so a sum carried across blocks sees the same sequence
// of additions whatever the block length; the products of floats are exact
// in double. Zero inputs (no spike) are skipped.
template <typename T>
void linear_weight_grad(const T* x, const double* gy, double* sum_t, int64_t in, int64_t out, int64_t steps,
                        int64_t batch, int64_t f0, int64_t f1) {
  for (int64_t s = steps - 1; s >= 0; --s) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t r = s * batch + b;
      const T* xr = x + r * in;
      const double* __restrict__ g = gy + r * out;
      for (int64_t f = f0; f < f1; ++f) {
        const T xv = xr[f];
        if (xv == T(0)) continue;
        const double xd = static_cast<double>(xv);
        double* __restrict__ acc = sum_t + f * out;
#pragma omp simd
        for (int64_t o = 0; o < out; ++o) acc[o] = acc[o] + xd * g[o];
      }
    }
  }
}

template void linear_weight_grad<float>(const float*, const double*, double*, int64_t, int64_t, int64_t, int64_t,
                                        int64_t, int64_t);
template void linear_weight_grad<double>(const double*, const double*, double*, int64_t, int64_t, int64_t, int64_t,
                                         int64_t, int64_t);

template void linear_rows<float>(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);
template void linear_rows<double>(const double*, const double*, const double*, double*, int64_t, int64_t, int64_t,
                                  int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
