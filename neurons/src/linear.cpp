#include "snn/neurons/linear.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

#include "grad_sums.h"
#include "kernels.h"
#include "linear_grad.h"
#include "linear_tile.h"
#include "window_geometry.h"
#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "snn/core/frozen_weights.h"

#if SNN_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace snn {
namespace neurons::detail {
#define SNN_DECLARE_LINEAR_ROWS(isa)                                                                          \
  namespace isa {                                                                                             \
  template <typename T>                                                                                       \
  void linear_dense(const T* x, const T* wt, const T* bias, T* y, int64_t in, int64_t out, int64_t r0, int64_t r1); \
  template <typename T, typename X>                                                                           \
  void linear_event(const X* x, const T* wt, const T* bias, T* y, int64_t in, int64_t out, int64_t r0, int64_t r1); \
  template <typename T>                                                                                       \
  void linear_event_steps(const uint8_t* x, const T* wt, const T* bias, T* y, int64_t in, int64_t out,       \
                          int64_t samples, int64_t steps, int64_t stride, int64_t y_stride);                  \
  template <typename T>                                                                                       \
  int64_t count_nonzero(const T* x, int64_t n);                                                               \
  }
SNN_DECLARE_LINEAR_ROWS(base)
SNN_DECLARE_LINEAR_ROWS(avx2)
SNN_DECLARE_LINEAR_ROWS(avx512)
#undef SNN_DECLARE_LINEAR_ROWS
#define SNN_DECLARE_LINEAR_GRAD(isa)                                                                         \
  namespace isa {                                                                                            \
  template <typename X>                                                                                      \
  void linear_weight_grad(const X* x, const double* gy, double* sum_t, double* bias_sum, int64_t in,           \
                          int64_t out, int64_t steps, int64_t batch, int64_t f0, int64_t f1);                \
  template <typename G>                                                                                      \
  void round_transposed(const double* sum_t, G* g, int64_t in, int64_t out, int64_t i0, int64_t i1);        \
  template <typename T> /* rows_loops.cpp */                                                                 \
  void planes_to_tile_rows(const T* planes, double* rows, int64_t width, int64_t L);                        \
  template <typename T>                                                                                      \
  void conv2d_weight_grad(const T* x, const WindowGeometry& g, const double* gy, double* sum_t,               \
                          double* bias_sum, int64_t out, int64_t f0, int64_t f1);                            \
  }
SNN_DECLARE_LINEAR_GRAD(base)
SNN_DECLARE_LINEAR_GRAD(avx2)
SNN_DECLARE_LINEAR_GRAD(avx512)
#undef SNN_DECLARE_LINEAR_GRAD
}  // namespace neurons::detail

