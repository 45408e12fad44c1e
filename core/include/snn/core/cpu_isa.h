#pragma once
/// Which instruction set the hot CPU loops use. They are compiled for
/// baseline x86-64 and for AVX2 and give identical results (the same IEEE and
/// integer operations in the same order); by default the best one the CPU
/// has is used. Forcing the baseline is for tests and for comparing speed.

#include <atomic>

namespace snn {

enum class CpuIsa {
  kAuto,      ///< AVX2 where the CPU has it, else baseline (default)
  kBaseline,  ///< plain x86-64 (SSE2)
};

namespace detail {
inline std::atomic<CpuIsa>& cpu_isa_setting() {
  static std::atomic<CpuIsa> setting{CpuIsa::kAuto};
  return setting;
}
}  // namespace detail

/// Chooses the instruction set of the CPU loops for all later calls.
inline void set_cpu_isa(CpuIsa isa) { detail::cpu_isa_setting().store(isa); }

/// Whether the CPU loops run their AVX2 build now.
inline bool cpu_loops_use_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has_avx2 = __builtin_cpu_supports("avx2");
  return has_avx2 && detail::cpu_isa_setting().load() == CpuIsa::kAuto;
#else
  return false;
#endif
}

}  // namespace snn
