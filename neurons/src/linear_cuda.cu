// The GPU kernel of snn::Linear (kernels.h: LinearArgs): for one row of x per
// block, the block lists the row's nonzero inputs in ascending order in shared
// memory, then each thread sums its outputs over that list. The additions are
// the CPU kernels' (linear_loops.cpp), in their order, and this file is built
// with --fmad=false, so a GPU reproduces the CPU's values bit for bit; with
// spiking inputs only the inputs that fired cost anything (event-driven).

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels.h"

namespace snn::neurons::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kOutPerThread = 2;                         // outputs per thread, kThreads apart (coalesced)
constexpr int kOutPerBlock = kThreads * kOutPerThread;   // 512 outputs per block
constexpr int kChunk = 1024;                             // inputs listed per pass (shared memory)

template <typename T>
__global__ void linear_kernel(LinearArgs<T> a) {
  __shared__ int32_t list_index[kChunk];
  __shared__ T list_value[kChunk];
  __shared__ int warp_hits[kWarps];
  const int64_t r = blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t o[kOutPerThread];
  T acc[kOutPerThread];
#pragma unroll
  for (int j = 0; j < kOutPerThread; ++j) {
    o[j] = static_cast<int64_t>(blockIdx.y) * kOutPerBlock + j * kThreads + threadIdx.x;
    acc[j] = (a.bias != nullptr && o[j] < a.out) ? a.bias[o[j]] : T(0);
  }
  const T* xr = a.x + r * a.in;
  for (int64_t f0 = 0; f0 < a.in; f0 += kChunk) {
    const int n = static_cast<int>(a.in - f0 < kChunk ? a.in - f0 : kChunk);
    // List this chunk's nonzero inputs, ascending: kThreads at a time, each
    // warp's hits placed after the earlier warps' (ballot + popcount).
    int listed = 0;
    for (int s = 0; s < n; s += kThreads) {
      const int f = s + threadIdx.x;
      const T xv = f < n ? xr[f0 + f] : T(0);
      const bool hit = xv != T(0);
      const unsigned mask = __ballot_sync(0xffffffffu, hit);
      if (lane == 0) warp_hits[warp] = __popc(mask);
      __syncthreads();
      int before = listed, total = listed;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        before += w < warp ? warp_hits[w] : 0;
        total += warp_hits[w];
      }
      if (hit) {
        const int at = before + __popc(mask & ((1u << lane) - 1u));
        list_index[at] = static_cast<int32_t>(f0 + f);
        list_value[at] = xv;
      }
      listed = total;
      __syncthreads();  // the list is complete, and warp_hits may be reused
    }
    // Each output adds its weight-row entries in list (= input) order.
#pragma unroll 4
    for (int i = 0; i < listed; ++i) {
      const T xv = list_value[i];
      const T* w = a.wt + static_cast<int64_t>(list_index[i]) * a.out;
#pragma unroll
      for (int j = 0; j < kOutPerThread; ++j) {
        if (o[j] < a.out) acc[j] = acc[j] + xv * w[o[j]];
      }
    }
    __syncthreads();  // before the next chunk overwrites the list
  }
#pragma unroll
  for (int j = 0; j < kOutPerThread; ++j) {
    if (o[j] < a.out) a.y[r * a.out + o[j]] = acc[j];
  }
}

}  // namespace

template <typename T>
void linear_cuda(const LinearArgs<T>& a, void* stream) {
  if (a.rows == 0 || a.out == 0) return;
  if (a.rows > 0x7fffffffLL || (a.out + kOutPerBlock - 1) / kOutPerBlock > 65535) {
    throw std::runtime_error("linear on the GPU: " + std::to_string(a.rows) + " rows x " + std::to_string(a.out) +
                             " outputs exceed the kernel's grid (2^31 - 1 rows, 65535 x 512 outputs)");
  }
  const dim3 grid(static_cast<unsigned>(a.rows), static_cast<unsigned>((a.out + kOutPerBlock - 1) / kOutPerBlock));
  linear_kernel<T><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("linear kernel launch failed: ") + cudaGetErrorString(err));
}

template void linear_cuda<float>(const LinearArgs<float>&, void*);
template void linear_cuda<double>(const LinearArgs<double>&, void*);

}  // namespace snn::neurons::detail
