// CNNs' usual max pool, 2 x 2 windows at stride 2 without padding (see
// snn/neurons/windows.h), compiled per instruction set like the other
// loops: a vector of outputs at a time, from the even and odd lanes of two
// input rows. Each output takes LibTorch's value and window position: the
// window scanned by rows from its first element, an element taken when
// greater than the maximum so far or NaN. Every lane makes those
// comparisons in that order, whatever the vector width, so every build
// gives the same values and positions (tests/neurons/windows_test.cpp).

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "simd_loops.h"

namespace snn::neurons::detail::SNN_ISA {
namespace {

// One output row of OW >= N outputs from input rows r0 and r1, N outputs
// at a time from the even and odd lanes of two input vectors per row. The
// last group overlaps the one before it instead of leaving a scalar tail
// (the MNIST CNN's rows are 14 and 7 outputs long): its outputs are
// computed twice, to the same values.
template <typename T, int N, bool kIdx>
inline __attribute__((always_inline)) void row(const T* r0, const T* r1, T* out, uint8_t* at, int64_t OW) {
  typedef T V __attribute__((vector_size(N * sizeof(T))));
  using I = decltype(V{} < V{});  // integer lanes of T's width: comparison masks, positions
  using E = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef uint8_t Bytes __attribute__((vector_size(N)));
  I even, odd;  // lanes of two vectors' concatenation: the windows' left and right columns
  for (int l = 0; l < N; ++l) {
    even[l] = static_cast<E>(2 * l);
    odd[l] = static_cast<E>(2 * l + 1);
  }
  for (int64_t ox0 = 0; ox0 < OW; ox0 += N) {
    const int64_t ox = ox0 + N <= OW ? ox0 : OW - N;
    const V a0 = load<V>(r0 + 2 * ox), a1 = load<V>(r0 + 2 * ox + N);
    const V b0 = load<V>(r1 + 2 * ox), b1 = load<V>(r1 + 2 * ox + N);
    V best = __builtin_shuffle(a0, a1, even);
    I where = I{};
    const V next[3] = {__builtin_shuffle(a0, a1, odd), __builtin_shuffle(b0, b1, even),
                       __builtin_shuffle(b0, b1, odd)};
#pragma GCC unroll 3
    for (int k = 0; k < 3; ++k) {
      const I take = (next[k] > best) | (next[k] != next[k]);
      best = take ? next[k] : best;
      if constexpr (kIdx) where = take ? I{} + static_cast<E>(k + 1) : where;
    }
    store(out + ox, best);
    if constexpr (kIdx) {
      const Bytes b = __builtin_convertvector(where, Bytes);
      std::memcpy(at + ox, &b, N);
    }
  }
}

// Rows too short for 4 lanes, one output at a time.
template <typename T, bool kIdx>
void scalar_row(const T* r0, const T* r1, T* out, uint8_t* at, int64_t OW) {
  for (int64_t ox = 0; ox < OW; ++ox) {
    T best = r0[2 * ox];
    uint8_t where = 0;
    const T next[3] = {r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1]};
    for (uint8_t k = 0; k < 3; ++k) {
      const bool take = (next[k] > best) | (next[k] != next[k]);
      best = take ? next[k] : best;
      where = take ? static_cast<uint8_t>(k + 1) : where;
    }
    out[ox] = best;
    if constexpr (kIdx) at[ox] = where;
  }
}

// Planes [p0, p1) of H x W into (H / 2) x (W / 2); idx (the window
// position ky 2 + kx, one byte per output) only when kIdx. The widest of
// 16, 8 and 4 lanes that the rows hold.
template <typename T, bool kIdx>
void planes(const T* x, T* y, uint8_t* idx, int64_t H, int64_t W, int64_t p0, int64_t p1) {
  const int64_t OH = H / 2, OW = W / 2;
  for (int64_t p = p0; p < p1; ++p) {
    for (int64_t oy = 0; oy < OH; ++oy) {
      const T* r0 = x + (p * H + 2 * oy) * W;
      const T* r1 = r0 + W;
      T* out = y + (p * OH + oy) * OW;
      uint8_t* at = kIdx ? idx + (p * OH + oy) * OW : nullptr;
      if (OW >= 16) {
        row<T, 16, kIdx>(r0, r1, out, at, OW);
      } else if (OW >= 8) {
        row<T, 8, kIdx>(r0, r1, out, at, OW);
      } else if (OW >= 4) {
        row<T, 4, kIdx>(r0, r1, out, at, OW);
      } else {
        scalar_row<T, kIdx>(r0, r1, out, at, OW);
      }
    }
  }
}

// One output row's gradient into input rows r0 and r1, N outputs at a
// time: each of the four window positions' lanes selected, then the two
// columns interleaved. The last group overlaps the one before it (it
// writes the same values twice) instead of leaving a scalar tail; N = 1 is
// the scalar loop for rows shorter than 4.
template <typename T, int N>
inline __attribute__((always_inline)) void row_backward(const T* g, const uint8_t* at, T* r0, T* r1, int64_t OW) {
  if constexpr (N == 1) {
    for (int64_t ox = 0; ox < OW; ++ox) {
      const T v = T(0) + g[ox];
      const uint8_t k = at[ox];
      r0[2 * ox] = k == 0 ? v : T(0);
      r0[2 * ox + 1] = k == 1 ? v : T(0);
      r1[2 * ox] = k == 2 ? v : T(0);
      r1[2 * ox + 1] = k == 3 ? v : T(0);
    }
  } else {
    typedef T V __attribute__((vector_size(N * sizeof(T))));
    using I = decltype(V{} < V{});
    typedef uint8_t Bytes __attribute__((vector_size(N)));
    I lo, hi;
    interleave_masks<I, N>(lo, hi);
    for (int64_t ox0 = 0; ox0 < OW; ox0 += N) {
      const int64_t ox = ox0 + N <= OW ? ox0 : OW - N;
      const V v = V{} + load<V>(g + ox);
      Bytes kb;
      std::memcpy(&kb, at + ox, N);
      const I k = __builtin_convertvector(kb, I);
      const V z = V{};
      const V a0 = k == 0 ? v : z, a1 = k == 1 ? v : z, b0 = k == 2 ? v : z, b1 = k == 3 ? v : z;
      store(r0 + 2 * ox, __builtin_shuffle(a0, a1, lo));
      store(r0 + 2 * ox + N, __builtin_shuffle(a0, a1, hi));
      store(r1 + 2 * ox, __builtin_shuffle(b0, b1, lo));
      store(r1 + 2 * ox + N, __builtin_shuffle(b0, b1, hi));
    }
  }
}

}  // namespace

