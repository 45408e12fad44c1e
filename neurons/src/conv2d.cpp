#include "snn/neurons/conv2d.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <torch/autograd.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "conv2d_args.h"
#include "linear_grad.h"
#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "snn/core/frozen_weights.h"
#include "snn/neurons/windows.h"

namespace snn {
namespace neurons::detail {
#define SNN_DECLARE_CONV2D_EVENT(isa)                                                                \
  namespace isa {                                                                                    \
  template <typename T, typename X>                                                                  \
  void conv2d_event(const X* x, T* y, const Conv2dEventArgs<T>& a, int64_t n0, int64_t n1);        \
  template <typename T>                                                                              \
  void conv2d_input_grad(const T* gy, T* gx, const Conv2dInputGradArgs<T>& a, int64_t n0, int64_t n1); \
  }
SNN_DECLARE_CONV2D_EVENT(base)
SNN_DECLARE_CONV2D_EVENT(avx2)
SNN_DECLARE_CONV2D_EVENT(avx512)
#undef SNN_DECLARE_CONV2D_EVENT
}  // namespace neurons::detail

namespace functional {
namespace {

std::string shape_text(const torch::Tensor& t) { return c10::str(t.sizes()); }

// Where each input pixel's value goes (Conv2dEventArgs::first, output,
// tap): output position (oy, ox) and tap (ky, kx) for every (ky, kx) whose
// window position lands on the pixel, taps ascending.
struct Targets {
  std::vector<int32_t> first, output, tap;
};

Targets targets_of(int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                   const std::array<int64_t, 2>& s, const std::array<int64_t, 2>& p, const std::array<int64_t, 2>& d) {
  Targets t;
  t.first.reserve(static_cast<size_t>(H * W + 1));
  // The output row (or column) that tap k of an input at i feeds, or -1.
  const auto along = [](int64_t i, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t extent) -> int64_t {
    const int64_t at = i + pad - k * dil;  // = o * stride
    if (at < 0 || at % stride != 0 || at / stride >= extent) return -1;
    return at / stride;
  };
  for (int64_t iy = 0; iy < H; ++iy) {
    for (int64_t ix = 0; ix < W; ++ix) {
      t.first.push_back(static_cast<int32_t>(t.output.size()));
      for (int64_t ky = 0; ky < KH; ++ky) {
        const int64_t oy = along(iy, ky, s[0], p[0], d[0], OH);
        if (oy < 0) continue;
        for (int64_t kx = 0; kx < KW; ++kx) {
          const int64_t ox = along(ix, kx, s[1], p[1], d[1], OW);
          if (ox < 0) continue;
          t.output.push_back(static_cast<int32_t>(oy * OW + ox));
          t.tap.push_back(static_cast<int32_t>(ky * KW + kx));
        }
      }
    }
  }
  t.first.push_back(static_cast<int32_t>(t.output.size()));
  return t;
}

// What a call derives from its geometry and weights, kept per thread (a
// pipeline stage calls with the same few layers again and again; at B = 1
// deriving them anew took as long as a fifth of the convolution itself).
// The targets depend on the geometry alone; the packed weights are kept
// only while a FrozenWeights guard promises the parameters do not change
// (snn/core/frozen_weights.h), and checked against the tensors' storage,
// place, layout, type and version besides.
constexpr size_t kCacheEntries = 16;  // layers of one thread; more: start over

const Targets& targets_cached(int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t OH, int64_t OW,
                              const std::array<int64_t, 2>& s, const std::array<int64_t, 2>& p,
                              const std::array<int64_t, 2>& d) {
  thread_local std::map<std::array<int64_t, 12>, Targets> cache;
  const std::array<int64_t, 12> key{H, W, KH, KW, OH, OW, s[0], s[1], p[0], p[1], d[0], d[1]};
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kCacheEntries) cache.clear();
    it = cache.emplace(key, targets_of(H, W, KH, KW, OH, OW, s, p, d)).first;
  }
  return it->second;
}

// The weights as rows f = (c KH + ky) KW + kx of TW output channels
// (zero-padded): W [Cout, F] transposed; the bias zero-padded to TW.
struct PackedConv {
  // What they were packed from: the storage (held weakly, so that a cache
  // entry does not keep a destroyed network's parameters alive), the place
  // and layout in it, and the version. Not the tensor object: callers pass
  // a fresh view of a layer's parameter at every call (the graph model's
  // [Cout, Cin KH KW] weight viewed as [Cout, Cin, KH, KW]), and a view
  // shares its base's storage and version counter, so an in-place change
  // through either is seen.
  struct Source {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage{c10::intrusive_ptr<c10::StorageImpl>()};
    const void* data = nullptr;
    std::vector<int64_t> sizes, strides;
    c10::ScalarType type = c10::ScalarType::Undefined;
    bool negated = false;  // a lazily negated view (_neg_view) reads other values
    uint32_t version = 0;

