#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "snn/core/error.h"
#include "snn/neurons/surrogate.h"

namespace snn {
namespace {

// Analytic derivatives written out independently of the library code.
double sigmoid_derivative(double alpha, double u) {
  const double s = 1.0 / (1.0 + std::exp(-alpha * u));
  return alpha * s * (1.0 - s);
}
double atan_derivative(double alpha, double u) {
  const double a = M_PI / 2.0 * alpha * u;
  return alpha / 2.0 / (1.0 + a * a);
}

TEST(Surrogate, ForwardIsHeavisideWithZeroFiring) {
  const torch::Tensor u = torch::tensor({-1.0, -1e-12, 0.0, 1e-12, 2.0}, torch::kDouble);
  const torch::Tensor s = functional::surrogate_spike(u, Surrogate::sigmoid());
  EXPECT_TRUE(torch::equal(s, torch::tensor({0.0, 0.0, 1.0, 1.0, 1.0}, torch::kDouble)));
}

TEST(Surrogate, SigmoidBackwardEqualsAnalyticDerivative) {
  for (double alpha : {1.0, 4.0, 10.0}) {
    const torch::Tensor u = torch::linspace(-2.0, 2.0, 41, torch::kDouble).requires_grad_();
    functional::surrogate_spike(u, Surrogate::sigmoid(alpha)).sum().backward();
    for (int64_t i = 0; i < u.numel(); ++i) {
      const double ui = u[i].item<double>();
      EXPECT_NEAR(u.grad()[i].item<double>(), sigmoid_derivative(alpha, ui), 1e-14) << "alpha " << alpha << " u " << ui;
    }
  }
}

TEST(Surrogate, ATanBackwardEqualsAnalyticDerivative) {
  for (double alpha : {0.5, 2.0, 7.0}) {
    const torch::Tensor u = torch::linspace(-2.0, 2.0, 41, torch::kDouble).requires_grad_();
    const torch::Tensor g = torch::rand({41}, torch::kDouble);
    (functional::surrogate_spike(u, Surrogate::atan(alpha)) * g).sum().backward();
    for (int64_t i = 0; i < u.numel(); ++i) {
      const double ui = u[i].item<double>();
      EXPECT_NEAR(u.grad()[i].item<double>(), g[i].item<double>() * atan_derivative(alpha, ui), 1e-14);
    }
  }
}

TEST(Surrogate, SharedDeviceFunctionEqualsAnalyticDerivative) {
  for (double u : {-1.5, -0.1, 0.0, 0.3, 2.0}) {
    EXPECT_NEAR(neurons::detail::surrogate_grad<double>(SurrogateKind::kSigmoid, 4.0, u), sigmoid_derivative(4.0, u),
                1e-15);
    EXPECT_NEAR(neurons::detail::surrogate_grad<double>(SurrogateKind::kATan, 2.0, u), atan_derivative(2.0, u), 1e-15);
    EXPECT_NEAR(neurons::detail::surrogate_grad<float>(SurrogateKind::kSigmoid, 4.0f, static_cast<float>(u)),
                sigmoid_derivative(4.0, u), 1e-6);
  }
}

TEST(Surrogate, ParsesNamesAndAlphaAndRejectsGarbage) {
  EXPECT_EQ(Surrogate::parse("sigmoid").alpha, 4.0);
  EXPECT_EQ(Surrogate::parse("atan").alpha, 2.0);
  EXPECT_EQ(Surrogate::parse("atan:3.5").alpha, 3.5);
  EXPECT_EQ(Surrogate::parse("atan:3.5").kind, SurrogateKind::kATan);
  EXPECT_THROW(Surrogate::parse("relu"), Error);
  EXPECT_THROW(Surrogate::parse("sigmoid:"), Error);
  EXPECT_THROW(Surrogate::parse("sigmoid:-1"), Error);
  EXPECT_THROW(Surrogate::parse("sigmoid:4x"), Error);
}

}  // namespace
}  // namespace snn
