#include "snn/neurons/batch_norm.h"

#include <torch/autograd.h>

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <array>
#include <cmath>

#include "grad_sums.h"
#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"

namespace snn::neurons::detail {
#define SNN_DECLARE_BN_LOOPS(isa)                                                                                  \
  namespace isa {                                                                                                  \
  template <typename T>                                                                                            \
  void bn_sums(const T* x, int64_t B, int64_t stride, int64_t S, double mean, bool squares, double (&out)[4]);     \
  template <typename T>                                                                                            \
  void bn_normalise(const T* x, T* y, int64_t B, int64_t stride, int64_t S, double mean, double invstd, double w,  \
                    double bias);                                                                                  \
  template <typename T>                                                                                            \
  void bn_backward_sums(const T* x, const T* g, int64_t B, int64_t stride, int64_t S, double mean, double invstd,  \
                        double w, double (&out)[4][4]);                                                            \
  template <typename T>                                                                                            \
  void bn_backward_apply(const T* x, const T* g, T* gx, int64_t B, int64_t stride, int64_t S, double mean,         \
                         double invstd, double w, double mean_gp, double mean_gpx);                                \
  template <typename T>                                                                                            \
  void bn_affine(const T* x, T* y, int64_t n, double scale, double shift);                                         \
  }
SNN_DECLARE_BN_LOOPS(base)
SNN_DECLARE_BN_LOOPS(avx2)
SNN_DECLARE_BN_LOOPS(avx512)
#undef SNN_DECLARE_BN_LOOPS
}  // namespace snn::neurons::detail

