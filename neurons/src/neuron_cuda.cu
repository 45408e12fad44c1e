// CUDA kernels of the fused neuron passes: one thread per neuron looping over
// the steps with v in a register, around the same neuron-step as the CPU
// loops (detail/neuron_step.h). Built with --fmad=false so that the device
// rounds exactly like the host: the CPU tests check what runs here.

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels.h"

namespace snn::neurons::detail {
namespace {

constexpr int kThreads = 256;

void check_launch(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " kernel launch failed: " + cudaGetErrorString(err));
  }
}

int blocks_for(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

template <ChargeForm F, bool kDivide, typename T, typename S>
__global__ void forward_kernel(ForwardArgs<T, S> a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.n) return;
  T v = a.v[i];
  int32_t ref = a.ref[i];
  const bool trace = a.h_trace != nullptr;
  for (int64_t t = 0; t < a.steps; ++t) {
    const int64_t j = t * a.n + i;
    const T x = a.x[a.x_constant ? i : j];
    T h;
    bool active;
    // Uniform branches: every thread of the launch takes the same one.
    bool spike;
    if (a.c.refractory > 0) {
      spike = a.c.hard_reset ? step<F, kDivide, true, true>(x, v, ref, h, active, a.c)
                             : step<F, kDivide, false, true>(x, v, ref, h, active, a.c);
    } else {
      spike = a.c.hard_reset ? step<F, kDivide, true, false>(x, v, ref, h, active, a.c)
                             : step<F, kDivide, false, false>(x, v, ref, h, active, a.c);
    }
    a.spikes[j] = static_cast<S>(spike);
    if (trace) {
      a.h_trace[j] = h;
      a.v_trace[j] = v;
      a.active_trace[j] = static_cast<uint8_t>(active);
    }
  }
  a.v[i] = v;
  a.ref[i] = ref;
}

template <ChargeForm F, bool kDivide, typename T>
__global__ void backward_kernel(BackwardArgs<T> a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.n) return;
  const T gx_per_gh = dh_dx<F, kDivide>(a.c);
  T gv = a.grad_v_final ? a.grad_v_final[i] : T(0);
  T gk = T(0);
  for (int64_t t = a.steps - 1; t >= 0; --t) {
    const int64_t j = t * a.n + i;
    const bool active = a.active_trace[j] != 0;
    const T gs = a.grad_spikes ? a.grad_spikes[j] : T(0);
    const T gh = a.c.hard_reset ? backward_step<F, kDivide, true>(a.h_trace[j], active, gs, gv, a.c, a.b)
                                : backward_step<F, kDivide, false>(a.h_trace[j], active, gs, gv, a.c, a.b);
    a.grad_x[j] = active ? gh * gx_per_gh : T(0);
    if (a.grad_k_partial && active) {
      const T v_prev = t > 0 ? a.v_trace[j - a.n] : a.v0[i];
      gk += gh * dh_dk<F>(v_prev, a.x[j], a.c);
    }
  }
  a.grad_v0[i] = gv;
  if (a.grad_k_partial) a.grad_k_partial[i] = gk;
}

template <typename T, typename S>
struct ForwardLaunch {
  const ForwardArgs<T, S>& a;
  cudaStream_t stream;
  template <ChargeForm F, bool kDivide>
  void operator()() const {
    if (a.n == 0) return;
    forward_kernel<F, kDivide, T, S><<<blocks_for(a.n), kThreads, 0, stream>>>(a);
    check_launch("neuron forward");
  }
};

template <typename T>
struct BackwardLaunch {
  const BackwardArgs<T>& a;
  cudaStream_t stream;
  template <ChargeForm F, bool kDivide>
  void operator()() const {
    if (a.n == 0) return;
    backward_kernel<F, kDivide, T><<<blocks_for(a.n), kThreads, 0, stream>>>(a);
    check_launch("neuron backward");
  }
};

}  // namespace

template <typename T, typename S>
void forward_cuda(Form form, const ForwardArgs<T, S>& args, void* stream) {
  dispatch_form(form, ForwardLaunch<T, S>{args, static_cast<cudaStream_t>(stream)});
}

template <typename T>
void backward_cuda(Form form, const BackwardArgs<T>& args, void* stream) {
  dispatch_form(form, BackwardLaunch<T>{args, static_cast<cudaStream_t>(stream)});
}

template void forward_cuda<float, float>(Form, const ForwardArgs<float, float>&, void*);
template void forward_cuda<float, uint8_t>(Form, const ForwardArgs<float, uint8_t>&, void*);
template void forward_cuda<double, double>(Form, const ForwardArgs<double, double>&, void*);
template void forward_cuda<double, uint8_t>(Form, const ForwardArgs<double, uint8_t>&, void*);
template void backward_cuda<float>(Form, const BackwardArgs<float>&, void*);
template void backward_cuda<double>(Form, const BackwardArgs<double>&, void*);

}  // namespace snn::neurons::detail
