#include "snn/neurons/batch_norm.h"

#include <torch/autograd.h>

#include <cmath>

#include "grad_sums.h"
#include "snn/core/error.h"

namespace snn {
namespace {

// x [K, B, C, ...] as [K, B, C, S].
torch::Tensor as_kbcs(const torch::Tensor& x) {
  return x.reshape({x.size(0), x.size(1), x.size(2), -1});
}

// Per-step, per-channel view [K, 1, C, 1] of a [K, C] tensor, and [1, 1, C, 1] of a [C] one.
torch::Tensor per_step(const torch::Tensor& t) { return t.view({t.size(0), 1, t.size(1), 1}); }
torch::Tensor per_channel(const torch::Tensor& t) { return t.view({1, 1, -1, 1}); }

struct BatchNormFunction : torch::autograd::Function<BatchNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps, double momentum,
                               const c10::intrusive_ptr<BatchNormGradSums>& sums, torch::Tensor running_mean,
                               torch::Tensor running_var) {
    const torch::Tensor xd = as_kbcs(x).to(torch::kDouble);
    const int64_t K = xd.size(0), C = xd.size(2);
    const double n = static_cast<double>(xd.size(1) * xd.size(3));
    const torch::Tensor mean = xd.sum({1, 3}) / n;  // [K, C]
    const torch::Tensor centered = xd - per_step(mean);
    const torch::Tensor var = (centered * centered).sum({1, 3}) / n;
    const torch::Tensor invstd = (var + eps).rsqrt();
    const torch::Tensor y = centered * per_step(invstd) * per_channel(weight.to(torch::kDouble)) +
                            per_channel(bias.to(torch::kDouble));
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
    (void)C;
    ctx->save_for_backward({x, mean, invstd, weight});
    ctx->saved_data["sums"] = c10::IValue::make_capsule(sums);
    ctx->saved_data["weight"] = weight;  // the parameters themselves get their .grad written
    ctx->saved_data["bias"] = bias;
    return y.to(x.scalar_type()).reshape(x.sizes());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& mean = saved[1];
    const torch::Tensor& invstd = saved[2];
    const torch::Tensor& weight = saved[3];
    const torch::Tensor gd = as_kbcs(grad[0]).to(torch::kDouble);
    const torch::Tensor xhat = (as_kbcs(x).to(torch::kDouble) - per_step(mean)) * per_step(invstd);
    const double n = static_cast<double>(gd.size(1) * gd.size(3));
    const torch::Tensor gw_steps = (gd * xhat).sum({1, 3});  // [K, C]
    const torch::Tensor gb_steps = gd.sum({1, 3});
    const torch::Tensor gp = gd * per_channel(weight.to(torch::kDouble));
    const torch::Tensor mean_gp = gp.sum({1, 3}) / n;
    const torch::Tensor mean_gpx = (gp * xhat).sum({1, 3}) / n;
    const torch::Tensor gx = per_step(invstd) * (gp - per_step(mean_gp) - xhat * per_step(mean_gpx));
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
    return {gx.to(x.scalar_type()).reshape(x.sizes()), torch::Tensor(), torch::Tensor(), torch::Tensor(),
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
  const torch::Tensor y = as_kbcs(xf).to(torch::kDouble) * per_channel(scale.to(x.device())) +
                          per_channel(shift.to(x.device()));
  return y.to(xf.scalar_type()).reshape(x.sizes());
}

void BatchNormImpl::pretty_print(std::ostream& os) const {
  os << "snn::BatchNorm(" << options.features() << ", eps=" << options.eps() << ", momentum=" << options.momentum()
     << ")";
}

}  // namespace snn
