// CPU loop of the Poisson encoder for a range of samples: one Philox call
// gives the 4 uniforms of a group at one step (element layout: philox.h).
// Compiled for baseline x86-64, AVX2 and AVX-512 (namespace SNN_ISA; the
// AVX-512 build runs two tiles' rounds in one 16-lane vector);
// poisson_cpu.cpp picks one at run time. Integer Philox rounds and a float
// compare: results are the same on all.

#include <cstddef>

#include "kernels.h"
#include "snn/core/detail/isa_scratch.h"
#include "snn/encoders/detail/philox.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace snn::encoders::detail::SNN_ISA {

// The blocks of 8 consecutive groups g0 .. g0+7: w[j 8 + l] = word j of group g0 + l.
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
inline __m256i vxor(__m256i a, __m256i b) { return _mm256_xor_si256(a, b); }
inline void splat(uint32_t x, __m256i* v) { *v = _mm256_set1_epi32(static_cast<int>(x)); }

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics (vpmuludq, shifts, inserts) start from
// _mm512_undefined_epi32(), which -Wmaybe-uninitialized reports when they
// are inlined (a false alarm, as in conv2d_loops.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// AVX-512: the same on 16 lanes.
inline __m512i mulhi_lo(__m512i a, __m512i m, __m512i* lo) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(m, 32));
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  return _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
}
inline __m512i vxor(__m512i a, __m512i b) { return _mm512_xor_si512(a, b); }
inline void splat(uint32_t x, __m512i* v) { *v = _mm512_set1_epi32(static_cast<int>(x)); }
#endif

// Philox4x32-10's rounds on P vectors of blocks, counters in (c0..c3),
// words out. Each round's multiplies wait for the last round's, so P
// independent chains keep the multiplier busy where one alone would mostly
// wait for it.
template <typename V, int P>
inline void philox_rounds(uint64_t seed, V (&c0)[P], V (&c1)[P], V (&c2)[P], V (&c3)[P]) {
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  V m0, m1, kk0, kk1;
  splat(0xD2511F53u, &m0);
  splat(0xCD9E8D57u, &m1);
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    splat(k0, &kk0);
    splat(k1, &kk1);
    for (int i = 0; i < P; ++i) {
      V lo0, lo1;
      const V hi0 = mulhi_lo(c0[i], m0, &lo0);
      const V hi1 = mulhi_lo(c2[i], m1, &lo1);
      c0[i] = vxor(vxor(hi1, c1[i]), kk0);
      c2[i] = vxor(vxor(hi0, c3[i]), kk1);
      c1[i] = lo1;
      c3[i] = lo0;
    }
  }
}

// The blocks of N tiles at once, tile i (groups g0[i] .. g0[i]+7) in the 8
// lanes of its own vector.
template <int N>
inline void philox_tiles8(uint64_t seed, uint64_t sample, uint32_t step, const uint32_t (&g0)[N],
                          uint32_t (&w)[N][kTile]) {
  __m256i c0[N], c1[N], c2[N], c3[N];
  for (int i = 0; i < N; ++i) {
    c0[i] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(g0[i])), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    splat(step, &c1[i]);
    splat(static_cast<uint32_t>(sample), &c2[i]);
    splat(static_cast<uint32_t>(sample >> 32), &c3[i]);
  }
  philox_rounds(seed, c0, c1, c2, c3);
  for (int i = 0; i < N; ++i) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[i] + 0 * kGroupsPerTile), c0[i]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[i] + 1 * kGroupsPerTile), c1[i]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[i] + 2 * kGroupsPerTile), c2[i]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[i] + 3 * kGroupsPerTile), c3[i]);
  }
}