namespace snn {
namespace {

// x [K, B, C, ...] as [K, B, C, S].
torch::Tensor as_kbcs(const torch::Tensor& x) {
  return x.reshape({x.size(0), x.size(1), x.size(2), -1});
}

// Per-step, per-channel view [K, 1, C, 1] of a [K, C] tensor, and [1, 1, C, 1] of a [C] one.
torch::Tensor per_step(const torch::Tensor& t) { return t.view({t.size(0), 1, t.size(1), 1}); }
torch::Tensor per_channel(const torch::Tensor& t) { return t.view({1, 1, -1, 1}); }

// The CPU path: one pass per (step, channel) instead of a dozen tensor ops
// over a double copy of the activations (they took a third of a spiking
// CNN's training step). Each (step, channel) is summed by one thread in a
// fixed order (four partial sums by position mod 4, joined as (0 + 1) +
// (2 + 3)), so the results depend neither on the thread count nor on how
// many steps a call holds; every element is computed in double as the
// tensor path does, and rounded once.
struct Stats {
  torch::Tensor mean, var, invstd;  // [K, C] double
};

// Four partial sums joined in a fixed order (the loops, per ISA, in
// batch_norm_loops.cpp).
double join(const double (&a)[4]) { return (a[0] + a[1]) + (a[2] + a[3]); }

Stats normalise_cpu(const torch::Tensor& x4, const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                    torch::Tensor& y4) {
  const int64_t K = x4.size(0), B = x4.size(1), C = x4.size(2), S = x4.size(3);
  const double n = static_cast<double>(B * S);
  Stats st{torch::empty({K, C}, torch::kDouble), torch::empty({K, C}, torch::kDouble), torch::empty({K, C}, torch::kDouble)};
  const torch::Tensor w = weight.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const torch::Tensor bb = bias.detach().to(torch::kCPU, torch::kDouble).contiguous();
  AT_DISPATCH_FLOATING_TYPES(x4.scalar_type(), "snn_batch_norm_forward", [&] {
    const scalar_t* x = x4.data_ptr<scalar_t>();
    scalar_t* y = y4.data_ptr<scalar_t>();
    double* mean = st.mean.data_ptr<double>();
    double* var = st.var.data_ptr<double>();
    double* invstd = st.invstd.data_ptr<double>();
    const double* wp = w.data_ptr<double>();
    const double* bp = bb.data_ptr<double>();
    const CpuLoops loops = cpu_loops();
    at::parallel_for(0, K * C, 1, [&](int64_t begin, int64_t end) {
      for (int64_t kc = begin; kc < end; ++kc) {
        const int64_t k = kc / C, c = kc % C;
        const int64_t off = (k * B * C + c) * S;
        double a[4];
        SNN_ISA_CALL(loops, neurons::detail, bn_sums(x + off, B, C * S, S, 0.0, false, a));
        const double m = join(a) / n;
        SNN_ISA_CALL(loops, neurons::detail, bn_sums(x + off, B, C * S, S, m, true, a));
        const double v = join(a) / n;
        const double is = 1.0 / std::sqrt(v + eps);
        mean[kc] = m;
        var[kc] = v;
        invstd[kc] = is;
        SNN_ISA_CALL(loops, neurons::detail, bn_normalise(x + off, y + off, B, C * S, S, m, is, wp[c], bp[c]));
      }
    });
  });
  return st;
}

// The backward pass of normalise_cpu: the input's gradient, and the weight's
// and bias's per step [K, C] (double), with the same fixed order.
std::array<torch::Tensor, 3> normalise_backward_cpu(const torch::Tensor& g4, const torch::Tensor& x4,
                                                    const torch::Tensor& mean_t, const torch::Tensor& invstd_t,
                                                    const torch::Tensor& weight) {
  const int64_t K = x4.size(0), B = x4.size(1), C = x4.size(2), S = x4.size(3);
  const double n = static_cast<double>(B * S);
  torch::Tensor gx4 = torch::empty_like(x4);
  torch::Tensor gw = torch::empty({K, C}, torch::kDouble), gb = torch::empty({K, C}, torch::kDouble);
  const torch::Tensor w = weight.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const torch::Tensor mean_c = mean_t.contiguous(), invstd_c = invstd_t.contiguous();
  AT_DISPATCH_FLOATING_TYPES(x4.scalar_type(), "snn_batch_norm_backward", [&] {
    const scalar_t* x = x4.data_ptr<scalar_t>();
    const scalar_t* g = g4.data_ptr<scalar_t>();
    scalar_t* gx = gx4.data_ptr<scalar_t>();
    const double* mean = mean_c.data_ptr<double>();
    const double* invstd = invstd_c.data_ptr<double>();
    const double* wp = w.data_ptr<double>();
    double* gwp = gw.data_ptr<double>();
    double* gbp = gb.data_ptr<double>();
    const CpuLoops loops = cpu_loops();
    at::parallel_for(0, K * C, 1, [&](int64_t begin, int64_t end) {
      for (int64_t kc = begin; kc < end; ++kc) {
        const int64_t k = kc / C, c = kc % C;
        const int64_t off = (k * B * C + c) * S;
        const double m = mean[kc], is = invstd[kc], wc = wp[c];
        double sums[4][4];  // g, g xhat, g w, g w xhat: four partial sums each
        SNN_ISA_CALL(loops, neurons::detail, bn_backward_sums(x + off, g + off, B, C * S, S, m, is, wc, sums));
        gwp[kc] = join(sums[1]);
        gbp[kc] = join(sums[0]);
        const double mean_gp = join(sums[2]) / n, mean_gpx = join(sums[3]) / n;
        SNN_ISA_CALL(loops, neurons::detail,
                     bn_backward_apply(x + off, g + off, gx + off, B, C * S, S, m, is, wc, mean_gp, mean_gpx));
      }
    });
  });
  return {gx4, gw, gb};
}

struct BatchNormFunction : torch::autograd::Function<BatchNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps, double momentum,
                               const c10::intrusive_ptr<BatchNormGradSums>& sums, torch::Tensor running_mean,
                               torch::Tensor running_var) {
    const torch::Tensor x4 = as_kbcs(x).contiguous();
    const int64_t K = x4.size(0);
    const double n = static_cast<double>(x4.size(1) * x4.size(3));
    torch::Tensor mean, var, invstd, y;  // [K, C] double; y [K, B, C, S] of x's dtype
    if (x4.is_cpu()) {
      y = torch::empty_like(x4);
      Stats st = normalise_cpu(x4, weight, bias, eps, y);
      mean = st.mean, var = st.var, invstd = st.invstd;
    } else {
      const torch::Tensor xd = x4.to(torch::kDouble);
      mean = xd.sum({1, 3}) / n;
      const torch::Tensor centered = xd - per_step(mean);
      var = (centered * centered).sum({1, 3}) / n;
      invstd = (var + eps).rsqrt();
      y = (centered * per_step(invstd) * per_channel(weight.to(torch::kDouble)) + per_channel(bias.to(torch::kDouble)))
              .to(x.scalar_type());
    }
    // The running statistics move once per step, rounded to their dtype each
    // time: the same values whatever the block size.
    {
      torch::NoGradGuard no_grad;
      const double unbiased = n > 1 ? n / (n - 1) : 1.0;
      for (int64_t k = 0; k < K; ++k) {
        running_mean.copy_(running_mean.to(torch::kDouble) * (1 - momentum) + mean[k].to(running_mean.device()) * momentum);
        running_var.copy_(running_var.to(torch::kDouble) * (1 - momentum) +
                          var[k].to(running_var.device()) * (momentum * unbiased));
      }
    }
    ctx->save_for_backward({x4, mean, invstd, weight});
    ctx->saved_data["sums"] = c10::IValue::make_capsule(sums);
    ctx->saved_data["weight"] = weight;  // the parameters themselves get their .grad written
    ctx->saved_data["bias"] = bias;
    return y.reshape(x.sizes());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& mean = saved[1];
    const torch::Tensor& invstd = saved[2];
    const torch::Tensor& weight = saved[3];
    torch::Tensor gx, gw_steps, gb_steps;  // gx of x's dtype; the others [K, C] double
    if (x.is_cpu()) {
      auto r = normalise_backward_cpu(as_kbcs(grad[0]).to(x.scalar_type()).contiguous(), x, mean, invstd, weight);
      gx = r[0], gw_steps = r[1], gb_steps = r[2];
    } else {
      const torch::Tensor gd = as_kbcs(grad[0]).to(torch::kDouble);
      const torch::Tensor xhat = (x.to(torch::kDouble) - per_step(mean)) * per_step(invstd);
      const double n = static_cast<double>(gd.size(1) * gd.size(3));
      gw_steps = (gd * xhat).sum({1, 3});
      gb_steps = gd.sum({1, 3});
      const torch::Tensor gp = gd * per_channel(weight.to(torch::kDouble));
      const torch::Tensor mean_gp = gp.sum({1, 3}) / n;
      const torch::Tensor mean_gpx = (gp * xhat).sum({1, 3}) / n;
      gx = (per_step(invstd) * (gp - per_step(mean_gp) - xhat * per_step(mean_gpx))).to(x.scalar_type());
    }
    // Weight and bias: summed in double over the steps in backpropagation
    // order (steps descending, across the calls of one optimiser step).
    auto sums = c10::static_intrusive_pointer_cast<BatchNormGradSums>(ctx->saved_data["sums"].toCapsule());
    const auto carry = [&](const char* name, torch::Tensor& sum, torch::Tensor& written, uint32_t& version,
                           const torch::Tensor& steps) {
      torch::Tensor param = ctx->saved_data[name].toTensor();
      if (!ctx->needs_input_grad(std::string(name) == "weight" ? 1 : 2)) return;
      if (!sum.defined()) sum = torch::zeros(param.sizes(), param.options().dtype(torch::kDouble));
      functional::sync_sum(sum, param, written, version, false);
      for (int64_t k = steps.size(0) - 1; k >= 0; --k) sum += steps[k];
      functional::publish_sum(sum, param, written, version, false);
    };
    carry("weight", sums->weight, sums->written_weight, sums->written_weight_version, gw_steps);
    carry("bias", sums->bias, sums->written_bias, sums->written_bias_version, gb_steps);
    return {gx.reshape(grad[0].sizes()), torch::Tensor(), torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

BatchNormImpl::BatchNormImpl(BatchNormOptions options_) : options(std::move(options_)) {
  if (options.features() < 1) throw Error("BatchNorm: features must be >= 1, got " + std::to_string(options.features()));
  if (!(options.eps() > 0) || !std::isfinite(options.eps())) {
    throw Error("BatchNorm: eps must be a positive number, got " + std::to_string(options.eps()));
  }
  if (!(options.momentum() >= 0 && options.momentum() <= 1)) {
    throw Error("BatchNorm: momentum must be in [0, 1], got " + std::to_string(options.momentum()));
  }
  reset();
}

void BatchNormImpl::reset() {
  const int64_t C = options.features();
  weight = register_parameter("weight", torch::ones({C}));
  bias = register_parameter("bias", torch::zeros({C}));
  running_mean = register_buffer("running_mean", torch::zeros({C}));
  running_var = register_buffer("running_var", torch::ones({C}));
  sums_ = c10::make_intrusive<BatchNormGradSums>();
}

std::pair<torch::Tensor, torch::Tensor> BatchNormImpl::inference_affine() const {
  const torch::Tensor scale = weight.detach().to(torch::kDouble) / (running_var.to(torch::kDouble) + options.eps()).sqrt();
  const torch::Tensor shift = bias.detach().to(torch::kDouble) - running_mean.to(torch::kDouble) * scale;
  return {scale, shift};
}

torch::Tensor BatchNormImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 3 && x.size(2) == options.features(), "BatchNorm of ", options.features(),
              " channels takes [K, B, ", options.features(), ", ...], got ", x.sizes());
  const torch::Tensor xf = x.scalar_type() == torch::kBool ? x.to(weight.scalar_type()) : x;
  if (torch::GradMode::is_enabled()) {
    return BatchNormFunction::apply(xf, weight, bias, options.eps(), options.momentum(), sums_, running_mean,
                                    running_var);
  }
  const auto [scale, shift] = inference_affine();
  if (xf.is_cpu() && (xf.scalar_type() == torch::kFloat || xf.scalar_type() == torch::kDouble)) {
    // One pass instead of four over a double copy (a spiking CNN's
    // evaluation spent a sixth of its time there): the same operations on
    // each element, double(x) * scale + shift rounded once to x's dtype.
    const torch::Tensor x4 = as_kbcs(xf).contiguous();
    torch::Tensor y = torch::empty_like(x4);
    const int64_t C = x4.size(2), S = x4.size(3), planes = x4.size(0) * x4.size(1) * C;
    // (On the CPU whatever the module's device: a CPU input is computed here.)
    const torch::Tensor sc_t = scale.to(torch::kCPU).contiguous(), sh_t = shift.to(torch::kCPU).contiguous();
    const double* sc = sc_t.data_ptr<double>();
    const double* sh = sh_t.data_ptr<double>();
    AT_DISPATCH_FLOATING_TYPES(x4.scalar_type(), "snn_batch_norm_inference", [&] {
      const scalar_t* xp = x4.data_ptr<scalar_t>();
      scalar_t* yp = y.data_ptr<scalar_t>();
      const CpuLoops loops = cpu_loops();
      at::parallel_for(0, planes, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, S)), [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          SNN_ISA_CALL(loops, neurons::detail, bn_affine(xp + p * S, yp + p * S, S, sc[p % C], sh[p % C]));
        }
      });
    });
    return y.reshape(x.sizes());
  }
  const torch::Tensor y = as_kbcs(xf).to(torch::kDouble) * per_channel(scale.to(x.device())) +
                          per_channel(shift.to(x.device()));
  return y.to(xf.scalar_type()).reshape(x.sizes());
}

void BatchNormImpl::pretty_print(std::ostream& os) const {
  os << "snn::BatchNorm(" << options.features() << ", eps=" << options.eps() << ", momentum=" << options.momentum()
     << ")";
}

}  // namespace snn
