// im2col rows and their gradient (snn::functional::im2rows, windows.cpp),
// compiled per instruction set like the other loops. Both go through an
// image's columns [F, L] (column f = (c KH + ky) KW + kx holds tap (ky, kx)
// of channel c in every window, in window order), whose copies and
// additions run along contiguous pixels, and transpose between columns and
// rows [L, F] in square blocks of one vector's lanes, transposed in
// registers. Only copies, and the gradient's additions in the same order on
// every build (each pixel's taps in ascending (ky, kx) from zero): every
// build gives the same bits.

#include <cstdint>
#include <type_traits>

#include "linear_tile.h"
#include "simd_loops.h"
#include "snn/core/detail/isa_scratch.h"
#include "window_geometry.h"

namespace snn::neurons::detail::SNN_ISA {
namespace {

using snn::detail::imax;
using snn::detail::imin;
using snn::detail::Scratch;

// dst [cols, rows] = src [rows, cols] transposed. Blocks of N x N (N the
// vector's lanes) go through registers (floats on AVX-512:
// transpose_block's in-lane shuffles, which need no index vectors and so
// leave all 32 registers to the block); a round interleaves the low halves
// of vectors i and i + N / 2 into vector 2 i and their high halves into
// 2 i + 1, and log2 N rounds transpose the block. The edges element by
// element.
template <typename T>
void transpose(const T* src, T* dst, int64_t rows, int64_t cols) {
  using V = typename Simd<T>::type;
  constexpr int N = sizeof(V) / sizeof(T);
  using I = decltype(V{} < V{});
  I lo, hi;
  interleave_masks<I, N>(lo, hi);
  const int64_t R = rows - rows % N, C = cols - cols % N;
  for (int64_t r0 = 0; r0 < R; r0 += N) {
    for (int64_t c0 = 0; c0 < C; c0 += N) {
#ifdef __AVX512F__
      if constexpr (std::is_same_v<T, float>) {
        transpose_block(src + r0 * cols + c0, cols, dst + c0 * rows + r0, rows);
        continue;
      }
#endif
      V v[N], w[N];
#pragma GCC unroll 16
      for (int i = 0; i < N; ++i) v[i] = load<V>(src + (r0 + i) * cols + c0);
#pragma GCC unroll 4
      for (int round = 1; round < N; round *= 2) {
#pragma GCC unroll 8
        for (int i = 0; i < N / 2; ++i) {
          w[2 * i] = __builtin_shuffle(v[i], v[i + N / 2], lo);
          w[2 * i + 1] = __builtin_shuffle(v[i], v[i + N / 2], hi);
        }
#pragma GCC unroll 16
        for (int i = 0; i < N; ++i) v[i] = w[i];
      }
#pragma GCC unroll 16
      for (int j = 0; j < N; ++j) store(dst + (c0 + j) * rows + r0, v[j]);
    }
    for (int64_t r = r0; r < r0 + N; ++r) {
      for (int64_t c = C; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
    }
  }
  for (int64_t r = R; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  }
}

// The output columns [ox0, ox1) whose tap at x offset off_x (kx dW - pW)
// lands inside the image's W columns: 0 <= ox sW + off_x < W. Empty (ox0 ==
// ox1) when the tap lies in the padding of every window.
inline void tap_columns(int64_t off_x, const WindowGeometry& g, int64_t& ox0, int64_t& ox1) {
  if (off_x > g.W - 1) {
    ox0 = ox1 = 0;
    return;
  }
  ox0 = imin(g.OW, off_x >= 0 ? int64_t{0} : (-off_x + g.sW - 1) / g.sW);
  ox1 = imax(ox0, imin(g.OW, (g.W - 1 - off_x) / g.sW + 1));
}

}  // namespace

// rows [N L, F] of images [n0, n1) of x [N, C, H, W]: each window (oy, ox)
// as one row, zero outside the input.
template <typename T>
void im2rows_images(const T* x, T* rows, const WindowGeometry& g, int64_t n0, int64_t n1) {
  const int64_t F = g.C * g.KH * g.KW, L = g.OH * g.OW;
  thread_local Scratch<T> scratch;
  T* const cols = scratch.reserve(F * L);
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t c = 0; c < g.C; ++c) {
      const T* plane = x + (n * g.C + c) * g.H * g.W;
      for (int64_t ky = 0; ky < g.KH; ++ky) {
        for (int64_t kx = 0; kx < g.KW; ++kx) {
          T* col = cols + ((c * g.KH + ky) * g.KW + kx) * L;
          const int64_t off_x = kx * g.dW - g.pW;
          int64_t ox0, ox1;
          tap_columns(off_x, g, ox0, ox1);
          for (int64_t oy = 0; oy < g.OH; ++oy) {
            T* dst = col + oy * g.OW;
            const int64_t iy = oy * g.sH - g.pH + ky * g.dH;
            if (iy < 0 || iy >= g.H) {
              for (int64_t ox = 0; ox < g.OW; ++ox) dst[ox] = T(0);
              continue;
            }
            const T* src = plane + iy * g.W + off_x;
            for (int64_t ox = 0; ox < ox0; ++ox) dst[ox] = T(0);
            if (g.sW == 1) {
              for (int64_t ox = ox0; ox < ox1; ++ox) dst[ox] = src[ox];
            } else {
              for (int64_t ox = ox0; ox < ox1; ++ox) dst[ox] = src[ox * g.sW];
            }
            for (int64_t ox = ox1; ox < g.OW; ++ox) dst[ox] = T(0);
          }
        }
      }
    }
    transpose(cols, rows + n * L * F, F, L);
  }
}

