#pragma once
/// Counter-based Philox4x32-10 (Salmon et al., "Parallel random numbers: as
/// easy as 1, 2, 3", SC'11), host and device. Stateless: the 4 words of
/// output depend only on (counter, key), so a spike train depends only on
/// (seed, sample, step, element) and never on batch layout, threads, devices
/// or pipeline stages. Checked against the published known-answer vectors and
/// against ATen's at::Philox4_32 (philox_engine) in the tests.

#include <cstdint>

#include "snn/core/host_device.h"

namespace snn::encoders::detail {

struct Philox4x32 {
  uint32_t v[4];
};

SNN_HOST_DEVICE void philox_round(uint32_t& c0, uint32_t& c1, uint32_t& c2, uint32_t& c3, uint32_t k0, uint32_t k1) {
  const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
  const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  const uint32_t n0 = hi1 ^ c1 ^ k0;
  const uint32_t n2 = hi0 ^ c3 ^ k1;
  c0 = n0;
  c1 = lo1;
  c2 = n2;
  c3 = lo0;
}

/// Philox4x32 with 10 rounds of the counter (c0..c3) under the key (k0, k1).
SNN_HOST_DEVICE Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                         uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    philox_round(c0, c1, c2, c3, k0, k1);
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

/// Uniform float in [0, 1) from the top 24 bits: exact in float and double,
/// so a spike does not depend on the input dtype beyond the input's value.
SNN_HOST_DEVICE float uniform01(uint32_t r) { return static_cast<float>(r >> 8) * 5.9604644775390625e-08f; }

/// The Philox block of one group at one step of one sample.
/// Counter = (group, step, sample index lo, hi); key = seed.
SNN_HOST_DEVICE Philox4x32 draw_group(uint64_t seed, uint64_t sample, uint32_t step, uint32_t group) {
  return philox4x32_10(group, step, static_cast<uint32_t>(sample), static_cast<uint32_t>(sample >> 32),
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

/// Which word of which group's block drives element e of a sample.
///
/// Elements come in tiles of kTile = 32; tile k uses groups 8k .. 8k+7, and
/// element 32k + 8j + l takes word j of group 8k + l. Consecutive elements
/// thus take the same word of consecutive groups, so a SIMD lane per group
/// writes contiguous elements (the CPU loop) and a thread per group writes
/// 4 coalesced rows (the CUDA kernel). Any element's draw depends only on
/// (seed, sample, step, e).
constexpr int64_t kTile = 32;
constexpr int64_t kGroupsPerTile = 8;

SNN_HOST_DEVICE uint32_t group_of(int64_t e) {
  return static_cast<uint32_t>((e / kTile) * kGroupsPerTile + e % kGroupsPerTile);
}
SNN_HOST_DEVICE int word_of(int64_t e) { return static_cast<int>((e % kTile) / kGroupsPerTile); }
/// Element that word j of group g drives (may lie past the sample's end).
SNN_HOST_DEVICE int64_t element_of(uint32_t g, int j) {
  return (static_cast<int64_t>(g) / kGroupsPerTile) * kTile + j * kGroupsPerTile + g % kGroupsPerTile;
}

}  // namespace snn::encoders::detail
