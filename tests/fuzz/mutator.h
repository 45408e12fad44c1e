#pragma once
// A deterministic byte-string mutator for the seeded fuzzer: the same seed
// gives the same sequence of mutants on every machine and compiler (its
// random numbers are SplitMix64, fully specified here, not <random>'s
// implementation-defined distributions).

#include <cstdint>
#include <string>
#include <vector>

namespace snn::fuzz {

/// SplitMix64: small, fast, and the same everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  /// Uniform in [0, bound); bound 0 gives 0.
  uint64_t below(uint64_t bound);
  /// True with probability 1 / n.
  bool one_in(uint64_t n) { return below(n) == 0; }

 private:
  uint64_t state_;
};

/// Integers that break size checks: 0, 1, -1, the edges of every signed and
/// unsigned width, powers of two around them.
const std::vector<uint64_t>& interesting_integers();

/// Mutation settings of one target.
struct MutatorOptions {
  size_t max_size = 1 << 16;             ///< mutants never grow beyond this many bytes
  std::vector<std::string> dictionary;   ///< tokens the format gives meaning to
  /// Offsets of big-endian 32-bit header fields (IDX sizes) that get
  /// interesting integers more often than other places.
  std::vector<size_t> be32_fields;
};

/// Applies a stack of 1 to 16 random mutations to `data` (bit flips, byte
/// sets, inserts, deletes, truncation, interesting integers of 1, 2, 4 or 8
/// bytes in either byte order, dictionary tokens, repeated and copied chunks,
/// splices with `other`).
void mutate(std::string& data, const std::string& other, Rng& rng, const MutatorOptions& options);

}  // namespace snn::fuzz
