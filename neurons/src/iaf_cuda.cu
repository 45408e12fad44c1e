// CUDA kernel of the Iaf (NEST) pass: one thread per neuron looping over the
// steps with its state in registers, around the same grid step as the CPU
// loop (detail/iaf_step.h). Built with --fmad=false, as the other kernels,
// so that the device rounds exactly like the host.

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "iaf_kernels.h"

namespace snn::neurons::detail {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void iaf_kernel(IafArgs<T> a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.n) return;
  T v = a.v[i], i_ex = a.i_ex[i], i_in = a.i_in[i], i0 = a.i0[i];
  int32_t ref = a.ref[i];
  const T i_e = a.i_e ? a.c.i_e + a.i_e[i % a.i_e_period] : a.c.i_e;
  for (int64_t t = 0; t < a.steps; ++t) {
    const int64_t j = t * a.n + i;
    T h;
    const bool spike = iaf_step<T>(a.ex[j], a.in ? a.in[j] : T(0), a.current ? a.current[j] : T(0), i_e, v, i_ex, i_in,
                                   i0, ref, h, a.c);
    a.spikes[j] = spike ? T(1) : T(0);
    if (a.v_trace) a.v_trace[j] = v + a.v_offset;
    if (a.h_trace) a.h_trace[j] = h + a.v_offset;
  }
  a.v[i] = v;
  a.i_ex[i] = i_ex;
  a.i_in[i] = i_in;
  a.i0[i] = i0;
  a.ref[i] = ref;
}

}  // namespace

template <typename T>
void iaf_forward_cuda(const IafArgs<T>& a, void* stream) {
  if (a.n == 0) return;
  iaf_kernel<T><<<static_cast<int>((a.n + kThreads - 1) / kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(a);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) throw std::runtime_error(std::string("iaf kernel launch failed: ") + cudaGetErrorString(err));
}

template void iaf_forward_cuda<float>(const IafArgs<float>&, void*);
template void iaf_forward_cuda<double>(const IafArgs<double>&, void*);

}  // namespace snn::neurons::detail
