#pragma once
/// The physics of one grid step of NEST's iaf_psc_delta and iaf_psc_exp
/// (models/iaf_psc_delta.cpp, models/iaf_psc_exp.cpp of NEST 3.10), written
/// once for every backend: the CPU loop (iaf.cpp) and the CUDA kernel
/// (iaf_cuda.cu) both call it. Free of LibTorch so that nvcc compiles it
/// quickly.
///
/// Exact integration: the linear dynamics between two grid points are
/// advanced by their propagators (computed once per layer, iaf.cpp), so the
/// only approximation is that inputs arrive on the grid, as in NEST.
/// Potentials are relative to E_L, as NEST keeps them.

#include <cstdint>

#include "snn/core/host_device.h"

namespace snn::neurons::detail {

/// Which NEST model.
enum class IafKind : int32_t {
  kPscDelta,  ///< iaf_psc_delta: an input spike makes v jump by its weight (mV)
  kPscExp,    ///< iaf_psc_exp: an input spike makes a synaptic current jump (pA), which decays exponentially
};

/// Per-layer constants of one step of length h (ms), in the compute dtype T.
template <typename T>
struct IafCoeffs {
  IafKind kind = IafKind::kPscDelta;
  T p22 = T(0);    ///< exp(-h / tau_m): the membrane's decay over a step
  T p20 = T(0);    ///< tau_m / C_m (1 - p22): a constant current's effect on v (mV per pA)
  T p11ex = T(0);  ///< exp(-h / tau_syn_ex) (psc_exp)
  T p11in = T(0);  ///< exp(-h / tau_syn_in) (psc_exp)
  T p21ex = T(0);  ///< an excitatory synaptic current's effect on v over a step (psc_exp)
  T p21in = T(0);  ///< an inhibitory one's
  T v_th = T(0);     ///< threshold, relative to E_L
  T v_reset = T(0);  ///< reset value, relative to E_L
  T v_min = T(0);    ///< lower bound of v, relative to E_L (psc_delta; -max for none)
  T i_e = T(0);      ///< constant input current of every neuron (pA)
  int32_t refractory_steps = 0;  ///< steps clamped at v_reset after a spike
};

/// One step of model K: `ex` and `in` are the weights of the input spikes
/// arriving at the end of this step (psc_delta: mV; psc_exp: pA, excitatory
/// >= 0, inhibitory <= 0), `current` the external current (pA) the neuron
/// takes from the next step on (NEST's one-step lag of current generators).
/// `i_e` is the neuron's constant current (pA: c.i_e plus its own, if any).
/// State: v, the synaptic currents i_ex and i_in, the current i0 in effect,
/// the refractory steps left. Writes h, the potential before the threshold
/// test and reset, and returns the spike. The order of operations is NEST's
/// update().
///
/// Written without branches: the free potential is computed for every
/// neuron and selected where the neuron is not refractory, so that a SIMD
/// loop over neurons (populations/, population_loops.cpp) vectorises it and
/// a GPU warp does not diverge. The selected values are the ones the
/// branches would give, bit for bit (the tests compare against NEST).
template <IafKind K, typename T, typename R = int32_t>
SNN_HOST_DEVICE bool iaf_step_of(T ex, T in, T current, T i_e, T& v, T& i_ex, T& i_in, T& i0, R& ref, T& h,
                                 const IafCoeffs<T>& c) {
  const bool free = ref == 0;
  if constexpr (K == IafKind::kPscDelta) {
    // Spikes arriving in the refractory period are lost (NEST's refractory_input false).
    T charged = c.p20 * (i0 + i_e) + c.p22 * v + (ex + in);
    charged = charged < c.v_min ? c.v_min : charged;
    v = free ? charged : v;
  } else {
    const T charged = v * c.p22 + i_ex * c.p21ex + i_in * c.p21in + (i_e + i0) * c.p20;
    v = free ? charged : v;
    i_ex *= c.p11ex;
    i_in *= c.p11in;
    i_ex += ex;  // spikes arriving at the end of the step act from the next step on
    i_in += in;
  }
  ref = free ? ref : ref - 1;
  h = v;
  const bool spike = v >= c.v_th;
  ref = spike ? R(c.refractory_steps) : ref;
  v = spike ? c.v_reset : v;
  i0 = current;
  return spike;
}

/// One step of the model c.kind (iaf_step_of's arguments).
template <typename T>
SNN_HOST_DEVICE bool iaf_step(T ex, T in, T current, T i_e, T& v, T& i_ex, T& i_in, T& i0, int32_t& ref, T& h,
                              const IafCoeffs<T>& c) {
  return c.kind == IafKind::kPscDelta ? iaf_step_of<IafKind::kPscDelta>(ex, in, current, i_e, v, i_ex, i_in, i0, ref, h, c)
                                      : iaf_step_of<IafKind::kPscExp>(ex, in, current, i_e, v, i_ex, i_in, i0, ref, h, c);
}

}  // namespace snn::neurons::detail
