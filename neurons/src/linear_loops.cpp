// CPU loops of snn::Linear, compiled per instruction set (see
// neuron_cpu_loops.cpp). Every output is its bias plus the products
// x[f] * wt[f, o] added one at a time in ascending f, with no fused
// multiply-add (-ffp-contract=off): the order per output is the
// same on every ISA, for every batching and every tiling below, so the
// dense and the event-driven kernels give the same results (a skipped zero
// input adds +-0, which changes nothing but the sign of an exact zero).
//
// SIMD lanes and register tiles run across outputs (and, in the dense
// kernel, across rows), never along the sum. The weights come packed in
// tiles of kTile output columns, [tiles, in, kTile] (zero-padded), so that
// a tile's weights are one contiguous stream instead of a column 4 KiB
// apart per input (which thrashed one L1 set).

#include <cstdint>
#include <cstring>
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

constexpr int64_t kTile = kLinearTile;  // linear_tile.h

// Stores the lanes [0, n) of a tile's accumulators to y (all of them when
// the tile is whole; the last tile of a layer whose size is not a multiple
// of kTile is padded with zero weights, whose columns are dropped here).
template <typename T, int NV>
inline __attribute__((always_inline)) void store_tile(T* y, const typename Simd<T>::type* acc, int64_t n) {
  using V = typename Simd<T>::type;
  constexpr int64_t L = sizeof(V) / sizeof(T);
  if (n == NV * L) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) store(y + v * L, acc[v]);
  } else {
    T tmp[NV * L];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) store(tmp + v * L, acc[v]);
    std::memcpy(y, tmp, n * sizeof(T));
  }
}

// Event-driven: outputs of tiles [t0, t0 + NT) for one row from its list of
// nonzero inputs (ascending). `binary`: every listed value is 1 (spikes),
// so the product is the weight itself, exactly.
template <typename T, int NT>
inline __attribute__((always_inline)) void event_tiles(const int32_t* idx, const T* val, int64_t n, bool binary,
                                                       const T* wp, const T* bias, T* yr, int64_t in, int64_t out,
                                                       int64_t t0) {
  using V = typename Simd<T>::type;
  constexpr int64_t L = sizeof(V) / sizeof(T);
  constexpr int NV = kTile / L;  // vectors per tile
  V acc[NT * NV];
  const T* w[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
    w[t] = wp + (t0 + t) * in * kTile;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[t * NV + v] = bias ? load<V>(bias + (t0 + t) * kTile + v * L) : V{};
  }
  if (binary) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t f = static_cast<int64_t>(idx[k]) * kTile;
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[t * NV + v] = acc[t * NV + v] + load<V>(w[t] + f + v * L);
      }
    }
  } else {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t f = static_cast<int64_t>(idx[k]) * kTile;
      const V xv = splat<V>(val[k]);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[t * NV + v] = acc[t * NV + v] + xv * load<V>(w[t] + f + v * L);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
    const int64_t o = (t0 + t) * kTile;
    store_tile<T, NV>(yr + o, acc + t * NV, imin(kTile, out - o));
  }
}

// acc + w where the row spikes (m = 0xFFFF), acc unchanged where it does
// not (m = 0): exactly what skipping the input does, including the sign of
// a zero sum. One masked add on the AVX-512 build, an add and a blend else.
template <typename V>
inline __attribute__((always_inline)) V add_where(V acc, V w, uint16_t m) {
#ifdef __AVX512F__
  if constexpr (sizeof(V) == 64 && sizeof(acc[0]) == 4) {
    return reinterpret_cast<V>(_mm512_mask_add_ps(reinterpret_cast<__m512>(acc), static_cast<__mmask16>(m),
                                                  reinterpret_cast<__m512>(acc), reinterpret_cast<__m512>(w)));
  } else if constexpr (sizeof(V) == 64) {
    return reinterpret_cast<V>(_mm512_mask_add_pd(reinterpret_cast<__m512d>(acc), static_cast<__mmask8>(m),
                                                  reinterpret_cast<__m512d>(acc), reinterpret_cast<__m512d>(w)));
  }
#endif
  using E = decltype(acc[0] + 0);
  using I = std::conditional_t<sizeof(E) == 4, int32_t, int64_t>;
  typedef I IV __attribute__((vector_size(sizeof(V))));
  const IV mv = splat<IV>(static_cast<I>(m != 0 ? -1 : 0));
  return mv ? acc + w : acc;
}