// gx [N, C, H, W] of images [n0, n1) from the rows' gradient grows [N L,
// F]: each pixel's taps summed from zero in ascending (ky, kx), the order
// of LibTorch's col2im (adding channel c's columns in ascending f into its
// plane gives every pixel its taps in that order).
template <typename T>
void rows2im_images(const T* grows, T* gx, const WindowGeometry& g, int64_t n0, int64_t n1) {
  const int64_t F = g.C * g.KH * g.KW, L = g.OH * g.OW;
  thread_local Scratch<T> scratch;
  T* const cols = scratch.reserve(F * L);
  for (int64_t n = n0; n < n1; ++n) {
    transpose(grows + n * L * F, cols, L, F);
    T* image = gx + n * g.C * g.H * g.W;
    for (int64_t i = 0; i < g.C * g.H * g.W; ++i) image[i] = T(0);
    for (int64_t c = 0; c < g.C; ++c) {
      T* plane = image + c * g.H * g.W;
      for (int64_t ky = 0; ky < g.KH; ++ky) {
        for (int64_t kx = 0; kx < g.KW; ++kx) {
          const T* col = cols + ((c * g.KH + ky) * g.KW + kx) * L;
          const int64_t off_x = kx * g.dW - g.pW;
          int64_t ox0, ox1;
          tap_columns(off_x, g, ox0, ox1);
          if (ox0 >= ox1) continue;
          for (int64_t oy = 0; oy < g.OH; ++oy) {
            const int64_t iy = oy * g.sH - g.pH + ky * g.dH;
            if (iy < 0 || iy >= g.H) continue;
            const T* src = col + oy * g.OW;
            T* dst = plane + iy * g.W + off_x;
            if (g.sW == 1) {
              for (int64_t ox = ox0; ox < ox1; ++ox) dst[ox] += src[ox];
            } else {
              for (int64_t ox = ox0; ox < ox1; ++ox) dst[ox * g.sW] += src[ox];
            }
          }
        }
      }
    }
  }
}

// One image's and output tile's share of a convolution's output gradient
// as the weight gradient reads it (pack_grad_planes, linear.cpp): rows [L,
// 16] (double; columns from `width` on zero) = planes [width, L]
// transposed, each value converted exactly. Through a transposed copy in
// the planes' type (register blocks where the tile is whole), then
// converted along contiguous memory.
template <typename T>
void planes_to_tile_rows(const T* planes, double* rows, int64_t width, int64_t L) {
  constexpr int64_t kTile = kLinearTile;
  thread_local Scratch<T> scratch_buffer;
  T* const t = scratch_buffer.reserve(L * kTile);
  if (width == kTile) {
    transpose(planes, t, kTile, L);
  } else {
    for (int64_t l = 0; l < L; ++l) {
      for (int64_t o = 0; o < kTile; ++o) t[l * kTile + o] = o < width ? planes[o * L + l] : T(0);
    }
  }
  for (int64_t i = 0; i < L * kTile; ++i) rows[i] = static_cast<double>(t[i]);
}

template void im2rows_images<float>(const float*, float*, const WindowGeometry&, int64_t, int64_t);
template void im2rows_images<double>(const double*, double*, const WindowGeometry&, int64_t, int64_t);
template void rows2im_images<float>(const float*, float*, const WindowGeometry&, int64_t, int64_t);
template void rows2im_images<double>(const double*, double*, const WindowGeometry&, int64_t, int64_t);
template void planes_to_tile_rows<float>(const float*, double*, int64_t, int64_t);
template void planes_to_tile_rows<double>(const double*, double*, int64_t, int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
