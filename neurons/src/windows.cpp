// Max pooling and im2col rows for the graph model's CNN layers: one pass
// each, with LibTorch's values and gradients (snn/neurons/windows.h).

#include "snn/neurons/windows.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/nn/functional/fold.h>
#include <torch/nn/functional/pooling.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "window_geometry.h"

namespace snn {
namespace neurons::detail {
#define SNN_DECLARE_WINDOW_LOOPS(isa)                                                                      \
  namespace isa {                                                                                          \
  template <typename T>                                                                                    \
  void max_pool_2x2(const T* x, T* y, uint8_t* idx, int64_t H, int64_t W, int64_t p0, int64_t p1);         \
  template <typename T>                                                                                    \
  void max_pool_2x2_backward(const T* gy, const uint8_t* idx, T* gx, int64_t H, int64_t W, int64_t p0,     \
                             int64_t p1);                                                                  \
  template <typename T>                                                                                    \
  void im2rows_images(const T* x, T* rows, const WindowGeometry& g, int64_t n0, int64_t n1);               \
  template <typename T>                                                                                    \
  void rows2im_images(const T* grows, T* gx, const WindowGeometry& g, int64_t n0, int64_t n1);             \
  }
SNN_DECLARE_WINDOW_LOOPS(base)
SNN_DECLARE_WINDOW_LOOPS(avx2)
SNN_DECLARE_WINDOW_LOOPS(avx512)
#undef SNN_DECLARE_WINDOW_LOOPS
}  // namespace neurons::detail

namespace functional {
namespace {

std::string pair_text(const std::array<int64_t, 2>& v) {
  return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")";
}

bool kernel_dtype(const torch::Tensor& x) {
  return x.is_cpu() && (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble);
}

// The sizes of one window operation, as plain numbers for the loops and
// for saved_data.
struct Geometry : neurons::detail::WindowGeometry {
  std::vector<int64_t> list() const { return {N, C, H, W, OH, OW, KH, KW, sH, sW, pH, pW, dH, dW}; }
  static Geometry of(const std::vector<int64_t>& v) {
    return {{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13]}};
  }
};

// --- max pooling -----------------------------------------------------------

// Output planes [p0, p1) of N C: each output's maximum and, if idx is
// given, its position in the window (ky KW + kx). LibTorch's rule: the
// window clipped to the input, scanned by rows from -inf, an element taken
// when greater or NaN; with nothing taken the position is the clipped
// window's first. (2 x 2 windows at stride 2 without padding go to the
// per-ISA max_pool_2x2 instead, pool_loops.cpp.)
template <typename T>
void pool_forward(const T* x, T* y, uint8_t* idx, const Geometry& g, int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
    const T* in = x + p * g.H * g.W;
    T* out = y + p * g.OH * g.OW;
    uint8_t* at = idx ? idx + p * g.OH * g.OW : nullptr;
    for (int64_t oy = 0; oy < g.OH; ++oy) {
      const int64_t y0 = oy * g.sH - g.pH;
      const int64_t ya = std::max<int64_t>(y0, 0), yb = std::min<int64_t>(y0 + g.KH, g.H);
      for (int64_t ox = 0; ox < g.OW; ++ox) {
        const int64_t x0 = ox * g.sW - g.pW;
        const int64_t xa = std::max<int64_t>(x0, 0), xb = std::min<int64_t>(x0 + g.KW, g.W);
        T best = -std::numeric_limits<T>::infinity();
        int64_t where = (ya - y0) * g.KW + (xa - x0);
        for (int64_t iy = ya; iy < yb; ++iy) {
          for (int64_t ix = xa; ix < xb; ++ix) {
            const T v = in[iy * g.W + ix];
            const bool take = (v > best) | (v != v);  // branch-free: spikes tie often
            best = take ? v : best;
            where = take ? (iy - y0) * g.KW + (ix - x0) : where;
          }
        }
        out[oy * g.OW + ox] = best;
        if (at) at[oy * g.OW + ox] = static_cast<uint8_t>(where);
      }
    }
  }
}

// The gradient of planes [p0, p1): zero, then each output's gradient added
// to its maximum's element, outputs in order (LibTorch's order). (The 2 x 2
// pool's goes to the per-ISA max_pool_2x2_backward, pool_loops.cpp.)
template <typename T>
void pool_backward(const T* gy, const uint8_t* idx, T* gx, const Geometry& g, int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
    T* plane = gx + p * g.H * g.W;
    std::fill(plane, plane + g.H * g.W, T(0));
    const T* go = gy + p * g.OH * g.OW;
    const uint8_t* at = idx + p * g.OH * g.OW;
    for (int64_t oy = 0; oy < g.OH; ++oy) {
      for (int64_t ox = 0; ox < g.OW; ++ox) {
        const int64_t o = oy * g.OW + ox, w = at[o];
        const int64_t iy = oy * g.sH - g.pH + w / g.KW, ix = ox * g.sW - g.pW + w % g.KW;
        plane[iy * g.W + ix] += go[o];
      }
    }
  }
}