// Event-driven, kGroup rows of one sample at once (its consecutive steps):
// the outputs of tiles [t0, t0 + NT) of rows yr[0, kGroup) from the union
// of their spikes, ascending, where entry k is input idx[k] and mask[k][g]
// says whether row g spikes there. Each weight vector is loaded once for
// the rows, and each row adds exactly the weights of its own spikes in
// ascending order: the values of event_tiles, bit for bit.
constexpr int kGroup = 4;
template <typename T, int NT>
inline __attribute__((always_inline)) void group_tiles(const int32_t* idx, const uint16_t (*mask)[kGroup], int64_t n,
                                                       const T* wp, const T* bias, T* const* yr, int64_t in,
                                                       int64_t out, int64_t t0) {
  using V = typename Simd<T>::type;
  constexpr int64_t L = sizeof(V) / sizeof(T);
  constexpr int NV = kTile / L;
  V acc[kGroup][NT * NV];
  const T* w[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
    w[t] = wp + (t0 + t) * in * kTile;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const V b = bias ? load<V>(bias + (t0 + t) * kTile + v * L) : V{};
#pragma GCC unroll 8
      for (int g = 0; g < kGroup; ++g) acc[g][t * NV + v] = b;
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    const int64_t f = static_cast<int64_t>(idx[k]) * kTile;
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        const V wv = load<V>(w[t] + f + v * L);
#pragma GCC unroll 8
        for (int g = 0; g < kGroup; ++g) acc[g][t * NV + v] = add_where(acc[g][t * NV + v], wv, mask[k][g]);
      }
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < kGroup; ++g) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const int64_t o = (t0 + t) * kTile;
      store_tile<T, NV>(yr[g] + o, acc[g] + t * NV, imin(kTile, out - o));
    }
  }
}

// Dense: outputs of tile t of rows [r0, r0 + R) over every input; each
// weight vector is loaded once for R rows.
template <typename T, int R>
inline __attribute__((always_inline)) void dense_tile(const T* x, const T* wp, const T* bias, T* y, int64_t in,
                                                      int64_t out, int64_t r0, int64_t t) {
  using V = typename Simd<T>::type;
  constexpr int64_t L = sizeof(V) / sizeof(T);
  constexpr int NV = kTile / L;
  V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = bias ? load<V>(bias + t * kTile + v * L) : V{};
  }
  const T* xr = x + r0 * in;
  const T* w = wp + t * in * kTile;
  for (int64_t f = 0; f < in; ++f, w += kTile) {
    V wv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) wv[v] = load<V>(w + v * L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V xb = splat<V>(xr[r * in + f]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = acc[r][v] + xb * wv[v];
    }
  }
  const int64_t o = t * kTile, n = imin(kTile, out - o);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) store_tile<T, NV>(y + (r0 + r) * out + o, acc[r], n);
}

// Rows per block: a block's inputs (and, for the event kernel, its lists)
// stay in cache while the weight tiles go by, and a pass's tiles (784 x 128
// floats on the AVX-512 build, 400 KB) stay in L2 for all the block's rows:
// 128 rows, not 32, read the weights from L3 a quarter as often (the
// event kernel of a 784-1024 layer at 10% firing went from 2.0 to 1.7-1.8
// microseconds per row on a Zen 4 core).
constexpr int64_t kBlockRows = 128;
// The dense kernel's blocks are longer: each weight tile (in x 16) is then
// read from L3 once per 96 rows, while the block's inputs (96 x in floats,
// 300 KB for in = 784) stay in L2.
constexpr int64_t kDenseBlockRows = 96;
// Rows per dense register tile: 4 x 2 accumulators of 32 bytes, or 8 of
// 64 bytes on the AVX-512 build (32 registers).
constexpr int kDenseRows = kVectorBytes == 64 ? 8 : 4;
// Tiles per event-driven pass over a row's list: 4 x 2 accumulators of 32
// bytes, or 8 of 64 bytes on the AVX-512 build (then 4 for what is left).
constexpr int kEventTiles = kVectorBytes == 64 ? 8 : 4;

}  // namespace

template <typename T>
void linear_dense(const T* x, const T* wp, const T* bias, T* y, int64_t in, int64_t out, int64_t r0, int64_t r1) {
  const int64_t tiles = (out + kTile - 1) / kTile;
  for (int64_t b0 = r0; b0 < r1; b0 += kDenseBlockRows) {
    const int64_t b1 = imin(r1, b0 + kDenseBlockRows);
    for (int64_t t = 0; t < tiles; ++t) {
      int64_t r = b0;
      for (; r + kDenseRows <= b1; r += kDenseRows) dense_tile<T, kDenseRows>(x, wp, bias, y, in, out, r, t);
      for (; r < b1; ++r) dense_tile<T, 1>(x, wp, bias, y, in, out, r, t);
    }
  }
}

namespace {

// The event-driven tile passes over rows [0, rows) of a block whose lists
// are ready: row i's nonzero inputs idx[i][0, count[i]) (values val[i],
// or all 1 where binary[i]), its outputs at y[i]. Every row for a few
// tiles, then the next tiles: those tiles' weights stay in L2 for all rows.
template <typename T>
void event_passes(const int32_t* const* idx, const T* const* val, const int64_t* count, const bool* binary,
                  T* const* y, int64_t rows, const T* wp, const T* bias, int64_t in, int64_t out) {
  const int64_t tiles = (out + kTile - 1) / kTile;
  int64_t t = 0;
  for (; t + kEventTiles <= tiles; t += kEventTiles) {
    for (int64_t i = 0; i < rows; ++i) {
      event_tiles<T, kEventTiles>(idx[i], val[i], count[i], binary[i], wp, bias, y[i], in, out, t);
    }
  }
  if constexpr (kEventTiles > 4) {
    for (; t + 4 <= tiles; t += 4) {
      for (int64_t i = 0; i < rows; ++i) event_tiles<T, 4>(idx[i], val[i], count[i], binary[i], wp, bias, y[i], in, out, t);
    }
  }
  for (; t < tiles; ++t) {
    for (int64_t i = 0; i < rows; ++i) event_tiles<T, 1>(idx[i], val[i], count[i], binary[i], wp, bias, y[i], in, out, t);
  }
}

}  // namespace

