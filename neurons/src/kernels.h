#pragma once
// Launchers of the fused neuron passes: plain pointers in, no LibTorch, so
// that nvcc compiles neuron_cuda.cu without LibTorch's headers. functional.cpp
// is the one place that turns tensors into these arguments and picks the
// backend (DESIGN.md: exactly one place decides CPU vs CUDA).

#include <cstdint>

#include "snn/core/build_info.h"
#include "snn/neurons/detail/neuron_step.h"

namespace snn::neurons::detail {

/// Which charge equation, and whether its rate divides by tau (LIF) or
/// multiplies by k (PLIF).
struct Form {
  ChargeForm charge = ChargeForm::kDecayZero;
  bool divide = true;
};

/// A fused multi-step forward pass over `steps` x `n` neuron-steps, time-major.
template <typename T, typename S>
struct ForwardArgs {
  const T* x = nullptr;     ///< [steps, n] input
  S* spikes = nullptr;      ///< [steps, n] output spikes (0/1 in T, or uint8 for bool tensors)
  T* v = nullptr;           ///< [n] potential: initial value in, final value out
  int32_t* ref = nullptr;   ///< [n] refractory steps left: in and out
  // Traces for the backward pass and for recording; all null or all set.
  T* h_trace = nullptr;            ///< [steps, n] h, before fire/reset
  T* v_trace = nullptr;            ///< [steps, n] v, after reset
  uint8_t* active_trace = nullptr; ///< [steps, n] 1 = not refractory
  int64_t steps = 0;
  int64_t n = 0;
  /// x is [n], the same input at every step (a direct input's first
  /// layer: the graph model runs it once per block and expands it over
  /// time), read in place rather than copied out to [steps, n].
  bool x_constant = false;
  /// When nonzero, a 2 x 2 max pool at stride 2 is fused into the pass
  /// (CPU only; forward_pool_cpu): the neurons are planes of an even
  /// height and pool_w (even) wide, which the caller checks, and `spikes` is
  /// [steps, n / 4], each step's spike of every window, the OR of its four
  /// neurons' (the max of 0/1 values). No traces.
  int64_t pool_w = 0;
  /// CPU only: v and ref hold no values yet (a layer's first block after a
  /// reset). The pass starts every neuron from reset (v = c.v_reset, no
  /// refractory steps left) instead of reading them, and writes both: no
  /// separate pass fills the state first.
  bool fresh = false;
  Coeffs<T> c;
};

/// Backpropagation through the `steps` of one fused forward pass.
template <typename T>
struct BackwardArgs {
  const T* h_trace = nullptr;            ///< [steps, n]
  const uint8_t* active_trace = nullptr; ///< [steps, n]
  const T* grad_spikes = nullptr;        ///< [steps, n], null = zero
  const T* grad_v_final = nullptr;       ///< [n], null = zero
  T* grad_x = nullptr;                   ///< [steps, n] out
  T* grad_v0 = nullptr;                  ///< [n] out
  // Only for a learnable rate k (PLIF); grad_k_partial null otherwise.
  const T* x = nullptr;        ///< [steps, n] forward input
  const T* v_trace = nullptr;  ///< [steps, n] v after each step
  const T* v0 = nullptr;       ///< [n] v before the first step
  T* grad_k_partial = nullptr; ///< [n] out: per-neuron sum of dL/dk
  int64_t steps = 0;
  int64_t n = 0;
  Coeffs<T> c;
  BackwardCoeffs<T> b;
};

template <typename T, typename S>
void forward_cpu(Form form, const ForwardArgs<T, S>& args);
/// forward_cpu with the 2 x 2 max pool fused (args.pool_w set, no traces,
/// 2 pool_w <= kPoolRowsMax): returns the number of spikes the neurons
/// fired, which are not stored.
template <typename T, typename S>
int64_t forward_pool_cpu(Form form, const ForwardArgs<T, S>& args);
/// The widest pair of rows (2 pool_w neurons) forward_pool_cpu takes.
constexpr int64_t kPoolRowsMax = 2048;
template <typename T>
void backward_cpu(Form form, const BackwardArgs<T>& args);

#if SNN_WITH_CUDA
/// `stream` is the cudaStream_t to launch on (LibTorch's current stream).
template <typename T, typename S>
void forward_cuda(Form form, const ForwardArgs<T, S>& args, void* stream);
template <typename T>
void backward_cuda(Form form, const BackwardArgs<T>& args, void* stream);
#endif

/// y = x wt + bias on the GPU for row-major x [rows, in], wt [in, out] (the
/// weight transposed) and y [rows, out]: every y[r, o] is bias[o] (or 0)
/// plus x[r, f] wt[f, o] over the nonzero x[r, f] in ascending f, each
/// product and sum rounded on its own. These are the CPU kernels' additions
/// in the CPU kernels' order (linear_loops.cpp), so a GPU gives the CPU's
/// values bit for bit, and spikes cost only the inputs that fired.
template <typename T>
struct LinearArgs {
  const T* x = nullptr;     ///< [rows, in]
  const T* wt = nullptr;    ///< [in, out]
  const T* bias = nullptr;  ///< [out], or null
  T* y = nullptr;           ///< [rows, out] out
  int64_t rows = 0;
  int64_t in = 0;
  int64_t out = 0;
};

#if SNN_WITH_CUDA
template <typename T>
void linear_cuda(const LinearArgs<T>& args, void* stream);
#endif

/// Calls fn.template operator()<F, kDivide>() for the form chosen at run time:
/// the one switch that turns the runtime form into a compile-time one.
template <typename Fn>
void dispatch_form(Form form, Fn&& fn) {
  switch (form.charge) {
    case ChargeForm::kIF:
      return fn.template operator()<ChargeForm::kIF, true>();
    case ChargeForm::kLeakZero:
      return fn.template operator()<ChargeForm::kLeakZero, true>();
    case ChargeForm::kDecayZero:
      return form.divide ? fn.template operator()<ChargeForm::kDecayZero, true>()
                         : fn.template operator()<ChargeForm::kDecayZero, false>();
    case ChargeForm::kDecay:
      return form.divide ? fn.template operator()<ChargeForm::kDecay, true>()
                         : fn.template operator()<ChargeForm::kDecay, false>();
    case ChargeForm::kLeak:
      return form.divide ? fn.template operator()<ChargeForm::kLeak, true>()
                         : fn.template operator()<ChargeForm::kLeak, false>();
  }
}

}  // namespace snn::neurons::detail
