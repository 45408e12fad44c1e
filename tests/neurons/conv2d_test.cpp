#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <functional>
#include <string>

#include "snn/core/cpu_isa.h"
#include "snn/core/error.h"
#include "snn/core/frozen_weights.h"
#include "snn/neurons/conv2d.h"
#include "snn/neurons/linear.h"
#include "snn/neurons/windows.h"
#include "support/cpu_builds.h"

namespace snn {
namespace {

struct ConvCase {
  int64_t cin, h, w, cout, kh, kw;
  std::array<int64_t, 2> stride, padding, dilation;
};

// The graph model's im2col path: unfold, then snn::Linear's fixed-order
// sums (the dense or the event-driven kernel).
torch::Tensor im2col_conv(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const ConvCase& c,
                          LinearPath path) {
  const torch::Tensor xr = x.scalar_type() == torch::kBool ? x.to(w.scalar_type()) : x;
  const torch::Tensor cols = torch::nn::functional::unfold(
      xr, torch::nn::functional::UnfoldFuncOptions({c.kh, c.kw})
              .stride({c.stride[0], c.stride[1]})
              .padding({c.padding[0], c.padding[1]})
              .dilation({c.dilation[0], c.dilation[1]}));
  const int64_t N = x.size(0), L = cols.size(2);
  const torch::Tensor y = functional::linear(cols.transpose(1, 2).reshape({N * L, -1}), w.reshape({c.cout, -1}), b, {},
                                             path);
  const int64_t oh = (c.h + 2 * c.padding[0] - c.dilation[0] * (c.kh - 1) - 1) / c.stride[0] + 1;
  return y.reshape({N, L, c.cout}).transpose(1, 2).reshape({N, c.cout, oh, L / oh});
}

std::string conv_name(const ConvCase& c) {
  return std::to_string(c.cin) + "x" + std::to_string(c.h) + "x" + std::to_string(c.w) + " -> " +
         std::to_string(c.cout) + " k" + std::to_string(c.kh) + "x" + std::to_string(c.kw) + " s" +
         std::to_string(c.stride[0]) + "," + std::to_string(c.stride[1]) + " p" + std::to_string(c.padding[0]) + "," +
         std::to_string(c.padding[1]) + " d" + std::to_string(c.dilation[0]) + "," + std::to_string(c.dilation[1]);
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> all = {
      {2, 9, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}},     // one tile of outputs, padded
      {3, 11, 8, 37, 3, 2, {2, 1}, {0, 1}, {1, 2}},    // partial tile, uneven stride and dilation
      {4, 10, 10, 64, 5, 5, {2, 2}, {2, 2}, {1, 1}},   // 4 vectors per row (AVX-512), stride 2
      {5, 7, 13, 130, 1, 3, {1, 3}, {0, 0}, {1, 1}},   // wider than 128: the generic row loop
      {1, 6, 6, 8, 6, 6, {1, 1}, {0, 0}, {1, 1}},      // the kernel fills the input: one output
      {3, 12, 12, 32, 3, 3, {3, 3}, {4, 4}, {2, 2}},   // padding beyond the dilated kernel's reach
  };
  return all;
}

// Bit for bit the im2col path's values, through either Linear kernel, on
// every build of the CPU loops, for spikes (float and bool), sparse reals
// and dense reals, in float and double, whatever the batch and threads.
TEST(Conv2dEvent, EqualsTheIm2colPathBitForBitOnEveryBuild) {
  torch::manual_seed(11);
  for (const auto& c : conv_cases()) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      const torch::Tensor w = torch::randn({c.cout, c.cin, c.kh, c.kw}, dtype);
      const torch::Tensor b = torch::randn({c.cout}, dtype);
      for (double p : {0.02, 0.2, 1.0}) {
        const torch::Tensor mask = torch::rand({6, c.cin, c.h, c.w}) < p;
        for (int kind = 0; kind < 3; ++kind) {
          // 0: float spikes, 1: bool spikes, 2: real values where the mask is set
          const torch::Tensor x = kind == 0   ? mask.to(dtype)
                                  : kind == 1 ? mask
                                              : torch::randn(mask.sizes(), dtype) * mask.to(dtype);
          const std::string what = conv_name(c) + " p=" + std::to_string(p) + " kind=" + std::to_string(kind) +
                                   (dtype == torch::kFloat ? " float" : " double");
          const torch::Tensor dense = im2col_conv(x, w, b, c, LinearPath::kDense);
          const torch::Tensor event = im2col_conv(x, w, b, c, LinearPath::kEvent);
          ASSERT_TRUE(torch::equal(dense, event)) << what;
          for (CpuIsa isa : test::cpu_builds()) {
            test::CpuIsaScope scope(isa);
            const torch::Tensor y = functional::conv2d_event(x, w, b, c.stride, c.padding, c.dilation);
            ASSERT_EQ(y.sizes(), dense.sizes()) << what;
            EXPECT_TRUE(torch::equal(y, dense)) << what << " CpuIsa " << static_cast<int>(isa);
          }
          // Without a bias: the sums start at zero, as Linear's do.
          EXPECT_TRUE(torch::equal(functional::conv2d_event(x, w, {}, c.stride, c.padding, c.dilation),
                                   im2col_conv(x, w, {}, c, LinearPath::kDense)))
              << what << " no bias";
        }
      }
    }
  }
}