// X is T (any real inputs) or uint8_t (bool spikes: every listed input is 1).
template <typename T, typename X>
void linear_event(const X* x, const T* wp, const T* bias, T* y, int64_t in, int64_t out, int64_t r0, int64_t r1) {
  constexpr bool kSpikes = std::is_same_v<X, uint8_t>;
  // Each thread's lists of nonzero inputs, kept between calls: no
  // allocation in steady state. (The listings may write up to 15 entries
  // past a row's count, within the row's `in` slots.)
  thread_local Scratch<int32_t> idx_buffer;
  thread_local Scratch<T> val_buffer;
  int32_t* const idx = idx_buffer.reserve(kBlockRows * in);
  T* const vals = kSpikes ? nullptr : val_buffer.reserve(kBlockRows * in);
  int64_t count[kBlockRows];
  bool binary[kBlockRows];
  const int32_t* lists[kBlockRows];
  const T* values[kBlockRows];
  T* ys[kBlockRows];
  for (int64_t b0 = r0; b0 < r1; b0 += kBlockRows) {
    const int64_t rows = imin(r1 - b0, kBlockRows);
    for (int64_t i = 0; i < rows; ++i) {
      if constexpr (kSpikes) {
        count[i] = list_spikes(x + (b0 + i) * in, in, idx + i * in);
        binary[i] = true;
      } else {
        count[i] = list_nonzero(x + (b0 + i) * in, in, idx + i * in, vals + i * in, &binary[i]);
      }
      lists[i] = idx + i * in;
      values[i] = kSpikes ? nullptr : vals + i * in;
      ys[i] = y + (b0 + i) * out;
    }
    event_passes<T>(lists, values, count, binary, ys, rows, wp, bias, in, out);
  }
}

