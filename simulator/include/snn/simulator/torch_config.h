#pragma once
/// What the benchmarks print about the math libraries under LibTorch, so
/// that every number comes with the BLAS and threads it was measured with.

#include <string>

namespace snn {

/// The BLAS / LAPACK / oneDNN / CPU-capability lines of at::show_config()
/// (e.g. "Intel(R) oneAPI Math Kernel Library Version 2024.2"), one
/// "name=value" or line per entry, each ending in '\n', led by a line with
/// the LibTorch version and `threads`.
std::string torch_config_summary(int threads);

/// The BLAS LibTorch dispatches to, in one short phrase (e.g. "MKL
/// 2024.2-Product"), or "unknown".
std::string torch_blas_name();

}  // namespace snn
