#include "snn/simulator/distributed.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <numeric>
#include <type_traits>

#include "snn/core/error.h"
#include "snn/neurons/linear.h"
#include "snn/simulator/fused_adam.h"

namespace snn {

SampleRange rank_share(int64_t samples, int64_t rank, int64_t world_size) {
  if (world_size > samples) {
    throw Error(fmt::format("{} ranks for {} samples: every rank needs at least one sample; use at most {} ranks, "
                            "or more samples (--limit)",
                            world_size, samples, samples));
  }
  SampleRange r;
  r.begin = rank * samples / world_size;
  r.end = (rank + 1) * samples / world_size;
  return r;
}

SampleRange batch_share(int64_t size, int64_t rank, int64_t world_size) {
  SampleRange r;
  r.begin = rank * size / world_size;
  r.end = (rank + 1) * size / world_size;
  return r;
}

namespace {
// flat_gradient() of the parameters with include[i] (all where empty),
// concatenated in parameters() order; overrides[i], where given and
// defined, stands for parameter i's gradient.
torch::Tensor flat_gradient_of(const SpikingNetwork& net, const std::vector<char>& include,
                               const std::vector<torch::Tensor>& overrides = {}) {
  const std::vector<Linear> layers = net.linear_layers();
  const std::vector<torch::Tensor> params = net.parameters();
  const auto included = [&](size_t i) { return include.empty() || include[i] != 0; };
  int64_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) total += included(i) ? params[i].numel() : 0;
  // Each part copied once, straight into its place: a carried weight sum is
  // a transposed view, and reshaping it first, then concatenating, copied
  // every gradient twice (a data-parallel step's largest copies).
  torch::Tensor flat = torch::empty({total}, torch::kDouble);
  int64_t at = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!included(i)) continue;
    const torch::Tensor& p = params[i];
    torch::Tensor part;
    for (const auto& fc : layers) {
      if (p.is_same(fc->weight) || (fc->bias.defined() && p.is_same(fc->bias))) part = fc->carried_grad_sum(p);
    }
    torch::Tensor place = flat.narrow(0, at, p.numel()).view(p.sizes());
    at += p.numel();
    if (i < overrides.size() && overrides[i].defined()) {
      place.copy_(overrides[i]);
    } else if (part.defined() && part.dim() == 2 && part.scalar_type() == torch::kDouble && part.t().is_contiguous()) {
      // A carried weight sum, the transpose of a contiguous [in, out]: the
      // layers' own transposing pass (LibTorch's transposed copy took
      // twice as long, 2 ms a step for a 784 x 1024 weight here).
      functional::round_transposed(part.t(), place);
    } else if (part.defined()) {
      place.copy_(part);
    } else if (p.grad().defined()) {
      place.copy_(p.grad());  // to double on the CPU, as it copies
    } else {
      place.zero_();
    }
  }
  return flat;
}
}  // namespace

torch::Tensor flat_gradient(const SpikingNetwork& net) { return flat_gradient_of(net, {}); }

void reduce_gradients(dist::World& world, const SpikingNetwork& net) {
  const torch::Tensor sum = world.sum_in_rank_order(flat_gradient(net));
  int64_t at = 0;
  for (auto p : net.parameters()) {
    const int64_t n = p.numel();
    const torch::Tensor mine = sum.narrow(0, at, n).reshape(p.sizes()).to(p.options().requires_grad(false));
    at += n;
    torch::Tensor& g = p.mutable_grad();
    if (g.defined()) {
      g.copy_(mine);
    } else {
      g = mine.clone();
    }
  }
}

namespace {
torch::Tensor flat_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.detach().to(torch::kCPU).reshape({-1}));
  return torch::cat(flat);
}
}  // namespace

