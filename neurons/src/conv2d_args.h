#pragma once
// The arguments of the event-driven Conv2d loops (conv2d_loops.cpp), set up
// by conv2d.cpp: plain data, no code (the loops are compiled per ISA).

#include <cstdint>

namespace snn::neurons::detail {

template <typename T>
struct Conv2dEventArgs {
  int64_t channels = 0, pixels = 0;  // Cin and H W of one image
  int64_t outputs = 0;               // OH OW output positions
  int64_t out_channels = 0;          // Cout
  int64_t width = 0;                 // TW: Cout rounded up to 16, the accumulators' and weights' row length
  int64_t taps = 0;                  // KH KW
  const T* weight = nullptr;         // [Cin KH KW, TW]: row f = (c KH + ky) KW + kx, zero-padded columns
  const T* bias = nullptr;           // [TW] zero-padded, or null
  // Where input pixel p = y W + x sends its value: entries [first[p],
  // first[p + 1]) of `output` (the position oy OW + ox) and `tap` (ky KW +
  // kx), in ascending tap order.
  const int32_t* first = nullptr;
  const int32_t* output = nullptr;
  const int32_t* tap = nullptr;
};

/// The input gradient of a stride-1, undilated Conv2d (conv2d_grad_loops.cpp):
/// gx [N, Cin, H, W] from gy [N, Cout, OH, OW], padding at most KH - 1 and
/// KW - 1 (so that every pixel has a tap inside some window).
template <typename T>
struct Conv2dInputGradArgs {
  int64_t in_channels = 0, H = 0, W = 0;    // Cin, H, W of gx's images
  int64_t out_channels = 0, OH = 0, OW = 0; // Cout, OH, OW of gy's images
  int64_t KH = 0, KW = 0, pH = 0, pW = 0;
  const T* weight = nullptr;  // [KH KW, Cout, Cin]: tap (ky KW + kx), then co, then ci
};

}  // namespace snn::neurons::detail
