#pragma once
// What the per-ISA loop sources of snn::neurons share (linear_loops.cpp,
// conv2d_loops.cpp): SIMD vectors of the build's width, and the listing of
// an input's nonzero entries that every event-driven kernel starts from.
// Internal linkage only (see snn/core/detail/isa_scratch.h); include this
// only from those sources, which define SNN_ISA.

#include <cstdint>
#include <cstring>
#include <immintrin.h>

// 32-byte GCC vectors are passed in registers only with AVX; these helpers
// are all inlined, so the ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace snn::neurons::detail::SNN_ISA {
namespace {

// One SIMD vector of T: 64 bytes on the AVX-512 build, else 32 (two SSE
// registers on the baseline build).
#ifdef __AVX512F__
constexpr int kVectorBytes = 64;
#else
constexpr int kVectorBytes = 32;
#endif
template <typename T>
struct Simd;
template <>
struct Simd<float> {
  typedef float type __attribute__((vector_size(kVectorBytes)));
};
template <>
struct Simd<double> {
  typedef double type __attribute__((vector_size(kVectorBytes)));
};

template <typename V, typename T>
inline __attribute__((always_inline)) V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename V, typename T>
inline __attribute__((always_inline)) void store(T* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}
// (Initialiser lists: GCC makes them one broadcast, where a loop over the
// lanes became 16 masked inserts on the AVX-512 build.)
template <typename V, typename T>
inline __attribute__((always_inline)) V splat(T s) {
  constexpr size_t kLanes = sizeof(V) / sizeof(T);
  if constexpr (kLanes == 16) {
    return V{s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s};
  } else if constexpr (kLanes == 8) {
    return V{s, s, s, s, s, s, s, s};
  } else {
    static_assert(kLanes == 4, "a SIMD vector of 4, 8 or 16 lanes");
    return V{s, s, s, s};
  }
}

#ifdef __AVX2__
// For each 8-bit mask, the positions of its set bits in ascending order,
// then zeros: the permutation that left-packs a group of 8 lanes.
struct LeftPackTable {
  alignas(32) int32_t lanes[256][8];
  constexpr LeftPackTable() : lanes{} {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int b = 0; b < 8; ++b) {
        if (m & (1 << b)) lanes[m][k++] = b;
      }
    }
  }
};
constexpr LeftPackTable kLeftPack{};
#endif

// Whether any of the values of one SIMD vector at p (64 bytes on the
// AVX-512 build, else 32) is nonzero (NaN counts, as with x != 0).
inline bool any_nonzero(const float* p) {
#ifdef __AVX512F__
  return _mm512_cmp_ps_mask(_mm512_loadu_ps(p), _mm512_setzero_ps(), _CMP_NEQ_UQ) != 0;
#elif defined(__AVX2__)
  return _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(p), _mm256_setzero_ps(), _CMP_NEQ_UQ)) != 0;
#else
  const __m128 zero = _mm_setzero_ps();
  return (_mm_movemask_ps(_mm_cmpneq_ps(_mm_loadu_ps(p), zero)) | _mm_movemask_ps(_mm_cmpneq_ps(_mm_loadu_ps(p + 4), zero))) != 0;
#endif
}
inline bool any_nonzero(const double* p) {
#ifdef __AVX512F__
  return _mm512_cmp_pd_mask(_mm512_loadu_pd(p), _mm512_setzero_pd(), _CMP_NEQ_UQ) != 0;
#elif defined(__AVX2__)
  return _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(p), _mm256_setzero_pd(), _CMP_NEQ_UQ)) != 0;
#else
  const __m128d zero = _mm_setzero_pd();
  return (_mm_movemask_pd(_mm_cmpneq_pd(_mm_loadu_pd(p), zero)) | _mm_movemask_pd(_mm_cmpneq_pd(_mm_loadu_pd(p + 2), zero))) != 0;
#endif
}

