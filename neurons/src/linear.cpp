#include "snn/neurons/linear.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/nn/init.h>

#include <cmath>

#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"

namespace snn {
namespace neurons::detail {
#define SNN_DECLARE_LINEAR_ROWS(isa)                                                                         \
  namespace isa {                                                                                            \
  template <typename T>                                                                                      \
  void linear_rows(const T* x, const T* wt, const T* bias, T* y, int64_t in, int64_t out, int64_t r0, int64_t r1); \
  }
SNN_DECLARE_LINEAR_ROWS(base)
SNN_DECLARE_LINEAR_ROWS(avx2)
#undef SNN_DECLARE_LINEAR_ROWS
}  // namespace neurons::detail

namespace functional {
namespace {

// The batch-invariant forward on 2-D x [rows, in].
torch::Tensor linear_forward(const torch::Tensor& x2, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (x2.is_cuda()) {
    // On a GPU the layer runs as a plain matmul for now: batch invariance
    // there needs a kernel of its own (the CUDA issue).
    return bias.defined() ? torch::addmm(bias, x2, weight.t()) : x2.matmul(weight.t());
  }
  const torch::Tensor x = x2.contiguous();
  const torch::Tensor wt = weight.t().contiguous();
  const torch::Tensor b = bias.defined() ? bias.contiguous() : torch::Tensor();
  const int64_t rows = x.size(0), in = x.size(1), out = weight.size(0);
  torch::Tensor y = torch::empty({rows, out}, x.options());
  const bool use_avx2 = cpu_loops_use_avx2();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "snn_linear", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* wp = wt.data_ptr<scalar_t>();
    const scalar_t* bp = b.defined() ? b.data_ptr<scalar_t>() : nullptr;
    scalar_t* yp = y.data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, in * out / 64));
    at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
      if (use_avx2) {
        neurons::detail::avx2::linear_rows(xp, wp, bp, yp, in, out, r0, r1);
      } else {
        neurons::detail::base::linear_rows(xp, wp, bp, yp, in, out, r0, r1);
      }
    });
  });
  return y;
}

struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x2,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    ctx->save_for_backward({x2, weight});
    ctx->saved_data["has_bias"] = bias.defined() && bias.numel() > 0;
    return linear_forward(x2, weight, bias.numel() > 0 ? bias : torch::Tensor());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x2 = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& gy = grad[0];
    torch::Tensor gb;
    if (ctx->saved_data["has_bias"].toBool()) gb = gy.sum(0);
    return {gy.matmul(weight), gy.t().matmul(x2), gb};
  }
};

}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1), "linear: input of shape ",
              x.sizes(), " does not fit a weight of shape ", weight.sizes(), " (expected [..., ", weight.size(1), "])");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(), "linear: input is ", x.scalar_type(), " but the weight is ",
              weight.scalar_type());
  TORCH_CHECK(x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble,
              "linear: input must be float32 or float64, got ", x.scalar_type());
  const torch::Tensor x2 = x.reshape({-1, x.size(-1)});
  // Autograd records every tensor input, so an absent bias travels as an empty tensor.
  const torch::Tensor b = bias.defined() ? bias : torch::empty({0}, weight.options());
  torch::Tensor y = LinearFunction::apply(x2, weight, b);
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = weight.size(0);
  return y.view(shape);
}

}  // namespace functional

LinearImpl::LinearImpl(const LinearOptions& options_) : options(options_) {
  if (options.in_features() < 1 || options.out_features() < 1) {
    throw Error("linear layer sizes must be >= 1, got " + std::to_string(options.in_features()) + " -> " +
                std::to_string(options.out_features()));
  }
  reset();
}

void LinearImpl::reset() {
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

torch::Tensor LinearImpl::forward(const torch::Tensor& x) { return functional::linear(x, weight, bias); }

void LinearImpl::pretty_print(std::ostream& os) const {
  os << "snn::Linear(in_features=" << options.in_features() << ", out_features=" << options.out_features()
     << ", bias=" << (options.bias() ? "true" : "false") << ")";
}

}  // namespace snn
