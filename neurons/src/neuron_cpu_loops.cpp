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

#include <cstring>

#include "neuron_cpu_loops.h"

namespace snn::neurons::detail::SNN_ISA {
namespace {

constexpr int64_t kBlock = 2048;
static_assert(kPoolRowsMax <= kBlock, "a pair of pooled rows must fit one block");

// A block's v and refractory counts into the local arrays, or, for a
// fresh state (args.fresh), the reset values; and back. A fresh state's
// counts are written even where no refractory period uses them, since
// its memory holds nothing yet.
template <bool kRefractory, typename T, typename S>
inline void load_state(const ForwardArgs<T, S>& args, int64_t i0, int64_t nb, T* v, int32_t* ref) {
  if (args.fresh) {
    for (int64_t i = 0; i < nb; ++i) v[i] = args.c.v_reset;
    if constexpr (kRefractory) {
      for (int64_t i = 0; i < nb; ++i) ref[i] = 0;
    }
    return;
  }
  for (int64_t i = 0; i < nb; ++i) v[i] = args.v[i0 + i];
  if constexpr (kRefractory) {
    for (int64_t i = 0; i < nb; ++i) ref[i] = args.ref[i0 + i];
  }
}

template <bool kRefractory, typename T, typename S>
inline void store_state(const ForwardArgs<T, S>& args, int64_t i0, int64_t nb, const T* v, const int32_t* ref) {
  for (int64_t i = 0; i < nb; ++i) args.v[i0 + i] = v[i];
  if constexpr (kRefractory) {
    for (int64_t i = 0; i < nb; ++i) args.ref[i0 + i] = ref[i];
  } else {
    if (args.fresh) {
      for (int64_t i = 0; i < nb; ++i) args.ref[i0 + i] = 0;
    }
  }
}

// The next step's inputs of a block, n values on from this step's x: a
// stream of only kBlock values (8 KiB), too short for the hardware
// prefetcher to ramp up on, so each step began with misses. Prefetched,
// they arrive while this step computes (the multi-step pass went from
// 0.25-0.31 to 0.18-0.20 ns per neuron-step on a Zen 4 core, N = 256K,
// T = 32).
template <typename T>
inline void prefetch_next_step(const T* x, int64_t n, int64_t nb) {
  const char* next = reinterpret_cast<const char*>(x + n);
  for (int64_t b = 0; b < nb * static_cast<int64_t>(sizeof(T)); b += 64) __builtin_prefetch(next + b);
}

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
      load_state<kRefractory>(args, i0, nb, v, ref);
      for (int64_t t = 0; t < args.steps; ++t) {
        const int64_t off = t * n + i0;
        const T* __restrict__ x = args.x + (args.x_constant ? i0 : off);
        S* __restrict__ s = args.spikes + off;
        T* __restrict__ ht = kTrace ? args.h_trace + off : nullptr;
        T* __restrict__ vt = kTrace ? args.v_trace + off : nullptr;
        uint8_t* __restrict__ act = kTrace ? args.active_trace + off : nullptr;
        if (t + 1 < args.steps && !args.x_constant) prefetch_next_step(x, n, nb);
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
      store_state<kRefractory>(args, i0, nb, v, ref);
    }
  }
};

// The pooled spikes of `rows` pairs of spike rows of width W (bytes, 0/1)
// into out [rows, W / 2]: 16 windows at a time, a window's two spikes of a
// row read as one 16-bit lane, so that OR, compare and convert are vector
// operations. The pooled rows of a CNN are short (14, 7): a row narrower
// than 16 windows is written 16 wide, and the next rows overwrite the
// excess; a wider row ends with a group that overlaps the one before it.
// The rows whose 16 lanes would pass the block's last window go one
// window at a time. So every read and write stays within the block's
// rows.
template <typename S>
inline void pool_rows(const uint8_t* sp, S* out, int64_t rows, int64_t W) {
  constexpr int64_t N = 16;
  typedef uint16_t P __attribute__((vector_size(2 * N)));
  typedef S O __attribute__((vector_size(N * sizeof(S))));
  const int64_t OW = W / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* top = sp + r * 2 * W;
    const uint8_t* bottom = top + W;
    S* o = out + r * OW;
    if (OW < N && (rows - r) * OW < N) {  // the 16 lanes would pass the block's last window
      for (int64_t ox = 0; ox < OW; ++ox) {
        o[ox] = (top[2 * ox] | top[2 * ox + 1] | bottom[2 * ox] | bottom[2 * ox + 1]) ? S(1) : S(0);
      }
      continue;
    }
    for (int64_t ox0 = 0; ox0 < OW; ox0 += N) {
      const int64_t ox = OW >= N && ox0 + N > OW ? OW - N : ox0;
      P a, b;
      std::memcpy(&a, top + 2 * ox, sizeof a);
      std::memcpy(&b, bottom + 2 * ox, sizeof b);
      const O any = __builtin_convertvector(-((a | b) != 0), O);  // lanes -1 / 0 -> 1 / 0
      std::memcpy(o + ox, &any, sizeof any);
    }
  }
}