TEST(Conv2dEvent, AgreesWithTorchConv2d) {
  torch::manual_seed(12);
  for (const auto& c : conv_cases()) {
    const torch::Tensor x = (torch::rand({4, c.cin, c.h, c.w}) < 0.3).to(torch::kDouble);
    const torch::Tensor w = torch::randn({c.cout, c.cin, c.kh, c.kw}, torch::kDouble);
    const torch::Tensor b = torch::randn({c.cout}, torch::kDouble);
    const torch::Tensor ref = torch::conv2d(x, w, b, {c.stride[0], c.stride[1]}, {c.padding[0], c.padding[1]},
                                            {c.dilation[0], c.dilation[1]});
    const torch::Tensor y = functional::conv2d_event(x, w, b, c.stride, c.padding, c.dilation);
    ASSERT_EQ(y.sizes(), ref.sizes()) << conv_name(c);
    EXPECT_TRUE(torch::allclose(y, ref, 1e-12, 1e-12)) << conv_name(c);
  }
}

// The packed weights are kept between calls only while a FrozenWeights
// guard lives, and only for the tensors they came from: a new guard, other
// weights or an in-place change (outside a guard) are seen; every case
// gives what a first call does.
TEST(Conv2dEvent, KeptPackingFollowsTheWeightsAndTheGuards) {
  torch::manual_seed(13);
  const ConvCase c = conv_cases()[2];
  const torch::Tensor x = (torch::rand({2, c.cin, c.h, c.w}) < 0.3).to(torch::kFloat);
  torch::Tensor w = torch::randn({c.cout, c.cin, c.kh, c.kw});
  torch::Tensor b = torch::randn({c.cout});
  const torch::Tensor w2 = torch::randn({c.cout, c.cin, c.kh, c.kw});
  const auto conv = [&](const torch::Tensor& wt, const torch::Tensor& bt) {
    return functional::conv2d_event(x, wt, bt, c.stride, c.padding, c.dilation);
  };
  const auto fresh = [&](const torch::Tensor& wt, const torch::Tensor& bt) {  // never packed before
    return functional::conv2d_event(x, wt.clone(), bt.defined() ? bt.clone() : bt, c.stride, c.padding, c.dilation);
  };
  const torch::Tensor y1 = fresh(w, b);
  {
    const FrozenWeights frozen;
    EXPECT_TRUE(torch::equal(conv(w, b), y1));
    EXPECT_TRUE(torch::equal(conv(w, b), y1));                            // kept
    EXPECT_TRUE(torch::equal(conv(w2, b), fresh(w2, b)));                 // other weights
    EXPECT_TRUE(torch::equal(conv(w, torch::Tensor()), fresh(w, {})));    // no bias
    EXPECT_TRUE(torch::equal(conv(w, b), y1));
    // A fresh view of the same weight at every call (as the graph model
    // passes its [Cout, Cin KH KW] parameter) is packed once; an in-place
    // change through its base is seen.
    const torch::Tensor flat = w.reshape({c.cout, -1}).clone();
    const auto view = [&] { return flat.view({c.cout, c.cin, c.kh, c.kw}); };
    const uint64_t before = functional::conv2d_event_packings();
    EXPECT_TRUE(torch::equal(conv(view(), b), y1));
    EXPECT_TRUE(torch::equal(conv(view(), b), y1));
    EXPECT_TRUE(torch::equal(conv(view(), b), y1));
    EXPECT_EQ(functional::conv2d_event_packings() - before, 1u);
    flat.mul_(2.0);
    EXPECT_TRUE(torch::equal(conv(view(), b), fresh(view(), b)));
    EXPECT_FALSE(torch::equal(conv(view(), b), y1));
    // Another layout of the same storage is another weight.
    const torch::Tensor flipped = flat.view({c.cout, c.cin, c.kh, c.kw}).transpose(2, 3);
    EXPECT_TRUE(torch::equal(conv(flipped, b), fresh(flipped.contiguous(), b)));
  }
  w.mul_(-0.5);  // between guards, in place (same tensor, same data)
  b.add_(1.0);
  {
    const FrozenWeights frozen;
    EXPECT_TRUE(torch::equal(conv(w, b), fresh(w, b)));
    EXPECT_FALSE(torch::equal(conv(w, b), y1));
  }
  {
    const FrozenWeights frozen;
    conv(w, b);
  }
  w.data().mul_(2.0);  // as an optimiser writes: the version counter does not see it
  {
    const FrozenWeights frozen;  // a new guard: the packing is made again
    EXPECT_TRUE(torch::equal(conv(w, b), fresh(w, b)));
  }
  w.mul_(3.0);  // without a guard: nothing is kept
  EXPECT_TRUE(torch::equal(conv(w, b), fresh(w, b)));
}

