// CPU loops of the fused neuron passes around the shared neuron-step
// (detail/neuron_step.h).
//
// Shape of the forward loop (DESIGN.md, measured there): neurons are taken in
// blocks of kBlock; a block's v and refractory counts live in local arrays
// (L1) across all steps, and the inner loop over the block is a SIMD loop.
// Memory traffic is then x in, spikes out, and v once per call, which is what
// makes the multi-step pass faster than T single steps.

#include <ATen/Parallel.h>

#include <algorithm>

#include "kernels.h"

namespace snn::neurons::detail {
namespace {

constexpr int64_t kBlock = 512;
// Blocks handed to one thread at a time: large enough to amortise
// scheduling, small enough to balance two threads on a few hundred K neurons.
constexpr int64_t kGrain = 8 * kBlock;

template <typename T, typename S, bool kTrace>
struct ForwardLoop {
  const ForwardArgs<T, S>& a;

  template <ChargeForm F, bool kDivide>
  void operator()() const {
    const ForwardArgs<T, S>& args = a;
    at::parallel_for(0, args.n, kGrain, [&args](int64_t begin, int64_t end) {
      const Coeffs<T> c = args.c;
      const int64_t n = args.n;
      T v[kBlock];
      int32_t ref[kBlock];
      for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
        const int64_t nb = std::min(kBlock, end - i0);
        std::copy(args.v + i0, args.v + i0 + nb, v);
        std::copy(args.ref + i0, args.ref + i0 + nb, ref);
        for (int64_t t = 0; t < args.steps; ++t) {
          const int64_t off = t * n + i0;
          const T* __restrict__ x = args.x + off;
          S* __restrict__ s = args.spikes + off;
          T* __restrict__ ht = kTrace ? args.h_trace + off : nullptr;
          T* __restrict__ vt = kTrace ? args.v_trace + off : nullptr;
          uint8_t* __restrict__ act = kTrace ? args.active_trace + off : nullptr;
#pragma omp simd
          for (int64_t i = 0; i < nb; ++i) {
            T h;
            bool active;
            const bool spike = step<F, kDivide>(x[i], v[i], ref[i], h, active, c);
            s[i] = static_cast<S>(spike);
            if constexpr (kTrace) {
              ht[i] = h;
              vt[i] = v[i];
              act[i] = static_cast<uint8_t>(active);
            }
          }
        }
        std::copy(v, v + nb, args.v + i0);
        std::copy(ref, ref + nb, args.ref + i0);
      }
    });
  }
};

template <typename T>
struct BackwardLoop {
  const BackwardArgs<T>& a;

  template <ChargeForm F, bool kDivide>
  void operator()() const {
    const BackwardArgs<T>& args = a;
    at::parallel_for(0, args.n, kGrain, [&args](int64_t begin, int64_t end) {
      const Coeffs<T> c = args.c;
      const BackwardCoeffs<T> b = args.b;
      const int64_t n = args.n;
      const T gx_per_gh = dh_dx<F, kDivide>(c);
      const bool with_k = args.grad_k_partial != nullptr;
      // Same blocking as the forward pass, walking time backwards: gv and gk
      // stay in local arrays and every row access is contiguous.
      T gv[kBlock];
      T gk[kBlock];
      for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
        const int64_t nb = std::min(kBlock, end - i0);
        for (int64_t i = 0; i < nb; ++i) {
          gv[i] = args.grad_v_final ? args.grad_v_final[i0 + i] : T(0);
          gk[i] = T(0);
        }
        for (int64_t t = args.steps - 1; t >= 0; --t) {
          const int64_t off = t * n + i0;
          const T* h = args.h_trace + off;
          const uint8_t* act = args.active_trace + off;
          const T* gs = args.grad_spikes ? args.grad_spikes + off : nullptr;
          T* gx = args.grad_x + off;
          for (int64_t i = 0; i < nb; ++i) {
            const bool active = act[i] != 0;
            const T gh = backward_step<F, kDivide>(h[i], active, gs ? gs[i] : T(0), gv[i], c, b);
            gx[i] = active ? gh * gx_per_gh : T(0);
            if (with_k && active) {
              const T v_prev = t > 0 ? args.v_trace[off - n + i] : args.v0[i0 + i];
              gk[i] += gh * dh_dk<F>(v_prev, args.x[off + i], c);
            }
          }
        }
        std::copy(gv, gv + nb, args.grad_v0 + i0);
        if (with_k) std::copy(gk, gk + nb, args.grad_k_partial + i0);
      }
    });
  }
};

}  // namespace

template <typename T, typename S>
void forward_cpu(Form form, const ForwardArgs<T, S>& args) {
  if (args.h_trace != nullptr) {
    dispatch_form(form, ForwardLoop<T, S, true>{args});
  } else {
    dispatch_form(form, ForwardLoop<T, S, false>{args});
  }
}

template <typename T>
void backward_cpu(Form form, const BackwardArgs<T>& args) {
  dispatch_form(form, BackwardLoop<T>{args});
}

template void forward_cpu<float, float>(Form, const ForwardArgs<float, float>&);
template void forward_cpu<float, bool>(Form, const ForwardArgs<float, bool>&);
template void forward_cpu<double, double>(Form, const ForwardArgs<double, double>&);
template void forward_cpu<double, bool>(Form, const ForwardArgs<double, bool>&);
template void backward_cpu<float>(Form, const BackwardArgs<float>&);
template void backward_cpu<double>(Form, const BackwardArgs<double>&);

}  // namespace snn::neurons::detail
