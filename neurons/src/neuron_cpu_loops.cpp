// CPU loops of the fused neuron passes around the shared neuron-step
// (detail/neuron_step.h), for one range of neurons. This file is compiled
// for baseline x86-64, AVX2 and AVX-512 (SNN_ISA names the namespace; GCC
// vectorises the loops 4, 8 and 16 floats wide), and neuron_cpu.cpp picks
// one at run time. It includes no LibTorch and no std algorithms, so no
// inline function is compiled here with one ISA and linked into the
// other's callers.
//
// Shape of the forward loop (DESIGN.md, measured there): neurons are taken
// in blocks of kBlock; a block's v and refractory counts live in local
// arrays (L1) across all steps, and the inner loop over the block is a SIMD
// loop. Memory traffic is then x in, spikes out, and v once per call.

#include "neuron_cpu_loops.h"

namespace snn::neurons::detail::SNN_ISA {
namespace {

constexpr int64_t kBlock = 2048;

template <typename T, typename S, bool kTrace, bool kHard, bool kRefractory>
struct ForwardLoop {
  const ForwardArgs<T, S>& args;
  int64_t begin, end;

  template <ChargeForm F, bool kDivide>
  void operator()() const {
    const Coeffs<T> c = args.c;
    const int64_t n = args.n;
    T v[kBlock];
    int32_t ref[kBlock];
    for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
      const int64_t nb = end - i0 < kBlock ? end - i0 : kBlock;
      for (int64_t i = 0; i < nb; ++i) v[i] = args.v[i0 + i];
      if constexpr (kRefractory) {
        for (int64_t i = 0; i < nb; ++i) ref[i] = args.ref[i0 + i];
      }
      for (int64_t t = 0; t < args.steps; ++t) {
        const int64_t off = t * n + i0;
        const T* __restrict__ x = args.x + (args.x_constant ? i0 : off);
        S* __restrict__ s = args.spikes + off;
        T* __restrict__ ht = kTrace ? args.h_trace + off : nullptr;
        T* __restrict__ vt = kTrace ? args.v_trace + off : nullptr;
        uint8_t* __restrict__ act = kTrace ? args.active_trace + off : nullptr;
        if (t + 1 < args.steps && !args.x_constant) {
          // The next step's inputs are n values on: a stream of only
          // kBlock values (8 KiB), too short for the hardware prefetcher
          // to ramp up on, so each step began with misses. Prefetched
          // here, they arrive while this step computes (the multi-step
          // pass went from 0.25-0.31 to 0.18-0.20 ns per neuron-step on a
          // Zen 4 core, N = 256K, T = 32).
          const char* next = reinterpret_cast<const char*>(x + n);
          for (int64_t b = 0; b < nb * static_cast<int64_t>(sizeof(T)); b += 64) __builtin_prefetch(next + b);
        }
#pragma omp simd
        for (int64_t i = 0; i < nb; ++i) {
          T h;
          bool active;
          const bool spike = step<F, kDivide, kHard, kRefractory>(x[i], v[i], ref[i], h, active, c);
          s[i] = spike ? S(1) : S(0);
          if constexpr (kTrace) {
            ht[i] = h;
            vt[i] = v[i];
            act[i] = static_cast<uint8_t>(active);
          }
        }
      }
      for (int64_t i = 0; i < nb; ++i) args.v[i0 + i] = v[i];
      if constexpr (kRefractory) {
        for (int64_t i = 0; i < nb; ++i) args.ref[i0 + i] = ref[i];
      }
    }
  }
};

template <typename T, bool kHard>
struct BackwardLoop {
  const BackwardArgs<T>& args;
  int64_t begin, end;

  // The surrogate and the optional inputs become template arguments, so
  // that the inner loop has no switch, no call and no pointer test: it is
  // then a SIMD loop like the forward one (it ran scalar, at ~3 ns per
  // neuron-step). Same operations per element, so the same values.
  template <ChargeForm F, bool kDivide>
  void operator()() const {
    if (args.b.surrogate == SurrogateKind::kATan) {
      with_inputs<F, kDivide, SurrogateKind::kATan>();
    } else {
      with_inputs<F, kDivide, SurrogateKind::kSigmoid>();
    }
  }

  template <ChargeForm F, bool kDivide, SurrogateKind kSurrogate>
  void with_inputs() const {
    const bool gs = args.grad_spikes != nullptr, gk = args.grad_k_partial != nullptr;
    if (gs && gk) {
      run<F, kDivide, kSurrogate, true, true>();
    } else if (gs) {
      run<F, kDivide, kSurrogate, true, false>();
    } else if (gk) {
      run<F, kDivide, kSurrogate, false, true>();
    } else {
      run<F, kDivide, kSurrogate, false, false>();
    }
  }