// The nonzero entries of x[0, n) for n <= 64 as bits (bit i: x[i] != 0,
// NaN counting, as with x != 0); *ones is cleared unless every nonzero
// entry is 1. A convolution's image row, for the weight gradient's masks.
template <typename T>
inline uint64_t nonzero_bits(const T* x, int64_t n, bool* ones) {
  uint64_t bits = 0;
  bool all_ones = true;
  int64_t i = 0;
#ifdef __AVX512F__
  if constexpr (sizeof(T) == 4) {
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    for (; i < n; i += 16) {  // the last group's lanes past n masked off (not loaded)
      const __mmask16 in = n - i >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(in, reinterpret_cast<const float*>(x) + i);
      const __mmask16 m = _mm512_cmp_ps_mask(v, zero, _CMP_NEQ_UQ), u = _mm512_cmp_ps_mask(v, one, _CMP_EQ_OQ);
      all_ones = all_ones && (m & ~u) == 0;
      bits |= static_cast<uint64_t>(m) << i;
    }
  } else {
    const __m512d zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0);
    for (; i < n; i += 8) {
      const __mmask8 in = n - i >= 8 ? __mmask8(0xFF) : static_cast<__mmask8>((1u << (n - i)) - 1);
      const __m512d v = _mm512_maskz_loadu_pd(in, reinterpret_cast<const double*>(x) + i);
      const __mmask8 m = _mm512_cmp_pd_mask(v, zero, _CMP_NEQ_UQ), u = _mm512_cmp_pd_mask(v, one, _CMP_EQ_OQ);
      all_ones = all_ones && (m & ~u) == 0;
      bits |= static_cast<uint64_t>(m) << i;
    }
  }
#elif defined(__AVX2__)
  if constexpr (sizeof(T) == 4) {
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(x) + i);
      const int m = _mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_NEQ_UQ));
      const int u = _mm256_movemask_ps(_mm256_cmp_ps(v, one, _CMP_EQ_OQ));
      all_ones = all_ones && (m & ~u) == 0;
      bits |= static_cast<uint64_t>(m) << i;
    }
  } else {
    const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
    for (; i + 4 <= n; i += 4) {
      const __m256d v = _mm256_loadu_pd(reinterpret_cast<const double*>(x) + i);
      const int m = _mm256_movemask_pd(_mm256_cmp_pd(v, zero, _CMP_NEQ_UQ));
      const int u = _mm256_movemask_pd(_mm256_cmp_pd(v, one, _CMP_EQ_OQ));
      all_ones = all_ones && (m & ~u) == 0;
      bits |= static_cast<uint64_t>(m) << i;
    }
  }
#endif
  for (; i < n; ++i) {
    const bool nz = x[i] != T(0);
    all_ones = all_ones && (!nz || x[i] == T(1));
    bits |= static_cast<uint64_t>(nz) << i;
  }
  *ones = *ones && all_ones;
  return bits;
}

// Lists the nonzero entries of x[0, n) in ascending order (indices and
// values); returns their number, and in *binary whether all of them are 1.
// Spikes are mostly zeros: groups of zeros are skipped with one vector
// test, the others listed without branches. Writes up to 15 entries past
// the count, within idx[0, n) and val[0, n).
template <typename T>
inline int64_t list_nonzero(const T* x, int64_t n, int32_t* idx, T* val, bool* binary) {
  using V = typename Simd<T>::type;
  constexpr int64_t L = sizeof(V) / sizeof(T);
  int64_t k = 0, f = 0;
  bool ones = true;
#ifdef __AVX512F__
  if constexpr (sizeof(T) == 4) {
    // AVX-512 left-packing: the nonzero lanes of 16 moved to the front by
    // one compress (the register form: storing compress is microcoded and
    // slow on Zen 4), then stored whole.
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (; f + 16 <= n; f += 16) {
      const __m512 v = _mm512_loadu_ps(reinterpret_cast<const float*>(x) + f);
      const __mmask16 mask = _mm512_cmp_ps_mask(v, zero, _CMP_NEQ_UQ);
      const __mmask16 unit = _mm512_cmp_ps_mask(v, one, _CMP_EQ_OQ);
      ones = ones && (mask & ~unit) == 0;
      const __m512i at = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int32_t>(f)));
      _mm512_storeu_si512(idx + k, _mm512_maskz_compress_epi32(mask, at));
      _mm512_storeu_ps(reinterpret_cast<float*>(val) + k, _mm512_maskz_compress_ps(mask, v));
      k += __builtin_popcount(static_cast<unsigned>(mask));
    }
  }
#endif
#ifdef __AVX2__
  if constexpr (sizeof(T) == 4) {
    // AVX2 left-packing: the lanes of a group that are nonzero, moved to
    // the front by one permutation from a table indexed by the group's
    // mask; no branch per group or per entry.
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    for (; f + 8 <= n; f += 8) {
      const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(x) + f);
      const int mask = _mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_NEQ_UQ));
      const int unit = _mm256_movemask_ps(_mm256_cmp_ps(v, one, _CMP_EQ_OQ));
      ones = ones && (mask & ~unit) == 0;
      const __m256i order = _mm256_load_si256(reinterpret_cast<const __m256i*>(kLeftPack.lanes[mask]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + k),
                          _mm256_add_epi32(order, _mm256_set1_epi32(static_cast<int32_t>(f))));
      _mm256_storeu_ps(reinterpret_cast<float*>(val) + k, _mm256_permutevar8x32_ps(v, order));
      k += __builtin_popcount(static_cast<unsigned>(mask));
    }
  }