namespace {

// Rows [rows, in] of zeros and ones (bool bytes, or reals) packed 8 to a
// byte (element k of a group of 8 at bit k; a row's last byte partly
// used). For bytes, one multiply gathers a group's 8 bytes, each 0 or 1,
// into its 8 bits (every product term lands on its own bit: no carries).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "pack_bits reads a group's 8 bytes as one little-endian word");

template <typename T>
void pack_bits(const T* x, int64_t rows, int64_t in, uint8_t* out) {
  const int64_t stride = (in + 7) / 8, whole = in / 8;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * in;
    uint8_t* o = out + r * stride;
    for (int64_t g = 0; g < whole; ++g) {
      if constexpr (std::is_same_v<T, uint8_t>) {
        uint64_t v;
        std::memcpy(&v, xr + 8 * g, 8);
        o[g] = static_cast<uint8_t>((v * 0x0102040810204080ULL) >> 56);
      } else {
        unsigned b = 0;
        for (int k = 0; k < 8; ++k) b |= static_cast<unsigned>(xr[8 * g + k] != T(0)) << k;
        o[g] = static_cast<uint8_t>(b);
      }
    }
    if (whole < stride) {
      unsigned b = 0;
      for (int64_t k = 0; 8 * whole + k < in; ++k) b |= static_cast<unsigned>(xr[8 * whole + k] != T(0)) << k;
      o[whole] = static_cast<uint8_t>(b);
    }
  }
}

// Whether every one of x's n values is 0 or 1 (spikes as reals): one pass
// the compiler vectorises, stopping at the first block with another value.
template <typename T>
bool zeros_and_ones(const T* x, int64_t n) {
  for (int64_t i0 = 0; i0 < n; i0 += 4096) {
    int other = 0;
    for (int64_t i = i0; i < std::min(n, i0 + 4096); ++i) {
      other |= static_cast<int>(x[i] != T(0)) & static_cast<int>(x[i] != T(1));
    }
    if (other != 0) return false;
  }
  return true;
}

// pack_bits' way back.
void unpack_bits(const uint8_t* bits, int64_t rows, int64_t in, uint8_t* x) {
  static const std::array<uint64_t, 256> kBytes = [] {
    std::array<uint64_t, 256> t{};
    for (unsigned b = 0; b < 256; ++b) {
      for (unsigned k = 0; k < 8; ++k) t[b] |= static_cast<uint64_t>((b >> k) & 1u) << (8 * k);
    }
    return t;
  }();
  const int64_t stride = (in + 7) / 8, whole = in / 8;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* br = bits + r * stride;
    uint8_t* xr = x + r * in;
    for (int64_t g = 0; g < whole; ++g) std::memcpy(xr + 8 * g, &kBytes[br[g]], 8);
    for (int64_t k = 0; 8 * whole + k < in; ++k) xr[8 * whole + k] = static_cast<uint8_t>((br[whole] >> k) & 1);
  }
}

}  // namespace

// One Linear layer's side of ShardedAdam's row exchange (GradRowsExchange):
// every rank sends its input rows (packed bits where they are spikes) to
// every rank that sums columns of this layer, with that rank's columns of
// its output gradient; per step, at its first backward call, the ranks
// decide alike whether rows move fewer bytes than the gradient sums would.
//
// One all-to-all a call where every rank's rows are spikes (bool, or reals
// of 0 and 1: what the layers of a spiking network read), with nothing
// exchanged beforehand: every size follows from what the ranks already
// share (the batch's samples and their shares, the call's steps, the
// layer's shape and dtypes), and each part opens with a header that the
// receiver checks. A second all-to-all carries the values of the ranks
// whose rows are not spikes to the ranks with columns, where any such
// pair exists (every rank reads every header, so all know alike). Each collective costs a few hundred microseconds
// of hand-offs on this project's 2-core machine whatever its size: the
// earlier version gathered every rank's row count and spike flag first,
// one more per layer and step.
class RowsOverRanks : public GradRowsExchange {
 public:
  /// `batch`: what ShardedAdam::begin_batch() says of the batch, shared by
  /// the layers; `layer`: this layer's index among them (checked across
  /// ranks at every call, so that two ranks never exchange different
  /// layers' rows).
  RowsOverRanks(dist::World& world, std::vector<std::pair<int64_t, int64_t>> columns, int64_t in, int64_t out,
                std::shared_ptr<const ShardedAdam::Batch> batch, int64_t layer)
      : world_(world), columns_(std::move(columns)), in_(in), out_(out), batch_(std::move(batch)), layer_(layer) {}