namespace functional {

double density_of(const torch::Tensor& x_any) {
  TORCH_CHECK(x_any.is_cpu(), "density_of: a CPU tensor is needed, got one on ", x_any.device());
  const torch::Tensor x = x_any.contiguous();
  if (x.numel() == 0) return 0.0;
  // An estimate from about 16K entries (whole rows, evenly spaced) is
  // all the choice of kernel needs; counting everything would cost as much
  // as the event-driven product of a narrow layer.
  const int64_t cols = x.dim() == 0 ? 1 : x.size(-1), rows = x.numel() / cols;
  const int64_t stride = std::max<int64_t>(1, rows / std::max<int64_t>(1, 16384 / cols));
  const CpuLoops loops = cpu_loops();
  int64_t nonzero = 0, seen = 0;
  auto count_rows = [&](const auto* p) {
    for (int64_t r = 0; r < rows; r += stride, seen += cols) {
      nonzero += SNN_ISA_CALL(loops, neurons::detail, count_nonzero(p + r * cols, cols));
    }
  };
  if (x.scalar_type() == torch::kBool) {
    count_rows(static_cast<const uint8_t*>(x.data_ptr()));  // bool spikes: one byte, 0 or 1
  } else {
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_linear_density", [&] { count_rows(x.data_ptr<scalar_t>()); });
  }
  return static_cast<double>(nonzero) / static_cast<double>(seen);
}

double crossover_for(double crossover, int64_t out) {
  // The event-driven kernel first lists a row's inputs, a cost that only
  // wide layers (many 16-column tiles) amortise: the crossover falls from
  // `crossover` for wide layers to 0.55 of it for a layer of one tile
  // (measured with linear_bench: about 0.38 and 0.22 on an AVX2 EPYC). The
  // AVX-512 build's dense kernel is twice as fast as AVX2's, its event
  // kernel only 1.15x: there the crossover falls to 0.16 of it for one tile
  // (about 0.36 and 0.06 on a Zen 4 EPYC).
  const double narrow = cpu_loops() == CpuLoops::kAvx512 ? 0.84 : 0.45;
  const double tiles = static_cast<double>((out + 15) / 16);
  return crossover * (1.0 - narrow / tiles);
}

LinearPath choose_path(double density, double crossover, int64_t out) {
  return density < crossover_for(crossover, out) ? LinearPath::kEvent : LinearPath::kDense;
}

namespace {

constexpr int64_t kTile = neurons::detail::kLinearTile;  // output columns per packed tile (linear_tile.h)

// The tiled layout every CPU kernel reads: dst [tiles, rows, kTile] gets
// row i's values o in [0, out) from row(i)[o * stride], converted to D, the
// last tile's missing columns zero. One pass; rows [i0, i1) only where
// given (threads packing parts).
template <typename D, typename S, typename RowFn>
void pack_rows(const RowFn& row, int64_t stride, int64_t rows, int64_t out, D* dst, int64_t i0 = 0, int64_t i1 = -1) {
  const int64_t tiles = (out + kTile - 1) / kTile;
  if (i1 < 0) i1 = rows;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t n = std::min(kTile, out - t * kTile);
    for (int64_t i = i0; i < i1; ++i) {
      D* d = dst + (t * rows + i) * kTile;
      const S* s = row(i) + t * kTile * stride;
      if (stride == 1 && n == kTile) {  // a whole tile of contiguous values: vector conversions
        for (int64_t j = 0; j < kTile; ++j) d[j] = static_cast<D>(s[j]);
        continue;
      }
      for (int64_t j = 0; j < n; ++j) d[j] = static_cast<D>(s[j * stride]);
      for (int64_t j = n; j < kTile; ++j) d[j] = D(0);
    }
  }
}

// wt [in, out] (any strides, on the CPU) as the kernels read it: [tiles,
// in, kTile], contiguous (it runs once per training step for every layer).
torch::Tensor pack_tiles(const torch::Tensor& wt) {
  TORCH_CHECK(wt.device().is_cpu(), "pack_tiles: the CPU kernels' layout, got a tensor on ", wt.device());
  const int64_t in = wt.size(0), out = wt.size(1), tiles = (out + kTile - 1) / kTile;
  torch::Tensor packed = torch::empty({tiles, in, kTile}, wt.options());
  AT_DISPATCH_FLOATING_TYPES(wt.scalar_type(), "snn_linear_pack", [&] {
    const scalar_t* src = wt.data_ptr<scalar_t>();
    const int64_t si = wt.stride(0);
    pack_rows<scalar_t, scalar_t>([&](int64_t i) { return src + i * si; }, wt.stride(1), in, out,
                                  packed.data_ptr<scalar_t>());
  });
  return packed;
}

torch::Tensor pad_bias(const torch::Tensor& bias) {
  torch::NoGradGuard no_grad;
  const int64_t out = bias.size(0), tiles = (out + kTile - 1) / kTile;
  return torch::constant_pad_nd(bias.detach(), {0, tiles * kTile - out}).contiguous();
}

// Rows [r0, r1) of y = x wt + b with one of the CPU kernels: the
// event-driven one on bool spikes xs when xs is given, else the event-driven
// or the dense one on the reals x.
template <typename T>
void cpu_rows(const T* x, const uint8_t* xs, const T* wp, const T* bp, T* y, int64_t in, int64_t out, int64_t r0,
              int64_t r1, bool event, CpuLoops loops) {
  if (xs) {
    SNN_ISA_CALL(loops, neurons::detail, linear_event(xs, wp, bp, y, in, out, r0, r1));
  } else if (event) {
    SNN_ISA_CALL(loops, neurons::detail, linear_event(x, wp, bp, y, in, out, r0, r1));
  } else {
    SNN_ISA_CALL(loops, neurons::detail, linear_dense(x, wp, bp, y, in, out, r0, r1));
  }
}

// y[r, :] = b + sum over f ascending of x[r, f] wt[f, :], for x [rows, in]
// (real, or bool spikes) and wt [in, out] packed by pack_tiles (b padded
// by pad_bias, or undefined): the fixed-order kernels behind forward and
// grad_x. The dense and the event-driven kernel give the same values (see
// linear_loops.cpp); kAuto picks one by the density of x. With steps > 1,
// x is [steps, B, in] flattened: bool spikes then go through
// linear_event_steps, which takes a sample's consecutive steps together.
torch::Tensor rows_times(const torch::Tensor& x2, const torch::Tensor& packed, int64_t out, const torch::Tensor& bias,
                         LinearPath path, double crossover, int64_t steps = 1) {
  torch::Tensor x = x2.contiguous();
  const int64_t rows = x.size(0), in = x.size(1);
  if (path == LinearPath::kAuto) path = choose_path(density_of(x), crossover, out);
  const bool event = path == LinearPath::kEvent;
  // The event kernel lists bool spikes directly; the dense one reads reals.
  const bool spikes = x.scalar_type() == torch::kBool && event;
  if (x.scalar_type() == torch::kBool && !event) x = x.to(packed.scalar_type());
  torch::Tensor y = torch::empty({rows, out}, packed.options());
  const CpuLoops loops = cpu_loops();
  AT_DISPATCH_FLOATING_TYPES(packed.scalar_type(), "snn_linear", [&] {
    const scalar_t* xp = spikes ? nullptr : x.data_ptr<scalar_t>();
    const uint8_t* sp = spikes ? static_cast<const uint8_t*>(x.data_ptr()) : nullptr;
    const scalar_t* wp = packed.data_ptr<scalar_t>();
    const scalar_t* bp = bias.defined() ? bias.data_ptr<scalar_t>() : nullptr;
    scalar_t* yp = y.data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, in * out / 64));
    // (Taken by samples, so only where there is a sample per thread.)
    if (spikes && steps > 1 && rows % steps == 0 && rows / steps >= at::get_num_threads()) {
      const int64_t B = rows / steps;
      at::parallel_for(0, B, std::max<int64_t>(1, grain / steps), [&](int64_t b0, int64_t b1) {
        SNN_ISA_CALL(loops, neurons::detail,
                     linear_event_steps(sp + b0 * in, wp, bp, yp + b0 * out, in, out, b1 - b0, steps, B, B));
      });
      return;
    }
    at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
      cpu_rows(xp, sp, wp, bp, yp, in, out, r0, r1, event, loops);
    });
  });
  return y;
}

// A layer's weights as the kernels of its device read them: by 16-column
// tiles for the CPU's (bias zero-padded to match), transposed for the GPU's.
PackedLinear packed_for(const torch::Tensor& weight, const torch::Tensor& bias) {
  torch::NoGradGuard no_grad;
  PackedLinear p;
  if (weight.is_cuda()) {
    p.weight = weight.detach().t().contiguous();
    p.bias = bias.defined() ? bias.detach().contiguous() : torch::Tensor();
  } else {
    p.weight = pack_tiles(weight.t());
    p.bias = bias.defined() ? pad_bias(bias) : torch::Tensor();
  }
  return p;
}