    static Source of(const torch::Tensor& t) {
      Source s;
      s.storage = t.storage().getWeakStorageImpl();
      s.data = t.data_ptr();
      s.sizes = t.sizes().vec();
      s.strides = t.strides().vec();
      s.type = t.scalar_type();
      s.negated = t.is_neg();
      s.version = t._version();
      return s;
    }
    bool is(const torch::Tensor& t) const {
      return !storage.expired() && storage._unsafe_get_target() == t.storage().unsafeGetStorageImpl() &&
             data == t.data_ptr() && t.sizes().equals(sizes) && t.strides().equals(strides) &&
             type == t.scalar_type() && negated == t.is_neg() && version == t._version();
    }
  };
  torch::Tensor weight, bias;
  Source source_weight, source_bias;
  uint64_t epoch = 0;
};

// Packings made on this thread (conv2d_event_packings()).
thread_local uint64_t g_packings = 0;

const PackedConv& packed_cached(const torch::Tensor& weight, const torch::Tensor& bias, int64_t Cout, int64_t F,
                                int64_t TW) {
  thread_local std::vector<PackedConv> cache;
  const uint64_t epoch = FrozenWeights::epoch();
  if (epoch != 0) {
    for (const PackedConv& c : cache) {
      if (c.epoch == epoch && c.source_weight.is(weight) && c.bias.defined() == bias.defined() &&
          (!bias.defined() || c.source_bias.is(bias))) {
        return c;
      }
    }
  }
  ++g_packings;
  PackedConv c;
  c.weight = torch::constant_pad_nd(weight.detach().reshape({Cout, F}).t(), {0, TW - Cout}).contiguous();
  c.bias = bias.defined() ? torch::constant_pad_nd(bias.detach(), {0, TW - Cout}).contiguous() : torch::Tensor();
  if (epoch == 0) {  // no promise: packed for this call only
    thread_local PackedConv once;
    once = std::move(c);
    cache.clear();
    return once;
  }
  c.source_weight = PackedConv::Source::of(weight);
  if (bias.defined()) c.source_bias = PackedConv::Source::of(bias);
  c.epoch = epoch;
  // Entries of an older epoch (or beyond the bound) go.
  std::vector<PackedConv> kept;
  for (PackedConv& old : cache) {
    // (Entries whose weights are gone can never be asked for again.)
    if (old.epoch == epoch && !old.source_weight.storage.expired() && kept.size() + 1 < kCacheEntries) {
      kept.push_back(std::move(old));
    }
  }
  kept.push_back(std::move(c));
  cache = std::move(kept);
  return cache.back();
}

}  // namespace

uint64_t conv2d_event_packings() { return g_packings; }

bool conv2d_event_pays(const torch::Tensor& x) {
  const auto type = x.scalar_type();
  return x.is_cpu() && x.numel() > 0 && (type == torch::kFloat || type == torch::kDouble || type == torch::kBool);
}

