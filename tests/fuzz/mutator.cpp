#include "mutator.h"

#include <algorithm>
#include <limits>

namespace snn::fuzz {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t Rng::below(uint64_t bound) {
  if (bound == 0) return 0;
  // Multiply-shift: a bias of at most 2^-64 per value, irrelevant here.
  return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64);
}

const std::vector<uint64_t>& interesting_integers() {
  static const std::vector<uint64_t> values = [] {
    std::vector<uint64_t> v = {0, 1, 2, 3, 7, 8, 9, 10, 16, 28, 32, 64, 100, 127, 128, 255, 256, 1000, 1024, 4096,
                               32767, 32768, 65535, 65536, 100000, 1000000};
    for (int bits : {7, 8, 15, 16, 31, 32, 33, 34, 40, 48, 53, 62, 63, 64}) {
      const uint64_t edge = bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t{1} << bits);
      v.push_back(edge);
      v.push_back(edge - 1);
      if (bits < 64) v.push_back(edge + 1);
    }
    const size_t n = v.size();
    for (size_t i = 0; i < n; ++i) v.push_back(0 - v[i]);  // the negatives in two's complement
    return v;
  }();
  return values;
}

namespace {

// Writes `width` bytes of `value` at `at` (clipped to the end of data).
void put_integer(std::string& data, size_t at, uint64_t value, int width, bool big_endian) {
  for (int i = 0; i < width && at + static_cast<size_t>(i) < data.size(); ++i) {
    const int shift = big_endian ? 8 * (width - 1 - i) : 8 * i;
    data[at + static_cast<size_t>(i)] = static_cast<char>((value >> shift) & 0xFF);
  }
}

void mutate_once(std::string& d, const std::string& other, Rng& rng, const MutatorOptions& o) {
  const auto position = [&](bool allow_end) { return static_cast<size_t>(rng.below(d.size() + (allow_end ? 1 : 0))); };
  const auto room = [&] { return o.max_size > d.size() ? o.max_size - d.size() : size_t{0}; };
  switch (rng.below(13)) {
    case 0:  // flip one bit
      if (!d.empty()) d[position(false)] ^= static_cast<char>(1u << rng.below(8));
      break;
    case 1: {  // set one byte to a random or edge value
      if (d.empty()) break;
      static const unsigned char edges[] = {0, 1, 0x7F, 0x80, 0xFF, '0', '9', ' ', '\n', ',', '\0'};
      d[position(false)] = static_cast<char>(rng.one_in(2) ? rng.below(256) : edges[rng.below(sizeof(edges))]);
      break;
    }
    case 2: {  // insert 1 .. 16 random bytes
      const size_t n = std::min<size_t>(1 + rng.below(16), room());
      std::string bytes;
      for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(rng.below(256)));
      d.insert(position(true), bytes);
      break;
    }
    case 3: {  // delete a range
      if (d.empty()) break;
      const size_t at = position(false);
      d.erase(at, 1 + rng.below(std::min<size_t>(d.size() - at, rng.one_in(4) ? d.size() : 16)));
      break;
    }
    case 4:  // truncate
      d.resize(position(true));
      break;
    case 5:
    case 6: {  // an interesting integer of 1, 2, 4 or 8 bytes, either byte order
      if (d.empty()) break;
      const auto& ints = interesting_integers();
      const int width = 1 << rng.below(4);
      put_integer(d, position(false), ints[rng.below(ints.size())], width, rng.one_in(2));
      break;
    }
    case 7: {  // an interesting integer in a known header field
      if (o.be32_fields.empty()) break;
      const auto& ints = interesting_integers();
      const size_t at = o.be32_fields[rng.below(o.be32_fields.size())];
      if (at + 4 <= d.size()) put_integer(d, at, ints[rng.below(ints.size())], 4, true);
      break;
    }
    case 8:
    case 9: {  // a dictionary token, inserted or overwriting
      if (o.dictionary.empty()) break;
      const std::string& token = o.dictionary[rng.below(o.dictionary.size())];
      const size_t at = position(true);
      if (rng.one_in(2) || at + token.size() > d.size()) {
        if (token.size() <= room()) d.insert(at, token);
      } else {
        d.replace(at, token.size(), token);
      }
      break;
    }
    case 10: {  // repeat a chunk several times
      if (d.empty()) break;
      const size_t at = position(false);
      const size_t len = 1 + rng.below(std::min<size_t>(d.size() - at, 64));
      const std::string chunk = d.substr(at, len);
      for (uint64_t k = 1 + rng.below(rng.one_in(8) ? 256 : 8); k > 0 && chunk.size() <= room(); --k) {
        d.insert(at, chunk);
      }
      break;
    }
    case 11: {  // copy a chunk over another place
      if (d.size() < 2) break;
      const size_t from = position(false), to = position(false);
      const size_t len = 1 + rng.below(std::min<size_t>(d.size() - std::max(from, to), 64));
      const std::string chunk = d.substr(from, len);
      d.replace(to, chunk.size(), chunk);
      break;
    }
    case 12: {  // splice: our prefix, the other input's suffix
      if (other.empty()) break;
      const size_t cut = position(true);
      const size_t from = static_cast<size_t>(rng.below(other.size()));
      d = d.substr(0, cut) + other.substr(from, o.max_size > cut ? o.max_size - cut : 0);
      break;
    }
  }
}

}  // namespace

void mutate(std::string& data, const std::string& other, Rng& rng, const MutatorOptions& options) {
  // Mostly a few mutations (inputs stay close to valid and get deep into
  // the reader), sometimes many.
  const uint64_t count = 1 + rng.below(uint64_t{1} << rng.below(5));
  for (uint64_t i = 0; i < count; ++i) mutate_once(data, other, rng, options);
  if (data.size() > options.max_size) data.resize(options.max_size);
}

}  // namespace snn::fuzz
