#pragma once
// The neuron phase of a population network's step (population_network.cpp)
// over a range of neurons, compiled once per instruction set (namespaces
// base, avx2 and avx512; see population_loops.cpp).

#include <cstdint>

#include "snn/neurons/detail/iaf_step.h"

namespace snn::populations::detail {

/// One step of the neurons of one population, all arrays indexed by the
/// network's global neuron ids.
struct IafUpdate {
  neurons::detail::IafCoeffs<double> c;  ///< the population's propagators
  double* ex = nullptr;          ///< this step's excitatory ring slot: read, then zeroed
  double* in = nullptr;          ///< this step's inhibitory ring slot (psc_exp): read, then zeroed
  bool has_dc = false;           ///< the population has DC currents: i0 and dc are used
  double dc = 0.0;               ///< the DC current given at this step (pA)
  bool own_i_e = false;          ///< the neurons have their own I_e: i_e is used, else c.i_e
  const double* i_e = nullptr;   ///< each neuron's constant current (pA)
  double* v = nullptr;           ///< state: potential relative to E_L (mV)
  double* i_ex = nullptr;        ///< state: synaptic currents (pA; psc_exp)
  double* i_in = nullptr;
  double* i0 = nullptr;          ///< state: the DC current in effect (pA)
  // 64-bit like the doubles, so that a SIMD loop has one lane width (with
  // int32 or byte lanes GCC unrolls 2 or 8 vectors of each double and
  // spills registers).
  int64_t* ref = nullptr;        ///< state: refractory steps left
  int64_t* flags = nullptr;      ///< scratch: this step's spikes (1) and not (0)
};

#define SNN_DECLARE_POPULATION_LOOPS(isa)                                                     \
  namespace isa {                                                                             \
  /* Steps neurons [lo, hi) and writes the ids of those that fired to `fired` in ascending */ \
  /* order (room for hi - lo); returns how many fired. */                                     \
  int64_t iaf_update(const IafUpdate& u, int64_t lo, int64_t hi, int32_t* fired);             \
  }
SNN_DECLARE_POPULATION_LOOPS(base)
SNN_DECLARE_POPULATION_LOOPS(avx2)
SNN_DECLARE_POPULATION_LOOPS(avx512)
#undef SNN_DECLARE_POPULATION_LOOPS

}  // namespace snn::populations::detail