  std::pair<int64_t, int64_t> columns() const override { return columns_[static_cast<size_t>(world_.rank())]; }

  /// The next step decides anew.
  void restart() {
    mode_ = Mode::kUndecided;
    calls_ = 0;
  }

  std::pair<torch::Tensor, torch::Tensor> gather(const torch::Tensor& x2, const torch::Tensor& gy_in,
                                                 int64_t steps) override {
    if (!batch_->every_rank_has_samples || mode_ == Mode::kSums) return {};
    const int64_t W = world_.size(), me = world_.rank(), rows = x2.size(0);
    const torch::Tensor gy = gy_in.contiguous();
    const torch::Tensor x = x2.contiguous();
    // Every rank's rows: its share of the batch in each of the call's steps.
    std::vector<int64_t> rows_of(static_cast<size_t>(W));
    int64_t total = 0;
    for (int64_t r = 0; r < W; ++r) {
      const SampleRange share = batch_share(batch_->samples, r, W);
      rows_of[static_cast<size_t>(r)] = (share.end - share.begin) * steps;
      total += rows_of[static_cast<size_t>(r)];
    }
    if (rows != rows_of[static_cast<size_t>(me)] || x.size(1) != in_ || gy.size(1) != out_ || gy.size(0) != rows) {
      throw InternalError(fmt::format("the gradient row exchange: rank {} has {} rows of {} inputs and {} x {} "
                                      "output gradients, its share is {} rows ({} steps of a batch of {}) of {} "
                                      "and {}",
                                      me, rows, x.size(1), gy.size(0), gy.size(1), rows_of[static_cast<size_t>(me)],
                                      steps, batch_->samples, in_, out_));
    }
    const int64_t gsize = gy.element_size();
    if (mode_ == Mode::kUndecided) {
      // Bytes a rank receives per step, summed over the ranks and divided
      // by W - 1: every rank's rows once (bits, as spikes, unless the last
      // exchange of this layer carried values), its gradient columns once,
      // in each of the step's calls (this one's rows times batch steps over
      // its steps); against every weight's and bias's double sum once. In
      // whole numbers (the same decision on every rank, from what they
      // share): both sides times 8 W and this call's steps.
      const int64_t x_bits = values_ ? 1 + 8 * x.element_size() : 1;
      const int64_t rows_cost =
          total * (in_ * x_bits * W + 8 * out_ * gsize) * std::max<int64_t>(steps, batch_->steps);
      const int64_t sums_cost = 64 * (in_ + 1) * out_ * W * steps;
      mode_ = rows_cost <= sums_cost ? Mode::kRows : Mode::kSums;
      if (mode_ == Mode::kSums) return {};
    }
    bool binary = x.scalar_type() == torch::kBool;
    if (!binary) {
      AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_zeros_and_ones",
                                 [&] { binary = zeros_and_ones(x.data_ptr<scalar_t>(), x.numel()); });
    }
    // A part: the header, then for a rank with columns this rank's rows as
    // bits (zeros where they are not spikes: the values follow) and its
    // gradient columns, each padded to 16 bytes so that values are read
    // from aligned addresses.
    const int64_t header[kHeader] = {layer_, calls_++, steps, rows, static_cast<int64_t>(binary),
                                     static_cast<int64_t>(x.scalar_type()), static_cast<int64_t>(gy.scalar_type()),
                                     in_, out_};
    const auto padded = [](int64_t bytes) { return (bytes + 15) / 16 * 16; };
    const int64_t head = padded(static_cast<int64_t>(sizeof header)), xrow = (in_ + 7) / 8;
    const auto part = [&](int64_t rows_r, int64_t cols) {
      return head + (cols == 0 ? int64_t(0) : padded(rows_r * xrow) + padded(rows_r * cols * gsize));
    };
    const auto [c0, c1] = columns();
    const int64_t n = c1 - c0;
    std::vector<int64_t> send(static_cast<size_t>(W), 0), recv(static_cast<size_t>(W), 0);
    for (int64_t r = 0; r < W; ++r) {
      if (r == me) continue;
      const auto [d0, d1] = columns_[static_cast<size_t>(r)];
      send[static_cast<size_t>(r)] = part(rows, d1 - d0);
      recv[static_cast<size_t>(r)] = part(rows_of[static_cast<size_t>(r)], n);
    }
    torch::Tensor bits;
    if (binary) {
      bits = torch::empty({rows * xrow}, torch::kUInt8);
      if (x.scalar_type() == torch::kBool) {
        pack_bits(static_cast<const uint8_t*>(x.data_ptr()), rows, in_, bits.data_ptr<uint8_t>());
      } else {
        AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_pack_bits",
                                   [&] { pack_bits(x.data_ptr<scalar_t>(), rows, in_, bits.data_ptr<uint8_t>()); });
      }
    }
    torch::Tensor buffer = torch::zeros({std::accumulate(send.begin(), send.end(), int64_t(0))}, torch::kUInt8);
    uint8_t* at = buffer.data_ptr<uint8_t>();
    for (int64_t r = 0; r < W; ++r) {
      if (r == me) continue;
      std::memcpy(at, header, sizeof header);
      at += head;
      const auto [d0, d1] = columns_[static_cast<size_t>(r)];
      if (d1 == d0) continue;
      if (binary) std::memcpy(at, bits.data_ptr(), static_cast<size_t>(rows * xrow));
      at += padded(rows * xrow);
      torch::from_blob(at, {rows, d1 - d0}, gy.options()).copy_(gy.narrow(1, d0, d1 - d0));
      at += padded(rows * (d1 - d0) * gsize);
    }
    const torch::Tensor received = world_.exchange(buffer, send, recv);
    // The headers: what must agree, and whose rows are spikes.
    std::vector<const uint8_t*> from(static_cast<size_t>(W), nullptr);  // each rank's part
    std::vector<char> spikes(static_cast<size_t>(W), 0);
    spikes[static_cast<size_t>(me)] = static_cast<char>(binary);
    const uint8_t* src = received.data_ptr<uint8_t>();
    for (int64_t r = 0; r < W; ++r) {
      if (r == me) continue;
      from[static_cast<size_t>(r)] = src;
      int64_t h[kHeader];
      std::memcpy(h, src, sizeof h);
      const int64_t want[kHeader] = {layer_, header[1], steps, rows_of[static_cast<size_t>(r)], h[4], header[5],
                                     header[6], in_, out_};
      static constexpr const char* kNames[kHeader] = {"layer", "call in the step", "steps", "rows", "spikes",
                                                      "input dtype", "gradient dtype", "inputs", "outputs"};
      for (int64_t k = 0; k < kHeader; ++k) {
        if (h[k] != want[k]) {
          throw InternalError(fmt::format("the gradient row exchange: rank {}'s {} is {}, rank {} expected {}", r,
                                          kNames[k], h[k], me, want[k]));
        }
      }
      spikes[static_cast<size_t>(r)] = static_cast<char>(h[4] != 0);
      src += recv[static_cast<size_t>(r)];
    }
    const bool all_binary = std::all_of(spikes.begin(), spikes.end(), [](char b) { return b != 0; });
    values_ = !all_binary;  // alike on every rank: the next step's choice counts them
    // The values of the rows that are not spikes, to the ranks with columns
    // (a collective wherever any such rank sends to any other rank with
    // columns: every rank knows both, so all call it or none).
    bool any_values = false;
    for (int64_t r = 0; r < W; ++r) {
      for (int64_t q = 0; q < W; ++q) {
        const auto [e0, e1] = columns_[static_cast<size_t>(q)];
        any_values = any_values || (q != r && !spikes[static_cast<size_t>(r)] && e1 > e0);
      }
    }
    torch::Tensor values;
    std::vector<int64_t> value_offset(static_cast<size_t>(W), 0);
    if (any_values) {
      const int64_t esize = x.element_size();
      std::vector<int64_t> vsend(static_cast<size_t>(W), 0), vrecv(static_cast<size_t>(W), 0);
      for (int64_t r = 0, off = 0; r < W; ++r) {
        if (r == me) continue;
        const auto [d0, d1] = columns_[static_cast<size_t>(r)];
        if (!binary && d1 > d0) vsend[static_cast<size_t>(r)] = rows * in_ * esize;
        if (!spikes[static_cast<size_t>(r)] && n > 0)
          vrecv[static_cast<size_t>(r)] = rows_of[static_cast<size_t>(r)] * in_ * esize;
        value_offset[static_cast<size_t>(r)] = off;
        off += vrecv[static_cast<size_t>(r)];
      }
      const torch::Tensor mine = x.reshape({-1}).view(torch::kUInt8);
      torch::Tensor vbuffer = torch::empty({std::accumulate(vsend.begin(), vsend.end(), int64_t(0))}, torch::kUInt8);
      for (int64_t r = 0, off = 0; r < W; ++r) {
        if (vsend[static_cast<size_t>(r)] == 0) continue;
        vbuffer.narrow(0, off, vsend[static_cast<size_t>(r)]).copy_(mine);
        off += vsend[static_cast<size_t>(r)];
      }
      values = world_.exchange(vbuffer, vsend, vrecv);
    }
    if (n == 0) return {torch::empty({0, in_}, x.options()), torch::empty({0, 0}, gy.options())};
    // The whole batch, each step's samples in rank order.
    const int64_t per_step = total / steps;
    torch::Tensor xg = torch::empty({total, in_}, all_binary ? torch::kBool : x.scalar_type());
    torch::Tensor gyg = torch::empty({total, n}, gy.scalar_type());
    const torch::Tensor xg3 = xg.view({steps, per_step, in_}), gy3 = gyg.view({steps, per_step, n});
    int64_t offset = 0;
    for (int64_t r = 0; r < W; ++r) {
      const int64_t rr = rows_of[static_cast<size_t>(r)], pr = rr / steps;
      if (r == me) {
        xg3.narrow(1, offset, pr).copy_(x.view({steps, pr, in_}));  // reals of 0 and 1 to bool, where binary
        gy3.narrow(1, offset, pr).copy_(gy.narrow(1, c0, n).reshape({steps, pr, n}));
      } else {
        const uint8_t* p = from[static_cast<size_t>(r)] + head;
        if (!spikes[static_cast<size_t>(r)]) {
          const uint8_t* v = values.data_ptr<uint8_t>() + value_offset[static_cast<size_t>(r)];
          xg3.narrow(1, offset, pr).copy_(torch::from_blob(const_cast<uint8_t*>(v), {steps, pr, in_}, xg.options()));
        } else if (all_binary) {
          for (int64_t s = 0; s < steps; ++s) {
            unpack_bits(p + s * pr * xrow, pr, in_, static_cast<uint8_t*>(xg.data_ptr()) + (s * per_step + offset) * in_);
          }
        } else {  // spikes beside rows that are not: as reals of 0 and 1
          const torch::Tensor unpacked = torch::empty({steps, pr, in_}, torch::kUInt8);
          unpack_bits(p, rr, in_, unpacked.data_ptr<uint8_t>());
          xg3.narrow(1, offset, pr).copy_(unpacked);
        }
        p += padded(rr * xrow);
        gy3.narrow(1, offset, pr).copy_(torch::from_blob(const_cast<uint8_t*>(p), {steps, pr, n}, gyg.options()));
      }
      offset += pr;
    }
    return {xg, gyg};
  }

 private:
  enum class Mode { kUndecided, kRows, kSums };
  dist::World& world_;
  std::vector<std::pair<int64_t, int64_t>> columns_;  // every rank's
  int64_t in_, out_;
  std::shared_ptr<const ShardedAdam::Batch> batch_;
  int64_t layer_;
  Mode mode_ = Mode::kUndecided;
  int64_t calls_ = 0;    // this step's
  bool values_ = false;  // whether this layer's last exchange carried values (rows not spikes)
  static constexpr int64_t kHeader = 9;
};

