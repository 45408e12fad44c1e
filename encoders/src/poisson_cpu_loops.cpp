// CPU loop of the Poisson encoder for a range of samples: one Philox call
// gives the 4 uniforms of a group at one step (element layout: philox.h). Compiled twice,
// for baseline x86-64 and for AVX2 (namespace SNN_ISA); poisson_cpu.cpp picks
// one at run time. Integer Philox rounds and a float compare: results are
// the same on both.

#include "kernels.h"
#include "snn/encoders/detail/philox.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace snn::encoders::detail::SNN_ISA {

// The blocks of 8 consecutive groups g0 .. g0+7: w[j][l] = word j of group g0 + l.
#if defined(__AVX2__)
// AVX2: the 8 groups in the 8 lanes. GCC's own vectorisation of the 32x32->64
// products is poor, so the rounds are written with vpmuludq on the even and
// odd lanes. Integer arithmetic: the same words as draw_group.
inline __m256i mulhi_lo(__m256i a, __m256i m, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m);                                         // lanes 0,2,4,6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(m, 32));  // lanes 1,3,5,7
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  return _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

inline void philox_tile(uint64_t seed, uint64_t sample, uint32_t step, uint32_t g0, uint32_t (&w)[4][kGroupsPerTile]) {
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(g0)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i c1 = _mm256_set1_epi32(static_cast<int>(step));
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(sample)));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(sample >> 32)));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    __m256i lo0, lo1;
    const __m256i hi0 = mulhi_lo(c0, m0, &lo0);
    const __m256i hi1 = mulhi_lo(c2, m1, &lo1);
    const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[0]), c0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[1]), c1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[2]), c2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[3]), c3);
}
#else
inline void philox_tile(uint64_t seed, uint64_t sample, uint32_t step, uint32_t g0, uint32_t (&w)[4][kGroupsPerTile]) {
  for (int64_t l = 0; l < kGroupsPerTile; ++l) {
    const Philox4x32 r = draw_group(seed, sample, step, g0 + static_cast<uint32_t>(l));
    for (int j = 0; j < 4; ++j) w[j][l] = r.v[j];
  }
}
#endif

template <typename T, typename S>
void poisson_range(const PoissonArgs<T, S>& a, int64_t b0, int64_t b1) {
  const int64_t tiles = a.features / kTile;
  const T scale = a.scale;
  for (int64_t b = b0; b < b1; ++b) {
    const uint64_t sample = static_cast<uint64_t>(a.sample[b]);
    for (int64_t t = 0; t < a.steps; ++t) {
      const T* __restrict__ p = a.p + t * a.p_step_stride + b * a.features;
      const uint32_t step = static_cast<uint32_t>(a.first_step + t);
      S* __restrict__ out = a.out + (t * a.batch + b) * a.features;
      for (int64_t k = 0; k < tiles; ++k) {
        // A tile whose probabilities are all <= 0 (an image's blank border,
        // most of MNIST) cannot spike, whatever its draws (u >= 0): its
        // Philox blocks are skipped, which changes no result.
        bool live = false;
#pragma omp simd reduction(| : live)
        for (int64_t e = 0; e < kTile; ++e) live = live | (p[k * kTile + e] * scale > T(0));
        if (!live) {
          for (int64_t e = 0; e < kTile; ++e) out[k * kTile + e] = S(0);
          continue;
        }
        // One SIMD lane per group: 8 Philox blocks, then 4 contiguous rows.
        uint32_t w[4][kGroupsPerTile];
        philox_tile(a.seed, sample, step, static_cast<uint32_t>(k * kGroupsPerTile), w);
        for (int j = 0; j < 4; ++j) {
          const int64_t e0 = k * kTile + j * kGroupsPerTile;
#pragma omp simd
          for (int64_t l = 0; l < kGroupsPerTile; ++l) {
            out[e0 + l] = static_cast<S>(static_cast<T>(uniform01(w[j][l])) < p[e0 + l] * scale);
          }
        }
      }
      // The partial last tile, element by element.
      for (int64_t e = tiles * kTile; e < a.features; ++e) {
        const Philox4x32 r = draw_group(a.seed, sample, step, group_of(e));
        out[e] = static_cast<S>(static_cast<T>(uniform01(r.v[word_of(e)])) < p[e] * scale);
      }
    }
  }
}

template void poisson_range<float, float>(const PoissonArgs<float, float>&, int64_t, int64_t);
template void poisson_range<float, uint8_t>(const PoissonArgs<float, uint8_t>&, int64_t, int64_t);
template void poisson_range<double, double>(const PoissonArgs<double, double>&, int64_t, int64_t);
template void poisson_range<double, uint8_t>(const PoissonArgs<double, uint8_t>&, int64_t, int64_t);

}  // namespace snn::encoders::detail::SNN_ISA
