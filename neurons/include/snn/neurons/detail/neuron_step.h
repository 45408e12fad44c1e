#pragma once
/// The physics of one neuron-step, written once for every backend.
///
/// These small inline functions are the single source of truth for the
/// charge / fire / reset arithmetic and for the surrogate derivatives. The CPU
/// loops (neuron_cpu.cpp) and the CUDA kernels (neuron_cuda.cu) both call
/// them, so the CPU tests check the arithmetic a GPU runs. This header must
/// stay free of LibTorch so that nvcc compiles it quickly.
///
/// The operation order of each charge form copies SpikingJelly 0.0.0.0.14
/// (activation_based/neuron.py) so that float results match it bit for bit.

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "snn/core/host_device.h"

namespace snn::neurons::detail {

/// The charge equation, h = f(v, x), in SpikingJelly's exact operation order.
/// `a` stands for the rate: either division by tau or multiplication by k.
enum class ChargeForm : int32_t {
  kIF,         ///< h = v + x
  kDecayZero,  ///< h = v + (x - v) a             (decay_input, v_reset 0 or soft)
  kDecay,      ///< h = v + (x - (v - v_reset)) a (decay_input, v_reset != 0)
  kLeakZero,   ///< h = v * leak + x              (no decay_input, v_reset 0 or soft)
  kLeak,       ///< h = v - (v - v_reset) a + x   (no decay_input, v_reset != 0)
};

/// Which surrogate derivative replaces the Heaviside's in the backward pass.
enum class SurrogateKind : int32_t {
  kSigmoid,  ///< d/dx sigmoid(alpha x) = alpha sg (1 - sg)
  kATan,     ///< d/dx (atan(pi/2 alpha x)/pi + 1/2) = alpha / 2 / (1 + (pi/2 alpha x)^2)
};

/// Per-layer constants of the neuron-step, already in the compute dtype T.
template <typename T>
struct Coeffs {
  T tau = T(2);          ///< membrane time constant in steps (division forms)
  T k = T(0.5);          ///< 1/tau as a multiplier (PLIF: sigmoid(w))
  T leak = T(0.5);       ///< kLeakZero's factor: 1 - 1/tau (LIF) or 1 - k (PLIF)
  T v_threshold = T(1);  ///< firing threshold
  T v_reset = T(0);      ///< hard reset value and the charge's resting value
  bool hard_reset = true;   ///< hard (v = v_reset) or soft (v = h - v_threshold);
                            ///< the backends pass it on as the kHard template argument
  int32_t refractory = 0;   ///< absolute refractory period in steps, 0 = none
};

/// h = f(v, x): the membrane potential after charging, before fire/reset.
/// kDivide: divide by tau (LIF) instead of multiplying by k (PLIF).
template <ChargeForm F, bool kDivide, typename T>
SNN_HOST_DEVICE T charge(T v, T x, const Coeffs<T>& c) {
  if constexpr (F == ChargeForm::kIF) {
    return v + x;
  } else if constexpr (F == ChargeForm::kLeakZero) {
    return v * c.leak + x;
  } else {
    T d;
    if constexpr (F == ChargeForm::kDecayZero) {
      d = x - v;
    } else if constexpr (F == ChargeForm::kDecay) {
      d = x - (v - c.v_reset);
    } else {
      d = v - c.v_reset;
    }
    const T scaled = kDivide ? d / c.tau : d * c.k;
    if constexpr (F == ChargeForm::kLeak) {
      return v - scaled + x;
    } else {
      return v + scaled;
    }
  }
}

/// One neuron-step: charge, fire, reset, and the refractory count.
///
/// `v` and `ref` are the neuron's state (potential, refractory steps left) and
/// are updated in place. Writes h (potential before fire/reset; the held v
/// during a refractory step) and returns the spike. A neuron in its
/// refractory period neither integrates nor fires. With refractory = 0 the
/// count stays 0 and this is exactly SpikingJelly's step.
/// kHard: hard reset (v = v_reset) or soft (v = h - v_threshold); a template
/// parameter so that the CPU loop vectorises without a select on masks.
/// kRefractory: whether c.refractory > 0. Without it the count is neither
/// read nor written (it stays 0), which saves 8 bytes of traffic per neuron
/// and call.
template <ChargeForm F, bool kDivide, bool kHard, bool kRefractory, typename T>
SNN_HOST_DEVICE bool step(T x, T& v, int32_t& ref, T& h, bool& active, const Coeffs<T>& c) {
  if constexpr (!kRefractory) {
    active = true;
    h = charge<F, kDivide>(v, x, c);
    const bool spike = h >= c.v_threshold;
    v = spike ? (kHard ? c.v_reset : h - c.v_threshold) : h;
    return spike;
  }
  // Branch-free (selects and bitwise ands) so that the CPU loop vectorises.
  active = ref <= 0;
  const T charged = charge<F, kDivide>(v, x, c);
  h = active ? charged : v;
  // SpikingJelly fires on h - v_threshold >= 0; for finite floats (no flush
  // to zero) that is exactly h >= v_threshold.
  const bool spike = active & (h >= c.v_threshold);
  const T after = kHard ? c.v_reset : h - c.v_threshold;
  v = spike ? after : h;
  const int32_t held = active ? 0 : ref - 1;
  ref = spike ? c.refractory : held;
  return spike;
}

/// e^x in the precision of T on host and device (expf for float: no silent
/// promotion to double on the host).
template <typename T>
SNN_HOST_DEVICE T exp_t(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return expf(x);
  } else {
    return exp(x);
  }
}