// Bool spikes x of `samples` samples over `steps` steps: row (s, i), step s
// of sample i, at x + (s * stride + i) * in; its outputs at
// y + (s * y_stride + i) * out. The values of linear_event, bit for bit.
//
// Why: the first layer's input is a rate-coded image, whose spikes at
// consecutive steps fall on the same pixels (each firing at its rate), so a
// sample's kGroup steps share most of their spikes. Their union is then
// listed once, and each weight vector loaded once for the kGroup rows
// (group_tiles): the event kernel's weight reads, from L2, are what bound
// it. A group whose rows share too little (spikes of a hidden layer,
// independent from step to step) runs row by row as in linear_event: the
// union costs kGroup masked adds per entry, a row's list one add per spike.
template <typename T>
void linear_event_steps(const uint8_t* x, const T* wp, const T* bias, T* y, int64_t in, int64_t out, int64_t samples,
                        int64_t steps, int64_t stride, int64_t y_stride) {
  using V = typename Simd<T>::type;
  constexpr int NV = static_cast<int>(kTile / (sizeof(V) / sizeof(T)));
  // Tiles per grouped pass: kGroup x NT x NV accumulators, 16 registers of
  // the 32 on the AVX-512 build (float NT = 4, double 2), 8 of the 16 on
  // the AVX2 build (float NT = 1). Where kGroup rows of one tile do not fit
  // (AVX2 double; the baseline build, whose 32-byte vectors are two SSE
  // registers each), every group goes row by row.
#ifdef __AVX2__
  constexpr int kAccumulators = kVectorBytes == 64 ? 16 : 8;
#else
  constexpr int kAccumulators = 0;
#endif
  constexpr bool kGrouped = kGroup * NV <= kAccumulators;
  constexpr int NT = kGrouped ? kAccumulators / (kGroup * NV) : 1;
  // Spikes per union entry: the bits set in u[f] < 16 (a table, not a
  // popcount call on the baseline build).
  constexpr uint8_t kBits[16] = {0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4};
  static_assert(kGroup == 4, "kBits counts 4 bits");
  const int64_t tiles = (out + kTile - 1) / kTile;
  thread_local Scratch<int32_t> idx_buffer;
  thread_local Scratch<uint16_t> mask_buffer;
  thread_local Scratch<uint8_t> union_buffer;
  constexpr int64_t per_block = kBlockRows / kGroup;  // samples per block
  int32_t* const idx = idx_buffer.reserve(kBlockRows * in);
  // The grouped samples' masks: at most per_block unions of in entries.
  uint16_t(*const mask)[kGroup] = reinterpret_cast<uint16_t(*)[kGroup]>(mask_buffer.reserve(per_block * in * kGroup));
  uint8_t* const u = union_buffer.reserve(in);
  // One block's rows (at most kBlockRows) and grouped samples.
  int64_t count[kBlockRows];
  bool binary[kBlockRows];
  const int32_t* lists[kBlockRows];
  const T* values[kBlockRows] = {};
  T* ys[kBlockRows];
  int64_t group_off[per_block], group_mask[per_block], group_count[per_block];
  T* group_y[per_block][kGroup];
  for (bool& b : binary) b = true;
  const auto row_x = [&](int64_t s, int64_t i) { return x + (s * stride + i) * in; };
  const auto row_y = [&](int64_t s, int64_t i) { return y + (s * y_stride + i) * out; };
  // A block: up to per_block samples, and as many step groups as keep it
  // within kBlockRows rows (a few samples, as at B = 1 or with many
  // threads, still make blocks of about 128 rows, over which the weights
  // read from L3 are shared).
  for (int64_t i0 = 0; i0 < samples; i0 += per_block) {
    const int64_t i1 = imin(samples, i0 + per_block);
    const int64_t span = kGroup * imax(1, per_block / (i1 - i0));  // steps per block
    for (int64_t s0 = 0; s0 < steps; s0 += span) {
      const int64_t s1 = imin(steps, s0 + span);
      // Single rows, grouped samples, list slots and mask rows used.
      int64_t rows = 0, groups = 0, used = 0, masked = 0;
      // The block's first group tells whether its rows share their spikes:
      // if not (a hidden layer's), the others go row by row without the
      // cost of their unions (which made independent spikes at 2% 16% slower).
      bool probe = kGrouped, first = true;
      for (int64_t q0 = s0; q0 < s1; q0 += kGroup) {
        const int64_t g = imin(kGroup, s1 - q0);
        for (int64_t i = i0; i < i1; ++i) {
          if (probe && g == kGroup) {
            // Bit j of u[f]: row j spikes at input f.
            const uint8_t* xr[kGroup];
            for (int j = 0; j < kGroup; ++j) xr[j] = row_x(q0 + j, i);
  #pragma omp simd
            for (int64_t f = 0; f < in; ++f) {
              uint8_t b = 0;
  #pragma GCC unroll 8
              for (int j = 0; j < kGroup; ++j) b |= static_cast<uint8_t>((xr[j][f] != 0) << j);
              u[f] = b;
            }
            int32_t* const list = idx + used;
            const int64_t n = list_spikes(u, in, list);
            int64_t spikes = 0;
            for (int64_t k = 0; k < n; ++k) spikes += kBits[u[list[k]]];
            // Grouped where each entry serves at least half the rows: kGroup
            // masked adds per entry against one add (and one weight load) per
            // spike row by row. bench/linear_bench: rate-coded rows 1.4x
            // faster grouped; independent spikes (2-30%) 0.72-0.84x as fast
            // if grouped, so they stay row by row (their unions are larger).
            if (kGroup * n <= 2 * spikes) {
              for (int64_t k = 0; k < n; ++k) {
                const unsigned b = u[list[k]];
  #pragma GCC unroll 8
                for (int j = 0; j < kGroup; ++j) mask[masked + k][j] = (b >> j & 1u) ? 0xFFFF : 0;
              }
              group_off[groups] = used;
              group_mask[groups] = masked;
              group_count[groups] = n;
              for (int j = 0; j < kGroup; ++j) group_y[groups][j] = row_y(q0 + j, i);
              ++groups;
              used += n;
              masked += n;
              first = false;
              continue;
            }
            probe = !first;  // a block whose first group was grouped tries every group
          }
          first = false;
          for (int64_t j = 0; j < g; ++j) {
            count[rows] = list_spikes(row_x(q0 + j, i), in, idx + used);
            lists[rows] = idx + used;
            ys[rows] = row_y(q0 + j, i);
            ++rows;
            used += count[rows - 1];
          }
        }
      }
      // (list_spikes may write up to 16 entries past a count, within `in`
      // slots from its start: a block's lists use at most kBlockRows * in.)
      event_passes<T>(lists, values, count, binary, ys, rows, wp, bias, in, out);
      int64_t t = 0;
      for (; t + NT <= tiles; t += NT) {
        for (int64_t q = 0; q < groups; ++q) {
          group_tiles<T, NT>(idx + group_off[q], mask + group_mask[q], group_count[q], wp, bias, group_y[q], in, out, t);
        }
      }
      for (; t < tiles; ++t) {
        for (int64_t q = 0; q < groups; ++q) {
          group_tiles<T, 1>(idx + group_off[q], mask + group_mask[q], group_count[q], wp, bias, group_y[q], in, out, t);
        }
      }
    }
  }
}

template <typename T>
int64_t count_nonzero(const T* x, int64_t n) {
  int32_t c = 0;  // one row of a layer's inputs: far below 2^31
#pragma omp simd reduction(+ : c)
  for (int64_t i = 0; i < n; ++i) c += x[i] != T(0) ? 1 : 0;
  return c;
}