torch::Tensor conv2d_event(const torch::Tensor& x_in, const torch::Tensor& weight, const torch::Tensor& bias,
                           std::array<int64_t, 2> stride, std::array<int64_t, 2> padding,
                           std::array<int64_t, 2> dilation) {
  if (x_in.dim() != 4 || weight.dim() != 4) {
    throw Error("conv2d: the input must be [N, C, H, W] and the weight [Cout, Cin, KH, KW], got " + shape_text(x_in) +
                " and " + shape_text(weight));
  }
  if (!x_in.is_cpu() || !weight.is_cpu()) {
    throw Error("conv2d_event: a CPU kernel, got tensors on " + c10::str(x_in.device()) + " and " +
                c10::str(weight.device()));
  }
  if (weight.scalar_type() != torch::kFloat && weight.scalar_type() != torch::kDouble) {
    throw Error(std::string("conv2d: the weight must be float32 or float64, got ") +
                c10::toString(weight.scalar_type()));
  }
  if (x_in.scalar_type() != weight.scalar_type() && x_in.scalar_type() != torch::kBool) {
    throw Error(std::string("conv2d: input is ") + c10::toString(x_in.scalar_type()) + " but the weight is " +
                c10::toString(weight.scalar_type()) + " (bool spikes are also accepted)");
  }
  const int64_t N = x_in.size(0), C = x_in.size(1), H = x_in.size(2), W = x_in.size(3);
  const int64_t Cout = weight.size(0), KH = weight.size(2), KW = weight.size(3);
  if (weight.size(1) != C) {
    throw Error("conv2d: the input has " + std::to_string(C) + " channels but the weight " + shape_text(weight) +
                " expects " + std::to_string(weight.size(1)));
  }
  if (bias.defined() && (bias.dim() != 1 || bias.size(0) != Cout)) {
    throw Error("conv2d: the bias must be [" + std::to_string(Cout) + "], got " + shape_text(bias));
  }
  for (int a = 0; a < 2; ++a) {
    if (stride[a] < 1 || dilation[a] < 1 || padding[a] < 0) {
      const auto pair = [](const std::array<int64_t, 2>& v) {
        return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
      };
      throw Error("conv2d: stride and dilation must be >= 1 and padding >= 0, got stride " + pair(stride) +
                  ", padding " + pair(padding) + ", dilation " + pair(dilation));
    }
  }
  const int64_t span_h = dilation[0] * (KH - 1) + 1, span_w = dilation[1] * (KW - 1) + 1;
  if (span_h > H + 2 * padding[0] || span_w > W + 2 * padding[1]) {
    throw Error("conv2d: a kernel spanning " + std::to_string(span_h) + " x " + std::to_string(span_w) +
                " does not fit the padded input " + std::to_string(H + 2 * padding[0]) + " x " +
                std::to_string(W + 2 * padding[1]));
  }
  const int64_t OH = (H + 2 * padding[0] - span_h) / stride[0] + 1, OW = (W + 2 * padding[1] - span_w) / stride[1] + 1;
  torch::Tensor y = torch::empty({N, Cout, OH, OW}, weight.options());
  if (N == 0 || Cout == 0) return y;
  const torch::Tensor x = x_in.contiguous();
  const Targets& t = targets_cached(H, W, KH, KW, OH, OW, stride, padding, dilation);
  const int64_t F = C * KH * KW, TW = (Cout + 15) / 16 * 16;
  torch::NoGradGuard no_grad;
  const PackedConv& packed = packed_cached(weight, bias, Cout, F, TW);
  const torch::Tensor& wt = packed.weight;
  const torch::Tensor& b = packed.bias;
  const CpuLoops loops = cpu_loops();
  AT_DISPATCH_FLOATING_TYPES(weight.scalar_type(), "snn_conv2d_event", [&] {
    neurons::detail::Conv2dEventArgs<scalar_t> a;
    a.channels = C;
    a.pixels = H * W;
    a.outputs = OH * OW;
    a.out_channels = Cout;
    a.width = TW;
    a.taps = KH * KW;
    a.weight = wt.data_ptr<scalar_t>();
    a.bias = b.defined() ? b.data_ptr<scalar_t>() : nullptr;
    a.first = t.first.data();
    a.output = t.output.data();
    a.tap = t.tap.data();
    scalar_t* yp = y.data_ptr<scalar_t>();
    // Images per task: about 64K accumulator updates' worth.
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, C * H * W * TW / 16));
    if (x.scalar_type() == torch::kBool) {
      const uint8_t* xp = static_cast<const uint8_t*>(x.data_ptr());
      at::parallel_for(0, N, grain, [&](int64_t n0, int64_t n1) {
        SNN_ISA_CALL(loops, neurons::detail, conv2d_event(xp, yp, a, n0, n1));
      });
    } else {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      at::parallel_for(0, N, grain, [&](int64_t n0, int64_t n1) {
        SNN_ISA_CALL(loops, neurons::detail, conv2d_event(xp, yp, a, n0, n1));
      });
    }
  });
  return y;
}