bool ShardedAdam::can_shard(const SpikingNetwork& net) {
  const auto params = net.parameters();
  if (params.empty()) return false;
  for (const auto& p : params) {
    if (p.scalar_type() != params[0].scalar_type() || !p.is_floating_point()) return false;
  }
  return true;
}

ShardedAdam::ShardedAdam(dist::World& world, const SpikingNetwork& net, const torch::optim::AdamOptions& options,
                         const std::vector<AdamMoments>& state)
    : world_(world), net_(net), params_(net.parameters()) {
  if (!can_shard(net)) throw InternalError("ShardedAdam: the parameters do not share one floating dtype");
  int64_t total = 0;
  for (const auto& p : params_) total += p.numel();
  for (int64_t r = 0; r < world.size(); ++r) {
    const SampleRange part = batch_share(total, r, world.size());
    split_.push_back(part.end - part.begin);
    if (r == world.rank()) begin_ = part.begin;
  }
  // The layers' double sums are what step() exchanges: nothing reads
  // their rounding into .grad() (see the destructor).
  for (Linear fc : net.linear_layers()) {
    if (fc->grad_sums()) fc->keep_grad_sums_only(true);
  }
  offsets_.push_back(0);
  for (const auto& p : params_) offsets_.push_back(offsets_.back() + p.numel());
  add_row_exchanges();
  const int64_t mine = split_[static_cast<size_t>(world.rank())];
  shard_ = flat_of(params_).narrow(0, begin_, mine).clone().requires_grad_(true);
  adam_ = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{shard_}, options);
  // A resumed state: this rank's slice of every parameter's moments.
  bool resumed = !state.empty();
  for (const auto& m : state) resumed = resumed && m.exp_avg.defined();
  if (resumed) {
    std::vector<torch::Tensor> avg, avg_sq;
    for (const auto& m : state) {
      avg.push_back(m.exp_avg);
      avg_sq.push_back(m.exp_avg_sq);
    }
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(state[0].step);
    s->exp_avg(flat_of(avg).narrow(0, begin_, mine).to(shard_.scalar_type()).clone());
    s->exp_avg_sq(flat_of(avg_sq).narrow(0, begin_, mine).to(shard_.scalar_type()).clone());
    adam_->state()[shard_.unsafeGetTensorImpl()] = std::move(s);
  }
}

