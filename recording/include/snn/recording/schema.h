#pragma once
/// The recording format (docs/RECORDING.md) as one table: every group,
/// attribute and dataset with its HDF5 type and shape rule. The table is
/// generated from recording/schema.json, which tools/export_nwb.py reads
/// too, so the writer, resume, recover, the analysis and the exporter cannot
/// disagree on a name, a type or a width. HDF5-free: the checks that read a
/// file with it are in snn/recording/detail/schema_check.h.

#include <cstddef>
#include <cstdint>
#include <string>

namespace snn::recording::schema {

/// A value's type in the file (little-endian).
enum class Type { kI16, kU32, kU64, kI64, kF32, kF64, kStr, kEnumU8 };

/// How the writer compresses a growing dataset (see schema.json).
enum class Filter { kNone, kDeflate, kSpikes, kSpikeIds };

/// One dimension of a shape: a number, or a quantity of the recording.
struct Extent {
  enum Kind {
    kFixed,               ///< `fixed`
    kSamples,             ///< the committed samples S
    kSamplesPlus1,        ///< S + 1 (pointers)
    kSamplesTimesSteps,   ///< S * T (report frames)
    kEvents,              ///< the population's spikes, spike_ptr[S]
    kSteps,               ///< T
    kClasses,             ///< width of output_counts
    kLayers,              ///< width of layer_spikes
    kRecorded,            ///< the population's recorded neurons
    kWidth,               ///< a report's recorded neurons
    kWidthPlus1,
  } kind;
  int64_t fixed;
};

struct Group {
  const char* id;
  const char* path;  ///< relative to the root; {pop} = a population
};

struct Attribute {
  const char* id;
  const char* on;  ///< the object it is attached to ("" = the root)
  const char* name;
  Type type;
  int rank;  ///< 0 = scalar
  Extent shape[2];
  bool optional;
};

struct Dataset {
  const char* id;
  const char* path;  ///< relative to the root; {pop} = a population
  Type type;
  size_t length;  ///< a fixed-length string's size (kStr); 0 otherwise
  int rank;       ///< 0 = scalar
  Extent shape[2];
  const char* units;  ///< the "units" attribute; "" = none
  Filter filter;
  bool optional;
  /// Whether the first dimension grows while the run writes.
  constexpr bool growing() const {
    return rank > 0 && (shape[0].kind == Extent::kSamples || shape[0].kind == Extent::kSamplesPlus1 ||
                        shape[0].kind == Extent::kSamplesTimesSteps || shape[0].kind == Extent::kEvents);
  }
};

/// `path` with {pop} replaced by `pop`.
inline std::string at(const char* path, const std::string& pop = "") {
  std::string out = path;
  const auto i = out.find("{pop}");
  if (i != std::string::npos) out.replace(i, 5, pop);
  return out;
}
inline std::string at(const Dataset& d, const std::string& pop = "") { return at(d.path, pop); }
inline std::string at(const Group& g, const std::string& pop = "") { return at(g.path, pop); }

}  // namespace snn::recording::schema

#include "snn/recording/schema_table.h"  // generated from recording/schema.json