// The GPU's ordered kernel (linear_cuda.cu) on x [rows, in] and the
// transposed weights: the CPU's values bit for bit, spikes only cost the
// inputs that fired.
torch::Tensor gpu_rows_times(const torch::Tensor& x2, const PackedLinear& packed, int64_t out) {
#if SNN_WITH_CUDA
  const c10::cuda::CUDAGuard guard(x2.device());
  const torch::Tensor x = x2.contiguous();
  torch::Tensor y = torch::empty({x.size(0), out}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_linear_cuda", [&] {
    neurons::detail::LinearArgs<scalar_t> a;
    a.x = x.data_ptr<scalar_t>();
    a.wt = packed.weight.data_ptr<scalar_t>();
    a.bias = packed.bias.defined() ? packed.bias.data_ptr<scalar_t>() : nullptr;
    a.y = y.data_ptr<scalar_t>();
    a.rows = x.size(0);
    a.in = x.size(1);
    a.out = out;
    neurons::detail::linear_cuda(a, at::cuda::getCurrentCUDAStream().stream());
  });
  return y;
#else
  (void)x2, (void)packed, (void)out;
  throw Error("a CUDA tensor reached snn::Linear, but snnsim was built without CUDA support");
#endif
}

// The batch-invariant forward on 2-D x [rows, in]; `cached` holds the
// weights and bias already packed (a module's cache), or is empty. On a GPU
// kDense is cuBLAS (fastest for dense real-valued inputs, but its summation
// order is its own), kAuto and kEvent the ordered kernel; kAuto does not
// measure the density there, which would make the host wait for the device.
torch::Tensor linear_forward(const torch::Tensor& x2, const torch::Tensor& weight, const torch::Tensor& bias,
                             const PackedLinear& cached, LinearPath path, double crossover, int64_t steps) {
  TORCH_CHECK(weight.device() == x2.device(), "linear: input on ", x2.device(), " but the weight on ", weight.device());
  if (x2.is_cuda() && x2.scalar_type() == torch::kBool) {
    // The GPU kernels read real inputs: bool spikes become 0/1 of the
    // weight's dtype (exact), on the device, without a host wait.
    return linear_forward(x2.to(weight.scalar_type()), weight, bias, cached, path, crossover, steps);
  }
  if (x2.is_cuda() && path == LinearPath::kDense) {
    return bias.defined() ? torch::addmm(bias, x2, weight.t()) : x2.matmul(weight.t());
  }
  const PackedLinear own = cached.weight.defined() ? PackedLinear{} : packed_for(weight, bias);
  const PackedLinear& packed = cached.weight.defined() ? cached : own;
  if (x2.is_cuda()) return gpu_rows_times(x2, packed, weight.size(0));
  return rows_times(x2, packed.weight, weight.size(0), packed.bias, path, crossover, steps);
}

}  // namespace

// (linear_grad.h) One pass; float to double is exact.

torch::Tensor pack_grad(const torch::Tensor& gy, int64_t steps) {
  const torch::Tensor g = gy.contiguous();
  const int64_t rows = g.size(0), out = g.size(1), batch = rows / steps, tiles = (out + kTile - 1) / kTile;
  torch::Tensor packed = torch::empty({tiles, rows, kTile}, g.options().dtype(torch::kDouble));
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "snn_linear_pack_grad", [&] {
    const scalar_t* src = g.data_ptr<scalar_t>();
    // A copy with a conversion per value, split by rows across threads (a
    // conv layer's gradient is 50K rows per batch and step block).
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, out));
    at::parallel_for(0, rows, grain, [&](int64_t i0, int64_t i1) {
      pack_rows<double, scalar_t>(
          [&](int64_t p) { return src + ((steps - 1 - p / batch) * batch + p % batch) * out; }, 1, rows, out,
          packed.data_ptr<double>(), i0, i1);
    });
  });
  return packed;
}

namespace {

// Adds the weight gradient of x2 [steps * batch, in] and gy (packed by
// pack_grad) to sum_t [in, out] (double), split across threads by input, each
// input's sums in BPTT row order: bit-identical for any thread count. With
// bias_sum, the bias gradient too (by the thread whose inputs start at 0).
void add_weight_grad(const torch::Tensor& x2, const torch::Tensor& g_packed, torch::Tensor& sum_t, double* bias_sum,
                     int64_t steps) {
  const torch::Tensor x = x2.contiguous();
  const int64_t rows = x.size(0), in = x.size(1), out = sum_t.size(1);
  const int64_t batch = rows / steps;
  const CpuLoops loops = cpu_loops();
  double* sp = sum_t.data_ptr<double>();
  const double* gp = g_packed.data_ptr<double>();
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, rows * out / 8));
  auto run = [&](const auto* xp) {
    at::parallel_for(0, in, grain, [&](int64_t f0, int64_t f1) {
      // The bias sums go with the first range of inputs (one thread's, in row order).
      SNN_ISA_CALL(loops, neurons::detail,
                   linear_weight_grad(xp, gp, sp, f0 == 0 ? bias_sum : nullptr, in, out, steps, batch, f0, f1));
    });
  };
  if (x.scalar_type() == torch::kBool) {
    run(static_cast<const uint8_t*>(x.data_ptr()));  // bool spikes: listed from the bytes
  } else {
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_linear_weight_grad", [&] { run(x.data_ptr<scalar_t>()); });
  }
}

// Adds the bias gradient (the column sums of gy, packed by pack_grad) to sum
// [out] in BPTT row order.
void add_bias_grad(const torch::Tensor& g_packed, torch::Tensor& sum) {
  const int64_t tiles = g_packed.size(0), rows = g_packed.size(1), out = sum.size(0);
  const double* gp = g_packed.data_ptr<double>();
  double* sp = sum.data_ptr<double>();
  // A tile's sums are one thread's, whatever the thread count.
  at::parallel_for(0, tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = std::min(kTile, out - t * kTile);
      double* st = sp + t * kTile;
      // The tile's sums in a local array over all rows (the same additions in
      // the same order): through st, which may alias the rows as far as the
      // compiler knows, each addition was a load and a store.
      double acc[kTile] = {};
      for (int64_t o = 0; o < n; ++o) acc[o] = st[o];
      for (int64_t p = 0; p < rows; ++p) {
        const double* row = gp + (t * rows + p) * kTile;
        for (int64_t o = 0; o < kTile; ++o) acc[o] += row[o];  // (columns past n add the rows' zeros, unused)
      }
      for (int64_t o = 0; o < n; ++o) st[o] = acc[o];
    }
  });
}

}  // namespace