#if defined(__AVX512F__)
// AVX-512: tiles 2i and 2i + 1 in the low and high 8 lanes of one vector
// (an odd N's last tile alone, 8 lanes).
template <int N>
inline void philox_tiles(uint64_t seed, uint64_t sample, uint32_t step, const uint32_t (&g0)[N],
                         uint32_t (&w)[N][kTile]) {
  if constexpr (N % 2 != 0) {
    philox_tiles8<N>(seed, sample, step, g0, w);
  } else {
    constexpr int P = N / 2;
    __m512i c0[P], c1[P], c2[P], c3[P];
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
    for (int i = 0; i < P; ++i) {
      const __m512i base = _mm512_inserti64x4(_mm512_set1_epi32(static_cast<int>(g0[2 * i])),
                                              _mm256_set1_epi32(static_cast<int>(g0[2 * i + 1])), 1);
      c0[i] = _mm512_add_epi32(base, lane);
      splat(step, &c1[i]);
      splat(static_cast<uint32_t>(sample), &c2[i]);
      splat(static_cast<uint32_t>(sample >> 32), &c3[i]);
    }
    philox_rounds(seed, c0, c1, c2, c3);
    for (int i = 0; i < P; ++i) {
      const __m512i c[4] = {c0[i], c1[i], c2[i], c3[i]};
      for (int j = 0; j < 4; ++j) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[2 * i] + j * kGroupsPerTile), _mm512_castsi512_si256(c[j]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(w[2 * i + 1] + j * kGroupsPerTile),
                            _mm512_extracti64x4_epi64(c[j], 1));
      }
    }
  }
}
#pragma GCC diagnostic pop
#else
template <int N>
inline void philox_tiles(uint64_t seed, uint64_t sample, uint32_t step, const uint32_t (&g0)[N],
                         uint32_t (&w)[N][kTile]) {
  philox_tiles8<N>(seed, sample, step, g0, w);
}
#endif  // __AVX512F__
#else
template <int N>
inline void philox_tiles(uint64_t seed, uint64_t sample, uint32_t step, const uint32_t (&g0)[N],
                         uint32_t (&w)[N][kTile]) {
  for (int i = 0; i < N; ++i) {
    for (int64_t l = 0; l < kGroupsPerTile; ++l) {
      const Philox4x32 r = draw_group(seed, sample, step, g0[i] + static_cast<uint32_t>(l));
      for (int j = 0; j < 4; ++j) w[i][j * kGroupsPerTile + l] = r.v[j];
    }
  }
}
#endif

// Spikes of one tile from its Philox words, stored word j of group l at
// j kGroupsPerTile + l: that is the element the word draws for (philox.h),
// so one loop over the 32 elements in order (two AVX-512 vectors; as 4
// loops of 8 it left the encoder at 1.4 ns per element whatever the
// rounds' width).
template <typename T, typename S>
inline void spike_tile(const uint32_t (&w)[kTile], const T* __restrict__ p, T scale, S* __restrict__ out) {
#pragma omp simd
  for (int64_t e = 0; e < kTile; ++e) out[e] = static_cast<S>(static_cast<T>(uniform01(w[e])) < p[e] * scale);
}

// Spikes of the N tiles k[0..N-1] of one sample at one step (p and out at
// the sample's row), their Philox blocks drawn together.
template <int N, typename T, typename S>
inline void draw_tiles(const PoissonArgs<T, S>& a, uint64_t sample, uint32_t step, const int64_t* k,
                       const T* __restrict__ p, S* __restrict__ out) {
  uint32_t w[N][kTile];  // tile i's word j of group l at w[i][j kGroupsPerTile + l]
  uint32_t g[N];
  for (int i = 0; i < N; ++i) g[i] = static_cast<uint32_t>(k[i] * kGroupsPerTile);
  philox_tiles<N>(a.seed, sample, step, g, w);
  for (int i = 0; i < N; ++i) spike_tile(w[i], p + k[i] * kTile, a.scale, out + k[i] * kTile);
}

