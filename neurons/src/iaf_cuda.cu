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
  iaf_neuron_steps(a, i);
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
