#pragma once
// The builds of the CPU loops (snn/core/cpu_isa.h) a test compares: every
// one this CPU can run, each forced in turn by its CpuIsa setting. On a CPU
// without AVX-512 the kAuto entry is the AVX2 build again.

#include <vector>

#include "snn/core/cpu_isa.h"

namespace snn::test {

/// Baseline, AVX2 (at most), and the best this CPU has, in that order.
inline std::vector<CpuIsa> cpu_builds() { return {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAuto}; }

/// Sets the CPU loops' instruction set for its lifetime, then back to kAuto.
class CpuIsaScope {
 public:
  explicit CpuIsaScope(CpuIsa isa) { set_cpu_isa(isa); }
  ~CpuIsaScope() { set_cpu_isa(CpuIsa::kAuto); }
  CpuIsaScope(const CpuIsaScope&) = delete;
  CpuIsaScope& operator=(const CpuIsaScope&) = delete;
};

}  // namespace snn::test
