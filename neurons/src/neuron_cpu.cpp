// CPU entry of the fused neuron passes: splits the neurons over LibTorch's
// intra-op threads and runs the loops compiled for the best instruction set
// this CPU has. All builds do the same IEEE operations in the same order
// (no FMA contraction), so results do not depend on the choice.

#include <ATen/Parallel.h>

#include "neuron_cpu_loops.h"
#include "snn/core/cpu_isa.h"

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
template void backward_cpu<float>(Form, const BackwardArgs<float>&);
template void backward_cpu<double>(Form, const BackwardArgs<double>&);

}  // namespace snn::neurons::detail
