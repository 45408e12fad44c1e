#pragma once
// Launchers of the Iaf (NEST) passes: plain pointers in, no LibTorch, so
// that nvcc compiles iaf_cuda.cu without LibTorch's headers. iaf.cpp is the
// one place that turns tensors into these arguments and picks the backend.

#include <cstdint>

#include "snn/core/build_info.h"
#include "snn/neurons/detail/iaf_step.h"

namespace snn::neurons::detail {

/// `steps` x `n` neuron-steps, time-major; inputs may be null (zero).
template <typename T>
struct IafArgs {
  const T* ex = nullptr;       ///< [steps, n] excitatory input weights
  const T* in = nullptr;       ///< [steps, n] inhibitory input weights, or null
  const T* current = nullptr;  ///< [steps, n] external current, or null
  const T* i_e = nullptr;      ///< [i_e_period] each neuron's own constant current, added to c.i_e, or null
  int64_t i_e_period = 1;      ///< neurons per sample: neuron i takes i_e[i % i_e_period]
  T* spikes = nullptr;         ///< [steps, n] out: 0/1
  T* v = nullptr;              ///< [n] state, in and out (relative to E_L)
  T* i_ex = nullptr;           ///< [n] state
  T* i_in = nullptr;           ///< [n] state
  T* i0 = nullptr;             ///< [n] state
  int32_t* ref = nullptr;      ///< [n] state
  T* v_trace = nullptr;        ///< [steps, n] out: v after each step plus `v_offset`, or null
  T* h_trace = nullptr;        ///< [steps, n] out: v before the threshold test plus `v_offset`, or null
  T v_offset = T(0);           ///< E_L: traces are absolute potentials, as NEST records V_m
  int64_t steps = 0;
  int64_t n = 0;
  IafCoeffs<T> c;
};

/// Neuron i's steps with its state in registers around iaf_step: the body
/// of both the CPU loop (iaf.cpp) and the CUDA kernel (iaf_cuda.cu).
template <typename T>
SNN_HOST_DEVICE void iaf_neuron_steps(const IafArgs<T>& a, int64_t i) {
  T v = a.v[i], i_ex = a.i_ex[i], i_in = a.i_in[i], i0 = a.i0[i];
  int32_t ref = a.ref[i];
  const T i_e = a.i_e ? a.c.i_e + a.i_e[i % a.i_e_period] : a.c.i_e;
  for (int64_t t = 0; t < a.steps; ++t) {
    const int64_t j = t * a.n + i;
    T h;
    const bool spike = iaf_step<T>(a.ex[j], a.in ? a.in[j] : T(0), a.current ? a.current[j] : T(0), i_e, v, i_ex,
                                   i_in, i0, ref, h, a.c);
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

template <typename T>
void iaf_forward_cpu(const IafArgs<T>& args);
#if SNN_WITH_CUDA
template <typename T>
void iaf_forward_cuda(const IafArgs<T>& args, void* stream);
#endif

}  // namespace snn::neurons::detail