void ShardedAdam::add_row_exchanges() {
  const int64_t W = world_.size();
  const auto index_of = [&](const torch::Tensor& t) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (t.defined() && params_[i].is_same(t)) return i;
    }
    return params_.size();
  };
  // With a stage on a GPU, when a CPU layer's backward runs can depend on
  // the GPU's timing, and the ranks' exchanges could come in different
  // orders: the row exchange is for networks on the CPU alone.
  for (const auto& p : params_) {
    if (!p.is_cpu()) return;
  }
  for (Linear fc : net_.linear_layers()) {
    const int64_t out = fc->weight.size(0), in = fc->weight.size(1);
    const size_t w = index_of(fc->weight), b = index_of(fc->bias);
    if (!fc->grad_sums() || !fc->weight.is_cpu() || in == 0 || w == params_.size()) continue;
    if (fc->bias.defined() && b == params_.size()) continue;
    // Rank r's weight rows: those its slice of the flat parameters touches.
    std::vector<std::pair<int64_t, int64_t>> columns;
    for (int64_t r = 0; r < W; ++r) {
      const int64_t s0 = batch_share(offsets_.back(), r, W).begin, s1 = batch_share(offsets_.back(), r, W).end;
      const int64_t lo = std::max(s0, offsets_[w]) - offsets_[w], hi = std::min(s1, offsets_[w + 1]) - offsets_[w];
      columns.emplace_back(lo < hi ? std::make_pair(lo / in, (hi + in - 1) / in)
                                   : std::make_pair<int64_t, int64_t>(0, 0));
    }
    RowsLayer layer;
    layer.fc = fc;
    layer.weight = w;
    layer.bias = b;
    // The bias sums of a row that two ranks' columns share come from the lower rank.
    const auto mine = columns[static_cast<size_t>(world_.rank())];
    layer.owned = mine;
    for (int64_t r = 0; r < world_.rank(); ++r) {
      const auto theirs = columns[static_cast<size_t>(r)];
      if (theirs.second > theirs.first) layer.owned.first = std::max(layer.owned.first, theirs.second);
    }
    layer.owned.second = std::max(layer.owned.first, layer.owned.second);
    layer.exchange = std::make_shared<RowsOverRanks>(world_, std::move(columns), in, out, batch_,
                                                     static_cast<int64_t>(rows_layers_.size()));
    fc->exchange_grad_rows(layer.exchange);
    rows_layers_.push_back(std::move(layer));
  }
}

