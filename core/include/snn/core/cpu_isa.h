#pragma once
/// Which instruction set the hot CPU loops use. They are compiled three
/// times, for baseline x86-64, AVX2 and AVX-512, and give identical results
/// (the same IEEE and integer operations in the same order: SIMD lanes run
/// across neurons or outputs, never along a sum, and no build contracts a
/// multiply and an add into one FMA); by default the best build the CPU can
/// run is used. Forcing a lower one is for tests and for comparing speed.

#include <atomic>

namespace snn {

/// The highest instruction set the CPU loops may use.
enum class CpuIsa {
  kAuto,      ///< the best the CPU has: AVX-512, else AVX2, else baseline (default)
  kAvx2,      ///< AVX2 where the CPU has it, never AVX-512
  kBaseline,  ///< plain x86-64 (SSE2)
};

/// The build of the CPU loops that runs.
enum class CpuLoops {
  kBaseline,  ///< plain x86-64 (SSE2)
  kAvx2,      ///< AVX2 (256-bit vectors)
  kAvx512,    ///< AVX-512 F, BW, VL and DQ (512-bit vectors), as on Zen 4 and Skylake-SP and later
};

namespace detail {
inline std::atomic<CpuIsa>& cpu_isa_setting() {
  static std::atomic<CpuIsa> setting{CpuIsa::kAuto};
  return setting;
}

/// The best build this CPU can run, whatever the setting.
inline CpuLoops cpu_loops_supported() {
#if defined(__x86_64__) || defined(__i386__)
  static const CpuLoops best = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
      return CpuLoops::kAvx512;
    }
    return __builtin_cpu_supports("avx2") ? CpuLoops::kAvx2 : CpuLoops::kBaseline;
  }();
  return best;
#else
  return CpuLoops::kBaseline;
#endif
}
}  // namespace detail

/// Chooses the highest instruction set of the CPU loops for all later calls.
inline void set_cpu_isa(CpuIsa isa) { detail::cpu_isa_setting().store(isa); }

/// The build of the CPU loops that runs now: the best this CPU has, capped
/// by set_cpu_isa().
inline CpuLoops cpu_loops() {
  const CpuLoops best = detail::cpu_loops_supported();
  switch (detail::cpu_isa_setting().load()) {
    case CpuIsa::kBaseline:
      return CpuLoops::kBaseline;
    case CpuIsa::kAvx2:
      return best == CpuLoops::kAvx512 ? CpuLoops::kAvx2 : best;
    case CpuIsa::kAuto:
      break;
  }
  return best;
}

/// "baseline", "AVX2" or "AVX-512", for reports.
inline const char* cpu_loops_name(CpuLoops loops) {
  switch (loops) {
    case CpuLoops::kAvx512:
      return "AVX-512";
    case CpuLoops::kAvx2:
      return "AVX2";
    case CpuLoops::kBaseline:
      break;
  }
  return "baseline";
}

}  // namespace snn

/// Calls `ns::<isa>::call` for the build `loops` names, where ns is the
/// namespace holding the base, avx2 and avx512 copies of a loop (each ISA
/// source is compiled once per build into its own namespace: SNN_ISA).
/// An expression: the value of the call, if it has one.
#define SNN_ISA_CALL(loops, ns, call)                                      \
  ((loops) == ::snn::CpuLoops::kAvx512 ? ns::avx512::call                  \
   : (loops) == ::snn::CpuLoops::kAvx2 ? ns::avx2::call                    \
                                       : ns::base::call)