// CNNs' usual pool, 2 x 2 windows at stride 2 without padding: per-ISA
// vector loops both ways (pool_loops.cpp).
bool is_pool_2x2(const Geometry& g) {
  return g.KH == 2 && g.KW == 2 && g.sH == 2 && g.sW == 2 && g.pH == 0 && g.pW == 0;
}

// Planes per task: about 16K outputs.
int64_t plane_grain(const Geometry& g) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.OH * g.OW)); }

torch::Tensor pool(const torch::Tensor& x, const Geometry& g, torch::Tensor* idx) {
  torch::Tensor y = torch::empty({g.N, g.C, g.OH, g.OW}, x.options());
  if (idx) *idx = torch::empty({g.N, g.C, g.OH, g.OW}, x.options().dtype(torch::kByte));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_max_pool2d", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    uint8_t* ip = idx ? idx->data_ptr<uint8_t>() : nullptr;
    if (is_pool_2x2(g)) {
      // CNNs' usual pool: vectors of outputs, no clipping arithmetic.
      const CpuLoops loops = cpu_loops();
      at::parallel_for(0, g.N * g.C, plane_grain(g), [&](int64_t p0, int64_t p1) {
        SNN_ISA_CALL(loops, neurons::detail, max_pool_2x2(xp, yp, ip, g.H, g.W, p0, p1));
      });
      return;
    }
    at::parallel_for(0, g.N * g.C, plane_grain(g),
                     [&](int64_t p0, int64_t p1) { pool_forward(xp, yp, ip, g, p0, p1); });
  });
  return y;
}

struct MaxPoolFunction : torch::autograd::Function<MaxPoolFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const Geometry& g) {
    torch::Tensor idx;
    torch::Tensor y = pool(x.contiguous(), g, &idx);
    ctx->save_for_backward({idx});
    ctx->saved_data["g"] = g.list();
    ctx->saved_data["dtype"] = static_cast<int64_t>(x.scalar_type());
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor idx = ctx->get_saved_variables()[0];
    const Geometry g = Geometry::of(ctx->saved_data["g"].toIntVector());
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const torch::Tensor gy = grads[0].to(dtype).contiguous();
    torch::Tensor gx = torch::empty({g.N, g.C, g.H, g.W}, gy.options());
    AT_DISPATCH_FLOATING_TYPES(gy.scalar_type(), "snn_max_pool2d_backward", [&] {
      const scalar_t* gp = gy.data_ptr<scalar_t>();
      const uint8_t* ip = idx.data_ptr<uint8_t>();
      scalar_t* xp = gx.data_ptr<scalar_t>();
      if (is_pool_2x2(g)) {
        const CpuLoops loops = cpu_loops();
        at::parallel_for(0, g.N * g.C, plane_grain(g), [&](int64_t p0, int64_t p1) {
          SNN_ISA_CALL(loops, neurons::detail, max_pool_2x2_backward(gp, ip, xp, g.H, g.W, p0, p1));
        });
        return;
      }
      at::parallel_for(0, g.N * g.C, plane_grain(g),
                       [&](int64_t p0, int64_t p1) { pool_backward(gp, ip, xp, g, p0, p1); });
    });
    return {gx, torch::Tensor()};
  }
};

// --- im2col rows -------------------------------------------------------------
// (The loops are per-ISA, rows_loops.cpp: vector copies, additions and
// transposes in registers.)

torch::Tensor rows(const torch::Tensor& x, const Geometry& g) {
  const int64_t F = g.C * g.KH * g.KW;
  torch::Tensor out = torch::empty({g.N * g.OH * g.OW, F}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_im2rows", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, g.OH * g.OW * F));
    const CpuLoops loops = cpu_loops();
    at::parallel_for(0, g.N, grain, [&](int64_t n0, int64_t n1) {
      SNN_ISA_CALL(loops, neurons::detail, im2rows_images(xp, op, g, n0, n1));
    });
  });
  return out;
}

struct Im2RowsFunction : torch::autograd::Function<Im2RowsFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const Geometry& g) {
    ctx->saved_data["g"] = g.list();
    ctx->saved_data["dtype"] = static_cast<int64_t>(x.scalar_type());
    return rows(x.contiguous(), g);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const Geometry g = Geometry::of(ctx->saved_data["g"].toIntVector());
    const auto dtype = static_cast<torch::ScalarType>(ctx->saved_data["dtype"].toInt());
    const torch::Tensor gr = grads[0].to(dtype).contiguous();
    torch::Tensor gx = torch::empty({g.N, g.C, g.H, g.W}, gr.options());
    AT_DISPATCH_FLOATING_TYPES(gr.scalar_type(), "snn_im2rows_backward", [&] {
      const scalar_t* gp = gr.data_ptr<scalar_t>();
      scalar_t* xp = gx.data_ptr<scalar_t>();
      const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, g.OH * g.OW * g.C * g.KH * g.KW));
      const CpuLoops loops = cpu_loops();
      at::parallel_for(0, g.N, grain, [&](int64_t n0, int64_t n1) {
        SNN_ISA_CALL(loops, neurons::detail, rows2im_images(gp, xp, g, n0, n1));
      });
    });
    return {gx, torch::Tensor()};
  }
};