/// Derivative of the surrogate spike function at u = h - v_threshold.
template <typename T>
SNN_HOST_DEVICE T surrogate_grad(SurrogateKind kind, T alpha, T u) {
  if (kind == SurrogateKind::kSigmoid) {
    const T sg = T(1) / (T(1) + exp_t(-(u * alpha)));
    return (T(1) - sg) * sg * alpha;
  }
  const T a = T(1.5707963267948966) * alpha * u;
  return alpha / T(2) / (T(1) + a * a);
}

/// dh/dx of the charge form.
template <ChargeForm F, bool kDivide, typename T>
SNN_HOST_DEVICE T dh_dx(const Coeffs<T>& c) {
  if constexpr (F == ChargeForm::kDecayZero || F == ChargeForm::kDecay) {
    return kDivide ? T(1) / c.tau : c.k;
  } else {
    return T(1);
  }
}

/// dh/dv of the charge form.
template <ChargeForm F, bool kDivide, typename T>
SNN_HOST_DEVICE T dh_dv(const Coeffs<T>& c) {
  if constexpr (F == ChargeForm::kIF) {
    return T(1);
  } else if constexpr (F == ChargeForm::kLeakZero) {
    return c.leak;
  } else {
    return kDivide ? T(1) - T(1) / c.tau : T(1) - c.k;
  }
}

/// dh/dk of the charge form (PLIF's learnable rate), at the step's v and x.
template <ChargeForm F, typename T>
SNN_HOST_DEVICE T dh_dk(T v, T x, const Coeffs<T>& c) {
  if constexpr (F == ChargeForm::kDecayZero) {
    return x - v;
  } else if constexpr (F == ChargeForm::kDecay) {
    return x - (v - c.v_reset);
  } else if constexpr (F == ChargeForm::kLeakZero) {
    return -v;
  } else if constexpr (F == ChargeForm::kLeak) {
    return -(v - c.v_reset);
  } else {
    return T(0);
  }
}

/// Options of the backward pass that do not change the forward arithmetic.
template <typename T>
struct BackwardCoeffs {
  SurrogateKind surrogate = SurrogateKind::kSigmoid;
  T alpha = T(4);
  bool detach_reset = false;
};

/// One step of backpropagation through time, from step t to step t - 1.
///
/// In: h and the active flag of step t, the gradient of the loss w.r.t. the
/// spike of step t (gs) and w.r.t. v after step t (gv). Out: gv becomes the
/// gradient w.r.t. v after step t - 1; returns the gradient w.r.t. h, from
/// which the caller derives dx (times dh/dx) and dk (times dh/dk). A
/// refractory step (not active) held v without charging: its dx and dk are
/// zero, which the caller applies, and gv passes through unchanged.
template <ChargeForm F, bool kDivide, bool kHard, typename T>
SNN_HOST_DEVICE T backward_step(T h, bool active, T gs, T& gv, const Coeffs<T>& c,
                                const BackwardCoeffs<T>& b) {
  if (!active) {
    // Refractory step: h = v_prev, no spike, v_t = h. Spike gradients are void.
    return gv;  // gv passes through unchanged to v_prev.
  }
  const T u = h - c.v_threshold;
  const bool spike = h >= c.v_threshold;
  const T sg = surrogate_grad(b.surrogate, b.alpha, u);
  // dv_t/dh_t through the reset; the spike's own surrogate path is dropped
  // when detach_reset is set (SpikingJelly's spike.detach() in the reset).
  T dv_dh;
  if (kHard) {
    dv_dh = (spike ? T(0) : T(1)) + (b.detach_reset ? T(0) : (c.v_reset - h) * sg);
  } else {
    dv_dh = T(1) - (b.detach_reset ? T(0) : c.v_threshold * sg);
  }
  const T gh = gs * sg + gv * dv_dh;
  gv = gh * dh_dv<F, kDivide>(c);
  return gh;
}

}  // namespace snn::neurons::detail
