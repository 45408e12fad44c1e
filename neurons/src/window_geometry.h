#pragma once
// The sizes of one window operation (max pooling, im2col rows) as plain
// numbers: what windows.cpp hands its loops, including the per-ISA ones
// (rows_loops.cpp), which see no LibTorch.

#include <cstdint>

namespace snn::neurons::detail {

/// N images of C planes H x W; windows KH x KW at stride (sH, sW), padding
/// (pH, pW) and dilation (dH, dW), OH x OW of them per plane.
struct WindowGeometry {
  int64_t N, C, H, W, OH, OW, KH, KW, sH, sW, pH, pW, dH = 1, dW = 1;
};

}  // namespace snn::neurons::detail
