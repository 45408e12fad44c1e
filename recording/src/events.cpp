#include "snn/recording/events.h"

#include <sstream>

#include "snn/core/build_info.h"
#include "snn/core/error.h"
#include "snn/recording/detail/compaction.h"

#if SNN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace snn::recording {
namespace {

template <typename S>
torch::Tensor positions_of(const torch::Tensor& spikes, detail::SampleMajorOffset shape) {
  const S* p = reinterpret_cast<const S*>(spikes.data_ptr());
  if (spikes.is_cuda()) {
#if SNN_WITH_CUDA
    const c10::cuda::CUDAGuard guard(spikes.device());
    void* stream = at::cuda::getCurrentCUDAStream().stream();
    const int64_t n = detail::count_spikes_cuda(p, shape, stream);
    torch::Tensor pos = torch::empty({n}, spikes.options().dtype(torch::kLong));
    detail::compact_spikes_cuda(p, shape, pos.data_ptr<int64_t>(), stream);
    return pos.cpu();
#else
    throw Error("spikes are on " + spikes.device().str() + " but this snnsim was built without CUDA");
#endif
  }
  torch::Tensor pos = torch::empty({shape.steps * shape.batch * shape.neurons}, torch::kLong);
  const int64_t n = detail::compact_spikes_host(p, shape, pos.data_ptr<int64_t>());
  return pos.narrow(0, 0, n);
}

}  // namespace

SpikeEvents compact_spikes(const torch::Tensor& spikes_in, const torch::Tensor& node_ids) {
  if (!spikes_in.defined() || spikes_in.dim() != 3) {
    std::ostringstream os;
    os << "spike compaction needs spikes [T, B, N], got "
       << (spikes_in.defined() ? c10::str(spikes_in.sizes()) : std::string("an undefined tensor"));
    throw Error(os.str());
  }
  torch::Tensor spikes = spikes_in;
  if (node_ids.defined()) {
    const torch::Tensor ids = node_ids.to(torch::kCPU, torch::kLong);
    const int64_t n = spikes.size(2);
    if (ids.dim() != 1 || ids.numel() == 0) throw Error("recorded neuron ids must be a non-empty list");
    const int64_t* ip = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) {
      if (ip[i] < 0 || ip[i] >= n || (i > 0 && ip[i] <= ip[i - 1])) {
        throw Error("recorded neuron ids must be strictly ascending ids in [0, " + std::to_string(n) + "), got " +
                    std::to_string(ip[i]) + " at position " + std::to_string(i));
      }
    }
    spikes = spikes.index_select(2, ids.to(spikes.device()));
  }
  if (spikes.scalar_type() == torch::kBool) spikes = spikes.view(torch::kUInt8);
  spikes = spikes.contiguous();
  const detail::SampleMajorOffset shape{spikes.size(0), spikes.size(1), spikes.size(2)};
  torch::Tensor pos;
  switch (spikes.scalar_type()) {
    case torch::kUInt8: pos = positions_of<uint8_t>(spikes, shape); break;
    case torch::kFloat: pos = positions_of<float>(spikes, shape); break;
    case torch::kDouble: pos = positions_of<double>(spikes, shape); break;
    default: throw Error(std::string("spikes must be bool, float32 or float64, got ") + c10::toString(spikes.scalar_type()));
  }
  // Positions ascend, so one walk over them and the (sample, step) rows
  // splits each into sample, step and neuron without a division.
  const int64_t n = pos.numel();
  SpikeEvents e;
  e.sample = torch::empty({n}, torch::kLong);
  e.step = torch::empty({n}, torch::kLong);
  e.node = torch::empty({n}, torch::kLong);
  e.per_sample = torch::zeros({shape.batch}, torch::kLong);
  const int64_t* pp = pos.data_ptr<int64_t>();
  int64_t *sp = e.sample.data_ptr<int64_t>(), *tp = e.step.data_ptr<int64_t>(), *np = e.node.data_ptr<int64_t>();
  int64_t* count = e.per_sample.data_ptr<int64_t>();
  const int64_t* ids = nullptr;
  torch::Tensor ids_cpu;
  if (node_ids.defined()) {
    ids_cpu = node_ids.to(torch::kCPU, torch::kLong).contiguous();
    ids = ids_cpu.data_ptr<int64_t>();
  }
  int64_t b = 0, t = 0, row_start = 0;
  for (int64_t i = 0; i < n; ++i) {
    while (pp[i] >= row_start + shape.neurons) {
      row_start += shape.neurons;
      if (++t == shape.steps) {
        t = 0;
        ++b;
      }
    }
    sp[i] = b;
    tp[i] = t;
    np[i] = ids ? ids[pp[i] - row_start] : pp[i] - row_start;
    ++count[b];
  }
  return e;
}

}  // namespace snn::recording