bool conv2d_input_grad_fits(const torch::Tensor& x, const torch::Tensor& weight, std::array<int64_t, 2> stride,
                            std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation) {
  const auto type = weight.scalar_type();
  if (!(x.is_cpu() && weight.is_cpu() && (type == torch::kFloat || type == torch::kDouble) && x.scalar_type() == type &&
        x.dim() == 4 && weight.dim() == 4 && weight.size(1) == x.size(1))) {
    return false;
  }
  for (int a = 0; a < 2; ++a) {
    const int64_t k = weight.size(2 + a);
    if (stride[a] != 1 || dilation[a] != 1 || padding[a] < 0 || padding[a] > k - 1 ||
        k > x.size(2 + a) + 2 * padding[a]) {
      return false;
    }
  }
  return true;
}

torch::Tensor conv2d_input_grad(const torch::Tensor& gy_in, const torch::Tensor& weight, int64_t H, int64_t W,
                                std::array<int64_t, 2> padding) {
  if (gy_in.dim() != 4 || weight.dim() != 4) {
    throw Error("conv2d_input_grad: the output gradient must be [N, Cout, OH, OW] and the weight [Cout, Cin, KH, KW], "
                "got " + shape_text(gy_in) + " and " + shape_text(weight));
  }
  const int64_t N = gy_in.size(0), Cout = weight.size(0), Cin = weight.size(1), KH = weight.size(2),
                KW = weight.size(3);
  const int64_t OH = H + 2 * padding[0] - KH + 1, OW = W + 2 * padding[1] - KW + 1;
  if (padding[0] < 0 || padding[1] < 0 || padding[0] > KH - 1 || padding[1] > KW - 1 || OH < 1 || OW < 1) {
    throw Error("conv2d_input_grad: padding (" + std::to_string(padding[0]) + ", " + std::to_string(padding[1]) +
                ") must lie in [0, kernel - 1] for the kernel " + std::to_string(KH) + " x " + std::to_string(KW) +
                " on a " + std::to_string(H) + " x " + std::to_string(W) + " input");
  }
  if (gy_in.size(1) != Cout || gy_in.size(2) != OH || gy_in.size(3) != OW) {
    throw Error("conv2d_input_grad: the output gradient " + shape_text(gy_in) + " does not fit the weight " +
                shape_text(weight) + " on a " + std::to_string(H) + " x " + std::to_string(W) +
                " input (expected [N, " + std::to_string(Cout) + ", " + std::to_string(OH) + ", " +
                std::to_string(OW) + "])");
  }
  if (!gy_in.is_cpu() || !weight.is_cpu() ||
      (weight.scalar_type() != torch::kFloat && weight.scalar_type() != torch::kDouble)) {
    throw Error("conv2d_input_grad: a CPU kernel for float32 and float64, got " + c10::str(gy_in.device()) + " " +
                c10::toString(gy_in.scalar_type()) + " and a " + c10::toString(weight.scalar_type()) + " weight");
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor gy = gy_in.to(weight.scalar_type()).contiguous();
  const torch::Tensor wp = weight.detach().permute({2, 3, 0, 1}).contiguous();  // [KH, KW, Cout, Cin]
  torch::Tensor gx = torch::empty({N, Cin, H, W}, weight.options());
  if (N == 0 || Cin == 0) return gx;
  const CpuLoops loops = cpu_loops();
  AT_DISPATCH_FLOATING_TYPES(weight.scalar_type(), "snn_conv2d_input_grad", [&] {
    neurons::detail::Conv2dInputGradArgs<scalar_t> a;
    a.in_channels = Cin;
    a.H = H;
    a.W = W;
    a.out_channels = Cout;
    a.OH = OH;
    a.OW = OW;
    a.KH = KH;
    a.KW = KW;
    a.pH = padding[0];
    a.pW = padding[1];
    a.weight = wp.data_ptr<scalar_t>();
    const scalar_t* gp = gy.data_ptr<scalar_t>();
    scalar_t* xp = gx.data_ptr<scalar_t>();
    // Images per task: about 64K vector products' worth.
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, Cin * H * W * KH * KW * Cout / 16));
    at::parallel_for(0, N, grain, [&](int64_t n0, int64_t n1) {
      SNN_ISA_CALL(loops, neurons::detail, conv2d_input_grad(gp, xp, a, n0, n1));
    });
  });
  return gx;
}

