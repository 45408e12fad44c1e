// The graph executor (GraphModel): a chain through it equals the fused chain
// bit for bit; skip connections and recurrence give the same spikes and
// gradients for every partition, K and batch composition, and equal a
// hand-written step loop; convolution equals LibTorch's conv2d (to rounding)
// and does not depend on the batch.

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "snn/core/error.h"
#include "snn/graph/graph_text.h"
#include "snn/neurons/conv2d.h"
#include "snn/neurons/functional.h"
#include "snn/simulator/graph_model.h"
#include "snn/simulator/network_graph.h"

namespace {

using namespace snn;
using graph::Graph;

// input [12] -> fc0 [9] -> lif0 (+ rec(delay(lif0)) ) -> fc1 [5] (+ skip(input)) -> lif1 -> output
const char* kRecurrentSkip = R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [12]
[[nodes]]
name = "fc0"
kind = "Affine"
features = 9
[[nodes]]
name = "lif0"
kind = "LIF"
from = ["fc0", "rec"]
tau = 2.0
v_threshold = 0.4
[[nodes]]
name = "delay"
kind = "Delay"
from = "lif0"
delay = 2
shape = [9]
[[nodes]]
name = "rec"
kind = "Linear"
from = "delay"
features = 9
[[nodes]]
name = "fc1"
kind = "Affine"
from = "lif0"
features = 5
[[nodes]]
name = "skip"
kind = "Affine"
from = "input"
features = 5
[[nodes]]
name = "lif1"
kind = "LIF"
from = ["fc1", "skip"]
tau = 3.0
v_threshold = 0.3
[[nodes]]
name = "output"
kind = "Output"
)";

NetworkConfig graph_config(const Graph& g, int64_t T) {
  NetworkConfig c;
  c.graph = std::make_shared<const Graph>(g);
  c.steps = T;
  c.seed = 5;
  return c;
}

torch::Tensor images(int64_t B, int64_t n) {
  torch::manual_seed(99);
  return torch::rand({B, n});
}

// [T, B, classes] output spikes of the network on `x` with a placement.
// `first`: the global index of x's first sample (the encoder draws by it).
torch::Tensor run(SpikingNetwork& net, const torch::Tensor& x, std::vector<std::string> devices, int64_t K,
                  std::vector<int64_t> balance = {}, int64_t first = 0) {
  torch::NoGradGuard no_grad;
  NetworkConfig c = net.config();
  c.devices = std::move(devices);
  c.steps_per_tick = K;
  c.balance = std::move(balance);
  SpikingNetwork placed(c);
  const auto from = net.named_parameters(), to = placed.named_parameters();
  for (size_t i = 0; i < from.size(); ++i) to[i].second.copy_(from[i].second);
  ModelPipeline p = placed.make_pipeline();
  return p.constant_forward(placed.prepare_input(x), c.steps, /*reduce=*/false,
                            torch::arange(first, first + x.size(0), torch::kLong));
}

TEST(GraphModel, AChainThroughTheExecutorEqualsTheFusedChain) {
  NetworkConfig c;
  c.layers = {30, 16, 7};
  c.neuron.tau = 3.0;
  c.neuron.v_threshold = 0.15;
  c.steps = 6;
  c.seed = 2;
  SpikingNetwork fused(c);
  NetworkConfig gc = graph_config(network_graph(fused), 6);  // with fused's weights
  gc.seed = 2;
  SpikingNetwork through(gc);
  ASSERT_NE(through.graph_model(), nullptr);
  EXPECT_EQ(through.config().layers, c.layers);
  const torch::Tensor x = images(9, 30);
  const torch::Tensor a = run(fused, x, {"cpu"}, 0), b = run(through, x, {"cpu"}, 0);
  EXPECT_GT(a.sum().item<double>(), 0);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::equal(a, run(through, x, {"cpu", "cpu"}, 4)));
}

TEST(GraphModel, RecurrenceAndSkipsGiveTheSameSpikesForEveryPartitionKAndBatch) {
  const Graph g = graph::parse_graph_text(kRecurrentSkip, "test");
  SpikingNetwork net(graph_config(g, 7));
  EXPECT_EQ(net.config().layers, (std::vector<int64_t>{12, 9, 5}));
  const torch::Tensor x = images(6, 12);
  const torch::Tensor ref = run(net, x, {"cpu"}, 0);
  EXPECT_GT(ref.sum().item<double>(), 0);
  EXPECT_TRUE(torch::equal(ref, run(net, x, {"cpu"}, 1)));
  EXPECT_TRUE(torch::equal(ref, run(net, x, {"cpu"}, 3)));
  EXPECT_TRUE(torch::equal(ref, run(net, x, {"cpu", "cpu"}, 2)));
  EXPECT_TRUE(torch::equal(ref, run(net, x, {"cpu", "cpu"}, 0, {1, 1})));
  // Each sample alone: the same spikes as within the batch.
  for (int64_t b = 0; b < x.size(0); ++b) {
    EXPECT_TRUE(torch::equal(ref.narrow(1, b, 1), run(net, x.narrow(0, b, 1), {"cpu", "cpu"}, 3, {}, b)))
        << "sample " << b;
  }
}

