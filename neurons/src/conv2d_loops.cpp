// The event-driven Conv2d loop (see snn/neurons/conv2d.h), compiled per
// instruction set like linear_loops.cpp, whose order of additions it keeps:
// every output is its bias plus the products x[f] * w[f, o] added one at a
// time in ascending f = (c KH + ky) KW + kx, without fused multiply-adds.
//
// Per image, the accumulators acc[position, TW] (TW: the output channels
// rounded up to 16, so that a row is whole vectors) start at the bias; the
// image's nonzero inputs are listed in ascending (c, y, x) order with
// Linear's left-packing, and each adds its weight row f (TW contiguous
// values, vectors across the output channels) to each output position
// whose window holds it. For one output position the inputs in its window
// come in ascending (c, ky, kx), which is ascending f: the im2col path's
// order. The accumulators are then transposed into y [Cout, positions].

#include <cstdint>
#include <type_traits>

#include "conv2d_args.h"
#include "simd_loops.h"
#include "snn/core/detail/isa_scratch.h"

namespace snn::neurons::detail::SNN_ISA {
namespace {

using snn::detail::imin;
using snn::detail::Scratch;

// Adds weight row w to accumulator row a (n vectors; NV of them where NV >
// 0, a count the compiler unrolls), or x times it.
template <typename T, int NV, bool kBinary>
inline __attribute__((always_inline)) void add_row(T* a, const T* w, T x, int64_t n) {
  using V = typename Simd<T>::type;
  constexpr int64_t L = sizeof(V) / sizeof(T);
  const int64_t nv = NV > 0 ? NV : n;
  if constexpr (kBinary) {
    (void)x;
#pragma GCC unroll 8
    for (int64_t v = 0; v < nv; ++v) store(a + v * L, load<V>(a + v * L) + load<V>(w + v * L));
  } else {
    const V xv = splat<V>(x);
#pragma GCC unroll 8
    for (int64_t v = 0; v < nv; ++v) store(a + v * L, load<V>(a + v * L) + xv * load<V>(w + v * L));
  }
}


// One image: x [Cin H W] to y [Cout, OH OW]; acc has OH OW x TW entries,
// idx and val Cin H W each.
template <typename T, typename X, int NV>
void conv_image(const X* x, T* y, const Conv2dEventArgs<T>& a, T* acc, int32_t* idx, T* val) {
  using V = typename Simd<T>::type;
  constexpr int64_t L = sizeof(V) / sizeof(T);
  const int64_t W = a.width, nv = W / L, positions = a.outputs;
  for (int64_t l = 0; l < positions; ++l) {
    T* row = acc + l * W;
    for (int64_t v = 0; v < nv; ++v) store(row + v * L, a.bias ? load<V>(a.bias + v * L) : V{});
  }
  const int64_t n = a.channels * a.pixels;
  bool binary = true;
  int64_t count = 0;
  if constexpr (std::is_same_v<X, uint8_t>) {
    count = list_spikes(x, n, idx);
  } else {
    count = list_nonzero(x, n, idx, val, &binary);
  }
  const int64_t per_channel = a.taps * W;  // weights of one input channel
  int64_t c = 0, base = 0;                 // the channel of the current input, and its first index
  const auto visit = [&](auto binary_tag) {
    constexpr bool kBinary = decltype(binary_tag)::value;
    c = 0;
    base = 0;
    for (int64_t k = 0; k < count; ++k) {
      const int64_t i = idx[k];
      while (i >= base + a.pixels) {  // ascending: the channel only grows
        ++c;
        base += a.pixels;
      }
      const int64_t p = i - base;
      const T* wc = a.weight + c * per_channel;
      const T xv = kBinary ? T(1) : val[k];
      for (int32_t j = a.first[p], j1 = a.first[p + 1]; j < j1; ++j) {
        add_row<T, NV, kBinary>(acc + static_cast<int64_t>(a.output[j]) * W, wc + static_cast<int64_t>(a.tap[j]) * W,
                                xv, nv);
      }
    }
  };
  if (binary) {
    visit(std::true_type{});
  } else {
    visit(std::false_type{});
  }
  // y[o, l] = acc[l, o]: 16 positions at a time, so that each store run is
  // contiguous while the 16 accumulator rows stay in L1.
  const int64_t cout = a.out_channels;
  for (int64_t l0 = 0; l0 < positions; l0 += 16) {
    const int64_t l1 = imin(positions, l0 + 16);
    int64_t o0 = 0;  // channels moved by whole blocks
#ifdef __AVX512F__
    if constexpr (std::is_same_v<T, float>) {
      if (l1 - l0 == 16) {
        for (; o0 + 16 <= cout; o0 += 16) transpose_block(acc + l0 * W + o0, W, y + o0 * positions + l0, positions);
      }
    }
#endif
    for (int64_t o = o0; o < cout; ++o) {
      T* yo = y + o * positions;
      for (int64_t l = l0; l < l1; ++l) yo[l] = acc[l * W + o];
    }
  }
}

template <typename T, typename X, int NV>
void conv_images(const X* x, T* y, const Conv2dEventArgs<T>& a, int64_t n0, int64_t n1) {
  // Each thread's buffers, kept between calls: no allocation in steady state.
  thread_local Scratch<T> acc_buffer;
  thread_local Scratch<int32_t> idx_buffer;
  thread_local Scratch<T> val_buffer;
  const int64_t in = a.channels * a.pixels;
  T* const acc = acc_buffer.reserve(a.outputs * a.width);
  int32_t* const idx = idx_buffer.reserve(in + 16);
  T* const val = std::is_same_v<X, uint8_t> ? nullptr : val_buffer.reserve(in + 16);
  for (int64_t n = n0; n < n1; ++n) {
    conv_image<T, X, NV>(x + n * in, y + n * a.out_channels * a.outputs, a, acc, idx, val);
  }
}

}  // namespace

// Images [n0, n1) of x [N, Cin H W] into y [N, Cout, OH OW]. The rows of
// up to 8 vectors (128 output channels of float on the AVX-512 build) are
// unrolled; wider ones loop.
template <typename T, typename X>
void conv2d_event(const X* x, T* y, const Conv2dEventArgs<T>& a, int64_t n0, int64_t n1) {
  constexpr int64_t L = sizeof(typename Simd<T>::type) / sizeof(T);
  switch (a.width / L) {
    case 1:
      return conv_images<T, X, 1>(x, y, a, n0, n1);
    case 2:
      return conv_images<T, X, 2>(x, y, a, n0, n1);
    case 4:
      return conv_images<T, X, 4>(x, y, a, n0, n1);
    case 8:
      return conv_images<T, X, 8>(x, y, a, n0, n1);
    default:
      return conv_images<T, X, 0>(x, y, a, n0, n1);
  }
}

template void conv2d_event<float, float>(const float*, float*, const Conv2dEventArgs<float>&, int64_t, int64_t);
template void conv2d_event<float, uint8_t>(const uint8_t*, float*, const Conv2dEventArgs<float>&, int64_t, int64_t);
template void conv2d_event<double, double>(const double*, double*, const Conv2dEventArgs<double>&, int64_t, int64_t);
template void conv2d_event<double, uint8_t>(const uint8_t*, double*, const Conv2dEventArgs<double>&, int64_t,
                                            int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
