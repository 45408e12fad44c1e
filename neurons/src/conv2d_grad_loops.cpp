// The input gradient of a stride-1, undilated Conv2d without im2col rows
// (snn::functional::conv2d_input_grad, conv2d.cpp), compiled per
// instruction set like the other loops.
//
// Its values are the im2col path's bit for bit: that path computes the
// rows' gradient g[(oy, ox), f] = sum over co ascending of gy[co, oy, ox]
// W[co, f] (snn::Linear's kernels: a product, then an addition, from +0)
// and col2im adds each pixel's taps into it from zero in ascending f =
// (ci KH + ky) KW + kx. Here a pixel's accumulator starts at zero and, for
// each tap (ky, kx) in ascending order whose window (iy + pH - ky, ix + pW -
// kx) exists, adds that tap's sum over co, formed the same way. Without the
// rows (9 times the input for a 3 x 3 kernel, written and read back from
// memory) and their transpose.
//
// Vectors run along a row of pixels ix, a block of CB input channels at a
// time (their taps' sums share each gy vector). gy is first copied into a
// zero-bordered buffer so that every tap reads whole vectors; lanes whose
// window does not exist are left out of the accumulator by a select, not
// by their zero products (which would be NaN for an infinite weight).

#include <cstdint>
#include <type_traits>

#include "conv2d_args.h"
#include "simd_loops.h"
#include "snn/core/detail/isa_scratch.h"

namespace snn::neurons::detail::SNN_ISA {
namespace {

using snn::detail::imin;
using snn::detail::Scratch;

// Input channels [ci0, ci0 + CB) of one image: gx [Cin, H, W] from the
// bordered gy buffer P [Cout, OH, Wb] (gy's (oy, ox) at column ox + KW - 1 -
// pW).
template <typename T, int CB>
void channel_block(const T* P, int64_t Wb, T* gx, const Conv2dInputGradArgs<T>& a, int64_t ci0) {
  using V = typename Simd<T>::type;
  using I = decltype(V{} < V{});  // integer lanes of T's width
  using E = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  constexpr int N = sizeof(V) / sizeof(T);
  const int64_t Cin = a.in_channels, Cout = a.out_channels, plane = a.OH * Wb;
  I lane;
  for (int l = 0; l < N; ++l) lane[l] = l;
  for (int64_t iy = 0; iy < a.H; ++iy) {
    for (int64_t ix0 = 0; ix0 < a.W; ix0 += N) {
      V acc[CB];
#pragma GCC unroll 8
      for (int j = 0; j < CB; ++j) acc[j] = V{};
      for (int64_t ky = 0; ky < a.KH; ++ky) {
        const int64_t oy = iy + a.pH - ky;
        if (oy < 0 || oy >= a.OH) continue;
        for (int64_t kx = 0; kx < a.KW; ++kx) {
          // Lanes whose window column ox = ix + pW - kx exists, within the row.
          const I ox = lane + static_cast<E>(ix0 + a.pW - kx);
          const I ix = lane + static_cast<E>(ix0);
          const I valid = (ox >= E{0}) & (ox < static_cast<E>(a.OW)) & (ix < static_cast<E>(a.W));
          const T* g = P + oy * Wb + ix0 + a.KW - 1 - kx;
          const T* w = a.weight + (ky * a.KW + kx) * Cout * Cin + ci0;
          V t[CB];
#pragma GCC unroll 8
          for (int j = 0; j < CB; ++j) t[j] = V{};
          for (int64_t co = 0; co < Cout; ++co, g += plane, w += Cin) {
            const V gv = load<V>(g);
#pragma GCC unroll 8
            for (int j = 0; j < CB; ++j) t[j] = t[j] + gv * splat<V>(w[j]);
          }
#pragma GCC unroll 8
          for (int j = 0; j < CB; ++j) acc[j] = valid ? acc[j] + t[j] : acc[j];
        }
      }
      const int64_t n = imin(N, a.W - ix0);
#pragma GCC unroll 8
      for (int j = 0; j < CB; ++j) {
        T* dst = gx + ((ci0 + j) * a.H + iy) * a.W + ix0;
        if (n == N) {
          store(dst, acc[j]);
        } else {
          T lanes[N];
          store(lanes, acc[j]);
          for (int64_t l = 0; l < n; ++l) dst[l] = lanes[l];
        }
      }
    }
  }
}

}  // namespace

// Images [n0, n1) of gy [N, Cout, OH, OW] into gx [N, Cin, H, W].
template <typename T>
void conv2d_input_grad(const T* gy, T* gx, const Conv2dInputGradArgs<T>& a, int64_t n0, int64_t n1) {
  constexpr int N = sizeof(typename Simd<T>::type) / sizeof(T);
  // Eight channels' sums and accumulators in registers on the AVX-512
  // build (32 of them), four on the others (16).
  constexpr int CB = kVectorBytes == 64 ? 8 : 4;
  const int64_t Wb = (a.W + N - 1) / N * N + a.KW - 1, shift = a.KW - 1 - a.pW;
  const int64_t size = a.out_channels * a.OH * Wb;
  thread_local Scratch<T> buffer;
  T* const P = buffer.reserve(size);
  for (int64_t i = 0; i < size; ++i) P[i] = T(0);  // the border, which stays zero
  for (int64_t n = n0; n < n1; ++n) {
    const T* src = gy + n * a.out_channels * a.OH * a.OW;
    for (int64_t r = 0; r < a.out_channels * a.OH; ++r) {
      T* dst = P + r * Wb + shift;
      for (int64_t ox = 0; ox < a.OW; ++ox) dst[ox] = src[r * a.OW + ox];
    }
    T* image = gx + n * a.in_channels * a.H * a.W;
    int64_t ci = 0;
    for (; ci + CB <= a.in_channels; ci += CB) channel_block<T, CB>(P, Wb, image, a, ci);
    for (; ci < a.in_channels; ++ci) channel_block<T, 1>(P, Wb, image, a, ci);
  }
}

template void conv2d_input_grad<float>(const float*, float*, const Conv2dInputGradArgs<float>&, int64_t, int64_t);
template void conv2d_input_grad<double>(const double*, double*, const Conv2dInputGradArgs<double>&, int64_t,
                                        int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