TEST(GraphModel, RecurrenceEqualsAHandWrittenStepLoop) {
  const Graph g = graph::parse_graph_text(kRecurrentSkip, "test");
  SpikingNetwork net(graph_config(g, 7));
  const torch::Tensor x = images(4, 12);
  const torch::Tensor got = run(net, x, {"cpu"}, 0);
  // The same encoder spikes, then the graph wired by hand, one step at a time.
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> p;
  for (const auto& [name, t] : net.named_parameters()) p[name] = t;
  const auto linear = [&](const std::string& node, bool bias) {
    const torch::Tensor& w = p.at(node + ".weight");
    Linear fc(LinearOptions(w.size(1), w.size(0)).bias(bias));
    fc->weight.copy_(w);
    if (bias) fc->bias.copy_(p.at(node + ".bias"));
    return fc;
  };
  Linear fc0 = linear("fc0", true), rec = linear("rec", false), fc1 = linear("fc1", true), skip = linear("skip", true);
  PoissonEncoder enc(PoissonEncoderOptions().seed(5).step_mode(StepMode::kMulti).spike_dtype(torch::kBool));
  const torch::Tensor in = net.prepare_input(x);
  const torch::Tensor spikes = enc->forward(in.unsqueeze(0).expand({7, 4, 12})).to(torch::kFloat);
  NeuronParams p0, p1;
  p0.tau = 2.0;
  p0.v_threshold = 0.4;
  p0.surrogate = Surrogate::atan();
  p1 = p0;
  p1.tau = 3.0;
  p1.v_threshold = 0.3;
  NeuronState s0, s1;
  std::vector<torch::Tensor> hidden, out;
  for (int64_t t = 0; t < 7; ++t) {
    const torch::Tensor xt = spikes.narrow(0, t, 1);
    torch::Tensor current = fc0->forward(xt);
    const torch::Tensor past = t >= 2 ? hidden[t - 2] : torch::zeros({1, 4, 9});
    current = current + rec->forward(past);
    hidden.push_back(functional::neuron_multistep(current, s0, p0));
    out.push_back(functional::neuron_multistep(fc1->forward(hidden.back()) + skip->forward(xt), s1, p1));
  }
  EXPECT_TRUE(torch::equal(got, torch::cat(out, 0)));
}

// Every parameter's gradient of sum(y * probe), y the network's output on
// x over T steps, placed on `devices` in blocks of K.
// (Parameters whose name holds `frozen`, if given, are frozen: no gradient,
// an undefined tensor in the list.)
std::vector<torch::Tensor> gradients(const Graph& g, const torch::Tensor& x, const torch::Tensor& probe,
                                     std::vector<std::string> devices, int64_t K, const std::string& frozen = "") {
  const int64_t T = probe.size(0);
  NetworkConfig c = graph_config(g, T);
  c.devices = std::move(devices);
  c.steps_per_tick = K;
  SpikingNetwork net(c);
  if (!frozen.empty()) {
    for (auto& [name, t] : net.named_parameters()) {
      if (name.find(frozen) != std::string::npos) t.requires_grad_(false);
    }
  }
  ModelPipeline pipe = net.make_pipeline();
  const torch::Tensor y = pipe.constant_forward(net.prepare_input(x), T, /*reduce=*/false);
  (y * probe).sum().backward();
  std::vector<torch::Tensor> out;
  for (const auto& [name, t] : net.named_parameters()) out.push_back(t.grad().defined() ? t.grad().clone() : torch::Tensor());
  return out;
}

TEST(GraphModel, GradientsDoNotDependOnPartitionOrK) {
  const Graph g = graph::parse_graph_text(kRecurrentSkip, "test");
  const torch::Tensor x = images(5, 12);
  torch::manual_seed(3);
  const torch::Tensor probe = torch::randn({7, 5, 5});
  const auto grads = [&](std::vector<std::string> devices, int64_t K) { return gradients(g, x, probe, devices, K); };
  const auto a = grads({"cpu"}, 0), b = grads({"cpu", "cpu"}, 3), c = grads({"cpu"}, 1);
  ASSERT_EQ(a.size(), b.size());
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
    EXPECT_TRUE(torch::equal(a[i], c[i])) << "parameter " << i;
    total += a[i].abs().sum().item<double>();
  }
  EXPECT_GT(total, 0);
}

// Every general neuron kind (general_neuron.h), per-neuron parameters, a
// CubaLIF fed back to itself through a Delay, and an LI read-out:
// input [12] -> fc0 -> lifs [9] -> fc1 (+ rec) -> cuba [8] -> fc2 -> thr [6]
//   -> fc3 -> culi [5] -> fc4 -> li [4] -> output
const char* kGeneralKinds = R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [12]
[[nodes]]
name = "fc0"
kind = "Affine"
features = 9
[[nodes]]
name = "lifs"
kind = "LIF"
tau = [1.5, 2, 3, 4, 5, 6, 7, 8, 9]
v_threshold = [0.2, 0.3, 0.4, 0.2, 0.3, 0.4, 0.2, 0.3, 0.4]
v_leak = 0.05
r = 1.5
[[nodes]]
name = "fc1"
kind = "Affine"
features = 8
[[nodes]]
name = "cuba"
kind = "CubaLIF"
from = ["fc1", "rec"]
tau_syn = 2.0
tau_mem = 3.0
v_threshold = 0.1
[[nodes]]
name = "delay"
kind = "Delay"
from = "cuba"
shape = [8]
[[nodes]]
name = "rec"
kind = "Linear"
from = "delay"
features = 8
[[nodes]]
name = "fc2"
kind = "Affine"
from = "cuba"
features = 6
[[nodes]]
name = "thr"
kind = "Threshold"
threshold = 0.05
[[nodes]]
name = "fc3"
kind = "Affine"
features = 5
[[nodes]]
name = "culi"
kind = "CubaLI"
tau_mem = 2.5
[[nodes]]
name = "fc4"
kind = "Affine"
features = 4
[[nodes]]
name = "li"
kind = "LI"
tau = 4.0
[[nodes]]
name = "output"
kind = "Output"
)";