void ShardedAdam::begin_batch(int64_t samples, int64_t steps, bool exchange_rows) {
  batch_->every_rank_has_samples = exchange_rows && samples >= world_.size();
  batch_->samples = samples;
  batch_->steps = steps;
}

ShardedAdam::~ShardedAdam() {
  try {
    for (auto& layer : rows_layers_) layer.fc->exchange_grad_rows(nullptr);
    for (Linear fc : net_.linear_layers()) {
      if (fc->grad_sums()) fc->keep_grad_sums_only(false);
    }
  } catch (...) {
    // Nothing to do in a destructor (linear_layers() allocates): the layers
    // then stay in sums-only mode, which only a later step would read.
  }
}

void ShardedAdam::set_lr(double lr) {
  for (auto& group : adam_->param_groups()) group.options().set_lr(lr);
}

void ShardedAdam::step() {
  const int64_t W = world_.size(), mine = split_[static_cast<size_t>(world_.rank())];
  // Layers whose gradient came through the row exchange this step (alike
  // on every rank): this rank holds the whole batch's sums of its weight
  // rows already, so only the other parameters' sums are exchanged, and
  // their biases as exact sums from the one rank that made each (the
  // others give zeros, which add exactly).
  std::vector<char> include(params_.size(), 1);
  std::vector<torch::Tensor> overrides(params_.size());
  std::vector<torch::Tensor> weight_sums(params_.size());  // [in, columns] double, from the layer's first column
  last_row_layers_ = 0;
  for (const auto& layer : rows_layers_) {
    const auto [sw, sb] = layer.fc->exchanged_grad_sums();
    if (!sw.defined()) continue;
    ++last_row_layers_;
    include[layer.weight] = 0;
    weight_sums[layer.weight] = sw;
    if (sb.defined()) {
      torch::Tensor b = torch::zeros({params_[layer.bias].numel()}, torch::kDouble);
      const int64_t c0 = layer.exchange->columns().first;
      const int64_t n = layer.owned.second - layer.owned.first;
      if (n > 0) b.narrow(0, layer.owned.first, n).copy_(sb.narrow(0, layer.owned.first - c0, n));
      overrides[layer.bias] = b;
    }
  }
  // What of each rank's slice the exchange carries: the included parameters' part.
  std::vector<int64_t> split_other(static_cast<size_t>(W), 0);
  for (int64_t r = 0, s0 = 0; r < W; s0 += split_[static_cast<size_t>(r)], ++r) {
    const int64_t s1 = s0 + split_[static_cast<size_t>(r)];
    for (size_t i = 0; i < params_.size(); ++i) {
      if (include[i]) {
        split_other[static_cast<size_t>(r)] +=
            std::max<int64_t>(0, std::min(s1, offsets_[i + 1]) - std::max(s0, offsets_[i]));
      }
    }
  }
  // Rank r's slice of every rank's gradient, added in rank order (no
  // exchange where every gradient came from rows and there is no bias:
  // every rank sees that alike).
  torch::Tensor other = torch::zeros({split_other[static_cast<size_t>(world_.rank())]}, torch::kDouble);
  if (std::any_of(split_other.begin(), split_other.end(), [](int64_t k) { return k > 0; })) {
    const torch::Tensor parts = world_.exchange_parts(flat_gradient_of(net_, include, overrides), split_other);
    other = parts[0].clone();
    for (int64_t r = 1; r < parts.size(0); ++r) other.add_(parts[r]);
  }
  // The next backward call starts the sums afresh (zero_grad's part), and
  // exchanges rows again only after begin_batch() says so.
  for (Linear fc : net_.linear_layers()) fc->restart_grad_sums();
  for (auto& layer : rows_layers_) layer.exchange->restart();
  batch_->every_rank_has_samples = false;
  // This rank's slice, parameter by parameter, rounded once.
  torch::Tensor grad = torch::empty({mine}, shard_.options().requires_grad(false));
  int64_t taken = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t lo = std::max(begin_, offsets_[i]), hi = std::min(begin_ + mine, offsets_[i + 1]);
    if (lo >= hi) continue;
    torch::Tensor place = grad.narrow(0, lo - begin_, hi - lo);
    if (include[i]) {
      place.copy_(other.narrow(0, taken, hi - lo));
      taken += hi - lo;
      continue;
    }
    // The weight rows [o0, o1) this slice touches are the layer's columns
    // for this rank (add_row_exchanges): its transposed sums, whole.
    const torch::Tensor& sw = weight_sums[i];
    const int64_t in = sw.size(0), o0 = (lo - offsets_[i]) / in;
    torch::Tensor rows = torch::empty({sw.size(1), in}, grad.options());
    functional::round_transposed(sw, rows);
    place.copy_(rows.reshape({-1}).narrow(0, lo - offsets_[i] - o0 * in, hi - lo));
  }
  shard_.mutable_grad() = grad;
  fused_adam_step(*adam_);
  // Every rank's updated slice, into every rank's parameters.
  const torch::Tensor all = world_.all_gather_parts(shard_.detach(), split_);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].copy_(all.narrow(0, offsets_[i], params_[i].numel()).reshape(params_[i].sizes()));
  }
}