  template <ChargeForm F, bool kDivide, SurrogateKind kSurrogate, bool kGradSpikes, bool kGradK>
  void run() const {
    const Coeffs<T> c = args.c;
    BackwardCoeffs<T> b = args.b;
    b.surrogate = kSurrogate;  // a constant once inlined: backward_step's surrogate switch folds away
    const int64_t n = args.n;
    const T gx_per_gh = dh_dx<F, kDivide>(c);
    // Same blocking as the forward pass, walking time backwards: gv and gk
    // stay in local arrays and every row access is contiguous.
    T gv[kBlock];
    T gk[kBlock];
    for (int64_t i0 = begin; i0 < end; i0 += kBlock) {
      const int64_t nb = end - i0 < kBlock ? end - i0 : kBlock;
      for (int64_t i = 0; i < nb; ++i) {
        gv[i] = args.grad_v_final ? args.grad_v_final[i0 + i] : T(0);
        gk[i] = T(0);
      }
      for (int64_t t = args.steps - 1; t >= 0; --t) {
        const int64_t off = t * n + i0;
        const T* __restrict__ h = args.h_trace + off;
        const uint8_t* __restrict__ act = args.active_trace + off;
        const T* __restrict__ gs = kGradSpikes ? args.grad_spikes + off : nullptr;
        T* __restrict__ gx = args.grad_x + off;
        const T* __restrict__ v_prev = kGradK ? (t > 0 ? args.v_trace + off - n : args.v0 + i0) : nullptr;
        const T* __restrict__ x = kGradK ? args.x + off : nullptr;
#pragma omp simd
        for (int64_t i = 0; i < nb; ++i) {
          const bool active = act[i] != 0;
          const T gh = backward_step<F, kDivide, kHard>(h[i], active, kGradSpikes ? gs[i] : T(0), gv[i], c, b);
          gx[i] = active ? gh * gx_per_gh : T(0);
          if constexpr (kGradK) gk[i] += active ? gh * dh_dk<F>(v_prev[i], x[i], c) : T(0);
        }
      }
      for (int64_t i = 0; i < nb; ++i) {
        args.grad_v0[i0 + i] = gv[i];
        if (kGradK) args.grad_k_partial[i0 + i] = gk[i];
      }
    }
  }
};

// Turns the runtime flags into template arguments, innermost last.
template <typename T, typename S, bool... kFlags>
void forward_flags(Form form, const ForwardArgs<T, S>& args, int64_t begin, int64_t end) {
  if constexpr (sizeof...(kFlags) == 3) {
    dispatch_form(form, ForwardLoop<T, S, kFlags...>{args, begin, end});
  } else {
    constexpr size_t k = sizeof...(kFlags);
    const bool flag = k == 0 ? args.h_trace != nullptr : k == 1 ? args.c.hard_reset : args.c.refractory > 0;
    if (flag) {
      forward_flags<T, S, kFlags..., true>(form, args, begin, end);
    } else {
      forward_flags<T, S, kFlags..., false>(form, args, begin, end);
    }
  }
}

}  // namespace

template <typename T, typename S>
void forward_range(Form form, const ForwardArgs<T, S>& args, int64_t begin, int64_t end) {
  forward_flags<T, S>(form, args, begin, end);
}

template <typename T>
void backward_range(Form form, const BackwardArgs<T>& args, int64_t begin, int64_t end) {
  if (args.c.hard_reset) {
    dispatch_form(form, BackwardLoop<T, true>{args, begin, end});
  } else {
    dispatch_form(form, BackwardLoop<T, false>{args, begin, end});
  }
}

template void forward_range<float, float>(Form, const ForwardArgs<float, float>&, int64_t, int64_t);
template void forward_range<float, uint8_t>(Form, const ForwardArgs<float, uint8_t>&, int64_t, int64_t);
template void forward_range<double, double>(Form, const ForwardArgs<double, double>&, int64_t, int64_t);
template void forward_range<double, uint8_t>(Form, const ForwardArgs<double, uint8_t>&, int64_t, int64_t);
template void backward_range<float>(Form, const BackwardArgs<float>&, int64_t, int64_t);
template void backward_range<double>(Form, const BackwardArgs<double>&, int64_t, int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