TEST(GraphModel, GeneralNeuronKindsRunTheSameForEveryPartitionKAndBatch) {
  const Graph g = graph::parse_graph_text(kGeneralKinds, "test");
  SpikingNetwork net(graph_config(g, 6));
  EXPECT_EQ(net.config().layers, (std::vector<int64_t>{12, 9, 8, 6, 5, 4}));
  ASSERT_EQ(net.neuron_layers().size(), 5u);
  EXPECT_FALSE(net.neuron_layers().back()->spiking());  // the LI read-out
  const torch::Tensor x = images(5, 12);
  const torch::Tensor ref = run(net, x, {"cpu"}, 0);
  // The read-out is a potential: real numbers, not 0/1.
  EXPECT_GT((ref.ne(0) & ref.ne(1)).sum().item<int64_t>(), 0);
  EXPECT_TRUE(torch::equal(ref, run(net, x, {"cpu"}, 1)));
  EXPECT_TRUE(torch::equal(ref, run(net, x, {"cpu", "cpu", "cpu"}, 4)));
  EXPECT_TRUE(torch::equal(ref, run(net, x, {"cpu", "cpu"}, 2, {2, 3})));
  for (int64_t b = 0; b < x.size(0); ++b) {
    EXPECT_TRUE(torch::equal(ref.narrow(1, b, 1), run(net, x.narrow(0, b, 1), {"cpu", "cpu"}, 5, {}, b)))
        << "sample " << b;
  }
  // Every spiking layer spikes somewhere (the test exercises them all).
  torch::NoGradGuard no_grad;
  SpikingNetwork counted(graph_config(g, 6));
  for (const auto& l : counted.neuron_layers()) l->set_count_spikes(true);
  ModelPipeline p = counted.make_pipeline();
  p.constant_forward(counted.prepare_input(x), 6, false, torch::arange(0, x.size(0), torch::kLong));
  for (size_t i = 0; i + 2 < counted.neuron_layers().size(); ++i) {
    EXPECT_GT(counted.neuron_layers()[i]->spikes_counted(), 0) << "layer " << i;
  }
}

TEST(GraphModel, GeneralNeuronGradientsDoNotDependOnPartitionOrK) {
  const Graph g = graph::parse_graph_text(kGeneralKinds, "test");
  const torch::Tensor x = images(4, 12);
  torch::manual_seed(3);
  const torch::Tensor probe = torch::randn({6, 4, 4});
  const auto grads = [&](std::vector<std::string> devices, int64_t K) { return gradients(g, x, probe, devices, K); };
  const auto a = grads({"cpu"}, 0), b = grads({"cpu", "cpu"}, 4), c = grads({"cpu"}, 1);
  ASSERT_EQ(a.size(), 6u * 2 - 1);  // fc0..fc4 weight and bias, rec.weight
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
    EXPECT_TRUE(torch::equal(a[i], c[i])) << "parameter " << i;
    EXPECT_GT(a[i].abs().sum().item<double>(), 0) << "parameter " << i;
  }
}

TEST(GraphModel, ConvolutionEqualsConv2dAndIsBatchInvariant) {
  const Graph g = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [2, 9, 9]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 3
kernel_size = 3
padding = 1
stride = 2
[[nodes]]
name = "l"
kind = "IF"
v_threshold = 0.2
[[nodes]]
name = "pool"
kind = "SumPool2d"
kernel_size = 1
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "fc"
kind = "Affine"
features = 4
[[nodes]]
name = "l2"
kind = "IF"
[[nodes]]
name = "output"
kind = "Output"
)",
                                          "conv");
  SpikingNetwork net(graph_config(g, 3));
  EXPECT_EQ(net.config().layers, (std::vector<int64_t>{162, 3 * 5 * 5, 4}));
  const torch::Tensor x = images(5, 162);
  const torch::Tensor ref = run(net, x, {"cpu"}, 0);
  for (int64_t b = 0; b < 5; ++b) EXPECT_TRUE(torch::equal(ref.narrow(1, b, 1), run(net, x.narrow(0, b, 1), {"cpu"}, 1, {}, b)));
  // The conv values against LibTorch's conv2d.
  const Graph w = network_graph(net);
  const auto& conv = w.node("conv");
  torch::manual_seed(4);
  const torch::Tensor in = torch::rand({5, 2, 9, 9});
  const torch::Tensor want = torch::conv2d(in, conv.weight, conv.bias, 2, 1);
  std::map<std::string, torch::Tensor> p;
  for (const auto& [name, t] : net.named_parameters()) p[name] = t;
  EXPECT_EQ(p.at("conv.weight").sizes().vec(), (std::vector<int64_t>{3, 18}));
  // im2col + the conv's Linear, as the executor does it.
  const torch::Tensor cols = torch::nn::functional::unfold(in, torch::nn::functional::UnfoldFuncOptions({3, 3}).padding(1).stride(2));
  const torch::Tensor got = torch::matmul(p.at("conv.weight"), cols) + p.at("conv.bias").view({1, 3, 1});
  EXPECT_TRUE(torch::allclose(got.view({5, 3, 5, 5}), want, 1e-5, 1e-6));
}

