#pragma once
// The output tile of snn::Linear's packed layouts: the packed weights
// [tiles, in, 16] and the packed output gradient [tiles, rows, 16] that
// linear.cpp writes and the per-ISA loops (linear_loops.cpp, rows_loops.cpp)
// read. One number for all of them: the packing is the same on every build.

#include <cstdint>

namespace snn::neurons::detail {

/// Output columns per packed tile: two 32-byte vectors of floats (one on
/// the AVX-512 build).
constexpr int64_t kLinearTile = 16;

}  // namespace snn::neurons::detail
