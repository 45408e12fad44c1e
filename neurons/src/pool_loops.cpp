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

template void max_pool_2x2<float>(const float*, float*, uint8_t*, int64_t, int64_t, int64_t, int64_t);
template void max_pool_2x2<double>(const double*, double*, uint8_t*, int64_t, int64_t, int64_t, int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