// Planes [p0, p1) of x [planes, H, W] into y [planes, H / 2, W / 2] and,
// unless idx is null, each output's window position into idx.
template <typename T>
void max_pool_2x2(const T* x, T* y, uint8_t* idx, int64_t H, int64_t W, int64_t p0, int64_t p1) {
  if (idx) {
    planes<T, true>(x, y, idx, H, W, p0, p1);
  } else {
    planes<T, false>(x, y, nullptr, H, W, p0, p1);
  }
}

// The gradient of planes [p0, p1) of max_pool_2x2: each output's gradient
// to its window position (idx), zero elsewhere, written row pair by row
// pair instead of zeroing the plane and adding each output's gradient to
// it. The values are that addition's: 0 + g (so -0 becomes +0, as there).
// An odd last row or column, in no window, gets zero.
template <typename T>
void max_pool_2x2_backward(const T* gy, const uint8_t* idx, T* gx, int64_t H, int64_t W, int64_t p0, int64_t p1) {
  const int64_t OH = H / 2, OW = W / 2;
  for (int64_t p = p0; p < p1; ++p) {
    T* plane = gx + p * H * W;
    for (int64_t oy = 0; oy < OH; ++oy) {
      const T* g = gy + (p * OH + oy) * OW;
      const uint8_t* at = idx + (p * OH + oy) * OW;
      T* r0 = plane + 2 * oy * W;
      if (OW >= 16) {
        row_backward<T, 16>(g, at, r0, r0 + W, OW);
      } else if (OW >= 8) {
        row_backward<T, 8>(g, at, r0, r0 + W, OW);
      } else if (OW >= 4) {
        row_backward<T, 4>(g, at, r0, r0 + W, OW);
      } else {
        row_backward<T, 1>(g, at, r0, r0 + W, OW);
      }
      if (W % 2) r0[W - 1] = r0[2 * W - 1] = T(0);
    }
    if (H % 2) {
      for (int64_t ix = 0; ix < W; ++ix) plane[(H - 1) * W + ix] = T(0);
    }
  }
}

template void max_pool_2x2<float>(const float*, float*, uint8_t*, int64_t, int64_t, int64_t, int64_t);
template void max_pool_2x2<double>(const double*, double*, uint8_t*, int64_t, int64_t, int64_t, int64_t);
template void max_pool_2x2_backward<float>(const float*, const uint8_t*, float*, int64_t, int64_t, int64_t, int64_t);
template void max_pool_2x2_backward<double>(const double*, const uint8_t*, double*, int64_t, int64_t, int64_t,
                                            int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
