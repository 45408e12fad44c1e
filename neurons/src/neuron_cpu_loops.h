#pragma once
// The CPU loops over a range of neurons, compiled once per instruction set
// (namespaces base, avx2 and avx512; see neuron_cpu_loops.cpp).

#include "kernels.h"

namespace snn::neurons::detail {
#define SNN_DECLARE_CPU_LOOPS(isa)                                                      \
  namespace isa {                                                                       \
  template <typename T, typename S>                                                     \
  void forward_range(Form form, const ForwardArgs<T, S>& args, int64_t begin, int64_t end); \
  template <typename T, typename S>                                                     \
  int64_t forward_pool_range(Form form, const ForwardArgs<T, S>& args, int64_t begin, int64_t end); \
  template <typename T>                                                                 \
  void backward_range(Form form, const BackwardArgs<T>& args, int64_t begin, int64_t end); \
  }
SNN_DECLARE_CPU_LOOPS(base)
SNN_DECLARE_CPU_LOOPS(avx2)
SNN_DECLARE_CPU_LOOPS(avx512)
#undef SNN_DECLARE_CPU_LOOPS
}  // namespace snn::neurons::detail