TEST(Conv2dEvent, AnImageGivesTheSameOutputAloneInAnyBatchAndOnAnyThreads) {
  torch::manual_seed(13);
  const ConvCase c{8, 14, 14, 24, 3, 3, {1, 1}, {1, 1}, {1, 1}};
  const torch::Tensor x = torch::rand({33, c.cin, c.h, c.w}) < 0.1;
  const torch::Tensor w = torch::randn({c.cout, c.cin, 3, 3});
  const torch::Tensor b = torch::randn({c.cout});
  const torch::Tensor all = functional::conv2d_event(x, w, b, c.stride, c.padding, c.dilation);
  EXPECT_TRUE(torch::equal(functional::conv2d_event(x.narrow(0, 17, 1), w, b, c.stride, c.padding, c.dilation),
                           all.narrow(0, 17, 1)));
  EXPECT_TRUE(torch::equal(functional::conv2d_event(x.narrow(0, 5, 9), w, b, c.stride, c.padding, c.dilation),
                           all.narrow(0, 5, 9)));
  const int saved = at::get_num_threads();
  at::set_num_threads(1);
  const torch::Tensor one = functional::conv2d_event(x, w, b, c.stride, c.padding, c.dilation);
  at::set_num_threads(saved);
  EXPECT_TRUE(torch::equal(one, all));
  // A non-contiguous input (a channel slice, as a grouped layer passes).
  const torch::Tensor wide = torch::rand({5, 2 * c.cin, c.h, c.w}) < 0.1;
  EXPECT_TRUE(torch::equal(functional::conv2d_event(wide.narrow(1, c.cin, c.cin), w, b, c.stride, c.padding, c.dilation),
                           functional::conv2d_event(wide.narrow(1, c.cin, c.cin).contiguous(), w, b, c.stride,
                                                    c.padding, c.dilation)));
}

// The message of the snn::Error f throws, or "no error".
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}