// Carried gradient sums (grad_sums.h), shared with BatchNorm.
// Makes `sum` (double, shaped like param.grad() or its transpose) hold what
// param.grad() holds: kept if the gradient is still the one written last
// (the sum holds more bits), zero if there is none, else copied from it.
void sync_sum(torch::Tensor& sum, const torch::Tensor& param, const torch::Tensor& written, uint32_t version,
              bool transposed) {
  const torch::Tensor& g = param.grad();
  if (!g.defined()) {
    sum.zero_();
  } else if (!(written.defined() && g.is_same(written) && g._version() == version)) {
    sum.copy_(transposed ? g.t() : g);
  }
}

void round_transposed(const torch::Tensor& sum_t, torch::Tensor& g) {
  const int64_t in = sum_t.size(0), out = sum_t.size(1);
  TORCH_CHECK(sum_t.scalar_type() == torch::kDouble && sum_t.is_contiguous() && g.is_contiguous() &&
                  g.dim() == 2 && g.size(0) == out && g.size(1) == in,
              "round_transposed: a contiguous double [in, out] sum into a contiguous [out, in] tensor");
  const double* sp = sum_t.data_ptr<double>();
  const CpuLoops loops = cpu_loops();
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "snn_linear_publish", [&] {
    scalar_t* gp = g.data_ptr<scalar_t>();
    at::parallel_for(0, in, std::max<int64_t>(4, 16384 / std::max<int64_t>(1, out)), [&](int64_t i0, int64_t i1) {
      SNN_ISA_CALL(loops, neurons::detail, round_transposed(sp, gp, in, out, i0, i1));
    });
  });
}

// A carried sum made ready for this call's additions: synced with .grad(),
// or in sums-only mode zeroed if a restart is pending.
static void ready_sum(torch::Tensor& sum, const torch::Tensor& param, const LinearGradSums& sums,
                      const torch::Tensor& written, uint32_t version, bool& restart, bool transposed) {
  if (!sums.sums_only) {
    sync_sum(sum, param, written, version, transposed);
  } else if (restart) {
    sum.zero_();
  }
  restart = false;
}

// Writes the rounding of `sum` (double, param's shape or, if `transposed`,
// its transpose) to g (contiguous, param's shape and dtype) in one pass.
static void write_rounded(const torch::Tensor& sum, torch::Tensor& g, bool transposed) {
  if (!transposed) {
    g.copy_(sum);
    return;
  }
  round_transposed(sum, g);
  // Written through the pointer: say so, as copy_ would, so that anything
  // that saved this gradient (an autograd graph, a cache) sees it changed.
  g.unsafeGetTensorImpl()->bump_version();
}

// Writes the rounding of `sum` to param.grad(), in place where the gradient
// is the one written last, and remembers what it wrote. Where the gradient
// was dropped (zero_grad sets it to none) and nothing else holds the tensor
// written last or its storage, that tensor is reused: no allocation per step.
void publish_sum(const torch::Tensor& sum, torch::Tensor& param, torch::Tensor& written, uint32_t& version,
                 bool transposed) {
  torch::Tensor& g = param.mutable_grad();
  const bool ours = g.defined() && written.defined() && g.is_same(written);
  if (!ours) {
    const bool reusable = !g.defined() && written.defined() && written.use_count() == 1 &&
                          written.storage().use_count() == 1 && written.sizes() == param.sizes() &&
                          written.scalar_type() == param.scalar_type() && written.device() == param.device();
    g = reusable ? written : torch::empty(param.sizes(), param.options().requires_grad(false));
  }
  write_rounded(sum, g, transposed);
  written = g;
  version = g._version();
}

torch::Tensor pack_grad_planes(const torch::Tensor& gy_planes) {
  const torch::Tensor g = gy_planes.contiguous();
  const int64_t N = g.size(0), out = g.size(1), L = g.size(2), tiles = (out + kTile - 1) / kTile;
  torch::Tensor packed = torch::empty({tiles, N * L, kTile}, g.options().dtype(torch::kDouble));
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "snn_linear_pack_grad_planes", [&] {
    const scalar_t* src = g.data_ptr<scalar_t>();
    double* dst = packed.data_ptr<double>();
    const CpuLoops loops = cpu_loops();
    at::parallel_for(0, N, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, out * L)), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        for (int64_t t = 0; t < tiles; ++t) {
          SNN_ISA_CALL(loops, neurons::detail,
                       planes_to_tile_rows(src + (n * out + t * kTile) * L, dst + (t * N * L + n * L) * kTile,
                                           std::min(kTile, out - t * kTile), L));
        }
      }
    });
  });
  return packed;
}

AddWeightGrad rows_weight_grad(const torch::Tensor& x2, const torch::Tensor& gd, int64_t steps) {
  return [x2, gd, steps](torch::Tensor& sum_t, double* bias_sum) { add_weight_grad(x2, gd, sum_t, bias_sum, steps); };
}

// (The output's height and the padding in y are conv2d_train's checks.)
bool conv2d_weight_grad_fits(const torch::Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> padding) {
  const int64_t ow = x.dim() == 4 ? x.size(3) + 2 * padding[1] - kernel[1] + 1 : 0;
  return x.dim() == 4 && x.is_cpu() && (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble) &&
         x.size(3) <= 64 && kernel[1] <= 64 && ow >= 1 && ow <= 64 && padding[0] >= 0 && padding[1] >= 0;
}