void check_nchw(const torch::Tensor& x, const char* what) {
  if (x.dim() != 4) throw Error(std::string(what) + ": the input must be [N, C, H, W], got " + c10::str(x.sizes()));
}

}  // namespace

torch::Tensor max_pool2d(const torch::Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                         std::array<int64_t, 2> padding) {
  check_nchw(x, "max_pool2d");
  for (int a = 0; a < 2; ++a) {
    if (kernel[a] < 1 || stride[a] < 1 || padding[a] < 0 || 2 * padding[a] > kernel[a]) {
      throw Error("max_pool2d: kernel and stride must be >= 1 and padding between 0 and half the kernel, got kernel " +
                  pair_text(kernel) + ", stride " + pair_text(stride) + ", padding " + pair_text(padding));
    }
    if (kernel[a] > x.size(2 + a) + 2 * padding[a]) {
      throw Error("max_pool2d: kernel " + pair_text(kernel) + " is larger than the padded input " +
                  c10::str(x.sizes()) + " (padding " + pair_text(padding) + ")");
    }
  }
  if (!kernel_dtype(x) || kernel[0] * kernel[1] > 256) {
    return torch::nn::functional::max_pool2d(x, torch::nn::functional::MaxPool2dFuncOptions({kernel[0], kernel[1]})
                                                    .stride({stride[0], stride[1]})
                                                    .padding({padding[0], padding[1]}));
  }
  Geometry g{{x.size(0), x.size(1), x.size(2), x.size(3), 0, 0, kernel[0], kernel[1], stride[0], stride[1],
             padding[0], padding[1]}};
  g.OH = (g.H + 2 * g.pH - g.KH) / g.sH + 1;
  g.OW = (g.W + 2 * g.pW - g.KW) / g.sW + 1;
  if (torch::GradMode::is_enabled() && x.requires_grad()) return MaxPoolFunction::apply(x, g);
  return pool(x.contiguous(), g, nullptr);
}

torch::Tensor spike_max_pool2x2(const torch::Tensor& x) {
  if (x.dim() < 3) throw Error("spike_max_pool2x2: spikes must be [..., H, W] with a leading dim, got " + c10::str(x.sizes()));
  const int64_t H = x.size(-2), W = x.size(-1);
  const bool is_bool = x.scalar_type() == torch::kBool;
  const torch::Tensor real = is_bool ? x.to(torch::kFloat) : x;
  const std::array<int64_t, 2> two{2, 2};
  const torch::Tensor y = functional::max_pool2d(real.reshape({-1, 1, H, W}), two, two, std::array<int64_t, 2>{0, 0});
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[sizes.size() - 2] = y.size(2);
  sizes[sizes.size() - 1] = y.size(3);
  return is_bool ? y.reshape(sizes).to(torch::kBool) : y.reshape(sizes);
}

torch::Tensor im2rows(const torch::Tensor& x, std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride,
                      std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation) {
  check_nchw(x, "im2rows");
  Geometry g{{x.size(0), x.size(1), x.size(2), x.size(3), 0, 0, kernel[0], kernel[1], stride[0], stride[1],
             padding[0], padding[1], dilation[0], dilation[1]}};
  for (int a = 0; a < 2; ++a) {
    if (kernel[a] < 1 || stride[a] < 1 || dilation[a] < 1 || padding[a] < 0) {
      throw Error("im2rows: kernel, stride and dilation must be >= 1 and padding >= 0, got kernel " +
                  pair_text(kernel) + ", stride " + pair_text(stride) + ", padding " + pair_text(padding) +
                  ", dilation " + pair_text(dilation));
    }
    if (dilation[a] * (kernel[a] - 1) + 1 > x.size(2 + a) + 2 * padding[a]) {
      throw Error("im2rows: kernel " + pair_text(kernel) + " with dilation " + pair_text(dilation) +
                  " is larger than the padded input " + c10::str(x.sizes()) + " (padding " + pair_text(padding) + ")");
    }
  }
  g.OH = (g.H + 2 * g.pH - g.dH * (g.KH - 1) - 1) / g.sH + 1;
  g.OW = (g.W + 2 * g.pW - g.dW * (g.KW - 1) - 1) / g.sW + 1;
  if (!kernel_dtype(x)) {
    const torch::Tensor cols = torch::nn::functional::unfold(x, torch::nn::functional::UnfoldFuncOptions({g.KH, g.KW})
                                                                    .dilation({g.dH, g.dW})
                                                                    .padding({g.pH, g.pW})
                                                                    .stride({g.sH, g.sW}));
    return cols.transpose(1, 2).reshape({-1, cols.size(1)});
  }
  if (torch::GradMode::is_enabled() && x.requires_grad()) return Im2RowsFunction::apply(x, g);
  return rows(x.contiguous(), g);
}

}  // namespace functional
}  // namespace snn