// One snn::Error naming the numbers, never a crash.
TEST(Conv2dEvent, RejectsShapesThatDoNotFitWithTheNumbers) {
  const torch::Tensor x = torch::zeros({2, 3, 5, 5});
  const torch::Tensor w = torch::zeros({4, 3, 3, 3});
  EXPECT_NE(error_of([&] { functional::conv2d_event(torch::zeros({2, 2, 5, 5}), w, {}, {1, 1}, {0, 0}, {1, 1}); })
                .find("2 channels"),
            std::string::npos);
  EXPECT_NE(error_of([&] { functional::conv2d_event(x, torch::zeros({4, 3, 7, 3}), {}, {1, 1}, {0, 0}, {1, 1}); })
                .find("spanning 7 x 3 does not fit the padded input 5 x 5"),
            std::string::npos);
  EXPECT_NE(error_of([&] { functional::conv2d_event(x, w, {}, {0, 1}, {0, 0}, {1, 1}); }).find("stride (0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { functional::conv2d_event(x, w, {}, {1, 1}, {0, 0}, {1, 0}); }).find("dilation (1, 0)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { functional::conv2d_event(x, w, torch::zeros({3}), {1, 1}, {0, 0}, {1, 1}); })
                .find("bias must be [4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { functional::conv2d_event(x.to(torch::kDouble), w, {}, {1, 1}, {0, 0}, {1, 1}); })
                .find("input is Double but the weight is Float"),
            std::string::npos);
}

// --- the input gradient without im2col rows ----------------------------------

// Stride 1, undilated: what conv2d_input_grad takes.
const std::vector<ConvCase>& grad_cases() {
  static const std::vector<ConvCase> all = {
      {32, 14, 14, 64, 3, 3, {1, 1}, {1, 1}, {1, 1}},  // the MNIST CNN's second convolution
      {3, 9, 9, 16, 3, 3, {1, 1}, {1, 1}, {1, 1}},     // fewer channels than a block
      {11, 28, 37, 5, 5, 5, {1, 1}, {2, 2}, {1, 1}},   // rows of several vectors, a part vector, blocks and a tail
      {4, 7, 6, 3, 3, 2, {1, 1}, {0, 1}, {1, 1}},      // no padding in y, uneven kernel
      {2, 5, 5, 4, 1, 1, {1, 1}, {0, 0}, {1, 1}},      // 1 x 1
      {9, 6, 20, 7, 5, 3, {1, 1}, {4, 2}, {1, 1}},     // padding kernel - 1: taps wholly in the padding
      {8, 4, 16, 6, 3, 3, {1, 1}, {1, 1}, {1, 1}},     // rows of whole vectors (16 floats, 8 doubles)
  };
  return all;
}

// The bits of a float or double tensor, as integers (torch::equal takes -0
// for +0).
torch::Tensor bits(const torch::Tensor& t) {
  return t.contiguous().view(t.scalar_type() == torch::kFloat ? torch::kInt : torch::kLong);
}

// x's gradient through the graph model's im2col path: im2rows, then
// snn::Linear, both differentiable.
torch::Tensor im2col_input_grad(const torch::Tensor& x0, const torch::Tensor& w, const torch::Tensor& gy,
                                const ConvCase& c) {
  const torch::Tensor x = x0.clone().requires_grad_(true);
  const torch::Tensor rows = functional::im2rows(x, {c.kh, c.kw}, c.stride, c.padding, c.dilation);
  const torch::Tensor y = functional::linear(rows, w.reshape({c.cout, -1}), {});
  const int64_t N = x.size(0), L = y.size(0) / N;
  y.reshape({N, L, c.cout}).transpose(1, 2).reshape(gy.sizes()).backward(gy);
  return x.grad();
}

TEST(Conv2dInputGrad, EqualsTheIm2colPathsGradientBitForBitOnEveryBuild) {
  torch::manual_seed(21);
  for (const auto& c : grad_cases()) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      const torch::Tensor x = torch::randn({3, c.cin, c.h, c.w}, dtype);
      const torch::Tensor w = torch::randn({c.cout, c.cin, c.kh, c.kw}, dtype);
      const int64_t oh = c.h + 2 * c.padding[0] - c.kh + 1, ow = c.w + 2 * c.padding[1] - c.kw + 1;
      // Exact zeros among the gradients (a max pool's): at 15% nonzero the
      // im2col path's backward takes Linear's event-driven kernel, which
      // skips them, at 70% the dense one.
      for (const double density : {0.7, 0.15}) {
        const torch::Tensor gy =
            torch::randn({3, c.cout, oh, ow}, dtype) * (torch::rand({3, c.cout, oh, ow}) < density);
        const std::string what = conv_name(c) + (dtype == torch::kFloat ? " float" : " double") + " density " +
                                 std::to_string(density);
        ASSERT_TRUE(functional::conv2d_input_grad_fits(x, w, c.stride, c.padding, c.dilation)) << what;
        const torch::Tensor ref = im2col_input_grad(x, w, gy, c);
        for (CpuIsa isa : test::cpu_builds()) {
          test::CpuIsaScope scope(isa);
          const torch::Tensor gx = functional::conv2d_input_grad(gy, w, c.h, c.w, c.padding);
          ASSERT_EQ(gx.sizes(), x.sizes()) << what;
          EXPECT_TRUE(torch::equal(bits(gx), bits(ref))) << what << " CpuIsa " << static_cast<int>(isa);
        }
        // And the convolution's own gradient (LibTorch's sums in its order).
        const torch::Tensor xt = x.clone().requires_grad_(true);
        torch::conv2d(xt, w, {}, 1, {c.padding[0], c.padding[1]}).backward(gy);
        EXPECT_TRUE(torch::allclose(ref, xt.grad(), 1e-4, dtype == torch::kFloat ? 1e-4 : 1e-10)) << what;
      }
    }
  }
}

