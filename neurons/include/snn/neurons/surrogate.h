#pragma once
/// Surrogate gradients: the spike is a Heaviside step forward, and backward
/// uses the derivative of a smooth stand-in (SpikingJelly's surrogate module).

#include <torch/types.h>

#include <string>

#include "snn/neurons/detail/neuron_step.h"

namespace snn {

using neurons::detail::SurrogateKind;

/// A surrogate gradient function and its sharpness alpha.
struct Surrogate {
  SurrogateKind kind = SurrogateKind::kSigmoid;  ///< default: sigmoid
  double alpha = 4.0;                            ///< default 4 (sigmoid)

  /// sg'(u) = alpha s (1 - s), s = sigmoid(alpha u). SpikingJelly's default, alpha 4.
  static Surrogate sigmoid(double alpha = 4.0) { return {SurrogateKind::kSigmoid, alpha}; }
  /// sg'(u) = alpha / 2 / (1 + (pi/2 alpha u)^2). SpikingJelly's ATan, alpha 2.
  static Surrogate atan(double alpha = 2.0) { return {SurrogateKind::kATan, alpha}; }
  /// Parses "sigmoid", "atan", "sigmoid:8" or "atan:2.5"; throws snn::Error otherwise.
  static Surrogate parse(const std::string& text);
  /// "sigmoid(alpha=4)".
  std::string str() const;
};

namespace functional {

/// spike = (u >= 0) as u's dtype, whose backward is grad * sg'(u): the
/// surrogate spike function as an autograd function, for code that builds
/// neurons from tensor ops (the fused layers call the same derivative).
torch::Tensor surrogate_spike(const torch::Tensor& u, const Surrogate& surrogate);
/// sg'(u) element-wise: the derivative surrogate_spike's backward uses.
torch::Tensor surrogate_derivative(const torch::Tensor& u, const Surrogate& surrogate);

}  // namespace functional
}  // namespace snn