AddWeightGrad conv2d_weight_grad(const torch::Tensor& x_in, std::array<int64_t, 2> kernel,
                                 std::array<int64_t, 2> padding, const torch::Tensor& gd) {
  return [x_in, kernel, padding, gd](torch::Tensor& sum_t, double* bias_sum) {
    const torch::Tensor x = x_in.contiguous();
    neurons::detail::WindowGeometry g{};
    g.N = x.size(0);
    g.C = x.size(1);
    g.H = x.size(2);
    g.W = x.size(3);
    g.KH = kernel[0];
    g.KW = kernel[1];
    g.pH = padding[0];
    g.pW = padding[1];
    g.sH = g.sW = 1;
    g.OH = g.H + 2 * g.pH - g.KH + 1;
    g.OW = g.W + 2 * g.pW - g.KW + 1;
    const int64_t in = g.C * g.KH * g.KW, out = sum_t.size(1);
    const CpuLoops loops = cpu_loops();
    double* sp = sum_t.data_ptr<double>();
    const double* gp = gd.data_ptr<double>();
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, g.N * g.OH * g.OW * out / 8));
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_conv2d_weight_grad", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      at::parallel_for(0, in, grain, [&](int64_t f0, int64_t f1) {
        SNN_ISA_CALL(loops, neurons::detail, conv2d_weight_grad(xp, g, gp, sp, f0 == 0 ? bias_sum : nullptr, out, f0, f1));
      });
    });
  };
}

void save_grad_sums(torch::autograd::AutogradContext* ctx, const c10::intrusive_ptr<LinearGradSums>& sums,
                    const torch::Tensor& weight, const torch::Tensor& bias, bool has_bias) {
  if (!sums) return;
  ctx->saved_data["sums"] = c10::IValue::make_capsule(sums);
  // The parameters themselves (not saved copies) get their .grad written.
  ctx->saved_data["weight"] = weight;
  if (has_bias) ctx->saved_data["bias"] = bias;
}

SavedGradSums saved_grad_sums(torch::autograd::AutogradContext* ctx, bool has_bias) {
  SavedGradSums s;
  if (!ctx->saved_data.count("sums")) return s;
  s.sums = c10::static_intrusive_pointer_cast<LinearGradSums>(ctx->saved_data["sums"].toCapsule());
  s.weight = ctx->saved_data["weight"].toTensor();
  if (has_bias) s.bias = ctx->saved_data["bias"].toTensor();
  return s;
}

std::pair<torch::Tensor, torch::Tensor> parameter_grads(const AddWeightGrad& add_weight, const torch::Tensor& gd,
                                                        const torch::Tensor& weight, bool need_w, bool need_b,
                                                        const SavedGradSums& saved) {
  const auto dbl = weight.options().dtype(torch::kDouble);
  LinearGradSums* const sums = saved.sums.get();
  // The double sums: the carried ones brought up to date with .grad, or
  // zeros for this call's gradients alone.
  torch::Tensor sum_t, sum_b;
  if (need_w) {
    if (sums) {
      if (!sums->weight_t.defined()) sums->weight_t = torch::zeros({weight.size(1), weight.size(0)}, dbl);
      ready_sum(sums->weight_t, saved.weight, *sums, sums->written_weight, sums->written_weight_version,
                sums->restart_weight, true);
      sum_t = sums->weight_t;
    } else {
      sum_t = torch::zeros({weight.size(1), weight.size(0)}, dbl);
    }
  }
  if (need_b) {
    if (sums) {
      if (!sums->bias.defined()) sums->bias = torch::zeros({weight.size(0)}, dbl);
      ready_sum(sums->bias, saved.bias, *sums, sums->written_bias, sums->written_bias_version, sums->restart_bias,
                false);
      sum_b = sums->bias;
    } else {
      sum_b = torch::zeros({weight.size(0)}, dbl);
    }
  }
  // The bias's sums in the weight's pass over the gradient where both are
  // wanted (the same additions in the same order as add_bias_grad's, while
  // the rows are in cache), else on their own.
  // (A weight of no inputs has no pass to go with.)
  const bool fused = need_w && need_b && weight.size(1) > 0;
  if (need_w) add_weight(sum_t, fused ? sum_b.data_ptr<double>() : nullptr);
  if (need_b && !fused) add_bias_grad(gd, sum_b);
  torch::Tensor gw, gb;
  if (sums) {
    // Carried: the gradients go to .grad directly, so autograd gets none
    // to accumulate (it would round per call); or nowhere but the sums.
    if (sums->sums_only) return {gw, gb};
    if (need_w) {
      torch::Tensor param = saved.weight;
      publish_sum(sums->weight_t, param, sums->written_weight, sums->written_weight_version, true);
    }
    if (need_b) {
      torch::Tensor param = saved.bias;
      publish_sum(sums->bias, param, sums->written_bias, sums->written_bias_version, false);
    }
  } else {
    // One call's gradients, summed in double and rounded once.
    if (need_w) gw = sum_t.t().to(weight.scalar_type()).contiguous();
    if (need_b) gb = sum_b.to(weight.scalar_type());
  }
  return {gw, gb};
}