TEST(Conv2dInputGrad, DoesNotDependOnTheBatchOrThreads) {
  torch::manual_seed(22);
  const ConvCase c = grad_cases()[0];
  const torch::Tensor w = torch::randn({c.cout, c.cin, c.kh, c.kw});
  const torch::Tensor gy = torch::randn({9, c.cout, c.h, c.w});
  const torch::Tensor all = functional::conv2d_input_grad(gy, w, c.h, c.w, c.padding);
  EXPECT_TRUE(torch::equal(bits(functional::conv2d_input_grad(gy.narrow(0, 4, 3), w, c.h, c.w, c.padding)),
                           bits(all.narrow(0, 4, 3))));
  const int saved = at::get_num_threads();
  for (const int t : {1, 3}) {
    at::set_num_threads(t);
    EXPECT_TRUE(torch::equal(bits(functional::conv2d_input_grad(gy, w, c.h, c.w, c.padding)), bits(all))) << t;
  }
  at::set_num_threads(saved);
}

// --- training without rows: conv2d_train ------------------------------------

// One case's outputs and gradients over two calls (the second call's
// gradients added to the first's), by the im2col path (im2rows, then the
// Linear module, both differentiable) or by conv2d_train with the module's
// weights and sums.
std::array<torch::Tensor, 6> two_training_calls(const ConvCase& c, const std::vector<torch::Tensor>& xs,
                                                const std::vector<torch::Tensor>& gys, torch::Dtype dtype,
                                                bool with_bias, bool carry, bool im2col) {
  torch::manual_seed(5);
  Linear fc(LinearOptions(c.cin * c.kh * c.kw, c.cout).bias(with_bias).carry_grad_sums(carry));
  fc->to(dtype);
  std::array<torch::Tensor, 6> got;
  for (size_t i = 0; i < xs.size(); ++i) {
    const torch::Tensor x = xs[i].clone().requires_grad_(true);
    torch::Tensor y;
    if (im2col) {
      const torch::Tensor rows = functional::im2rows(x, {c.kh, c.kw}, c.stride, c.padding, c.dilation);
      y = fc->forward(rows).reshape({x.size(0), -1, c.cout}).transpose(1, 2).reshape(gys[i].sizes());
    } else {
      y = functional::conv2d_train(x, fc->weight, fc->bias, {c.kh, c.kw}, c.padding, fc->grad_sums());
    }
    y.backward(gys[i]);
    got[0] = i == 0 ? y.detach() + 0.0 : got[0];  // + 0.0: the event kernel may give -0 where im2col gives +0
    got[1] = i == 0 ? x.grad() : got[1];
  }
  got[2] = fc->weight.grad();
  got[3] = with_bias ? fc->bias.grad() : torch::zeros({1});
  got[4] = fc->weight.detach().clone();
  got[5] = with_bias ? fc->bias.detach().clone() : torch::zeros({c.cout}, dtype);
  return got;
}