namespace {

// A weight held as Linear holds it over im2col rows, [Cout, Cin KH KW], as
// the convolution's [Cout, Cin, KH, KW].
torch::Tensor as_kernels(const torch::Tensor& weight, int64_t cin, int64_t KH, int64_t KW) {
  return weight.reshape({weight.size(0), cin, KH, KW});
}

// conv2d_train's node: x and the weight saved, the output's gradient read
// from planes.
struct Conv2dTrainFunction : torch::autograd::Function<Conv2dTrainFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias, int64_t KH, int64_t KW,
                               int64_t pH, int64_t pW, const c10::intrusive_ptr<LinearGradSums>& sums) {
    ctx->save_for_backward({x, weight});
    const bool has_bias = bias.numel() > 0;
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["KH"] = KH;
    ctx->saved_data["KW"] = KW;
    ctx->saved_data["pH"] = pH;
    ctx->saved_data["pW"] = pW;
    save_grad_sums(ctx, sums, weight, bias, has_bias);
    return conv2d_event(x, as_kernels(weight, x.size(1), KH, KW), has_bias ? bias : torch::Tensor(), {1, 1},
                        {pH, pW}, {1, 1});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor gy = grads[0].contiguous();
    const int64_t KH = ctx->saved_data["KH"].toInt(), KW = ctx->saved_data["KW"].toInt();
    const std::array<int64_t, 2> padding{ctx->saved_data["pH"].toInt(), ctx->saved_data["pW"].toInt()};
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const bool need_w = ctx->needs_input_grad(1), need_b = has_bias && ctx->needs_input_grad(2);
    torch::Tensor gx, gw, gb;
    if (ctx->needs_input_grad(0)) {
      gx = conv2d_input_grad(gy, as_kernels(weight, x.size(1), KH, KW), x.size(2), x.size(3), padding);
    }
    if (need_w || need_b) {
      torch::NoGradGuard no_grad;
      const torch::Tensor gd = pack_grad_planes(gy.view({gy.size(0), gy.size(1), gy.size(2) * gy.size(3)}));
      // The weight's sums from x's planes where a row of pixels fits a
      // 64-bit mask, else from rebuilt im2col rows (KH KW times x's size);
      // the same bits either way.
      AddWeightGrad add_weight;
      if (need_w) {
        add_weight = conv2d_weight_grad_fits(x, {KH, KW}, padding)
                         ? conv2d_weight_grad(x.detach(), {KH, KW}, padding, gd)
                         : rows_weight_grad(im2rows(x.detach(), {KH, KW}, {1, 1}, padding, {1, 1}), gd, 1);
      }
      std::tie(gw, gb) = parameter_grads(add_weight, gd, weight, need_w, need_b, saved_grad_sums(ctx, has_bias));
    }
    return {gx, gw, gb, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor conv2d_train(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                           std::array<int64_t, 2> kernel, std::array<int64_t, 2> padding,
                           const c10::intrusive_ptr<LinearGradSums>& sums) {
  const bool shapes_fit = x.dim() == 4 && weight.dim() == 2 && kernel[0] >= 1 && kernel[1] >= 1 &&
                          weight.size(1) == x.size(1) * kernel[0] * kernel[1] &&
                          (!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)));
  if (!shapes_fit ||
      !conv2d_input_grad_fits(x.detach(), as_kernels(weight.detach(), x.size(1), kernel[0], kernel[1]), {1, 1},
                              padding, {1, 1}) ||
      (bias.defined() && (bias.scalar_type() != weight.scalar_type() || !bias.is_cpu()))) {
    throw Error("conv2d_train: the input " + shape_text(x) + ", weight " + shape_text(weight) + " and bias " +
                (bias.defined() ? shape_text(bias) : std::string("(none)")) + " do not make one stride-1 CPU " +
                "convolution with a " + std::to_string(kernel[0]) + " x " + std::to_string(kernel[1]) +
                " kernel and padding (" + std::to_string(padding[0]) + ", " + std::to_string(padding[1]) +
                ") of one dtype (float32 or float64)");
  }
  // Autograd records every tensor input, so an absent bias travels as an empty tensor.
  const torch::Tensor b = bias.defined() ? bias : torch::empty({0}, weight.options());
  return Conv2dTrainFunction::apply(x, weight, b, kernel[0], kernel[1], padding[0], padding[1], sums);
}

}  // namespace functional
}  // namespace snn