// The weight gradient's rows per mask of an input's nonzero rows (its bits).
constexpr int64_t kWeightGradChunkRows = 64;
// Output tiles per pass over the masks: eight vectors of sums.
constexpr int kPassTiles = kVectorBytes == 64 ? 4 : 2;

// NT output tiles' double sums at `sums` into registers and back. Where the
// group passes `out` (not `whole`: `valid` = out - its first column), the
// sums go through a zero-padded copy, so no load or store passes the end.
template <int NT>
inline __attribute__((always_inline)) void load_tile_sums(const double* sums, bool whole, int64_t valid,
                                                          typename Simd<double>::type* acc) {
  using V = Simd<double>::type;
  constexpr int64_t L = sizeof(V) / sizeof(double);
  double edge[NT * kTile];  // filled only where used: this runs once per input and chunk
  const double* from = sums;
  if (!whole) {
    for (int64_t o = 0; o < NT * kTile; ++o) edge[o] = 0.0;
    std::memcpy(edge, sums, valid * sizeof(double));
    from = edge;
  }
#pragma GCC unroll 16
  for (int v = 0; v < NT * kTile / L; ++v) acc[v] = load<V>(from + v * L);
}
template <int NT>
inline __attribute__((always_inline)) void store_tile_sums(double* sums, bool whole, int64_t valid,
                                                           const typename Simd<double>::type* acc) {
  using V = Simd<double>::type;
  constexpr int64_t L = sizeof(V) / sizeof(double);
  if (whole) {
#pragma GCC unroll 16
    for (int v = 0; v < NT * kTile / L; ++v) store(sums + v * L, acc[v]);
    return;
  }
  double edge[NT * kTile];
#pragma GCC unroll 16
  for (int v = 0; v < NT * kTile / L; ++v) store(edge + v * L, acc[v]);
  std::memcpy(sums, edge, valid * sizeof(double));
}

// The weight gradient's pass over the masks for the NT output tiles from
// t: for each chunk of rows and each input f in [f0, f0 + nf) with a
// nonzero mask, the input's sums of those tiles (in registers meanwhile)
// get the gy rows of its bits in ascending row order, times value(p, f)
// (the input at row p; not called when `binary`: every nonzero input is 1).
// With bias_sum, the tiles' bias sums (columns of gy) get every row of each
// chunk after its inputs, in ascending row order as well. The chunk of the
// tiles' columns (NT x 8 KiB) stays in L1 (48 KiB on the Xeons, 32 KiB on
// Zen) while the inputs go by. A group whose last tile passes `out` goes
// through zero-padded copies of its sums.
template <int NT, typename Value>
void weight_grad_tiles(const Value& value, const double* gy, double* sum_t, double* bias_sum, const uint64_t* masks,
                       int64_t out, int64_t rows, int64_t f0, int64_t nf, bool binary, int64_t t) {
  using V = Simd<double>::type;
  constexpr int64_t L = sizeof(V) / sizeof(double);
  constexpr int NV = kTile / L;  // vectors per tile
  const int64_t chunks = (rows + kWeightGradChunkRows - 1) / kWeightGradChunkRows;
  const bool whole = (t + NT) * kTile <= out;
  const double* g[NT];
  for (int k = 0; k < NT; ++k) g[k] = gy + (t + k) * rows * kTile;
  for (int64_t c = 0; c < chunks; ++c) {
    const uint64_t* mc = masks + c * nf;
    const int64_t c0 = c * kWeightGradChunkRows;
    for (int64_t f = 0; f < nf; ++f) {
      uint64_t bits = mc[f];
      if (bits == 0) continue;  // no nonzero input in this chunk
      double* const sums = sum_t + (f0 + f) * out + t * kTile;
      V acc[NT * NV];
      load_tile_sums<NT>(sums, whole, out - t * kTile, acc);
      if (binary) {
        for (; bits != 0; bits &= bits - 1) {
          const int64_t off = (c0 + __builtin_ctzll(bits)) * kTile;
#pragma GCC unroll 4
          for (int k = 0; k < NT; ++k) {
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) acc[k * NV + v] = acc[k * NV + v] + load<V>(g[k] + off + v * L);
          }
        }
      } else {
        for (; bits != 0; bits &= bits - 1) {
          const int64_t p = c0 + __builtin_ctzll(bits), off = p * kTile;
          const V xv = splat<V>(value(p, f));
#pragma GCC unroll 4
          for (int k = 0; k < NT; ++k) {
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) acc[k * NV + v] = acc[k * NV + v] + xv * load<V>(g[k] + off + v * L);
          }
        }
      }
      store_tile_sums<NT>(sums, whole, out - t * kTile, acc);
    }
    if (bias_sum != nullptr) {
      double* const sums = bias_sum + t * kTile;
      V acc[NT * NV];
      load_tile_sums<NT>(sums, whole, out - t * kTile, acc);
      const int64_t c1 = imin(c0 + kWeightGradChunkRows, rows);
      for (int64_t p = c0; p < c1; ++p) {
#pragma GCC unroll 4
        for (int k = 0; k < NT; ++k) {
#pragma GCC unroll 8
          for (int v = 0; v < NV; ++v) acc[k * NV + v] = acc[k * NV + v] + load<V>(g[k] + p * kTile + v * L);
        }
      }
      store_tile_sums<NT>(sums, whole, out - t * kTile, acc);
    }
  }
}

