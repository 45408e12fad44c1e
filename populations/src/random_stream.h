#pragma once
// A sequence of random numbers from the counter-based Philox generator:
// the k-th number of stream (seed; purpose, projection, id) depends on
// nothing else, so whatever draws it (any thread, any order of streams)
// gets the same value.

#include <cmath>
#include <cstdint>

#include "snn/encoders/detail/philox.h"

namespace snn::populations::detail {

/// What a stream is for: one counter word keeps the purposes apart.
enum class Purpose : uint32_t {
  kSources = 1,   // a target's sources
  kWeights = 2,   // a target's synapse weights
  kDelays = 3,    // a target's synapse delays
  kPairs = 4,     // fixed_total_number's pairs
  kPoisson = 5,   // a Poisson drive's counts (id: trial, projection word: step)
};

class RandomStream {
 public:
  /// Counter = (block, id lo, id hi | purpose << 24, projection); key = seed.
  /// id < 2^40.
  RandomStream(uint64_t seed, Purpose purpose, uint32_t projection, uint64_t id)
      : k0_(static_cast<uint32_t>(seed)),
        k1_(static_cast<uint32_t>(seed >> 32)),
        c1_(static_cast<uint32_t>(id)),
        c2_(static_cast<uint32_t>(id >> 32) | (static_cast<uint32_t>(purpose) << 24)),
        c3_(projection) {}

  uint32_t next() {
    if (pos_ == 4) {
      block_ = encoders::detail::philox4x32_10(counter_++, c1_, c2_, c3_, k0_, k1_);
      pos_ = 0;
    }
    return block_.v[pos_++];
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() {
    const uint64_t a = next() >> 5, b = next() >> 6;
    return static_cast<double>((a << 26) | b) * 0x1.0p-53;
  }
  /// Uniform in (0, 1].
  double uniform_open0() { return 1.0 - uniform(); }
  /// Uniform integer in [0, n), n <= 2^32 (Lemire's multiply-shift; the
  /// bias, below n / 2^32, is far below any statistic's resolution).
  uint32_t below(uint64_t n) { return static_cast<uint32_t>((static_cast<uint64_t>(next()) * n) >> 32); }
  /// Standard normal (Box-Muller, one value per two uniforms).
  double normal() {
    const double r = std::sqrt(-2.0 * std::log(uniform_open0()));
    return r * std::cos(2.0 * M_PI * uniform());
  }
  /// Poisson count of mean lambda >= 0 by inversion, in pieces of mean at
  /// most 32 so that exp(-lambda) never underflows.
  int64_t poisson(double lambda) {
    int64_t total = 0;
    while (lambda > 0) {
      const double part = lambda > 32 ? 32 : lambda;
      lambda -= part;
      const double u = uniform();
      double p = std::exp(-part), f = p;
      int64_t k = 0;
      while (u >= f && k < 1000) {
        ++k;
        p *= part / static_cast<double>(k);
        f += p;
      }
      total += k;
    }
    return total;
  }

 private:
  uint32_t k0_, k1_, c1_, c2_, c3_;
  uint32_t counter_ = 0;
  encoders::detail::Philox4x32 block_{};
  int pos_ = 4;
};

}  // namespace snn::populations::detail