std::vector<AdamMoments> ShardedAdam::gather_state() {
  const auto it = adam_->state().find(shard_.unsafeGetTensorImpl());
  std::vector<AdamMoments> out(params_.size());
  // Before the first step there is no state on any rank (all step together).
  if (it == adam_->state().end()) return out;
  const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
  const torch::Tensor avg = world_.all_gather_rows(s.exp_avg()), avg_sq = world_.all_gather_rows(s.exp_avg_sq());
  int64_t at = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t n = params_[i].numel();
    out[i].step = s.step();
    out[i].exp_avg = avg.narrow(0, at, n).reshape(params_[i].sizes()).clone();
    out[i].exp_avg_sq = avg_sq.narrow(0, at, n).reshape(params_[i].sizes()).clone();
    at += n;
  }
  return out;
}

EvalResult evaluate_over(dist::World* world, SpikingNetwork& net, const LabeledImages& data, int64_t batch_size,
                         int64_t limit) {
  if (!world) return evaluate(net, data, batch_size, limit);
  const int64_t n = limit < 0 ? data.size() : std::min(limit, data.size());
  const EvalResult mine =
      evaluate(net, data, batch_size, limit, nullptr, {}, rank_share(n, world->rank(), world->size()));
  return gather_results(*world, mine, net.config());
}