// grad_cases and widths that exercise the weight gradient's masks: whole
// and partial output tiles, rows of exactly 64 output columns, shifts both
// ways, and images whose rows or output rows pass 64 (the rows' path).
const std::vector<ConvCase>& train_cases() {
  static const std::vector<ConvCase> all = [] {
    std::vector<ConvCase> v = grad_cases();
    v.push_back({3, 5, 64, 20, 3, 3, {1, 1}, {1, 1}, {1, 1}});   // OW = 64: a row is a whole mask; 1 + 1/4 tiles
    v.push_back({2, 4, 60, 17, 3, 5, {1, 1}, {0, 4}, {1, 1}});   // OW = 64 from padding, taps in the left padding
    v.push_back({2, 5, 53, 9, 3, 5, {1, 1}, {1, 2}, {1, 1}});    // taps shifted both ways, rows across words
    v.push_back({5, 6, 70, 40, 3, 3, {1, 1}, {1, 1}, {1, 1}});   // W = 70: rebuilt rows; 2 + 1/2 tiles
    v.push_back({2, 3, 62, 6, 3, 5, {1, 1}, {1, 4}, {1, 1}});    // W = 62 but OW = 66: rebuilt rows
    return v;
  }();
  return all;
}

TEST(Conv2dTrain, GivesTheIm2colPathsOutputAndGradientsBitForBitOnEveryBuild) {
  torch::manual_seed(23);
  for (size_t k = 0; k < train_cases().size(); ++k) {
    const ConvCase& c = train_cases()[k];
    const int64_t oh = c.h + 2 * c.padding[0] - c.kh + 1, ow = c.w + 2 * c.padding[1] - c.kw + 1;
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      // Spikes (the weight gradient's additions without products), real
      // inputs with zeros (products, zeros skipped), and a mix of 0, -0, 1
      // and other values (-0 is no input; 1s among reals are products).
      for (const int kind : {0, 1, 2}) {
        const bool spikes = kind == 0;
        std::vector<torch::Tensor> xs, gys;
        for (int call = 0; call < 2; ++call) {
          torch::Tensor x = (torch::rand({3, c.cin, c.h, c.w}) < 0.2).to(dtype);
          if (kind == 1) x = x * torch::randn({3, c.cin, c.h, c.w}, dtype);
          if (kind == 2) {
            const torch::Tensor values = torch::tensor({0.0, -0.0, 1.0, 1.0, 2.5, -1.0}, dtype);
            x = values.index({torch::randint(6, {3, c.cin, c.h, c.w})});
          }
          xs.push_back(x);
          gys.push_back(torch::randn({3, c.cout, oh, ow}, dtype) * (torch::rand({3, c.cout, oh, ow}) < 0.7));
        }
        const bool with_bias = k % 2 == 0, carry = k % 3 != 1;
        const std::string what = conv_name(c) + (dtype == torch::kFloat ? " float" : " double") +
                                 (spikes ? " spikes" : kind == 1 ? " real" : " mixed") + (with_bias ? " bias" : "") +
                                 (carry ? " carried sums" : " autograd's sums");
        const auto ref = two_training_calls(c, xs, gys, dtype, with_bias, carry, true);
        for (CpuIsa isa : test::cpu_builds()) {
          test::CpuIsaScope scope(isa);
          const auto got = two_training_calls(c, xs, gys, dtype, with_bias, carry, false);
          for (size_t i = 0; i < ref.size(); ++i) {
            ASSERT_TRUE(got[i].defined()) << what << " " << i;
            EXPECT_TRUE(torch::equal(bits(got[i]), bits(ref[i])))
                << what << " CpuIsa " << static_cast<int>(isa) << " result " << i;
          }
        }
        // Thread counts split the inputs (im2col columns) differently,
        // channels' taps included; the bias sums go with the first part.
        const int saved_threads = at::get_num_threads();
        for (const int threads : {1, 3}) {
          at::set_num_threads(threads);
          const auto got = two_training_calls(c, xs, gys, dtype, with_bias, carry, false);
          for (size_t i = 0; i < ref.size(); ++i) {
            EXPECT_TRUE(torch::equal(bits(got[i]), bits(ref[i]))) << what << " threads " << threads << " result " << i;
          }
        }
        at::set_num_threads(saved_threads);
        // And LibTorch's convolution, to rounding.
        const double tol = dtype == torch::kFloat ? 1e-4 : 1e-10;
        const torch::Tensor w4 = ref[4].view({c.cout, c.cin, c.kh, c.kw});
        EXPECT_TRUE(torch::allclose(ref[0], torch::conv2d(xs[0], w4, ref[5], 1, {c.padding[0], c.padding[1]}), tol, tol))
            << what;
        const torch::Tensor xt = xs[0].clone().requires_grad_(true);
        torch::Tensor wt = w4.clone().requires_grad_(true);
        torch::conv2d(xt, wt, {}, 1, {c.padding[0], c.padding[1]}).backward(gys[0]);
        EXPECT_TRUE(torch::allclose(ref[1], xt.grad(), tol, tol)) << what;
        torch::conv2d(xs[1], wt, {}, 1, {c.padding[0], c.padding[1]}).backward(gys[1]);
        // (LibTorch sums thousands of dense products in float: to its rounding.)
        const double wtol = dtype == torch::kFloat ? 1e-3 : 1e-10;
        EXPECT_TRUE(torch::allclose(ref[2], wt.grad().reshape({c.cout, -1}), wtol, wtol)) << what;
        if (with_bias) {
          EXPECT_TRUE(torch::allclose(ref[3], (gys[0] + gys[1]).sum({0, 2, 3}), wtol, wtol)) << what;
        }
      }
    }
  }
}

