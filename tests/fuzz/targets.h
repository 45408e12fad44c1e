#pragma once
// The fuzz targets: each reader of untrusted files snnsim has, wrapped so
// that the driver (fuzz_main.cpp) can feed it mutated inputs.

#include <stdexcept>
#include <string>
#include <vector>

#include "mutator.h"

namespace snn::fuzz {

/// Thrown by a target's checks when a reader ACCEPTED an input but returned
/// something that breaks its own contract (e.g. a non-finite CSV value): a
/// defect, reported as a failure like a crash.
struct Defect : std::logic_error {
  using std::logic_error::logic_error;
};

struct Target {
  std::string name;
  std::string file_name;  ///< the input's name in the work folder (its extension helps a human replaying it)
  MutatorOptions mutator;
  /// Byte mutations are applied to one input in this many (recordings are
  /// mostly edited through HDF5 instead, see `prepare`).
  uint64_t mutate_bytes_one_in = 1;
  /// Whether accepted mutants join the pool. Not for recordings: HDF5 stamps
  /// edited objects with the time of day, so their bytes would differ from
  /// run to run, and with them every later input.
  bool grow_pool = true;
  /// Writes the input to `path` (`bytes_mutated`: the driver's byte
  /// mutations changed it); structure-aware targets change it further here
  /// (gzip an IDX file, edit a recording's datasets). Default: the bytes as
  /// they are.
  void (*prepare)(const std::string& bytes, bool bytes_mutated, Rng& rng, const std::string& path) = nullptr;
  /// Runs the readers on the file at `path`: returns when they accept it,
  /// throws their error when they reject it, throws Defect when what they
  /// returned is wrong. Deterministic: the same file, the same outcome.
  void (*check)(const std::string& path) = nullptr;
};

Target idx_target();
Target csv_target();
Target config_target();
Target recording_target();

/// Small file helpers (POSIX: libtorch.so exports a std::filesystem of its own).
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& bytes);

}  // namespace snn::fuzz