// Training through a second convolution (stride 1, after spiking neurons):
// both convolutions train through snn::functional::conv2d_train, whose
// input gradient comes straight from the output's, so the first
// convolution's parameters get gradients through the second, which do not
// depend on the partition or K. (tests/neurons/conv2d_test.cpp shows its
// values and gradients bit for bit the im2col path's; this is the graph
// model's wiring of it.)
TEST(GraphModel, ConvolutionAfterNeuronsPassesItsInputGradientOn) {
  const Graph g = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [1, 8, 8]
[[nodes]]
name = "conv1"
kind = "Conv2d"
features = 4
kernel_size = 3
padding = 1
[[nodes]]
name = "l1"
kind = "LIF"
v_threshold = 0.3
[[nodes]]
name = "conv2"
kind = "Conv2d"
features = 5
kernel_size = 3
padding = 1
[[nodes]]
name = "l2"
kind = "LIF"
v_threshold = 0.3
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "fc"
kind = "Affine"
features = 3
[[nodes]]
name = "l3"
kind = "IF"
v_threshold = 0.5
[[nodes]]
name = "output"
kind = "Output"
)",
                                          "conv_grad");
  const torch::Tensor x = images(4, 64);
  torch::manual_seed(5);
  const torch::Tensor probe = torch::randn({5, 4, 3});
  const auto a = gradients(g, x, probe, {"cpu"}, 0), b = gradients(g, x, probe, {"cpu", "cpu"}, 2),
             c = gradients(g, x, probe, {"cpu"}, 1);
  ASSERT_EQ(a.size(), 6u);  // conv1, conv2, fc: weight and bias each
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
    EXPECT_TRUE(torch::equal(a[i], c[i])) << "parameter " << i;
  }
  EXPECT_GT(a[0].abs().sum().item<double>(), 0) << "no gradient reached the first convolution";
  // The second convolution frozen (weight and bias): the first still gets
  // the same gradients through it, the frozen one none.
  const auto f = gradients(g, x, probe, {"cpu"}, 0, "conv2");
  ASSERT_EQ(f.size(), a.size());
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(f[i].defined()) << "parameter " << i;
    EXPECT_TRUE(torch::equal(f[i], a[i])) << "parameter " << i;
  }
  EXPECT_FALSE(f[2].defined());
  EXPECT_FALSE(f[3].defined());
}

// A grouped convolution: each group's channels from its own inputs, as
// LibTorch's conv2d with groups (to rounding); written and read back whole.
TEST(GraphModel, GroupedConvolutionEqualsConv2dWithGroups) {
  const Graph g = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [4, 7, 7]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 6
kernel_size = 3
padding = 1
groups = 2
[[nodes]]
name = "li"
kind = "LI"
tau = 1.0
[[nodes]]
name = "output"
kind = "Output"
)",
                                          "grouped");
  SpikingNetwork net(graph_config(g, 1));
  std::map<std::string, torch::Tensor> p;
  for (const auto& [name, t] : net.named_parameters()) p[name] = t;
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p.at("conv.g1.weight").sizes().vec(), (std::vector<int64_t>{3, 2 * 3 * 3}));
  // Pixels of 0 and 1 spike never and always: the input is the image itself.
  torch::manual_seed(6);
  const torch::Tensor x = (torch::rand({3, 4 * 7 * 7}) < 0.5).to(torch::kFloat);
  const torch::Tensor got = run(net, x, {"cpu"}, 0)[0].reshape({3, 6, 7, 7});  // an LI of tau 1: v = its input
  const Graph w = network_graph(net);
  ASSERT_EQ(w.node("conv").weight.sizes().vec(), (std::vector<int64_t>{6, 2, 3, 3}));
  const torch::Tensor want = torch::conv2d(x.reshape({3, 4, 7, 7}), w.node("conv").weight, w.node("conv").bias, 1, 1, 1, 2);
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5)) << (got - want).abs().max().item<double>();
  // The graph with its weights builds the same network again.
  SpikingNetwork again(graph_config(w, 1));
  EXPECT_TRUE(torch::equal(run(again, x, {"cpu"}, 0), run(net, x, {"cpu"}, 0)));
}

// Inference on sparse spikes takes the event-driven convolution
// (snn/neurons/conv2d.h), a forward that records gradients the im2col path:
// the same spikes, bit for bit, through strides, dilation and groups.
TEST(GraphModel, InferenceOnSpikesTakesTheEventDrivenConvolutionWithTheSameSpikes) {
  const Graph g = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [2, 10, 10]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 4
kernel_size = 3
padding = 1
[[nodes]]
name = "if0"
kind = "IF"
v_threshold = 0.1
[[nodes]]
name = "conv2"
kind = "Conv2d"
features = 6
kernel_size = 3
padding = 2
stride = 2
dilation = 2
groups = 2
[[nodes]]
name = "lif1"
kind = "LIF"
v_threshold = 0.05
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "fc"
kind = "Affine"
features = 5
[[nodes]]
name = "lif2"
kind = "LIF"
v_threshold = 0.02
[[nodes]]
name = "output"
kind = "Output"
)",
                                          "event");
  SpikingNetwork net(graph_config(g, 6));
  // Dim images: the encoder's spikes fire for about a tenth of the pixels.
  const torch::Tensor x = images(9, 200) * 0.25;
  ModelPipeline pipe = net.make_pipeline();
  const torch::Tensor input = net.prepare_input(x);
  ASSERT_TRUE(functional::conv2d_event_pays(torch::zeros({1, 2, 10, 10}, torch::kBool)));  // the encoder's spikes
  const torch::Tensor trained = pipe.constant_forward(input, 6, false);  // records gradients: im2col
  ASSERT_TRUE(trained.requires_grad());
  const torch::Tensor inferred = run(net, x, {"cpu"}, 0);                // no gradients: event-driven
  EXPECT_GT(inferred.sum().item<double>(), 0);  // spikes reach the output
  EXPECT_TRUE(torch::equal(trained.detach(), inferred));
}

