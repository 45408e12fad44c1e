// CPU entry of the fused neuron passes: splits the neurons over LibTorch's
// intra-op threads and runs the loops compiled for the best instruction set
// this CPU has. All builds do the same IEEE operations in the same order
// (no FMA contraction), so results do not depend on the choice.

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "neuron_cpu_loops.h"
#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"

namespace snn::neurons::detail {
namespace {

// Neurons handed to one thread at a time: large enough to amortise
// scheduling, small enough to balance two threads on a few hundred K neurons.
constexpr int64_t kGrain = 4096;

}  // namespace

template <typename T, typename S>
void forward_cpu(Form form, const ForwardArgs<T, S>& args) {
  const CpuLoops loops = cpu_loops();
  at::parallel_for(0, args.n, kGrain, [&](int64_t begin, int64_t end) {
    SNN_ISA_CALL(loops, snn::neurons::detail, forward_range(form, args, begin, end));
  });
}

template <typename T, typename S>
int64_t forward_pool_cpu(Form form, const ForwardArgs<T, S>& args) {
  const CpuLoops loops = cpu_loops();
  const int64_t R = 2 * args.pool_w;
  if (args.pool_w <= 0 || args.pool_w % 2 != 0 || R > kPoolRowsMax || args.n % R != 0 || args.h_trace) {
    throw InternalError("forward_pool_cpu: " + std::to_string(args.n) + " neurons in rows of " +
                        std::to_string(args.pool_w) + " cannot be pooled 2 x 2 (or traces were asked for)");
  }
  // Whole pairs of rows per thread, so that every window is one thread's.
  std::atomic<int64_t> fired{0};
  at::parallel_for(0, args.n / R, std::max<int64_t>(1, kGrain / R), [&](int64_t begin, int64_t end) {
    fired += SNN_ISA_CALL(loops, snn::neurons::detail, forward_pool_range(form, args, begin, end));
  });
  return fired.load();
}

template <typename T>
void backward_cpu(Form form, const BackwardArgs<T>& args) {
  const CpuLoops loops = cpu_loops();
  at::parallel_for(0, args.n, kGrain, [&](int64_t begin, int64_t end) {
    SNN_ISA_CALL(loops, snn::neurons::detail, backward_range(form, args, begin, end));
  });
}

template void forward_cpu<float, float>(Form, const ForwardArgs<float, float>&);
template void forward_cpu<float, uint8_t>(Form, const ForwardArgs<float, uint8_t>&);
template void forward_cpu<double, double>(Form, const ForwardArgs<double, double>&);
template void forward_cpu<double, uint8_t>(Form, const ForwardArgs<double, uint8_t>&);
template int64_t forward_pool_cpu<float, float>(Form, const ForwardArgs<float, float>&);
template int64_t forward_pool_cpu<float, uint8_t>(Form, const ForwardArgs<float, uint8_t>&);
template int64_t forward_pool_cpu<double, double>(Form, const ForwardArgs<double, double>&);
template int64_t forward_pool_cpu<double, uint8_t>(Form, const ForwardArgs<double, uint8_t>&);
template void backward_cpu<float>(Form, const BackwardArgs<float>&);
template void backward_cpu<double>(Form, const BackwardArgs<double>&);

}  // namespace snn::neurons::detail