// Only some of x, the weight and the bias want a gradient (a frozen layer,
// a first layer), or the batch is empty: the ones wanted are the im2col
// path's, the others none.
TEST(Conv2dTrain, GivesOnlyTheGradientsWantedAndHandlesAnEmptyBatch) {
  torch::manual_seed(24);
  for (const size_t k : {1, 3}) {  // a whole output tile and a part of one, rows across 64-row chunks
  const ConvCase c = grad_cases()[k];
  const int64_t oh = c.h + 2 * c.padding[0] - c.kh + 1, ow = c.w + 2 * c.padding[1] - c.kw + 1;
  for (const int64_t N : {2, 0}) {
    const torch::Tensor x0 = (torch::rand({N, c.cin, c.h, c.w}) < 0.3).to(torch::kFloat);
    const torch::Tensor gy = torch::randn({N, c.cout, oh, ow});
    torch::Tensor bias_alone;           // the bias's gradient summed on its own
    for (int want = 1; want < 8; ++want) {  // bits: x, weight, bias
      const bool want_x = want & 1, want_w = want & 2, want_b = want & 4;
      std::vector<torch::Tensor> got[2];
      for (int im2col = 0; im2col < 2; ++im2col) {
        torch::manual_seed(5);
        Linear fc(LinearOptions(c.cin * c.kh * c.kw, c.cout).carry_grad_sums(true));
        fc->weight.requires_grad_(want_w);
        fc->bias.requires_grad_(want_b);
        const torch::Tensor x = x0.clone().requires_grad_(want_x);
        torch::Tensor y;
        if (im2col) {
          const torch::Tensor rows = functional::im2rows(x, {c.kh, c.kw}, c.stride, c.padding, c.dilation);
          y = fc->forward(rows).reshape({N, oh * ow, c.cout}).transpose(1, 2).reshape(gy.sizes());
        } else {
          y = functional::conv2d_train(x, fc->weight, fc->bias, {c.kh, c.kw}, c.padding, fc->grad_sums());
        }
        ASSERT_EQ(y.sizes(), gy.sizes());
        y.backward(gy);
        got[im2col] = {x.grad(), fc->weight.grad(), fc->bias.grad()};
      }
      for (size_t i = 0; i < 3; ++i) {
        const std::string what = "N " + std::to_string(N) + " want " + std::to_string(want) + " result " +
                                 std::to_string(i);
        ASSERT_EQ(got[0][i].defined(), got[1][i].defined()) << what;
        if (got[1][i].defined()) EXPECT_TRUE(torch::equal(bits(got[0][i]), bits(got[1][i]))) << what;
      }
      EXPECT_EQ(got[0][0].defined(), want_x);
      EXPECT_EQ(got[0][1].defined(), want_w);
      EXPECT_EQ(got[0][2].defined(), want_b);
      // With the weight, the bias's sums go in the weight's pass: the same bits.
      if (want == 4) bias_alone = got[1][2];
      if (want_b && want_w) EXPECT_TRUE(torch::equal(bits(got[1][2]), bits(bias_alone))) << "want " << want;
    }
  }
  }
}