// Neurons whose spikes go to a 2 x 2 max pool alone run fused with it in
// inference (only the pooled spikes stored): the same output spikes and
// spike counts as training's two passes, for every K and partition; a
// stage cut after a neuron layer keeps its pool in its stage, so that the
// pooled values cross the cut.
TEST(GraphModel, NeuronsFusedWithTheirMaxPoolGiveTheTwoPassesSpikesAndCounts) {
  const Graph g = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [2, 8, 12]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 4
kernel_size = 3
padding = 1
[[nodes]]
name = "lif0"
kind = "LIF"
v_threshold = 0.1
[[nodes]]
name = "pool0"
kind = "MaxPool2d"
kernel_size = 2
[[nodes]]
name = "conv2"
kind = "Conv2d"
features = 6
kernel_size = 3
padding = 1
[[nodes]]
name = "if1"
kind = "IF"
v_threshold = 0.1
[[nodes]]
name = "pool1"
kind = "MaxPool2d"
kernel_size = 2
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "fc"
kind = "Affine"
features = 5
[[nodes]]
name = "lif2"
kind = "LIF"
v_threshold = 0.05
[[nodes]]
name = "output"
kind = "Output"
)",
                                          "pooled");
  SpikingNetwork net(graph_config(g, 6));
  const torch::Tensor x = images(9, 2 * 8 * 12);
  ModelPipeline pipe = net.make_pipeline();
  const torch::Tensor input = net.prepare_input(x);
  const auto counts = [&] {
    std::vector<double> out;
    for (const auto& l : net.neuron_layers()) out.push_back(l->spikes_counted());
    return out;
  };
  for (const auto& l : net.neuron_layers()) l->set_count_spikes(true);
  const torch::Tensor trained = pipe.constant_forward(input, 6, false);  // records gradients: two passes
  ASSERT_TRUE(trained.requires_grad());
  const std::vector<double> trained_counts = counts();
  for (const auto& l : net.neuron_layers()) l->set_count_spikes(true);  // from zero
  torch::Tensor inferred;
  {
    torch::NoGradGuard no_grad;
    inferred = pipe.constant_forward(input, 6, false);
  }
  EXPECT_TRUE(torch::equal(trained.detach(), inferred));
  EXPECT_EQ(counts(), trained_counts);
  for (size_t i = 0; i < trained_counts.size(); ++i) EXPECT_GT(trained_counts[i], 0) << "layer " << i;
  for (int64_t K : {1, 4, 0}) {
    EXPECT_TRUE(torch::equal(run(net, x, {"cpu"}, K), inferred)) << "K = " << K;
    EXPECT_TRUE(torch::equal(run(net, x, {"cpu", "cpu", "cpu"}, K, {1, 1, 1}), inferred)) << "three stages, K = " << K;
    EXPECT_TRUE(torch::equal(run(net, x, {"cpu", "cpu"}, K, {2, 1}), inferred)) << "two stages, K = " << K;
  }
  GraphModel model(g);
  std::vector<torch::nn::AnyModule> stages = model.make_stages({1, 1, 1});
  torch::NoGradGuard no_grad;
  const torch::Tensor cut = stages[0].forward<torch::Tensor>((torch::rand({3, 2, 2 * 8 * 12}) < 0.3).to(torch::kFloat));
  EXPECT_EQ(cut.sizes(), (std::vector<int64_t>{3, 2, 4 * 4 * 6}));  // pool0's [4, 4, 6], not lif0's [4, 8, 12]
}

// An Input node with encoding = "direct" feeds the pixel values at every
// step, unencoded: through an identity Linear, IF neurons (threshold 1,
// reset to 0) integrating 0.5, 0.25 and 1.0 fire 2, 1 and 4 times in 4
// steps, for any K and partition; the setting survives the config's JSON.
TEST(GraphModel, ADirectInputFeedsThePixelValuesAtEveryStep) {
  const char* text = R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [3]
encoding = "direct"
[[nodes]]
name = "fc"
kind = "Linear"
features = 3
[[nodes]]
name = "if0"
kind = "IF"
[[nodes]]
name = "pass"
kind = "Linear"
features = 3
[[nodes]]
name = "if1"
kind = "IF"
v_threshold = 0.5
[[nodes]]
name = "output"
kind = "Output"
)";
  Graph g = graph::parse_graph_text(text, "test");
  g.nodes[1].weight = torch::eye(3);
  g.nodes[3].weight = torch::eye(3);
  SpikingNetwork net(graph_config(g, 4));
  EXPECT_FALSE(net.poisson_input());
  // (A config's JSON keeps the structure; the weights are parameters.)
  EXPECT_FALSE(SpikingNetwork(NetworkConfig::from_json(net.config().to_json())).poisson_input());
  const torch::Tensor x = torch::tensor({{0.5f, 0.25f, 1.0f}});
  const torch::Tensor counts = run(net, x, {"cpu"}, 0).sum(0);
  EXPECT_TRUE(torch::equal(counts, torch::tensor({{2.0f, 1.0f, 4.0f}}))) << counts;
  EXPECT_TRUE(torch::equal(run(net, x, {"cpu", "cpu"}, 1, {1, 1}), run(net, x, {"cpu"}, 0)));
  // What the encoder would give stage 0: the images themselves, T times.
  EXPECT_TRUE(torch::equal(net.encode_input(x), x.unsqueeze(0).expand({4, 1, 3})));

  g.nodes[0].encoding = "poisson";
  EXPECT_TRUE(SpikingNetwork(graph_config(g, 4)).poisson_input());
  g.nodes[0].encoding = "latency";
  try {
    SpikingNetwork bad(graph_config(g, 4));
    FAIL() << "encoding 'latency' was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'input' (Input): encoding 'latency' is neither poisson nor direct"),
              std::string::npos) << e.what();
  }
}