template <typename T, typename S>
void poisson_range(const PoissonArgs<T, S>& a, int64_t b0, int64_t b1) {
  const int64_t tiles = a.features / kTile, rest = a.features % kTile;
  const T scale = a.scale;
  auto tile_live = [scale](const T* p) {
    // (An int, not a bool: GCC vectorises an int OR-reduction, but ran the
    // bool one as a scalar loop that cost a third of the encoder.)
    int live = 0;
#pragma omp simd reduction(| : live)
    for (int64_t e = 0; e < kTile; ++e) live |= static_cast<int>(p[e] * scale > T(0));
    return live != 0;
  };
  // (Not std::vector: see isa_scratch.h.)
  thread_local snn::detail::Scratch<int64_t> live_buffer, dead_buffer;
  int64_t* const live_list = live_buffer.reserve(tiles);
  int64_t* const dead_runs = dead_buffer.reserve(2 * tiles);  // [first, last) tiles that cannot spike, in pairs
  int64_t n_live = 0, n_dead = 0;
  // The partial last tile, padded to a whole one (zero probabilities, never
  // written back): drawn like the others, its Philox words are the same.
  T p_pad[kTile] = {};
  S out_pad[kTile];
  bool pad_live = false;
  for (int64_t b = b0; b < b1; ++b) {
    const uint64_t sample = static_cast<uint64_t>(a.sample[b]);
    for (int64_t t = 0; t < a.steps; ++t) {
      const T* __restrict__ p = a.p + t * a.p_step_stride + b * a.features;
      const uint32_t step = static_cast<uint32_t>(a.first_step + t);
      S* __restrict__ out = a.out + (t * a.batch + b) * a.features;
      // A tile whose probabilities are all <= 0 (an image's blank border,
      // most of MNIST) cannot spike, whatever its draws (u >= 0): its Philox
      // blocks are skipped, which changes no result. For a constant input
      // the live tiles are found once per sample, not at every step.
      if (t == 0 || a.p_step_stride != 0) {
        n_live = 0;
        n_dead = 0;
        for (int64_t k = 0; k < tiles; ++k) {
          if (tile_live(p + k * kTile)) {
            live_list[n_live++] = k;
          } else if (n_dead > 0 && dead_runs[2 * n_dead - 1] == k) {
            dead_runs[2 * n_dead - 1] = k + 1;
          } else {
            dead_runs[2 * n_dead] = k;
            dead_runs[2 * n_dead + 1] = k + 1;
            ++n_dead;
          }
        }
        for (int64_t e = 0; e < rest; ++e) p_pad[e] = p[tiles * kTile + e];
        pad_live = rest > 0 && tile_live(p_pad);
      }
      for (int64_t d = 0; d < n_dead; ++d) {
        for (int64_t e = dead_runs[2 * d] * kTile; e < dead_runs[2 * d + 1] * kTile; ++e) out[e] = S(0);
      }
      // One SIMD lane per group: 8 Philox blocks per tile, several tiles at
      // once, then 4 contiguous rows per tile.
      int64_t i = 0;
#if defined(__AVX512F__)
      // (Four 16-lane chains, as the AVX2 build's four 8-lane ones.)
      for (; i + 8 <= n_live; i += 8) draw_tiles<8>(a, sample, step, live_list + i, p, out);
#endif
      for (; i + 4 <= n_live; i += 4) draw_tiles<4>(a, sample, step, live_list + i, p, out);
      for (; i + 2 <= n_live; i += 2) draw_tiles<2>(a, sample, step, live_list + i, p, out);
      for (; i < n_live; ++i) draw_tiles<1>(a, sample, step, live_list + i, p, out);
      if (rest > 0) {
        if (pad_live) {
          const int64_t k = tiles;
          uint32_t w[1][kTile];
          const uint32_t g[1] = {static_cast<uint32_t>(k * kGroupsPerTile)};
          philox_tiles<1>(a.seed, sample, step, g, w);
          spike_tile(w[0], p_pad, scale, out_pad);
        }
        for (int64_t e = 0; e < rest; ++e) out[tiles * kTile + e] = pad_live ? out_pad[e] : S(0);
      }
    }
  }
}

template void poisson_range<float, float>(const PoissonArgs<float, float>&, int64_t, int64_t);
template void poisson_range<float, uint8_t>(const PoissonArgs<float, uint8_t>&, int64_t, int64_t);
template void poisson_range<double, double>(const PoissonArgs<double, double>&, int64_t, int64_t);
template void poisson_range<double, uint8_t>(const PoissonArgs<double, uint8_t>&, int64_t, int64_t);

}  // namespace snn::encoders::detail::SNN_ISA