#endif
  for (; f + L <= n; f += L) {
    if (!any_nonzero(x + f)) continue;
#pragma GCC unroll 8
    for (int64_t j = 0; j < L; ++j) {
      const T xv = x[f + j];
      idx[k] = static_cast<int32_t>(f + j);
      val[k] = xv;
      const bool nz = xv != T(0);
      ones = ones && (!nz || xv == T(1));
      k += nz;
    }
  }
  for (; f < n; ++f) {
    const T xv = x[f];
    idx[k] = static_cast<int32_t>(f);
    val[k] = xv;
    const bool nz = xv != T(0);
    ones = ones && (!nz || xv == T(1));
    k += nz;
  }
  *binary = ones;
  return k;
}

// Lists the inputs that spiked among bool (one byte, 0 or 1) spikes x[0, n)
// in ascending order; returns their number. The bytes are tested 32 at a
// time and left-packed 8 at a time like list_nonzero's floats (64 and 16 on
// the AVX-512 build): a quarter of the bytes to read, and no values to list
// (every product is the weight). Writes up to 15 entries past the count,
// within idx[0, n).
inline int64_t list_spikes(const uint8_t* x, int64_t n, int32_t* idx) {
  int64_t k = 0, f = 0;
#ifdef __AVX512BW__
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (; f + 64 <= n; f += 64) {
    const __m512i v = _mm512_loadu_si512(x + f);
    const uint64_t mask = _mm512_test_epi8_mask(v, v);
    if (mask == 0) continue;
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __mmask16 m = static_cast<__mmask16>(mask >> (16 * g));
      const __m512i at = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int32_t>(f + 16 * g)));
      _mm512_storeu_si512(idx + k, _mm512_maskz_compress_epi32(m, at));
      k += __builtin_popcount(static_cast<unsigned>(m));
    }
  }
#endif
#ifdef __AVX2__
  const __m256i zero = _mm256_setzero_si256();
  for (; f + 32 <= n; f += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + f));
    const uint32_t mask = ~static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, zero)));
    if (mask == 0) continue;
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const uint32_t m = (mask >> (8 * g)) & 0xffu;
      const __m256i order = _mm256_load_si256(reinterpret_cast<const __m256i*>(kLeftPack.lanes[m]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + k),
                          _mm256_add_epi32(order, _mm256_set1_epi32(static_cast<int32_t>(f + 8 * g))));
      k += __builtin_popcount(m);
    }
  }
#endif
  for (; f + 8 <= n; f += 8) {
    uint64_t word;
    std::memcpy(&word, x + f, sizeof word);
    if (word == 0) continue;
#pragma GCC unroll 8
    for (int64_t j = 0; j < 8; ++j) {
      idx[k] = static_cast<int32_t>(f + j);
      k += x[f + j] != 0;
    }
  }
  for (; f < n; ++f) {
    idx[k] = static_cast<int32_t>(f);
    k += x[f] != 0;
  }
  return k;
}

// The __builtin_shuffle index vectors that interleave two N-lane vectors
// a and b: lo gives a0 b0 a1 b1 ... (their low halves), hi the same of their
// high halves. I is the integer vector type of the lanes' width.
template <typename I, int N>
inline __attribute__((always_inline)) void interleave_masks(I& lo, I& hi) {
  for (int l = 0; l < N / 2; ++l) {
    lo[2 * l] = l;
    lo[2 * l + 1] = l + N;
    hi[2 * l] = l + N / 2;
    hi[2 * l + 1] = l + N / 2 + N;
  }
}

#ifdef __AVX512F__
// GCC 12's AVX-512 shuffle intrinsics start from _mm512_undefined_ps(), which
// -Wmaybe-uninitialized reports when they are inlined (a false alarm).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// y[j positions + i] = acc[i W + j] for i, j < 16: a 16 x 16 block
// transposed in registers (unpack, then shuffles within and across 128-bit
// lanes), 32 vector moves where the element loop makes 512 scalar ones.
// Data movement only: the values are the element loop's. (The event
// convolution's accumulators, conv2d_loops.cpp; im2col rows, rows_loops.cpp.)
inline __attribute__((always_inline)) void transpose_block(const float* acc, int64_t W, float* y, int64_t positions) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(acc + i * W);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int h = 0; h < 16; h += 8) {
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
    }
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
  for (int j = 0; j < 16; ++j) _mm512_storeu_ps(y + j * positions, r[j]);
}
#pragma GCC diagnostic pop
#endif

}  // namespace
}  // namespace snn::neurons::detail::SNN_ISA