TEST(Conv2dInputGrad, RejectsShapesThatDoNotFitWithTheNumbers) {
  const torch::Tensor w = torch::zeros({4, 3, 3, 3});
  EXPECT_NE(error_of([&] { functional::conv2d_input_grad(torch::zeros({2, 4, 5, 5}), w, 5, 5, {3, 1}); })
                .find("padding (3, 1) must lie in [0, kernel - 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { functional::conv2d_input_grad(torch::zeros({2, 5, 5, 5}), w, 5, 5, {1, 1}); })
                .find("expected [N, 4, 5, 5]"),
            std::string::npos);
  const torch::Tensor w2 = w.reshape({4, 27});
  EXPECT_NE(error_of([&] { functional::conv2d_train(torch::zeros({2, 2, 5, 5}), w2, {}, {3, 3}, {1, 1}); })
                .find("the input [2, 2, 5, 5], weight [4, 27] and bias (none) do not make one stride-1 CPU "
                      "convolution with a 3 x 3 kernel and padding (1, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { functional::conv2d_train(torch::zeros({2, 3, 5, 5}), w2, torch::zeros({5}), {3, 3}, {1, 1}); })
                .find("bias [5]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { functional::conv2d_train(torch::zeros({2, 3, 5, 5}), w2, {}, {3, 3}, {3, 1}); })
                .find("padding (3, 1)"),
            std::string::npos);
  EXPECT_FALSE(functional::conv2d_input_grad_fits(torch::zeros({2, 3, 5, 5}), w, {2, 1}, {1, 1}, {1, 1}));
  EXPECT_FALSE(functional::conv2d_input_grad_fits(torch::zeros({2, 3, 5, 5}), w, {1, 1}, {1, 1}, {1, 2}));
  EXPECT_FALSE(functional::conv2d_input_grad_fits(torch::zeros({2, 3, 5, 5}), w, {1, 1}, {3, 1}, {1, 1}));
  EXPECT_FALSE(functional::conv2d_input_grad_fits(torch::zeros({2, 3, 5, 5}, torch::kDouble), w, {1, 1}, {1, 1},
                                                  {1, 1}));
  EXPECT_TRUE(functional::conv2d_input_grad_fits(torch::zeros({2, 3, 5, 5}), w, {1, 1}, {2, 2}, {1, 1}));
}

}  // namespace
}  // namespace snn