// All the weight gradient's passes over the masks: kPassTiles tiles per
// pass where there are that many, eight independent vector sums (two tiles
// of four vectors on AVX2, four of two on AVX-512) to hide the latency of
// the additions; each sum's own order is kept, so the result does not
// depend on how many tiles share a pass.
template <typename Value>
void weight_grad_passes(const Value& value, const double* gy, double* sum_t, double* bias_sum, const uint64_t* masks,
                        int64_t out, int64_t rows, int64_t f0, int64_t nf, bool binary) {
  const int64_t tiles = (out + kTile - 1) / kTile;
  for (int64_t t = 0; t < tiles;) {
    const int64_t nt = imin(int64_t{kPassTiles}, tiles - t);
    if (nt == 1) {
      weight_grad_tiles<1>(value, gy, sum_t, bias_sum, masks, out, rows, f0, nf, binary, t);
    } else if (nt == 2) {
      weight_grad_tiles<2>(value, gy, sum_t, bias_sum, masks, out, rows, f0, nf, binary, t);
    } else if constexpr (kPassTiles == 4) {  // (AVX2 passes at most two tiles: no code for more)
      if (nt == 3) {
        weight_grad_tiles<3>(value, gy, sum_t, bias_sum, masks, out, rows, f0, nf, binary, t);
      } else {
        weight_grad_tiles<4>(value, gy, sum_t, bias_sum, masks, out, rows, f0, nf, binary, t);
      }
    }
    t += nt;
  }
}

// Adds a block's weight gradient to double running sums for the inputs f in
// [f0, f1): sum_t[f, o] += x[r, f] * gy[r, o]. Every sum visits the rows in
// the order backpropagation through time visits the steps (steps
// descending, samples ascending), so a sum carried across blocks sees the
// same sequence of additions whatever the block length; the products of
// floats are exact in double. Zero inputs (no spike) are skipped.
//
// Shape: gy comes packed like the weights, [tiles, rows, 16] (zero-padded),
// with its rows in BPTT order (row p is step steps - 1 - p / batch, sample
// p % batch), so that a tile's column is contiguous. The rows are taken
// kWeightGradChunkRows = 64 at a time, and each input's nonzero rows within
// a chunk are one 64-bit mask (bit j: row c0 + j), built once per call from
// each row's list of nonzero inputs; its set bits ascend, so they visit the
// rows in BPTT order. For each group of kPassTiles output tiles, chunk by
// chunk, each input with a nonzero mask then adds the gy rows of its bits to
// its sums (weight_grad_tiles): the chunk of the tiles' columns (16 or 32
// KiB) stays in L1 while the inputs go by, the sums (inputs x 128 bytes per
// tile) in L2.
//
// With bias_sum (the caller whose inputs start at 0 passes it), the bias
// gradient's sums [out] are added too: each column of gy over all rows in
// the same order, while each chunk is in cache.
//
// X is float or double (real inputs) or uint8_t (bool spikes, listed from
// the bytes).
template <typename X>
void linear_weight_grad(const X* x, const double* gy, double* sum_t, double* bias_sum, int64_t in, int64_t out,
                        int64_t steps, int64_t batch, int64_t f0, int64_t f1) {
  constexpr bool kSpikes = std::is_same_v<X, uint8_t>;
  const int64_t nf = f1 - f0, rows = steps * batch;
  const int64_t chunks = (rows + kWeightGradChunkRows - 1) / kWeightGradChunkRows;
  // Each thread's buffers, kept between calls: no allocation in steady state.
  thread_local Scratch<uint64_t> masks_buffer;  // [chunks, nf]
  thread_local Scratch<int32_t> nz_buffer;       // one row's nonzero inputs
  thread_local Scratch<X> nz_val_buffer;         // list_nonzero's values: unused (re-read from x where needed)
  thread_local Scratch<int64_t> row_at_buffer;   // the x row of each BPTT position
  uint64_t* const masks = masks_buffer.reserve(chunks * nf);
  if (chunks * nf > 0) std::memset(masks, 0, static_cast<size_t>(chunks * nf) * sizeof(uint64_t));
  int32_t* const nz = nz_buffer.reserve(nf + 64);
  X* const nz_val = nz_val_buffer.reserve(nf + 64);
  int64_t* const row_at = row_at_buffer.reserve(rows);
  // Each row's nonzero inputs, listed with the event kernel's branch-free
  // left-packing (spikes are mostly zeros), set their bits.
  bool binary = true;  // every nonzero input is 1 (spikes): no products, no values
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t r = s * batch + b, p = (steps - 1 - s) * batch + b;
      row_at[p] = r;
      int64_t k = 0;
      if constexpr (kSpikes) {
        k = list_spikes(x + r * in + f0, nf, nz);
      } else {
        bool ones = true;
        k = list_nonzero(x + r * in + f0, nf, nz, nz_val, &ones);
        binary = binary && ones;
      }
      uint64_t* m = masks + (p / kWeightGradChunkRows) * nf;
      const uint64_t bit = uint64_t(1) << (p % kWeightGradChunkRows);
      for (int64_t i = 0; i < k; ++i) m[nz[i]] |= bit;
    }
  }
  weight_grad_passes([&](int64_t p, int64_t f) { return static_cast<double>(x[row_at[p] * in + f0 + f]); }, gy, sum_t,
                     bias_sum, masks, out, rows, f0, nf, binary);
}