EvalResult gather_results(dist::World& world, const EvalResult& share, const NetworkConfig& config) {
  EvalResult r;
  r.execution = share.execution;
  r.first_sample = world.all_gather_rows(torch::tensor({share.first_sample}, torch::kLong))[0].item<int64_t>();
  r.counts = world.all_gather_rows(share.counts.to(torch::kFloat));
  r.labels = world.all_gather_rows(share.labels.to(torch::kLong));
  r.samples = r.counts.size(0);
  r.resumed_at = world.sum_in_rank_order(torch::tensor({share.resumed_at}, torch::kLong))[0].item<int64_t>();
  // Whole numbers in int64 and double: their sums are exact in any order.
  r.correct_by_step = world.sum_in_rank_order(share.correct_by_step);
  const torch::Tensor spikes = world.sum_in_rank_order(torch::tensor(share.layer_spikes, torch::kDouble));
  r.layer_spikes.assign(spikes.data_ptr<double>(), spikes.data_ptr<double>() + spikes.numel());
  // Each rank's recorder bytes are its own; the run's are their sum.
  r.record_total_bytes = world.sum_in_rank_order(torch::tensor({share.record_total_bytes}, torch::kLong))[0].item<int64_t>();
  r.record_peak_bytes = share.record_peak_bytes;
  finish_result(r, config);
  return r;
}

}  // namespace snn
