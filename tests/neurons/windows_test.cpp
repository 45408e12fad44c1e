// snn::functional::max_pool2d and im2rows against the LibTorch operations
// they replace: values and gradients bit for bit.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "snn/neurons/windows.h"
#include "support/cpu_builds.h"

namespace snn {
namespace {

using A2 = std::array<int64_t, 2>;

struct Window {
  int64_t c, h, w;
  A2 kernel, stride, padding, dilation;
};

std::string name_of(const Window& c) {
  return std::to_string(c.c) + "x" + std::to_string(c.h) + "x" + std::to_string(c.w) + " k" +
         std::to_string(c.kernel[0]) + "," + std::to_string(c.kernel[1]) + " s" + std::to_string(c.stride[0]) + "," +
         std::to_string(c.stride[1]) + " p" + std::to_string(c.padding[0]) + "," + std::to_string(c.padding[1]) +
         " d" + std::to_string(c.dilation[0]) + "," + std::to_string(c.dilation[1]);
}

// Spike-like inputs tie often (0 and 1 only); analog ones do not.
torch::Tensor input_of(const Window& c, int64_t n, bool spikes, torch::Dtype dtype) {
  torch::manual_seed(7);
  const torch::Tensor r = torch::rand({n, c.c, c.h, c.w}, torch::dtype(dtype));
  return spikes ? (r < 0.3).to(dtype) : r * 4 - 2;
}

bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  // equal() treats NaN as unequal to itself; compare the bytes instead.
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const torch::Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}

const std::vector<Window> pool_cases = {
    {3, 8, 8, {2, 2}, {2, 2}, {0, 0}, {1, 1}},     // the CNN's pool
    {2, 7, 9, {2, 2}, {2, 2}, {0, 0}, {1, 1}},     // the same on odd sizes (a row and a column left over)
    {2, 9, 7, {3, 3}, {2, 2}, {1, 1}, {1, 1}},     // overlapping, padded, odd sizes
    {2, 6, 10, {2, 3}, {1, 2}, {1, 0}, {1, 1}},    // uneven kernel and stride
    {1, 5, 5, {5, 5}, {1, 1}, {2, 2}, {1, 1}},     // every window overlaps every other
};

// The 2 x 2, stride-2 pool's vector loop (pool_loops.cpp) at each width:
// rows of 3 outputs (scalar), 4, 7 (4 lanes, the last group overlapping),
// 14 (8 lanes; the MNIST CNN's first pool), 16 and 40 (16 lanes), odd
// sizes leaving a row and a column out.
const std::vector<Window> pool_2x2_cases = {
    {2, 6, 6, {2, 2}, {2, 2}, {0, 0}, {1, 1}},   {2, 8, 8, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {2, 14, 14, {2, 2}, {2, 2}, {0, 0}, {1, 1}}, {2, 28, 28, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
    {1, 5, 33, {2, 2}, {2, 2}, {0, 0}, {1, 1}},  {1, 7, 81, {2, 2}, {2, 2}, {0, 0}, {1, 1}},
};

// Spikes, analog values, and analog values salted with NaNs and infinities
// of both signs (where the window position rule matters most).
torch::Tensor salted(const Window& c, int64_t n, int kind, torch::Dtype dtype) {
  torch::Tensor x = input_of(c, n, kind == 0, dtype);
  if (kind == 2) {
    const torch::Tensor r = torch::rand(x.sizes(), torch::dtype(torch::kDouble));
    x.masked_fill_(r < 0.05, std::numeric_limits<double>::quiet_NaN());
    x.masked_fill_((r >= 0.05) & (r < 0.1), std::numeric_limits<double>::infinity());
    x.masked_fill_((r >= 0.1) & (r < 0.15), -std::numeric_limits<double>::infinity());
  }
  return x;
}

TEST(MaxPool2d, GivesLibTorchsValuesAndGradientsBitForBit) {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const bool spikes : {true, false}) {
      for (const auto& c : pool_cases) {
        SCOPED_TRACE(name_of(c) + (spikes ? " spikes " : " analog ") + c10::toString(dtype));
        const torch::Tensor x0 = input_of(c, 5, spikes, dtype);
        const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
        const torch::Tensor ya = functional::max_pool2d(xa, c.kernel, c.stride, c.padding);
        const torch::Tensor yb = torch::max_pool2d(xb, {c.kernel[0], c.kernel[1]}, {c.stride[0], c.stride[1]},
                                                   {c.padding[0], c.padding[1]});
        ASSERT_TRUE(same_bits(ya, yb));
        const torch::Tensor g = torch::randn(ya.sizes(), torch::dtype(dtype));
        ya.backward(g);
        yb.backward(g);
        EXPECT_TRUE(same_bits(xa.grad(), xb.grad()));
        torch::NoGradGuard no_grad;  // the inference path keeps no index
        EXPECT_TRUE(same_bits(functional::max_pool2d(x0, c.kernel, c.stride, c.padding), yb));
      }
    }
  }
}

TEST(MaxPool2d, TakesNaNsAndInfinitiesAsLibTorchDoes) {
  torch::Tensor x0 = torch::zeros({1, 1, 4, 4});
  x0[0][0][0][1] = std::numeric_limits<float>::quiet_NaN();
  x0[0][0][1][1] = std::numeric_limits<float>::quiet_NaN();
  x0[0][0][2].fill_(-std::numeric_limits<float>::infinity());
  x0[0][0][3][3] = std::numeric_limits<float>::infinity();
  // Overlapping padded windows, and the 2 x 2 pool's own loop.
  for (const int64_t s : {1, 2}) {
    const A2 stride{s, s}, padding{2 - s, 2 - s};
    SCOPED_TRACE("stride " + std::to_string(s));
    const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
    const torch::Tensor ya = functional::max_pool2d(xa, {2, 2}, stride, padding);
    const torch::Tensor yb = torch::max_pool2d(xb, {2, 2}, {s, s}, {2 - s, 2 - s});
    ASSERT_TRUE(same_bits(ya, yb));
    ya.sum().backward();
    yb.sum().backward();
    EXPECT_TRUE(same_bits(xa.grad(), xb.grad()));
  }
}

TEST(MaxPool2d, EveryCpuBuildOfThe2x2PoolGivesLibTorchsValuesAndGradients) {
  const CpuIsa before = detail::cpu_isa_setting().load();
  for (const CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAuto}) {
    set_cpu_isa(isa);
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      for (const int kind : {0, 1, 2}) {
        for (const auto& c : pool_2x2_cases) {
          SCOPED_TRACE(name_of(c) + " " + cpu_loops_name(cpu_loops()) + " input kind " + std::to_string(kind) + " " +
                       c10::toString(dtype));
          const torch::Tensor x0 = salted(c, 3, kind, dtype);
          const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
          const torch::Tensor ya = functional::max_pool2d(xa, c.kernel, c.stride, c.padding);
          const torch::Tensor yb = torch::max_pool2d(xb, {2, 2}, {2, 2});
          ASSERT_TRUE(same_bits(ya, yb));
          // Some gradients -0, which LibTorch's zeroed gradient turns into +0.
          const torch::Tensor g = torch::randn(ya.sizes(), torch::dtype(dtype))
                                      .masked_fill_(torch::rand(ya.sizes()) < 0.2, -0.0);
          ya.backward(g);
          yb.backward(g);
          EXPECT_TRUE(same_bits(xa.grad(), xb.grad()));  // the window positions kept
          torch::NoGradGuard no_grad;
          EXPECT_TRUE(same_bits(functional::max_pool2d(x0, c.kernel, c.stride, c.padding), yb));
        }
      }
    }
  }
  set_cpu_isa(before);
}

