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

}  // namespace snn::neurons::detail
