#include "snn/neurons/surrogate.h"

#include <torch/autograd.h>

#include <cmath>
#include <sstream>

#include "snn/core/error.h"

namespace snn {

Surrogate Surrogate::parse(const std::string& text) {
  const auto colon = text.find(':');
  const std::string name = text.substr(0, colon);
  Surrogate s;
  if (name == "sigmoid") {
    s = sigmoid();
  } else if (name == "atan") {
    s = atan();
  } else {
    throw Error("unknown surrogate '" + text + "': expected sigmoid[:alpha] or atan[:alpha]");
  }
  if (colon != std::string::npos) {
    const std::string num = text.substr(colon + 1);
    std::size_t used = 0;
    try {
      s.alpha = std::stod(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != num.size() || num.empty() || !(s.alpha > 0) || !std::isfinite(s.alpha)) {
      throw Error("surrogate '" + text + "': alpha must be a positive number");
    }
  }
  return s;
}

std::string Surrogate::str() const {
  std::ostringstream os;
  os << (kind == SurrogateKind::kSigmoid ? "sigmoid" : "atan") << "(alpha=" << alpha << ")";
  return os.str();
}

namespace functional {

torch::Tensor surrogate_derivative(const torch::Tensor& u, const Surrogate& surrogate) {
  // Tensor-op twin of detail::surrogate_grad, in SpikingJelly's op order.
  const double alpha = surrogate.alpha;
  if (surrogate.kind == SurrogateKind::kSigmoid) {
    const torch::Tensor sg = (u * alpha).sigmoid();
    return (1.0 - sg) * sg * alpha;
  }
  return alpha / 2.0 / (1.0 + (M_PI / 2.0 * alpha * u).pow(2));
}

namespace {

struct SurrogateSpike : torch::autograd::Function<SurrogateSpike> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& u,
                               int64_t kind, double alpha) {
    ctx->save_for_backward({u});
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["alpha"] = alpha;
    return (u >= 0).to(u.scalar_type());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const torch::Tensor u = ctx->get_saved_variables()[0];
    const Surrogate s{static_cast<SurrogateKind>(ctx->saved_data["kind"].toInt()), ctx->saved_data["alpha"].toDouble()};
    return {grad[0] * surrogate_derivative(u, s), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor surrogate_spike(const torch::Tensor& u, const Surrogate& surrogate) {
  return SurrogateSpike::apply(u, static_cast<int64_t>(surrogate.kind), surrogate.alpha);
}

}  // namespace functional
}  // namespace snn