// A direct input is the same image at every step: without gradients, the
// nodes before the first neuron (here convolution, BatchNorm, max and sum
// pooling, Flatten, Dropout and an Affine) run once per block of K steps
// and their output is shared by the block's steps. Spikes equal
// step-by-step blocks (K = 1, where nothing is shared) bit for bit, for
// blocks of 2, 3 and all 5 steps, on one stage and two. (Sharing a
// neuron's steps, which carry state, fails this test.)
TEST(GraphModel, NodesBeforeTheFirstNeuronRunOncePerBlockOnADirectInput) {
  const char* text = R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [2, 8, 8]
encoding = "direct"
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 4
kernel_size = 3
padding = 1
[[nodes]]
name = "bn"
kind = "BatchNorm"
[[nodes]]
name = "pool"
kind = "MaxPool2d"
kernel_size = 2
[[nodes]]
name = "sum"
kind = "SumPool2d"
kernel_size = 2
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "drop"
kind = "Dropout"
p = 0.3
[[nodes]]
name = "fc0"
kind = "Affine"
features = 6
[[nodes]]
name = "lif0"
kind = "LIF"
v_threshold = 0.3
[[nodes]]
name = "fc1"
kind = "Affine"
features = 5
[[nodes]]
name = "lif1"
kind = "LIF"
v_threshold = 0.2
[[nodes]]
name = "output"
kind = "Output"
)";
  Graph g = graph::parse_graph_text(text, "test");
  SpikingNetwork net(graph_config(g, 5));
  EXPECT_FALSE(net.poisson_input());
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(3);
    for (auto& p : net.named_parameters()) {
      if (p.first.find("weight") != std::string::npos) p.second.uniform_(-0.5, 0.7);  // BatchNorm's scale too
    }
  }
  const torch::Tensor x = images(7, 2 * 8 * 8);
  const torch::Tensor steps = run(net, x, {"cpu"}, 1);  // one step per block: nothing shared
  EXPECT_GT(steps.sum().item<double>(), 0);
  EXPECT_LT(steps.sum().item<double>(), steps.numel());  // not every neuron at every step
  for (int64_t K : {2, 3, 0}) {
    EXPECT_TRUE(torch::equal(run(net, x, {"cpu"}, K), steps)) << "K = " << K;
    EXPECT_TRUE(torch::equal(run(net, x, {"cpu", "cpu"}, K, {1, 1}), steps)) << "two stages, K = " << K;
  }
}

TEST(GraphModel, NodeNamesWithDotsRun) {
  // PyTorch-made NIR files name nodes "0", "fc.1", ...
  Graph g = graph::parse_graph_text(kRecurrentSkip, "test");
  for (auto& n : g.nodes) n.name = "m." + n.name;
  for (auto& e : g.edges) e = {"m." + e.source, "m." + e.target};
  SpikingNetwork dotted(graph_config(g, 5));
  SpikingNetwork plain(graph_config(graph::parse_graph_text(kRecurrentSkip, "test"), 5));
  const torch::Tensor x = images(3, 12);
  EXPECT_TRUE(torch::equal(run(dotted, x, {"cpu", "cpu"}, 2), run(plain, x, {"cpu"}, 0)));
}

TEST(GraphModel, AnOutputTStepsBehindItsInputIsRefused) {
  // input -> d (2 steps) -> fc0 and skip: with T = 2 the Output never saw
  // the input (all-zero outputs; training failed in LibTorch's autograd).
  Graph g = graph::parse_graph_text(kRecurrentSkip, "test");
  EXPECT_EQ(GraphModel(g).shapes().latency, 0);  // its Delay is on a cycle, not on the way
  graph::Node d;
  d.name = "d";
  d.kind = graph::NodeKind::kDelay;
  d.delay = 2;
  g.nodes.push_back(d);
  d.shape = {12};
  for (auto& e : g.edges) {
    if (e.source == "input") e.source = "d";
  }
  g.edges.push_back({"input", "d"});
  try {
    SpikingNetwork net(graph_config(g, 2));  // (a NIR file is read with the default T, --T comes after)
    net.make_pipeline();
    FAIL() << "T = 2 was accepted for an Output 2 steps behind";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the graph's Output is 2 steps behind its Input (its shortest path passes the "
                                         "Delay 'd' of 2), so T = 2 steps never reach it: give T > 2"),
              std::string::npos)
        << e.what();
  }
  SpikingNetwork net(graph_config(g, 3));
  net.make_pipeline();
  SimulationConfig shorter = net.config().simulation();
  shorter.steps = 1;
  EXPECT_THROW(net.set_simulation(shorter), Error);
}