TEST(MaxPool2d, DoesNotDependOnThreads) {
  const Window c = pool_cases[1];
  const torch::Tensor x = input_of(c, 16, true, torch::kFloat).requires_grad_(true);
  const int threads = at::get_num_threads();
  std::vector<torch::Tensor> outs, grads;
  for (const int t : {1, 2, 3}) {
    at::set_num_threads(t);
    x.mutable_grad() = torch::Tensor();
    const torch::Tensor y = functional::max_pool2d(x, c.kernel, c.stride, c.padding);
    (y * torch::arange(y.numel()).reshape(y.sizes())).sum().backward();
    outs.push_back(y.detach());
    grads.push_back(x.grad().clone());
  }
  at::set_num_threads(threads);
  for (size_t i = 1; i < outs.size(); ++i) {
    EXPECT_TRUE(same_bits(outs[0], outs[i]));
    EXPECT_TRUE(same_bits(grads[0], grads[i]));
  }
}

TEST(MaxPool2d, RejectsWindowsThatDoNotFitWithTheNumbers) {
  const torch::Tensor x = torch::zeros({1, 1, 4, 4});
  const auto message = [&](A2 k, A2 s, A2 p) {
    try {
      functional::max_pool2d(x, k, s, p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({0, 2}, {1, 1}, {0, 0}).find("kernel (0, 2)"), std::string::npos);
  EXPECT_NE(message({2, 2}, {0, 1}, {0, 0}).find("stride (0, 1)"), std::string::npos);
  EXPECT_NE(message({2, 2}, {1, 1}, {2, 0}).find("padding (2, 0)"), std::string::npos);
  EXPECT_NE(message({6, 2}, {1, 1}, {0, 0}).find("larger than the padded input"), std::string::npos);
}

const std::vector<Window> conv_cases = {
    {3, 9, 9, {3, 3}, {1, 1}, {1, 1}, {1, 1}},     // the CNN's conv
    {2, 11, 8, {3, 2}, {2, 1}, {0, 1}, {1, 2}},    // uneven stride and dilation
    {4, 7, 7, {5, 5}, {1, 1}, {2, 2}, {1, 1}},     // a pixel in up to 25 windows
    {1, 6, 6, {1, 1}, {2, 3}, {0, 0}, {1, 1}},     // strides that skip pixels
    {2, 4, 2, {3, 3}, {1, 2}, {2, 2}, {1, 2}},     // taps that fall in the padding in every window
    {32, 14, 14, {3, 3}, {1, 1}, {1, 1}, {1, 1}},  // the MNIST CNN's second conv
};

// The path im2rows replaces.
torch::Tensor unfold_rows(const torch::Tensor& x, const Window& c) {
  const torch::Tensor cols = torch::nn::functional::unfold(
      x, torch::nn::functional::UnfoldFuncOptions({c.kernel[0], c.kernel[1]})
             .stride({c.stride[0], c.stride[1]})
             .padding({c.padding[0], c.padding[1]})
             .dilation({c.dilation[0], c.dilation[1]}));
  return cols.transpose(1, 2).reshape({-1, cols.size(1)});
}

TEST(Im2Rows, GivesUnfoldsRowsAndGradientsBitForBitOnEveryCpuBuild) {
  // The loops are compiled per instruction set, their transposes in blocks
  // of a vector's lanes (16 or 8 floats, 8 or 4 doubles): the cases have
  // blocks and edges.
  for (const CpuIsa isa : test::cpu_builds()) {
    test::CpuIsaScope scope(isa);
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      for (const auto& c : conv_cases) {
        SCOPED_TRACE(name_of(c) + " " + cpu_loops_name(cpu_loops()) + " " + c10::toString(dtype));
        const torch::Tensor x0 = input_of(c, 3, false, dtype);
        const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
        const torch::Tensor ra = functional::im2rows(xa, c.kernel, c.stride, c.padding, c.dilation);
        const torch::Tensor rb = unfold_rows(xb, c);
        ASSERT_TRUE(same_bits(ra, rb));
        const torch::Tensor g = torch::randn(ra.sizes(), torch::dtype(dtype));
        ra.backward(g);
        rb.backward(g);
        EXPECT_TRUE(same_bits(xa.grad(), xb.grad()));
        torch::NoGradGuard no_grad;
        EXPECT_TRUE(same_bits(functional::im2rows(x0, c.kernel, c.stride, c.padding, c.dilation), rb));
      }
    }
  }
}

TEST(Im2Rows, ANarrowedInputGetsItsGradientThroughTheView) {
  // Grouped convolutions take a channel slice of the input.
  const Window c = conv_cases[0];
  const torch::Tensor x0 = input_of({6, 9, 9, c.kernel, c.stride, c.padding, c.dilation}, 2, false, torch::kFloat);
  const torch::Tensor xa = x0.clone().requires_grad_(true), xb = x0.clone().requires_grad_(true);
  const torch::Tensor ra = functional::im2rows(xa.narrow(1, 3, 3), c.kernel, c.stride, c.padding, c.dilation);
  const torch::Tensor rb = unfold_rows(xb.narrow(1, 3, 3), c);
  ASSERT_TRUE(same_bits(ra, rb));
  ra.sum().backward();
  rb.sum().backward();
  EXPECT_TRUE(same_bits(xa.grad(), xb.grad()));
}

TEST(Im2Rows, RejectsAKernelLargerThanThePaddedInput) {
  try {
    functional::im2rows(torch::zeros({1, 1, 4, 4}), {3, 3}, {1, 1}, {0, 0}, {2, 2});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel (3, 3) with dilation (2, 2) is larger than the padded input"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace snn