// The forward pass with a 2 x 2 max pool at stride 2 fused into it, for
// inference: each step's spikes of a block stay in a local byte array
// (L1) and only their pooled windows are stored, a quarter of the spikes,
// where the unfused path writes every spike and the pool reads them back.
// The range and the blocks are in pairs of rows of the pooled planes
// (2 W neurons each), so that every window lies inside one block. Each
// neuron's step is the one above; a window's spike is the OR of its four
// 0/1 spikes, which is their maximum. Returns the spikes fired.
template <typename T, typename S, bool kHard, bool kRefractory>
struct ForwardPoolLoop {
  const ForwardArgs<T, S>& args;
  int64_t begin, end;  // row pairs
  int64_t* fired;

  template <ChargeForm F, bool kDivide>
  void operator()() const {
    const Coeffs<T> c = args.c;
    const int64_t n = args.n, W = args.pool_w, R = 2 * W, OW = W / 2, pooled = n / 4;
    const int64_t per = kBlock / R;  // row pairs per block, >= 1 (forward_pool_cpu checks R)
    T v[kBlock];
    int32_t ref[kBlock];
    alignas(64) uint8_t sp[kBlock];
    int64_t count = 0;
    for (int64_t r0 = begin; r0 < end; r0 += per) {
      const int64_t rows = end - r0 < per ? end - r0 : per;
      const int64_t i0 = r0 * R, nb = rows * R;
      load_state<kRefractory>(args, i0, nb, v, ref);
      for (int64_t t = 0; t < args.steps; ++t) {
        const T* __restrict__ x = args.x + (args.x_constant ? i0 : t * n + i0);
        if (t + 1 < args.steps && !args.x_constant) prefetch_next_step(x, n, nb);
        int32_t step_count = 0;
#pragma omp simd reduction(+ : step_count)
        for (int64_t i = 0; i < nb; ++i) {
          T h;
          bool active;
          const bool spike = step<F, kDivide, kHard, kRefractory>(x[i], v[i], ref[i], h, active, c);
          sp[i] = static_cast<uint8_t>(spike);
          step_count += spike ? 1 : 0;
        }
        count += step_count;
        pool_rows(sp, args.spikes + t * pooled + r0 * OW, rows, W);
      }
      store_state<kRefractory>(args, i0, nb, v, ref);
    }
    *fired = count;
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

template <typename T, typename S, bool kHard>
void forward_pool_flags(Form form, const ForwardArgs<T, S>& args, int64_t begin, int64_t end, int64_t* fired) {
  if (args.c.refractory > 0) {
    dispatch_form(form, ForwardPoolLoop<T, S, kHard, true>{args, begin, end, fired});
  } else {
    dispatch_form(form, ForwardPoolLoop<T, S, kHard, false>{args, begin, end, fired});
  }
}

}  // namespace

template <typename T, typename S>
void forward_range(Form form, const ForwardArgs<T, S>& args, int64_t begin, int64_t end) {
  forward_flags<T, S>(form, args, begin, end);
}

template <typename T, typename S>
int64_t forward_pool_range(Form form, const ForwardArgs<T, S>& args, int64_t begin, int64_t end) {
  int64_t fired = 0;
  if (args.c.hard_reset) {
    forward_pool_flags<T, S, true>(form, args, begin, end, &fired);
  } else {
    forward_pool_flags<T, S, false>(form, args, begin, end, &fired);
  }
  return fired;
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
template int64_t forward_pool_range<float, float>(Form, const ForwardArgs<float, float>&, int64_t, int64_t);
template int64_t forward_pool_range<float, uint8_t>(Form, const ForwardArgs<float, uint8_t>&, int64_t, int64_t);
template int64_t forward_pool_range<double, double>(Form, const ForwardArgs<double, double>&, int64_t, int64_t);
template int64_t forward_pool_range<double, uint8_t>(Form, const ForwardArgs<double, uint8_t>&, int64_t, int64_t);
template void backward_range<float>(Form, const BackwardArgs<float>&, int64_t, int64_t);
template void backward_range<double>(Form, const BackwardArgs<double>&, int64_t, int64_t);

}  // namespace snn::neurons::detail::SNN_ISA