namespace {

// Data parallel (GradRowsExchange): the whole batch's rows from every rank,
// summed into this rank's columns in one process's order, the weight's and
// the bias's in one pass as parameter_grads sums them. False where the
// exchange declines this call (the usual sums then).
bool add_exchanged_grads(LinearGradSums& sums, const torch::Tensor& x2, const torch::Tensor& gy, int64_t steps,
                         int64_t in, bool need_w, bool need_b) {
  const auto [xg, gyg] = sums.rows->gather(x2, gy, steps);
  if (!xg.defined()) return false;
  const int64_t n = gyg.size(1);
  if (!sums.rows_current) {
    const auto dbl = torch::TensorOptions().dtype(torch::kDouble);
    if (sums.rows_weight_t.defined() && sums.rows_weight_t.size(0) == in && sums.rows_weight_t.size(1) == n) {
      sums.rows_weight_t.zero_();
      sums.rows_bias.zero_();
    } else {
      sums.rows_weight_t = torch::zeros({in, n}, dbl);
      sums.rows_bias = torch::zeros({n}, dbl);
    }
    sums.rows_current = true;
  }
  if (n == 0 || xg.size(0) == 0) return true;
  const torch::Tensor gd = pack_grad(gyg, steps);
  const bool fused = need_w && need_b && in > 0;
  if (need_w) add_weight_grad(xg, gd, sums.rows_weight_t, fused ? sums.rows_bias.data_ptr<double>() : nullptr, steps);
  if (need_b && !fused) add_bias_grad(gd, sums.rows_bias);
  return true;
}

struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x2,
                               const torch::Tensor& weight, const torch::Tensor& bias, int64_t steps,
                               const c10::intrusive_ptr<LinearGradSums>& sums, int64_t path, double crossover,
                               const PackedLinear* packed) {
    ctx->save_for_backward({x2, weight});
    const bool has_bias = bias.numel() > 0;
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["steps"] = steps;
    save_grad_sums(ctx, sums, weight, bias, has_bias);
    return linear_forward(x2, weight, has_bias ? bias : torch::Tensor(), packed ? *packed : PackedLinear{},
                          static_cast<LinearPath>(path), crossover, steps);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x2 = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& gy = grad[0];
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const bool need_w = ctx->needs_input_grad(1), need_b = has_bias && ctx->needs_input_grad(2);
    torch::Tensor gx, gw, gb;
    if (gy.is_cuda()) {
      if (ctx->needs_input_grad(0)) gx = gy.matmul(weight);
      if (need_w) gw = gy.t().matmul(x2);
      if (need_b) gb = gy.sum(0);
      return {gx, gw, gb, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    // grad_x[r, :] = sum over o ascending of gy[r, o] W[o, :]: the forward kernel with W as its [in, out].
    if (ctx->needs_input_grad(0)) {
      gx = rows_times(gy, pack_tiles(weight), weight.size(1), torch::Tensor(), LinearPath::kAuto, kLinearEventCrossover);
    }
    if (!need_w && !need_b) return {gx, gw, gb, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const int64_t steps = ctx->saved_data["steps"].toInt();
    const SavedGradSums saved_sums = saved_grad_sums(ctx, has_bias);
    if (saved_sums.sums && saved_sums.sums->sums_only && saved_sums.sums->rows &&
        add_exchanged_grads(*saved_sums.sums, x2, gy, steps, weight.size(1), need_w, need_b)) {
      return {gx, gw, gb, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    const torch::Tensor gd = pack_grad(gy, steps);  // once, for both sums
    std::tie(gw, gb) = parameter_grads(rows_weight_grad(x2, gd, steps), gd, weight, need_w, need_b, saved_sums);
    return {gx, gw, gb, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

namespace {
torch::Tensor linear_with(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                          const c10::intrusive_ptr<LinearGradSums>& sums, LinearPath path, double crossover,
                          const PackedLinear* packed) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1), "linear: input of shape ",
              x.sizes(), " does not fit a weight of shape ", weight.sizes(), " (expected [..., ", weight.size(1), "])");
  TORCH_CHECK(weight.scalar_type() == torch::kFloat || weight.scalar_type() == torch::kDouble,
              "linear: the weight must be float32 or float64, got ", weight.scalar_type());
  TORCH_CHECK(x.scalar_type() == weight.scalar_type() || x.scalar_type() == torch::kBool, "linear: input is ",
              x.scalar_type(), " but the weight is ", weight.scalar_type(), " (bool spikes are also accepted)");
  torch::Tensor x2 = x.reshape({-1, x.size(-1)});
  // Bool spikes go to the CPU kernels as they are, forward and backward
  // (the weight gradient lists them from the bytes too); a GPU's backward
  // (cuBLAS) reads reals, so there they become 0/1 reals when it will run.
  const bool records_grad = torch::GradMode::is_enabled() &&
                            (weight.requires_grad() || (bias.defined() && bias.requires_grad()));
  if (x2.scalar_type() == torch::kBool && records_grad && x2.is_cuda()) x2 = x2.to(weight.scalar_type());
  // Autograd records every tensor input, so an absent bias travels as an empty tensor.
  const torch::Tensor b = bias.defined() ? bias : torch::empty({0}, weight.options());
  // Rows of a multi-step input [T, B, in] are step-major; BPTT order needs T.
  const int64_t steps = x.dim() >= 3 ? x.size(0) : 1;
  torch::Tensor y = LinearFunction::apply(x2, weight, b, steps, sums, static_cast<int64_t>(path), crossover, packed);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = weight.size(0);
  return y.view(shape);
}
}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const c10::intrusive_ptr<LinearGradSums>& sums, LinearPath path, double crossover) {
  return linear_with(x, weight, bias, sums, path, crossover, nullptr);
}

}  // namespace functional

LinearImpl::LinearImpl(const LinearOptions& options_) : options(options_) {
  if (!(options.event_crossover() >= 0.0 && options.event_crossover() <= 1.0)) {
    throw Error("the event-driven crossover is a firing fraction in [0, 1], got " +
                std::to_string(options.event_crossover()));
  }
  if (options.in_features() < 1 || options.out_features() < 1) {
    throw Error("linear layer sizes must be >= 1, got " + std::to_string(options.in_features()) + " -> " +
                std::to_string(options.out_features()));
  }
  reset();
}

void LinearImpl::reset() {
  packed_ = PackedLinear{};
  grad_sums_ = options.carry_grad_sums() ? c10::make_intrusive<LinearGradSums>() : c10::intrusive_ptr<LinearGradSums>();
  weight = register_parameter("weight", torch::empty({options.out_features(), options.in_features()}));
  bias = register_parameter("bias", options.bias() ? torch::empty({options.out_features()}) : torch::Tensor(),
                            options.bias());
  // torch::nn::Linear's initialisation.
  torch::NoGradGuard no_grad;
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

LinearPath KernelTrial::choose(double density, int64_t rows, double crossover, LinearPath guess, bool& timed) {
  timed = false;
  // Far from the crossover (or with none: a crossover of 0 asks for the
  // dense kernel) the formula is safe, and timing would only cost. Above
  // 75% nonzero inputs the event-driven kernel, which adds most of what
  // the dense one does and lists them first, was never the faster (it
  // reaches the dense kernel's time near 60% on the CPU where it does best).
  if (!(crossover > 0.0 && density >= crossover / 3.0 && density <= std::min(0.75, 3.0 * crossover))) return guess;
  // The kernels' costs grow differently with the density, and with the
  // rows per call (weights read once per block of rows): a trial per bin.
  const int d = static_cast<int>(std::floor(std::log(density) / std::log(1.25)));
  const int r = static_cast<int>(std::floor(std::log2(static_cast<double>(std::max<int64_t>(1, rows)))));
  size_t b = 0;
  while (b < bins_.size() && !(bins_[b].density == d && bins_[b].rows == r)) ++b;
  if (b == bins_.size()) {
    if (bins_.size() == kMaxBins) {
      bins_.clear();
      b = 0;
    }
    bins_.push_back(Bin{d, r});
  }
  const Bin& bin = bins_[b];
  if (bin.runs[0] >= kRuns && bin.runs[1] >= kRuns) {
    return bin.best[1] <= bin.best[0] ? LinearPath::kEvent : LinearPath::kDense;
  }
  timed = true;
  timed_ = b;
  // Alternately, event-driven first: a slow spell of the machine (seconds
  // on a VM) then tends to hit both kernels alike.
  return bin.runs[1] <= bin.runs[0] ? LinearPath::kEvent : LinearPath::kDense;
}

void KernelTrial::record(LinearPath path, double seconds_per_row) {
  TORCH_CHECK(path == LinearPath::kDense || path == LinearPath::kEvent, "KernelTrial::record: a kernel, got kAuto");
  TORCH_CHECK(timed_ < bins_.size(), "KernelTrial::record: no call is being timed");
  Bin& bin = bins_[timed_];
  const int k = path == LinearPath::kEvent ? 1 : 0;
  bin.best[k] = std::min(bin.best[k], seconds_per_row);
  ++bin.runs[k];
}

namespace {

// Times a call for its KernelTrial when `timed` (else only runs it).
template <typename Fn>
void timed_call(bool timed, KernelTrial& trial, LinearPath path, int64_t rows, const Fn& fn) {
  if (!timed) {
    fn();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  trial.record(path, s / static_cast<double>(std::max<int64_t>(1, rows)));
}

}  // namespace

const PackedLinear* LinearImpl::prepare(const torch::Tensor& x, LinearPath& path, KernelTrial& trial, bool& timed) {
  path = options.path();
  timed = false;
  if (path == LinearPath::kAuto && x.is_cpu() && x.numel() > 0 &&
      (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble || x.scalar_type() == torch::kBool)) {
    // Decided here rather than in functional::linear so that the module can
    // report what it chose (the benchmark prints it).
    last_density_ = functional::density_of(x.contiguous());
    path = functional::choose_path(last_density_, options.event_crossover(), options.out_features());
    if (options.time_kernels()) {
      path = trial.choose(last_density_, x.numel() / options.in_features(),
                          functional::crossover_for(options.event_crossover(), options.out_features()), path, timed);
    }
  }
  last_path_ = path;
  // (cuBLAS, kDense on a GPU, reads the weights as they are.)
  const bool packs = weight.is_cpu() || (weight.is_cuda() && path != LinearPath::kDense);
  if (x.device() != weight.device() || !packs) return nullptr;
  // Packed once per pipeline run (FrozenWeights), else on every call.
  const uint64_t epoch = FrozenWeights::epoch();
  const bool fresh = epoch != 0 && packed_.epoch == epoch && packed_.source_weight.is_same(weight) &&
                     packed_.weight_version == weight._version() && packed_.weight_data == weight.data_ptr() &&
                     (!bias.defined() || (packed_.source_bias.is_same(bias) && packed_.bias_version == bias._version()));
  if (!fresh) {
    packed_ = functional::packed_for(weight, bias);
    packed_.source_weight = weight;
    packed_.source_bias = bias;
    packed_.weight_version = weight._version();
    packed_.weight_data = weight.data_ptr();
    packed_.epoch = epoch;
    packed_.bias_version = bias.defined() ? bias._version() : 0;
  }
  return &packed_;
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  LinearPath path = LinearPath::kAuto;
  bool timed = false;
  const PackedLinear* packed = prepare(x, path, forward_trial_, timed);
  torch::Tensor y;
  timed_call(timed, forward_trial_, path, x.numel() / options.in_features(), [&] {
    y = functional::linear_with(x, weight, bias, grad_sums_, path, options.event_crossover(), packed);
  });
  return y;
}

void LinearImpl::forward_steps(const torch::Tensor& x, const StepBlockFn& consume) {
  const int64_t in = options.in_features();
  if (x.dim() != 3 || x.size(2) != in) {
    throw Error("linear forward_steps: input must be [T, B, " + std::to_string(in) + "], got " +
                c10::str(x.sizes()));
  }
  if (!x.is_cpu() || !weight.is_cpu()) throw Error("linear forward_steps: the input and the weights must be on the CPU");
  if (x.scalar_type() != weight.scalar_type() && x.scalar_type() != torch::kBool) {
    throw Error("linear forward_steps: input is " + std::string(c10::toString(x.scalar_type())) +
                " but the weight is " + c10::toString(weight.scalar_type()) + " (bool spikes are also accepted)");
  }
  if (torch::GradMode::is_enabled() && (weight.requires_grad() || (bias.defined() && bias.requires_grad()))) {
    throw Error("linear forward_steps is for inference: call it with no gradient recorded (torch::NoGradGuard)");
  }
  if (x.numel() == 0) return;
  LinearPath path = LinearPath::kAuto;
  bool timed = false;
  const PackedLinear& packed = *prepare(x, path, steps_trial_, timed);
  timed_call(timed, steps_trial_, path, x.size(0) * x.size(1), [&] { steps_with(x, path, packed, consume); });
}

void LinearImpl::steps_with(const torch::Tensor& x, LinearPath path, const PackedLinear& packed,
                            const StepBlockFn& consume) {
  const int64_t in = options.in_features(), out = options.out_features();
  const bool event = path == LinearPath::kEvent;
  const bool spikes = x.scalar_type() == torch::kBool && event;
  const torch::Tensor xc = x.scalar_type() == torch::kBool && !event ? x.to(weight.scalar_type()) : x.contiguous();
  const int64_t T = x.size(0), B = x.size(1);
  const CpuLoops loops = cpu_loops();
  // Samples per block: y is 32 x out values, in L2 (for bool spikes 32 x out
  // values of each of about 128 / 32 steps, 512 KB for float at out = 1024).
  constexpr int64_t kBlock = 32;
  // Samples per thread: about as much work as rows_times gives a thread.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, T * in * out / 64));
  AT_DISPATCH_FLOATING_TYPES(weight.scalar_type(), "snn_linear_steps", [&] {
    const scalar_t* xp = spikes ? nullptr : xc.data_ptr<scalar_t>();
    const uint8_t* sp = spikes ? static_cast<const uint8_t*>(xc.data_ptr()) : nullptr;
    const scalar_t* wp = packed.weight.data_ptr<scalar_t>();
    const scalar_t* bp = packed.bias.defined() ? packed.bias.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, B, grain, [&](int64_t s0, int64_t s1) {
      if (spikes) {
        // Bool spikes, event-driven: a block of samples over several steps
        // per call (about 128 rows), so that the kernel can take a sample's
        // consecutive steps together (linear_event_steps); then each step's
        // outputs are handed out.
        constexpr int64_t kRows = 128;
        std::vector<scalar_t> y;
        for (int64_t b0 = s0; b0 < s1; b0 += kBlock) {
          const int64_t n = std::min(kBlock, s1 - b0);
          const int64_t steps = std::max<int64_t>(4, kRows / n / 4 * 4);
          y.resize(static_cast<size_t>(steps * n * out));
          for (int64_t t0 = 0; t0 < T; t0 += steps) {
            const int64_t k = std::min(steps, T - t0);
            SNN_ISA_CALL(loops, neurons::detail,
                         linear_event_steps(sp + (t0 * B + b0) * in, wp, bp, y.data(), in, out, n, k, B, n));
            for (int64_t t = t0; t < t0 + k; ++t) consume(t, b0, b0 + n, y.data() + (t - t0) * n * out);
          }
        }
        return;
      }
      // Rows r .. r + n of x, kernel output in y.
      std::vector<scalar_t> y(static_cast<size_t>(kBlock * out));
      auto rows = [&](int64_t r, int64_t n) {
        functional::cpu_rows(spikes ? nullptr : xp + r * in, spikes ? sp + r * in : nullptr, wp, bp, y.data(), in,
                             out, 0, n, event, loops);
      };
      if (s1 - s0 == B && B < kBlock) {
        // The whole batch on this thread, and a small one: consecutive steps'
        // rows are contiguous, so a block takes several steps (the weights
        // are then read once per kBlock rows, as in forward(), not per step).
        const int64_t steps = kBlock / B;
        for (int64_t t0 = 0; t0 < T; t0 += steps) {
          const int64_t k = std::min(steps, T - t0);
          rows(t0 * B, k * B);
          for (int64_t t = t0; t < t0 + k; ++t) consume(t, 0, B, y.data() + (t - t0) * B * out);
        }
        return;
      }
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t b0 = s0; b0 < s1; b0 += kBlock) {
          const int64_t n = std::min(kBlock, s1 - b0);
          rows(t * B + b0, n);
          consume(t, b0, b0 + n, y.data());
        }
      }
    });
  });
}

torch::Tensor LinearImpl::carried_grad_sum(const torch::Tensor& param) const {
  if (!grad_sums_) return {};
  const LinearGradSums& g = *grad_sums_;
  // Whether the sum is the gradient's record: since the last restart (sums
  // only), or while .grad() is still the tensor the layer wrote last.
  const auto current = [&](const torch::Tensor& written, uint32_t version, bool restart) {
    if (g.sums_only) return !restart;
    const torch::Tensor& grad = param.grad();
    return grad.defined() && written.defined() && grad.is_same(written) && grad._version() == version;
  };
  if (param.is_same(weight) && g.weight_t.defined() &&
      current(g.written_weight, g.written_weight_version, g.restart_weight)) {
    return g.weight_t.t();
  }
  if (bias.defined() && param.is_same(bias) && g.bias.defined() &&
      current(g.written_bias, g.written_bias_version, g.restart_bias)) {
    return g.bias;
  }
  return {};
}

void LinearImpl::keep_grad_sums_only(bool on) {
  if (!grad_sums_) {
    throw Error("keep_grad_sums_only: this snn::Linear carries no gradient sums (LinearOptions::carry_grad_sums)");
  }
  grad_sums_->sums_only = on;
  // Either way the sums start afresh: from zero (sums only), or from
  // whatever .grad() holds then (not from sums .grad() never saw).
  grad_sums_->written_weight = grad_sums_->written_bias = torch::Tensor();
  restart_grad_sums();
}

void LinearImpl::restart_grad_sums() {
  if (!grad_sums_) return;
  grad_sums_->restart_weight = grad_sums_->restart_bias = true;
  grad_sums_->rows_current = false;
}

void LinearImpl::exchange_grad_rows(std::shared_ptr<GradRowsExchange> rows) {
  if (!grad_sums_ || (rows && !grad_sums_->sums_only)) {
    throw Error("exchange_grad_rows: this snn::Linear does not keep its gradients as sums only "
                "(keep_grad_sums_only(true) first)");
  }
  grad_sums_->rows = std::move(rows);
  grad_sums_->rows_current = false;
}

std::pair<torch::Tensor, torch::Tensor> LinearImpl::exchanged_grad_sums() const {
  if (!grad_sums_ || !grad_sums_->rows_current) return {};
  return {grad_sums_->rows_weight_t, bias.defined() ? grad_sums_->rows_bias : torch::Tensor()};
}

void LinearImpl::pretty_print(std::ostream& os) const {
  os << "snn::Linear(in_features=" << options.in_features() << ", out_features=" << options.out_features()
     << ", bias=" << (options.bias() ? "true" : "false") << ")";
}

}  // namespace snn
