#include "snn/dist/pipeline_links.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "snn/core/error.h"

namespace snn::dist {
namespace {

// A block's header: dtype, dims, then the sizes (unused ones 0).
constexpr int64_t kMaxDims = 8;
constexpr int64_t kHeaderLength = 2 + kMaxDims;

// Spike blocks (bool, a byte per 0/1) travel as bits: 8 times fewer bytes
// through the sockets, whose copies otherwise cost the ranks more than the
// packing does.
torch::Tensor pack_bits(const torch::Tensor& spikes) {
  const int64_t n = spikes.numel();
  torch::Tensor packed = torch::empty({(n + 7) / 8}, torch::kUInt8);
  const uint8_t* in = reinterpret_cast<const uint8_t*>(spikes.data_ptr<bool>());
  uint8_t* out = packed.data_ptr<uint8_t>();
  const int64_t whole = n / 8;
  for (int64_t i = 0; i < whole; ++i) {
    uint64_t x;
    std::memcpy(&x, in + 8 * i, 8);
    // Byte k holds b_k in bit 0: fold bytes k+1, k+2..k+3, k+4..k+7 into bits 1, 2-3, 4-7 of byte 0.
    x |= x >> 7;
    x |= x >> 14;
    x |= x >> 28;
    out[i] = static_cast<uint8_t>(x);
  }
  if (whole * 8 < n) {
    uint8_t last = 0;
    for (int64_t j = whole * 8; j < n; ++j) last = static_cast<uint8_t>(last | (in[j] << (j - whole * 8)));
    out[whole] = last;
  }
  return packed;
}

void unpack_bits(const torch::Tensor& packed, torch::Tensor& spikes) {
  static const std::array<uint64_t, 256> kBytes = [] {
    std::array<uint64_t, 256> t{};
    for (int v = 0; v < 256; ++v) {
      for (int b = 0; b < 8; ++b) t[v] |= static_cast<uint64_t>((v >> b) & 1) << (8 * b);
    }
    return t;
  }();
  const int64_t n = spikes.numel();
  const uint8_t* in = packed.data_ptr<uint8_t>();
  uint8_t* out = reinterpret_cast<uint8_t*>(spikes.data_ptr<bool>());
  const int64_t whole = n / 8;
  for (int64_t i = 0; i < whole; ++i) std::memcpy(out + 8 * i, &kBytes[in[i]], 8);
  for (int64_t j = whole * 8; j < n; ++j) out[j] = static_cast<uint8_t>((in[whole] >> (j - whole * 8)) & 1);
}

class RankSource : public BlockSource {
 public:
  RankSource(World& world, int64_t src, int tag) : world_(world), src_(src), tag_(tag) {}

  torch::Tensor receive() override {
    torch::Tensor header = torch::empty({kHeaderLength}, torch::kLong);
    world_.recv(header, src_, tag_, &cancel_);
    const int64_t* h = header.data_ptr<int64_t>();
    const int64_t dtype = h[0], dims = h[1];
    if (dtype < 0 || dtype >= static_cast<int64_t>(c10::ScalarType::NumOptions) || dims < 0 || dims > kMaxDims) {
      throw Error(fmt::format("rank {} sent a pipeline block with a bad header (dtype {}, {} dims): are both ranks "
                              "the same snnsim?",
                              src_, dtype, dims));
    }
    std::vector<int64_t> sizes(h + 2, h + 2 + dims);
    torch::Tensor t = torch::empty(sizes, torch::TensorOptions().dtype(static_cast<c10::ScalarType>(dtype)));
    if (t.numel() == 0) return t;
    if (t.scalar_type() == torch::kBool) {
      torch::Tensor packed = torch::empty({(t.numel() + 7) / 8}, torch::kUInt8);
      world_.recv(packed, src_, tag_, &cancel_);
      unpack_bits(packed, t);
      return t;
    }
    world_.recv(t, src_, tag_, &cancel_);
    return t;
  }
  void cancel() noexcept override { cancel_.cancel(); }

 private:
  World& world_;
  const int64_t src_;
  const int tag_;
  Cancel cancel_;
};

class RankSink : public BlockSink {
 public:
  RankSink(World& world, int64_t dst, int tag) : world_(world), dst_(dst), tag_(tag) {}

  void send(const torch::Tensor& block) override {
    if (block.dim() > kMaxDims) {
      throw Error(fmt::format("a pipeline block of {} dims cannot go to rank {} (at most {})", block.dim(), dst_,
                              kMaxDims));
    }
    const torch::Tensor data = block.to(torch::kCPU).contiguous();
    std::array<int64_t, kHeaderLength> h{};
    h[0] = static_cast<int64_t>(data.scalar_type());
    h[1] = data.dim();
    for (int64_t d = 0; d < data.dim(); ++d) h[2 + d] = data.size(d);
    world_.send(torch::from_blob(h.data(), {kHeaderLength}, torch::kLong), dst_, tag_, &cancel_);
    if (data.numel() == 0) return;
    world_.send(data.scalar_type() == torch::kBool ? pack_bits(data) : data, dst_, tag_, &cancel_);
  }
  void cancel() noexcept override { cancel_.cancel(); }

 private:
  World& world_;
  const int64_t dst_;
  const int tag_;
  Cancel cancel_;
};

}  // namespace

std::shared_ptr<BlockSource> block_source(World& world, int64_t src, int tag) {
  return std::make_shared<RankSource>(world, src, tag);
}

std::shared_ptr<BlockSink> block_sink(World& world, int64_t dst, int tag) {
  return std::make_shared<RankSink>(world, dst, tag);
}

PipelineLinks pipeline_links(World& world) {
  PipelineLinks l;
  const int64_t n = world.size(), r = world.rank();
  if (n < 2) return l;
  if (r > 0) l.upstream = block_source(world, r - 1, kPipelineBlockTag);
  l.downstream = r + 1 < n ? block_sink(world, r + 1, kPipelineBlockTag) : block_sink(world, 0, kPipelineResultTag);
  if (r == 0) l.results = block_source(world, n - 1, kPipelineResultTag);
  return l;
}

}  // namespace snn::dist