TEST(GraphModel, ABalanceThatCutsACycleIsRefused) {
  Graph g = graph::parse_graph_text(kRecurrentSkip, "test");
  EXPECT_EQ(GraphModel(g).atomic_groups(), (std::vector<int64_t>{1, 1}));
  // lif1 feeds back into lif0 too: both layers are one cycle.
  graph::Node d2;
  d2.name = "delay2";
  d2.kind = graph::NodeKind::kDelay;
  d2.shape = {5};
  graph::Node r2;
  r2.name = "rec2";
  r2.kind = graph::NodeKind::kLinear;
  r2.features = 9;
  g.nodes.push_back(d2);
  g.nodes.push_back(r2);
  g.edges.insert(g.edges.end(), {{"lif1", "delay2"}, {"delay2", "rec2"}, {"rec2", "lif0"}});
  const GraphModel m(g);
  EXPECT_EQ(m.atomic_groups(), (std::vector<int64_t>{2}));
  try {
    m.check_balance({1, 1});
    FAIL() << "a cut inside a cycle was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuts the cycle through"), std::string::npos) << e.what();
  }
  NetworkConfig c = graph_config(g, 4);
  c.devices = {"cpu", "cpu"};
  EXPECT_THROW(SpikingNetwork(c).make_pipeline(), Error);
}

}  // namespace

namespace {

// input [1, 8, 8] -> conv [4, 6, 6] -> bn -> lif0 -> pool [4, 3, 3] -> flat -> drop -> fc [6] -> lif1 -> output
const char* kNormDrop = R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [1, 8, 8]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 4
kernel_size = 3
[[nodes]]
name = "bn"
kind = "BatchNorm"
momentum = 0.2
[[nodes]]
name = "lif0"
kind = "LIF"
v_threshold = 0.5
[[nodes]]
name = "pool"
kind = "SumPool2d"
kernel_size = 2
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "drop"
kind = "Dropout"
p = 0.3
[[nodes]]
name = "fc"
kind = "Affine"
features = 6
[[nodes]]
name = "lif1"
kind = "LIF"
v_threshold = 0.3
[[nodes]]
name = "output"
kind = "Output"
)";

// One training forward and backward; the outputs, gradients and BatchNorm statistics.
std::vector<torch::Tensor> train_step(const Graph& g, const torch::Tensor& x, std::vector<std::string> devices, int64_t K,
                                      int64_t epoch = 0) {
  NetworkConfig c = graph_config(g, 5);
  c.devices = std::move(devices);
  c.steps_per_tick = K;
  SpikingNetwork net(c);
  net.set_training_epoch(epoch);
  ModelPipeline pipe = net.make_pipeline();
  torch::manual_seed(8);
  const torch::Tensor probe = torch::randn({5, x.size(0), 6});
  const torch::Tensor y = pipe.constant_forward(net.prepare_input(x), 5, false, torch::arange(x.size(0), torch::kLong));
  (y * probe).sum().backward();
  std::vector<torch::Tensor> out{y.detach()};
  for (const auto& [name, t] : net.named_parameters()) out.push_back(t.grad().clone());
  for (const auto& [name, t] : net.named_buffers()) out.push_back(t.clone());
  return out;
}

}  // namespace

TEST(GraphModel, BatchNormAndDropoutTrainTheSameForEveryPartitionAndK) {
  const Graph g = graph::parse_graph_text(kNormDrop, "test");
  const torch::Tensor x = images(6, 64);
  const auto a = train_step(g, x, {"cpu"}, 0), b = train_step(g, x, {"cpu", "cpu"}, 2), c = train_step(g, x, {"cpu"}, 1);
  ASSERT_EQ(a.size(), 1u + 6 + 2);  // output; conv, bn, fc weight and bias; bn's running mean and variance
  EXPECT_GT(a[0].sum().item<double>(), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "item " << i;
    EXPECT_TRUE(torch::equal(a[i], c[i])) << "item " << i;
    if (i > 0 && i < 7) EXPECT_GT(a[i].abs().sum().item<double>(), 0) << "gradient " << i;
  }
  // The statistics moved from their start (0 and 1).
  EXPECT_GT(a[7].abs().sum().item<double>(), 0);
  // Another epoch draws other dropout masks.
  EXPECT_FALSE(torch::equal(a[0], train_step(g, x, {"cpu"}, 0, 1)[0]));
}

TEST(GraphModel, DropoutMasksDependOnTheSampleAndEpochNotTheBatch) {
  const Graph g = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [30]
[[nodes]]
name = "drop"
kind = "Dropout"
p = 0.4
[[nodes]]
name = "li"
kind = "LI"
tau = 1.0
[[nodes]]
name = "output"
kind = "Output"
)",
                                          "test");
  // An LI of tau 1 passes its input through: the output is the dropped-out input spikes.
  NetworkConfig c = graph_config(g, 3);
  SpikingNetwork net(c);
  const torch::Tensor x = torch::full({40, 30}, 1.0);  // every input spikes at every step
  const auto forward = [&](const torch::Tensor& imgs, int64_t first, bool grad) {
    torch::AutoGradMode mode(grad);
    ModelPipeline p = net.make_pipeline();
    return p.constant_forward(net.prepare_input(imgs), 3, false,
                              torch::arange(first, first + imgs.size(0), torch::kLong));
  };
  const torch::Tensor all = forward(x, 0, true);
  // The same mask at every step; kept elements scaled by 1 / (1 - p).
  EXPECT_TRUE(torch::equal(all[0], all[2]));
  const double kept = all.ne(0).to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(kept, 0.6, 0.05);
  EXPECT_TRUE(torch::allclose(all.masked_select(all.ne(0)), torch::full({1}, 1.0 / 0.6)));
  for (int64_t b : {0, 17, 39}) {
    EXPECT_TRUE(torch::equal(forward(x.narrow(0, b, 1), b, true), all.narrow(1, b, 1))) << "sample " << b;
  }
  net.set_training_epoch(1);
  EXPECT_FALSE(torch::equal(forward(x, 0, true), all));
  // Inference: no dropout.
  EXPECT_TRUE(torch::equal(forward(x, 0, false), torch::ones_like(all)));
}

