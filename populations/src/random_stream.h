#pragma once
// A sequence of random numbers from the counter-based Philox generator:
// the k-th number of stream (seed; purpose, projection, id) depends on
// nothing else, so whatever draws it (any thread, any order of streams)
// gets the same value.

#include <cmath>
#include <cstdint>

#include "snn/encoders/detail/philox.h"
#include "snn/populations/connectivity.h"

namespace snn::populations::detail {

/// What a stream is for: one counter word keeps the purposes apart.
enum class Purpose : uint32_t {
  kSources = 1,   // a target's sources
  kWeights = 2,   // a target's synapse weights
  kDelays = 3,    // a target's synapse delays
  kPairs = 4,     // fixed_total_number's pairs
  kInitial = 6,   // initial potentials (id: trial; projection word: the population; words 4i..4i+3: neuron i)
  kPoisson = 5,   // a Poisson drive's counts (id: trial << 28 | step; projection word: the drive; word i: neuron i)
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
  /// Uniform in [0, 1) with 32 random bits (one word).
  double uniform32() { return static_cast<double>(next()) * 0x1.0p-32; }
  /// Jumps to word `word` of the stream (the next call of next() returns it).
  void seek(uint64_t word) {
    counter_ = static_cast<uint32_t>(word / 4);
    block_ = encoders::detail::philox4x32_10(counter_++, c1_, c2_, c3_, k0_, k1_);
    pos_ = static_cast<int>(word % 4);
  }

 private:
  uint32_t k0_, k1_, c1_, c2_, c3_;
  uint32_t counter_ = 0;
  encoders::detail::Philox4x32 block_{};
  int pos_ = 4;
};

/// A value of the distribution from the stream.
inline double draw(const Distribution& d, RandomStream& s) {
  switch (d.kind) {
    case Distribution::Kind::kConstant:
      return d.a;
    case Distribution::Kind::kUniform:
      return d.a + (d.b - d.a) * s.uniform();
    case Distribution::Kind::kNormal:
      return d.a + d.b * s.normal();
  }
  return d.a;
}

}  // namespace snn::populations::detail