// Adds a convolution's weight gradient for the inputs f in [f0, f1) (f =
// (c KH + ky) KW + kx, the im2col column) to sum_t [C KH KW, out]: what
// linear_weight_grad adds for the rows im2rows makes of x (row p = n OH OW
// + oy OW + ox, steps = 1), without those rows. x is [N, C, H, W] (float
// or double), the convolution stride 1 and undilated (g.sH = g.sW = g.dH =
// g.dW = 1) with W, OW and KW at most 64 (conv2d_weight_grad_fits). The
// masks come from each image row's nonzero pixels as one 64-bit word,
// shifted to each tap's columns and placed at its window row's first bit:
// the same bits as the rows' (padding is zero and sets none), so the same
// sums, added in the same order; bias_sum as linear_weight_grad's.
template <typename T>
void conv2d_weight_grad(const T* x, const WindowGeometry& g, const double* gy, double* sum_t, double* bias_sum,
                        int64_t out, int64_t f0, int64_t f1) {
  const int64_t L = g.OH * g.OW, rows = g.N * L, nf = f1 - f0, taps = g.KH * g.KW, HW = g.H * g.W;
  const int64_t chunks = (rows + kWeightGradChunkRows - 1) / kWeightGradChunkRows;
  const int64_t c0 = f0 / taps, c1 = nf > 0 ? (f1 - 1) / taps + 1 : c0, nc = c1 - c0;
  thread_local Scratch<uint64_t> masks_buffer;     // [chunks, nf]
  thread_local Scratch<uint64_t> row_bits_buffer;  // [N, nc, H]: each image row's nonzero pixels
  thread_local Scratch<int64_t> row_base_buffer;   // x's offset of each row's window (real inputs)
  uint64_t* const masks = masks_buffer.reserve(chunks * nf);
  if (chunks * nf > 0) std::memset(masks, 0, static_cast<size_t>(chunks * nf) * sizeof(uint64_t));
  uint64_t* const row_bits = row_bits_buffer.reserve(g.N * nc * g.H);
  bool binary = true;  // every nonzero input is 1 (spikes): no products, no values
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t c = c0; c < c1; ++c) {
      const T* plane = x + (n * g.C + c) * HW;
      for (int64_t iy = 0; iy < g.H; ++iy) {
        row_bits[(n * nc + c - c0) * g.H + iy] = nonzero_bits(plane + iy * g.W, g.W, &binary);
      }
    }
  }
  // Each input's tap: its channel's rows in row_bits, its row offset ky -
  // pH and its column shift dx = kx - pW (bit ox of a window row: pixel
  // ox + dx; dx < KW <= 64, and -dx <= pW < 64 as OW = W + 2 pW - KW + 1 <=
  // 64).
  thread_local Scratch<int64_t> tap_buffer;
  int64_t* const tap = tap_buffer.reserve(3 * nf);  // [nf][3]: channel rows, ky - pH, dx
  for (int64_t f = f0; f < f1; ++f) {
    const int64_t c = f / taps, ky = f % taps / g.KW, kx = f % g.KW;
    tap[3 * (f - f0)] = (c - c0) * g.H;
    tap[3 * (f - f0) + 1] = ky - g.pH;
    tap[3 * (f - f0) + 2] = kx - g.pW;
  }
  const uint64_t keep = g.OW == 64 ? ~uint64_t(0) : (uint64_t(1) << g.OW) - 1;
  // Window row by window row, its bits placed for every input in turn: the
  // writes go along a chunk's masks (contiguous), not nf words apart.
  for (int64_t n = 0; n < g.N; ++n) {
    const uint64_t* const bits_of = row_bits + n * nc * g.H;
    for (int64_t oy = 0; oy < g.OH; ++oy) {
      const int64_t p0 = n * L + oy * g.OW, word = p0 / kWeightGradChunkRows, shift = p0 % kWeightGradChunkRows;
      const bool spills = shift != 0 && shift + g.OW > kWeightGradChunkRows;
      uint64_t* const m = masks + word * nf;
      for (int64_t f = 0; f < nf; ++f) {
        const int64_t iy = oy + tap[3 * f + 1];
        if (iy < 0 || iy >= g.H) continue;  // the tap's row is padding
        const uint64_t b = bits_of[tap[3 * f] + iy];
        const int64_t dx = tap[3 * f + 2];
        const uint64_t seg = (dx >= 0 ? b >> dx : b << -dx) & keep;
        m[f] |= seg << shift;
        if (spills) m[nf + f] |= seg >> (kWeightGradChunkRows - shift);
      }
    }
  }
  if (binary) {
    weight_grad_passes([](int64_t, int64_t) { return 1.0; }, gy, sum_t, bias_sum, masks, out, rows, f0, nf, true);
    return;
  }
  // Real inputs: row p's window starts at x's offset row_base[p] (its tap
  // (0, 0) shifted by the padding); tap f adds c H W + ky W + kx.
  int64_t* const row_base = row_base_buffer.reserve(rows);
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t oy = 0; oy < g.OH; ++oy) {
      for (int64_t ox = 0; ox < g.OW; ++ox) row_base[n * L + oy * g.OW + ox] = n * g.C * HW + (oy - g.pH) * g.W + ox - g.pW;
    }
  }
  weight_grad_passes(
      [&](int64_t p, int64_t f) {
        const int64_t tap = f0 + f, c = tap / taps, ky = tap % taps / g.KW, kx = tap % g.KW;
        return static_cast<double>(x[row_base[p] + c * HW + ky * g.W + kx]);
      },
      gy, sum_t, bias_sum, masks, out, rows, f0, nf, false);
}