TEST(GraphModel, FoldedBatchNormGivesTheUnfoldedInferenceToRounding) {
  Graph g = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [1, 6, 6]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 3
kernel_size = 3
padding = 1
[[nodes]]
name = "bn"
kind = "BatchNorm"
[[nodes]]
name = "drop"
kind = "Dropout"
p = 0.5
[[nodes]]
name = "li"
kind = "LI"
tau = 1.0
[[nodes]]
name = "output"
kind = "Output"
)",
                                    "test");
  torch::manual_seed(4);
  g.node("conv").weight = torch::randn({3, 1, 3, 3});
  g.node("conv").bias = torch::randn({3});
  g.node("bn").weight = torch::tensor({0.5f, 2.0f, -1.0f});
  g.node("bn").bias = torch::tensor({0.1f, -0.2f, 0.3f});
  g.node("bn").arrays["running_mean"] = torch::tensor({0.2, -0.5, 1.0}, torch::kDouble);
  g.node("bn").arrays["running_var"] = torch::tensor({0.5, 2.0, 0.1}, torch::kDouble);
  std::vector<std::string> unfolded;
  const Graph folded = graph::fold_for_inference(g, &unfolded);
  EXPECT_TRUE(unfolded.empty());
  EXPECT_FALSE(folded.has_node("bn"));
  EXPECT_FALSE(folded.has_node("drop"));
  const auto potentials = [&](const Graph& graph) {
    SpikingNetwork net(graph_config(graph, 2));
    torch::NoGradGuard no_grad;
    ModelPipeline p = net.make_pipeline();
    return p.constant_forward(net.prepare_input(images(4, 36)), 2, false);
  };
  const torch::Tensor a = potentials(g), b = potentials(folded);
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5)) << (a - b).abs().max().item<double>();
  EXPECT_GT(a.abs().sum().item<double>(), 0);
  // A BatchNorm after a pool cannot be folded: it stays, and export refuses it.
  Graph pooled = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [1, 6, 6]
[[nodes]]
name = "pool"
kind = "AvgPool2d"
kernel_size = 2
[[nodes]]
name = "bn"
kind = "BatchNorm"
[[nodes]]
name = "li"
kind = "LI"
[[nodes]]
name = "output"
kind = "Output"
)",
                                         "test");
  unfolded.clear();
  EXPECT_TRUE(graph::fold_for_inference(pooled, &unfolded).has_node("bn"));
  EXPECT_EQ(unfolded, std::vector<std::string>{"bn"});
}

// Thread count: every graph kind (recurrence and skips, convolution and
// pooling, the general neurons) gives the same spikes and gradients on 1 and
// 2 intra-op threads.
TEST(GraphModel, OneAndTwoThreadsGiveTheSameSpikesAndGradients) {
  const Graph conv = graph::parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [1, 12, 12]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 6
kernel_size = 3
[[nodes]]
name = "lif0"
kind = "LIF"
v_threshold = 0.3
[[nodes]]
name = "pool"
kind = "MaxPool2d"
kernel_size = 2
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "fc"
kind = "Affine"
features = 5
[[nodes]]
name = "lif1"
kind = "LIF"
v_threshold = 0.2
[[nodes]]
name = "output"
kind = "Output"
)",
                                             "conv");
  for (const Graph& g : {graph::parse_graph_text(kRecurrentSkip, "rec"), conv,
                         graph::parse_graph_text(kGeneralKinds, "general")}) {
    const int64_t in = graph::shape_str(g.validate().output.at("input")) == "[12]" ? 12 : 144;
    const torch::Tensor x = images(7, in);
    const auto run_on = [&](int threads) {
      const int saved = at::get_num_threads();
      at::set_num_threads(threads);
      SpikingNetwork net(graph_config(g, 5));
      ModelPipeline pipe = net.make_pipeline();
      const torch::Tensor y = pipe.constant_forward(net.prepare_input(x), 5, false);
      y.sum().backward();
      std::vector<torch::Tensor> out{y.detach()};
      for (const auto& [name, t] : net.named_parameters()) out.push_back(t.grad().clone());
      at::set_num_threads(saved);
      return out;
    };
    const auto one = run_on(1), two = run_on(2);
    ASSERT_EQ(one.size(), two.size());
    EXPECT_GT(one[0].abs().sum().item<double>(), 0);
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << "item " << i;
  }
}

// A graph on a GPU (recurrence, a skip, the general kinds) equals the CPU.
TEST(GraphModel_CUDA, GraphsOnAGpuGiveTheCpuSpikes) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device present";
  for (const char* text : {kRecurrentSkip, kGeneralKinds}) {
    const Graph g = graph::parse_graph_text(text, "test");
    SpikingNetwork net(graph_config(g, 6));
    const torch::Tensor x = images(5, 12);
    const torch::Tensor cpu = run(net, x, {"cpu"}, 0);
    const torch::Tensor gpu = run(net, x, {"cuda:0"}, 0).cpu();
    const torch::Tensor mixed = run(net, x, {"cpu", "cuda:0"}, 2).cpu();
    EXPECT_TRUE(torch::equal(cpu, gpu));
    EXPECT_TRUE(torch::equal(cpu, mixed));
  }
}
