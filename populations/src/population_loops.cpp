// The neuron phase of a population network's step: NEST's update of every
// neuron of a range (the shared iaf_step_of, detail/iaf_step.h), then the
// ids of those that fired. Compiled for baseline x86-64, AVX2 and AVX-512
// (SNN_ISA names the namespace; 2, 4 and 8 doubles a vector), chosen at run
// time by population_network.cpp. Every build does the same IEEE
// operations in the same order on each neuron, so all give the same spikes
// and potentials (tests/populations). No LibTorch and no std algorithms
// here: no inline function is compiled with one ISA and linked into
// another's callers.

#include "population_loops.h"

namespace snn::populations::detail::SNN_ISA {
namespace {

using neurons::detail::IafKind;

// kDc: the population has DC currents (otherwise i0 stays 0 and is not
// touched); kOwnIe: its neurons have their own I_e (otherwise c.i_e for
// all). Every step reads and writes each neuron's whole state, from L2 for
// a few thousand neurons, so what a population lacks is neither read nor
// written; psc_delta populations have no inhibitory ring.
template <IafKind K, bool kDc, bool kOwnIe>
void step_range(const IafUpdate& u, int64_t lo, int64_t hi) {
  const neurons::detail::IafCoeffs<double> c = u.c;
  const double dc = u.dc, i_e_all = c.i_e;
  double* __restrict__ ex = u.ex;
  double* __restrict__ in = u.in;
  const double* __restrict__ i_e = u.i_e;
  double* __restrict__ v = u.v;
  double* __restrict__ i_ex = u.i_ex;
  double* __restrict__ i_in = u.i_in;
  double* __restrict__ i0 = u.i0;
  int64_t* __restrict__ ref = u.ref;
  int64_t* __restrict__ flags = u.flags;
#pragma omp simd
  for (int64_t g = lo; g < hi; ++g) {
    constexpr bool kExp = K == IafKind::kPscExp;
    // The state in locals, stored once at the end: stepped through
    // references into the arrays, GCC stores each value and loads it back
    // within the iteration, and those loads wait on the stores.
    double vg = v[g], syn_ex = kExp ? i_ex[g] : 0.0, syn_in = kExp ? i_in[g] : 0.0, in_effect = kDc ? i0[g] : 0.0, h;
    int64_t r = ref[g];
    const bool spike = neurons::detail::iaf_step_of<K, double, int64_t>(
        ex[g], kExp ? in[g] : 0.0, kDc ? dc : 0.0, kOwnIe ? i_e[g] : i_e_all, vg, syn_ex, syn_in, in_effect, r, h, c);
    v[g] = vg;
    ref[g] = r;
    if constexpr (kExp) {
      i_ex[g] = syn_ex;
      i_in[g] = syn_in;
    }
    if constexpr (kDc) i0[g] = in_effect;
    flags[g] = spike ? 1 : 0;
    ex[g] = 0.0;  // the slot serves the step D steps on next
    if constexpr (kExp) in[g] = 0.0;
  }
}

template <IafKind K>
void step_kind(const IafUpdate& u, int64_t lo, int64_t hi) {
  const bool dc = u.has_dc, own = u.own_i_e;
  if (dc && own) {
    step_range<K, true, true>(u, lo, hi);
  } else if (dc) {
    step_range<K, true, false>(u, lo, hi);
  } else if (own) {
    step_range<K, false, true>(u, lo, hi);
  } else {
    step_range<K, false, false>(u, lo, hi);
  }
}

}  // namespace

int64_t iaf_update(const IafUpdate& u, int64_t lo, int64_t hi, int32_t* fired) {
  if (u.c.kind == IafKind::kPscDelta) {
    step_kind<IafKind::kPscDelta>(u, lo, hi);
  } else {
    step_kind<IafKind::kPscExp>(u, lo, hi);
  }
  // Spikes are rare (a few per thousand neuron-steps): skip 4 flags at a time.
  const int64_t* flags = u.flags;
  int64_t count = 0, g = lo;
  for (; g + 4 <= hi; g += 4) {
    if ((flags[g] | flags[g + 1] | flags[g + 2] | flags[g + 3]) == 0) continue;
    for (int64_t k = 0; k < 4; ++k) {
      if (flags[g + k]) fired[count++] = static_cast<int32_t>(g + k);
    }
  }
  for (; g < hi; ++g) {
    if (flags[g]) fired[count++] = static_cast<int32_t>(g);
  }
  return count;
}

}  // namespace snn::populations::detail::SNN_ISA