// g[o, i] = sum_t[i, o] rounded to G, for the inputs i in [i0, i1): the
// weight gradient's publication from its sums. 4 x 4 blocks transposed in
// registers, since scalar stores a row of g apart (in x 4 bytes) ran at
// about 5 ns per element.
template <typename G>
void round_transposed(const double* sum_t, G* g, int64_t in, int64_t out, int64_t i0, int64_t i1) {
  typedef double D4 __attribute__((vector_size(32)));
  typedef G G4 __attribute__((vector_size(4 * sizeof(G))));
  const int64_t i4 = i0 + (i1 - i0) / 4 * 4, o4 = out / 4 * 4;
  for (int64_t i = i0; i < i4; i += 4) {
    for (int64_t o = 0; o < o4; o += 4) {
      G4 r[4];
      for (int k = 0; k < 4; ++k) {
        D4 v;
        std::memcpy(&v, sum_t + (i + k) * out + o, sizeof(v));
        r[k] = __builtin_convertvector(v, G4);
      }
      const G4 t0 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5), t1 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5);
      const G4 t2 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7), t3 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
      const G4 c[4] = {__builtin_shufflevector(t0, t1, 0, 1, 4, 5), __builtin_shufflevector(t0, t1, 2, 3, 6, 7),
                       __builtin_shufflevector(t2, t3, 0, 1, 4, 5), __builtin_shufflevector(t2, t3, 2, 3, 6, 7)};
      for (int k = 0; k < 4; ++k) std::memcpy(g + (o + k) * in + i, &c[k], sizeof(G4));
    }
    for (int64_t o = o4; o < out; ++o) {
      for (int64_t k = i; k < i + 4; ++k) g[o * in + k] = static_cast<G>(sum_t[k * out + o]);
    }
  }
  for (int64_t i = i4; i < i1; ++i) {
    for (int64_t o = 0; o < out; ++o) g[o * in + i] = static_cast<G>(sum_t[i * out + o]);
  }
}

template void round_transposed<float>(const double*, float*, int64_t, int64_t, int64_t, int64_t);
template void round_transposed<double>(const double*, double*, int64_t, int64_t, int64_t, int64_t);
template void linear_weight_grad<float>(const float*, const double*, double*, double*, int64_t, int64_t, int64_t,
                                        int64_t, int64_t, int64_t);
template void linear_weight_grad<double>(const double*, const double*, double*, double*, int64_t, int64_t, int64_t,
                                        int64_t, int64_t, int64_t);
template void conv2d_weight_grad<float>(const float*, const WindowGeometry&, const double*, double*, double*, int64_t,
                                        int64_t, int64_t);
template void conv2d_weight_grad<double>(const double*, const WindowGeometry&, const double*, double*, double*, int64_t,
                                         int64_t, int64_t);
template void linear_weight_grad<uint8_t>(const uint8_t*, const double*, double*, double*, int64_t, int64_t, int64_t,
                                        int64_t, int64_t, int64_t);

#define SNN_INSTANTIATE(T)                                                                                  \
  template void linear_dense<T>(const T*, const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t);      \
  template void linear_event<T, T>(const T*, const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t);   \
  template void linear_event<T, uint8_t>(const uint8_t*, const T*, const T*, T*, int64_t, int64_t, int64_t,   \
                                         int64_t);                                                            \
  template void linear_event_steps<T>(const uint8_t*, const T*, const T*, T*, int64_t, int64_t, int64_t,       \
                                      int64_t, int64_t, int64_t);                                             \
  template int64_t count_nonzero<T>(const T*, int64_t);
SNN_INSTANTIATE(float)
SNN_INSTANTIATE(double)
#undef SNN_INSTANTIATE
template int64_t count_nonzero<uint8_t>(const uint8_t*, int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
