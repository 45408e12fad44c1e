// Network graphs: validation messages, the TOML/JSON form, NIR files written
// and read back, and chain graphs as SpikingNetworks (the same spikes).

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "snn/core/error.h"
#include "snn/graph/graph.h"
#include "snn/graph/graph_text.h"
#include "snn/graph/nir_file.h"
#include "snn/simulator/network_graph.h"
#include "support/source_path.h"

namespace {

using namespace snn;
using namespace snn::graph;

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/snn_graph_" + std::to_string(::getpid()) + "_" + name;
}

// The message of validate() (or "" when the graph is valid).
std::string problem(const Graph& g) {
  try {
    g.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string parse_problem(const std::string& text) {
  try {
    parse_graph_text(text, "model 'x.toml'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kChainToml = R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [784]

[[nodes]]
name = "fc0"
kind = "Affine"
features = 32

[[nodes]]
name = "lif0"
kind = "LIF"
tau = 3.0
v_threshold = 0.75

[[nodes]]
name = "fc1"
kind = "Affine"
features = 10

[[nodes]]
name = "lif1"
kind = "LIF"
tau = 3.0
v_threshold = 0.75

[[nodes]]
name = "output"
kind = "Output"
)";

TEST(GraphText, ChainInFileOrderWithInferredShapes) {
  const Graph g = parse_graph_text(kChainToml, "model 'x.toml'");
  ASSERT_EQ(g.nodes.size(), 6u);
  ASSERT_EQ(g.edges.size(), 5u);
  EXPECT_EQ(g.edges[0], (Edge{"input", "fc0"}));
  EXPECT_EQ(g.edges[4], (Edge{"lif1", "output"}));
  const GraphShapes s = g.validate();
  EXPECT_EQ(s.output.at("lif0"), std::vector<int64_t>{32});
  EXPECT_EQ(s.output.at("output"), std::vector<int64_t>{10});
  EXPECT_EQ(g.node("lif0").neuron.tau, 3.0);
  EXPECT_EQ(g.node("lif0").neuron.v_threshold, 0.75);
  const ChainModel m = chain_model(g);
  EXPECT_EQ(m.layers, (std::vector<int64_t>{784, 32, 10}));
  EXPECT_TRUE(m.parameters.empty());  // weights come from the seed
}

TEST(GraphText, JsonReadsAsTomlAndRoundTrips) {
  Graph a = parse_graph_text(kChainToml, "a");
  a.node("lif0").neuron.surrogate.alpha = 1.0 / 3.0;  // every digit survives (checkpoints keep this JSON)
  const Graph b = parse_graph_text(graph_to_json(a), "b");
  EXPECT_EQ(graph_to_json(a), graph_to_json(b));
  EXPECT_EQ(b.edges, a.edges);
  EXPECT_EQ(b.node("lif0").neuron.surrogate.alpha, 1.0 / 3.0);
}

TEST(GraphText, ScaleFactorsSurviveTheJsonForm) {
  // A checkpoint keeps a graph network's structure as this JSON: a Scale's
  // factors are part of it (they are not trained parameters).
  const Graph g = parse_graph_text(R"({"nodes": [{"name": "i", "kind": "Input", "shape": [3]},
      {"name": "s", "kind": "Scale", "scale": [0.5, -2, 0.125]}, {"name": "o", "kind": "Output"}]})",
                                   "scale");
  const Graph back = parse_graph_text(graph_to_json(g), "back");
  EXPECT_TRUE(torch::equal(back.node("s").scale, g.node("s").scale));
  EXPECT_EQ(back.validate().output.at("o"), std::vector<int64_t>{3});
}

TEST(GraphText, BadInputNamesNodeAndKey) {
  EXPECT_NE(parse_problem("[[nodes]]\nname = \"a\"\nkind = \"Convolution\"\n").find("node 'a': unknown kind 'Convolution'"),
            std::string::npos);
  EXPECT_NE(parse_problem("[[nodes]]\nname = \"a\"\nkind = \"Input\"\nshap = [3]\n").find("has no key 'shap'"),
            std::string::npos);
  EXPECT_NE(parse_problem("[[nodes]]\nname = \"a\"\nkind = \"Input\"\nshape = \"big\"\n").find("'shape' must be"),
            std::string::npos);
  EXPECT_NE(parse_problem("[[nodes]\nname = 1\n").find("line 1"), std::string::npos);
  EXPECT_NE(parse_problem("nodez = 1\n").find("unknown top-level key 'nodez'"), std::string::npos);
}

Graph chain(int64_t in, int64_t hidden, int64_t out) {
  return parse_graph_text("{\"nodes\": [{\"name\": \"input\", \"kind\": \"Input\", \"shape\": [" + std::to_string(in) +
                              "]}, {\"name\": \"fc0\", \"kind\": \"Affine\", \"features\": " + std::to_string(hidden) +
                              "}, {\"name\": \"lif0\", \"kind\": \"LIF\"}, {\"name\": \"fc1\", \"kind\": \"Affine\", "
                              "\"features\": " + std::to_string(out) +
                              "}, {\"name\": \"lif1\", \"kind\": \"LIF\"}, {\"name\": \"output\", \"kind\": \"Output\"}]}",
                          "chain");
}

TEST(GraphValidate, EveryProblemIsNamed) {
  {
    Graph g = chain(4, 3, 2);
    g.edges.push_back({"lif1", "nowhere"});
    EXPECT_NE(problem(g).find("edge 'lif1' -> 'nowhere' names no node 'nowhere'"), std::string::npos) << problem(g);
  }
  {
    Graph g = chain(4, 3, 2);
    g.node("fc1").weight = torch::zeros({2, 5});  // takes 5, gets 3
    EXPECT_NE(problem(g).find("node 'fc1': weight [2, 5] takes 5 inputs but its input is [3]"), std::string::npos)
        << problem(g);
  }
  {
    Graph g = chain(4, 3, 2);
    g.node("fc0").weight = torch::zeros({3, 4});
    g.node("fc0").bias = torch::zeros({4});
    EXPECT_NE(problem(g).find("node 'fc0': bias has shape [4] but [3] is needed"), std::string::npos) << problem(g);
  }
  {
    Graph g = chain(4, 3, 2);
    g.edges.push_back({"lif0", "fc0"});  // recurrence without a delay
    EXPECT_NE(problem(g).find("the cycle fc0 -> lif0 -> fc0 has no Delay node"), std::string::npos) << problem(g);
  }
  {
    Graph g = chain(4, 3, 2);
    Node extra;
    extra.name = "spare";
    extra.kind = NodeKind::kLIF;
    g.nodes.push_back(extra);
    g.edges.push_back({"lif0", "spare"});
    EXPECT_NE(problem(g).find("node 'spare' (LIF) has no outgoing edge"), std::string::npos) << problem(g);
  }
  {
    Graph g = chain(4, 3, 2);
    g.edges.push_back({"lif0", "lif1"});  // [3] summed with fc1's [2]
    EXPECT_NE(problem(g).find("edge 'lif0' -> 'lif1': lif0 gives [3] but 'lif1' already takes [2]"), std::string::npos)
        << problem(g);
  }
  {
    Graph g = chain(4, 3, 2);
    g.node("lif0").neuron.tau = 0.5;
    EXPECT_NE(problem(g).find("node 'lif0': "), std::string::npos) << problem(g);
  }
  {
    Graph g = chain(4, 3, 2);
    g.nodes.push_back(g.node("fc0"));
    EXPECT_NE(problem(g).find("two nodes are named 'fc0'"), std::string::npos) << problem(g);
  }
}

// A neuron node given r, v_leak or a per-neuron list takes the general
// form; problems with it name the node and the key.
TEST(GraphText, GeneralNeuronParametersAndTheirProblems) {
  const auto net = [](const std::string& neuron) {
    return "[[nodes]]\nname = \"in\"\nkind = \"Input\"\nshape = [4]\n[[nodes]]\nname = \"fc\"\nkind = "
           "\"Affine\"\nfeatures = 3\n[[nodes]]\nname = \"n\"\n" +
           neuron + "\n[[nodes]]\nname = \"out\"\nkind = \"Output\"\n";
  };
  const Graph sj = parse_graph_text(net("kind = \"LIF\"\ntau = 3.0\nv_reset = -0.5"), "x");
  EXPECT_FALSE(has_general_dynamics(sj.node("n")));
  const Graph g = parse_graph_text(net("kind = \"LIF\"\ntau = 3.0\nv_reset = -0.5\nv_threshold = [0.5, 1, 2]"), "x");
  ASSERT_TRUE(has_general_dynamics(g.node("n")));
  const auto& a = g.node("n").arrays;
  EXPECT_EQ(a.at("tau").item<double>(), 3.0);
  EXPECT_EQ(a.at("r").item<double>(), 1.0);          // decay_input's r
  EXPECT_EQ(a.at("v_leak").item<double>(), -0.5);    // leaks toward the reset, as SpikingJelly's
  EXPECT_EQ(a.at("v_threshold").size(0), 3);
  EXPECT_EQ(problem(g), "");
  // decay_input = false is r = tau.
  const Graph leak = parse_graph_text(net("kind = \"LIF\"\ntau = 4.0\ndecay_input = false\nv_leak = 0.25"), "x");
  EXPECT_EQ(leak.node("n").arrays.at("r").item<double>(), 4.0);
  // The same network in the JSON form, and back.
  EXPECT_EQ(graph_to_json(parse_graph_text(graph_to_json(g), "json")), graph_to_json(g));
  EXPECT_NE(parse_problem(net("kind = \"LIF\"\nr = 2.0\ndecay_input = true")).find("give 'r' or 'decay_input', not both"),
            std::string::npos);
  EXPECT_NE(parse_problem(net("kind = \"PLIF\"\nv_threshold = [1, 2, 3]")).find("a PLIF node takes one value per key"),
            std::string::npos);
  EXPECT_NE(parse_problem(net("kind = \"LI\"\nv_threshold = 1.0")).find("a LI node has no key 'v_threshold'"),
            std::string::npos);
  EXPECT_NE(parse_problem(net("kind = \"CubaLIF\"\nw_in = \"big\"")).find("'w_in' must be a number or a flat list"),
            std::string::npos);
  const Graph wrong = parse_graph_text(net("kind = \"CubaLIF\"\ntau_mem = [1, 2]"), "x");
  EXPECT_NE(problem(wrong).find("node 'n': tau_mem has shape [2] but the node has 3 neurons of shape [3]"), std::string::npos)
      << problem(wrong);
  const Graph zero = parse_graph_text(net("kind = \"CubaLI\"\ntau_syn = [1, 0, 2]"), "x");
  EXPECT_NE(problem(zero).find("node 'n': tau_syn must be > 0 steps"), std::string::npos) << problem(zero);
  const Graph refr = parse_graph_text(net("kind = \"Threshold\"\nthreshold = 0.5"), "x");
  EXPECT_EQ(problem(refr), "");
}

TEST(GraphText, BatchNormAndDropoutKeysAndTheirProblems) {
  const auto net = [](const std::string& extra) {
    return "[[nodes]]\nname = \"in\"\nkind = \"Input\"\nshape = [2, 4, 4]\n[[nodes]]\nname = \"conv\"\nkind = "
           "\"Conv2d\"\nfeatures = 3\nkernel_size = 3\n[[nodes]]\nname = \"bn\"\nkind = \"BatchNorm\"\n" +
           extra + "\n[[nodes]]\nname = \"d\"\nkind = \"Dropout\"\np = 0.25\n[[nodes]]\nname = \"n\"\nkind = "
           "\"LIF\"\n[[nodes]]\nname = \"out\"\nkind = \"Output\"\n";
  };
  const Graph g = parse_graph_text(net("eps = 1e-3\nmomentum = 0.05"), "x");
  EXPECT_EQ(g.node("bn").eps, 1e-3);
  EXPECT_EQ(g.node("bn").momentum, 0.05);
  EXPECT_EQ(g.node("d").p, 0.25);
  EXPECT_EQ(problem(g), "");
  EXPECT_EQ(graph_to_json(parse_graph_text(graph_to_json(g), "json")), graph_to_json(g));
  EXPECT_NE(problem(parse_graph_text(net("momentum = 2"), "x")).find("node 'bn': momentum must be in [0, 1], got 2"),
            std::string::npos);
  Graph drop = g;
  drop.node("d").p = 1.0;
  EXPECT_NE(problem(drop).find("node 'd': a Dropout's p must be in [0, 1), got 1"), std::string::npos) << problem(drop);
  Graph stats = g;
  stats.node("bn").arrays["running_var"] = torch::tensor({1.0, -1.0, 1.0}, torch::kDouble);
  EXPECT_NE(problem(stats).find("node 'bn': running_var holds a negative value"), std::string::npos) << problem(stats);
  stats.node("bn").arrays["running_var"] = torch::ones({2}, torch::kDouble);
  EXPECT_NE(problem(stats).find("node 'bn': running_var has shape [2] but [3] is needed"), std::string::npos)
      << problem(stats);
  EXPECT_NE(parse_problem(net("p = 0.5")).find("a BatchNorm node has no key 'p'"), std::string::npos);
}

TEST(GraphValidate, DelayedRecurrenceAndSkipsAreValid) {
  // input -> fc0 -> lif0 -> fc1 -> lif1 -> output, lif0 -> delay -> rec -> lif0,
  // and a skip input -> skip -> lif1.
  Graph g = chain(4, 3, 2);
  Node d;
  d.name = "delay";
  d.kind = NodeKind::kDelay;
  d.shape = {3};
  Node rec;
  rec.name = "rec";
  rec.kind = NodeKind::kLinear;
  rec.weight = torch::zeros({3, 3});
  Node skip;
  skip.name = "skip";
  skip.kind = NodeKind::kAffine;
  skip.features = 2;
  g.nodes.insert(g.nodes.end(), {d, rec, skip});
  g.edges.insert(g.edges.end(), {{"lif0", "delay"}, {"delay", "rec"}, {"rec", "lif0"}, {"input", "skip"}, {"skip", "lif1"}});
  const GraphShapes s = g.validate();
  EXPECT_EQ(s.output.at("rec"), std::vector<int64_t>{3});
  // The order puts every edge forward but the one into the Delay on the
  // cycle (the Delay gives its past input, so it goes first).
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < s.order.size(); ++i) at[s.order[i]] = i;
  for (const auto& e : g.edges) {
    if (e.target != "delay") EXPECT_LT(at[e.source], at[e.target]) << e.source << " -> " << e.target;
  }
  // Not simulated as a chain yet, and the message says which node leaves it.
  try {
    chain_model(g);
    FAIL() << "a graph with recurrence was taken for a chain";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'input' (Input) feeds 2 nodes"), std::string::npos) << e.what();
  }
}

TEST(GraphValidate, SizesBeyond31BitsAreRefusedNamingTheNode) {
  // A padding of 2^63 - 1 wrapped to a smaller output and trained another
  // network; sizes whose product overflows named no node.
  const auto conv = [](const std::string& input_shape, std::string extra) {
    if (extra.rfind("features", 0) != 0) extra += "\nfeatures = 4";
    return problem(parse_graph_text("[[nodes]]\nname = \"input\"\nkind = \"Input\"\nshape = " + input_shape +
                         "\n[[nodes]]\nname = \"conv\"\nkind = \"Conv2d\"\nkernel_size = 3\n" + extra +
                         "\n[[nodes]]\nname = \"lif\"\nkind = \"LIF\"\n[[nodes]]\nname = \"flat\"\nkind = \"Flatten\"\n"
                         "[[nodes]]\nname = \"fc\"\nkind = \"Affine\"\nfeatures = 10\n[[nodes]]\nname = \"out\"\n"
                         "kind = \"LIF\"\n[[nodes]]\nname = \"output\"\nkind = \"Output\"\n", "x"));
  };
  EXPECT_EQ(conv("[1, 28, 28]", ""), "");
  EXPECT_NE(conv("[1, 28, 28]", "padding = 9223372036854775807")
                .find("node 'conv' (Conv2d): padding [9223372036854775807, 9223372036854775807] is out of range (at most "
                      "2147483647)"),
            std::string::npos)
      << conv("[1, 28, 28]", "padding = 9223372036854775807");
  EXPECT_NE(conv("[1, 28, 28]", "dilation = 4611686018427387904").find("node 'conv' (Conv2d): dilation"), std::string::npos);
  EXPECT_NE(conv("[1, 28, 28]", "features = 8589934592").find("node 'conv' (Conv2d): features 8589934592 is out of range"),
            std::string::npos);
  EXPECT_NE(conv("[1, 4611686018427387904, 28]", "").find("node 'input' (Input): shape"), std::string::npos);
  // Each size in range, their product not.
  EXPECT_NE(conv("[1, 65536, 65536]", "").find("node 'input' (Input): its output [1, 65536, 65536] holds more than "
                                               "2147483647 values per sample"),
            std::string::npos)
      << conv("[1, 65536, 65536]", "");
  EXPECT_NE(conv("[1, 28, 28]", "features = 100000000").find("node 'conv' (Conv2d): its output [100000000, 26, 26]"),
            std::string::npos);
}

TEST(GraphValidate, LatencyIsTheShortestDelayPathToTheOutput) {
  EXPECT_EQ(chain(4, 3, 2).validate().latency, 0);
  // input -> fc0 -> lif0 -> d1 -> fc1 -> d2 -> lif1 -> output: 2 + 3 steps.
  const auto delayed = [](const std::string& skip) {
    return parse_graph_text(
        "{\"nodes\": [{\"name\": \"input\", \"kind\": \"Input\", \"shape\": [4]}, {\"name\": \"fc0\", \"kind\": "
        "\"Affine\", \"features\": 3}, {\"name\": \"lif0\", \"kind\": \"LIF\"}, {\"name\": \"d1\", \"kind\": \"Delay\", "
        "\"delay\": 2}, {\"name\": \"fc1\", \"kind\": \"Affine\", \"features\": 2}, {\"name\": \"d2\", \"kind\": "
        "\"Delay\", \"delay\": 3}, {\"name\": \"lif1\", \"kind\": \"LIF\"" + skip +
            "}, {\"name\": \"output\", \"kind\": \"Output\"}" +
            (skip.empty() ? "" : ", {\"name\": \"skip\", \"kind\": \"Affine\", \"features\": 2, \"from\": [\"lif0\"]}") + "]}",
        "delayed");
  };
  const GraphShapes s = delayed("").validate();
  EXPECT_EQ(s.latency, 5);
  EXPECT_EQ(s.latency_path, (std::vector<std::string>{"d1", "d2"}));
  // A path around d1 and d2 (lif0 -> skip -> lif1) reaches the Output at once.
  const GraphShapes skipped = delayed(", \"from\": [\"d2\", \"skip\"]").validate();
  EXPECT_EQ(skipped.latency, 0);
  EXPECT_TRUE(skipped.latency_path.empty());
}

// Every node has an incoming and an outgoing edge, yet the Output hangs on a
// cycle of its own (lifb -> d -> rec -> lifb) that nothing from the Input
// enters (the input goes round lif0's cycle): refused by validate(), naming the Output and what feeds it. It used
// to pass validation and fail only when a pipeline was made.
TEST(GraphValidate, AnOutputOnACycleTheInputNeverEntersIsRefused) {
  const std::string text = R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [4]
[[nodes]]
name = "fc0"
kind = "Affine"
features = 3
[[nodes]]
name = "lif0"
kind = "LIF"
from = ["fc0", "rec0"]
[[nodes]]
name = "d0"
kind = "Delay"
from = "lif0"
delay = 1
shape = [3]
[[nodes]]
name = "rec0"
kind = "Linear"
from = "d0"
features = 3
[[nodes]]
name = "lifb"
kind = "LIF"
from = "rec"
[[nodes]]
name = "d"
kind = "Delay"
from = "lifb"
delay = 1
shape = [3]
[[nodes]]
name = "rec"
kind = "Linear"
from = "d"
features = 3
[[nodes]]
name = "output"
kind = "Output"
from = "lifb"
)";
  const Graph g = parse_graph_text(text, "island");
  EXPECT_EQ(problem(g),
            "graph: the Output 'output' is not reached from the Input: its input comes from 'lifb', which no path "
            "from the Input enters (a cycle of its own), so it never sees the input");
  // The same cycle feeding lif0, with the Output after lif0, is a valid
  // graph: the Output sees the input, the cycle adds its own spikes.
  std::string fed = text;
  fed.replace(fed.rfind("from = \"lifb\""), 13, "from = \"lif0\"");
  EXPECT_EQ(parse_graph_text(fed, "fed").validate().latency, 0);
}

TEST(GraphValidate, ConvAndPoolShapes) {
  const Graph g = parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [1, 28, 28]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 8
kernel_size = 3
padding = 1
[[nodes]]
name = "pool"
kind = "MaxPool2d"
kernel_size = 2
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "output"
kind = "Output"
)",
                                   "conv");
  const GraphShapes s = g.validate();
  EXPECT_EQ(s.output.at("conv"), (std::vector<int64_t>{8, 28, 28}));
  EXPECT_EQ(s.output.at("pool"), (std::vector<int64_t>{8, 14, 14}));
  EXPECT_EQ(s.output.at("flat"), (std::vector<int64_t>{8 * 14 * 14}));
  Graph big = g;
  big.node("conv").kernel_size = {31, 31};
  EXPECT_NE(problem(big).find("kernel [31, 31] (dilation [1, 1]) is larger than the padded input [1, 28, 28]"),
            std::string::npos)
      << problem(big);
  Graph zero = g;
  zero.node("pool").stride = {0, 2};
  EXPECT_NE(problem(zero).find("node 'pool': stride [0, 2] must be >= 1"), std::string::npos) << problem(zero);
  Graph groups = g;
  groups.node("conv").groups = 3;
  EXPECT_NE(problem(groups).find("groups 3 do not divide the 1 input channels"), std::string::npos) << problem(groups);
}

TEST(GraphText, ShippedExampleGraphsReadAndValidate) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_path("examples/graphs"))) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    ASSERT_NO_THROW(read_graph_text(entry.path().string()).validate());
    ++files;
  }
  EXPECT_GE(files, 6);
  // SpikingJelly's Fashion-MNIST tutorial network, layer for layer.
  const GraphShapes s = read_graph_text(test::source_path("examples/graphs/fashion_cnn.toml")).validate();
  EXPECT_EQ(s.output.at("conv1"), (std::vector<int64_t>{128, 28, 28}));
  EXPECT_EQ(s.output.at("pool1"), (std::vector<int64_t>{128, 14, 14}));
  EXPECT_EQ(s.output.at("pool2"), (std::vector<int64_t>{128, 7, 7}));
  EXPECT_EQ(s.output.at("flat"), (std::vector<int64_t>{6272}));
  EXPECT_EQ(s.output.at("fc1"), (std::vector<int64_t>{2048}));
  EXPECT_EQ(s.output.at("output"), (std::vector<int64_t>{10}));
}

TEST(NirFile, EveryKindWrittenAndReadBackUnchanged) {
  torch::manual_seed(7);
  Graph g = parse_graph_text(R"(
[[nodes]]
name = "input"
kind = "Input"
shape = [2, 8, 8]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 4
kernel_size = [3, 3]
stride = 1
padding = [1, 0]
groups = 2
[[nodes]]
name = "pool"
kind = "SumPool2d"
kernel_size = 2
[[nodes]]
name = "avg"
kind = "AvgPool2d"
kernel_size = 1
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "fc"
kind = "Affine"
features = 5
[[nodes]]
name = "if"
kind = "IF"
v_threshold = 0.5
[[nodes]]
name = "lin"
kind = "Linear"
features = 5
[[nodes]]
name = "delay"
kind = "Delay"
delay = 3
[[nodes]]
name = "plif"
kind = "PLIF"
tau = 2.5
decay_input = false
surrogate = "atan:2"
[[nodes]]
name = "lifs"
kind = "LIF"
tau = [2.0, 3.0, 4.5, 7.0, 1.25]
v_threshold = [0.5, 0.75, 1.0, 1.25, 0.1]
r = 0.9
v_leak = 0.125
v_reset = -0.25
[[nodes]]
name = "cuba"
kind = "CubaLIF"
tau_syn = 3.0
tau_mem = [4.0, 5.0, 6.0, 7.0, 8.0]
w_in = 0.5
surrogate = "sigmoid:3"
[[nodes]]
name = "thr"
kind = "Threshold"
threshold = 0.3
[[nodes]]
name = "culi"
kind = "CubaLI"
tau_syn = 1.5
v_leak = -0.5
[[nodes]]
name = "li"
kind = "LI"
tau = 3.0
r = 2.0
[[nodes]]
name = "output"
kind = "Output"
)",
                             "every kind");
  g.node("conv").weight = torch::randn({4, 1, 3, 3});
  g.node("conv").bias = torch::randn({4});
  g.node("fc").weight = torch::randn({5, 4 * 4 * 3});
  g.node("fc").bias = torch::randn({5});
  g.node("lin").weight = torch::randn({5, 5});
  g.node("plif").arrays["w"] = torch::tensor(-0.4f);
  const std::string path = temp_path("every.nir");
  write_nir(path, g, 1e-3);
  ASSERT_TRUE(is_nir_file(path));
  const Graph back = read_nir(path);
  back.validate();
  // The same nodes (NIR stores them by name) with the same fields.
  Graph sorted = g;
  std::stable_sort(sorted.nodes.begin(), sorted.nodes.end(), [](const Node& a, const Node& b) { return a.name < b.name; });
  std::stable_partition(sorted.nodes.begin(), sorted.nodes.end(), [](const Node& n) { return n.kind == NodeKind::kInput; });
  std::stable_partition(sorted.nodes.begin(), sorted.nodes.end(), [](const Node& n) { return n.kind != NodeKind::kOutput; });
  Graph shaped = back;  // read nodes know their shapes; written ones inferred them
  for (auto& n : shaped.nodes) {
    if (n.kind != NodeKind::kInput) n.shape.clear();
  }
  EXPECT_EQ(graph_to_json(shaped), graph_to_json(sorted));
  for (const char* n : {"conv", "fc", "lin"}) {
    EXPECT_TRUE(torch::equal(back.node(n).weight, g.node(n).weight)) << n;
  }
  EXPECT_TRUE(torch::equal(back.node("conv").bias, g.node("conv").bias));
  EXPECT_EQ(back.node("delay").delay, 3);
  EXPECT_EQ(back.node("plif").kind, NodeKind::kPLIF);
  EXPECT_FLOAT_EQ(back.node("plif").arrays.at("w").item<float>(), -0.4f);
  EXPECT_FALSE(back.node("plif").neuron.decay_input);
  EXPECT_EQ(back.node("plif").neuron.surrogate.kind, SurrogateKind::kATan);
  // The general parameters in steps, back as they were given.
  EXPECT_TRUE(has_general_dynamics(back.node("lifs")));
  EXPECT_TRUE(torch::equal(back.node("lifs").arrays.at("tau"), torch::tensor({2.0, 3.0, 4.5, 7.0, 1.25}, torch::kDouble)));
  EXPECT_EQ(back.node("cuba").arrays.at("tau_syn").item<double>(), 3.0);
  EXPECT_EQ(back.node("cuba").neuron.surrogate.alpha, 3.0);
  EXPECT_EQ(back.node("thr").arrays.at("threshold").item<double>(), 0.3);
  EXPECT_FALSE(has_general_dynamics(back.node("if")));  // SpikingJelly's IF, fused
  // Another dt: the IF's r = 1 / dt now scales each input by r dt = 0.5, a
  // general IF; the time constants are as many steps of the new dt.
  const Graph other = read_nir(path, 0.5e-3);
  ASSERT_TRUE(has_general_dynamics(other.node("if")));
  EXPECT_DOUBLE_EQ(other.node("if").arrays.at("r").item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(other.node("li").arrays.at("tau").item<double>(), 6.0);
  EXPECT_DOUBLE_EQ(other.node("li").arrays.at("r").item<double>(), 2.0);
  std::remove(path.c_str());
  // A delay in another dt's steps, or refused when it is not whole.
  Graph d = parse_graph_text("{\"nodes\": [{\"name\": \"i\", \"kind\": \"Input\", \"shape\": [5]}, {\"name\": \"d\", "
                             "\"kind\": \"Delay\", \"delay\": 3}, {\"name\": \"o\", \"kind\": \"Output\"}]}",
                             "delay");
  write_nir(path, d, 1e-3);
  EXPECT_EQ(read_nir(path, 0.5e-3).node("d").delay, 6);
  EXPECT_EQ(read_nir(path).node("d").delay, 3);  // the file's own dt
  EXPECT_THROW(read_nir(path, 2e-3), Error);
  std::remove(path.c_str());
}

TEST(NirFile, ExportRefusesWhatNirCannotSay) {
  Graph g = chain(4, 3, 2);
  g.node("fc0").weight = torch::zeros({3, 4});
  g.node("fc1").weight = torch::zeros({2, 3});
  g.node("lif0").neuron.v_reset = std::nullopt;
  const std::string path = temp_path("soft.nir");
  try {
    write_nir(path, g);
    FAIL() << "a soft reset was exported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'lif0' has a soft reset"), std::string::npos) << e.what();
  }
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "a refused export left a file";
  g.node("lif0").neuron.v_reset = 0.0;
  g.nodes[3].weight = torch::Tensor();  // fc1 without weights
  EXPECT_THROW(write_nir(path, g), Error);
}

TEST(NetworkGraph, ChainNetworkThroughNirGivesTheSameSpikes) {
  NetworkConfig c;
  c.layers = {20, 12, 5};
  c.neuron.tau = 3.0;
  c.neuron.v_threshold = 0.6;
  c.seed = 11;
  c.steps = 6;
  SpikingNetwork a(c);
  const std::string path = temp_path("chain.nir");
  write_nir(path, network_graph(a));
  NetworkConfig base;
  base.steps = c.steps;
  base.seed = c.seed;
  const auto b = network_from_model(path, base);
  EXPECT_EQ(b->config().layers, c.layers);
  EXPECT_EQ(b->config().neuron.tau, 3.0);
  EXPECT_EQ(b->config().neuron.v_threshold, 0.6);
  const auto pa = a.named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor images = torch::rand({7, 20}, torch::TensorOptions().dtype(torch::kFloat));
  const auto spikes = [&](SpikingNetwork& n) {
    ModelPipeline p = n.make_pipeline();
    return p.constant_forward(n.prepare_input(images), c.steps, /*reduce=*/false);
  };
  EXPECT_TRUE(torch::equal(spikes(a), spikes(*b)));
  std::remove(path.c_str());
}

}  // namespace

namespace {

// A chain read from a file keeps its neuron nodes' names (the populations of
// its recordings) through export and reading back; a PLIF's learned rate too.
TEST(NetworkGraph, AChainFromAFileKeepsItsNodeNames) {
  NetworkConfig c;
  c.layers = {12, 6, 3};
  c.neuron.model = NeuronModel::kParametricLIF;
  c.neuron.tau = 3.0;
  SpikingNetwork a(c);
  Graph g = network_graph(a);
  g.node("lif1").arrays["w"] = torch::tensor(0.7f);
  for (auto& n : g.nodes) {
    if (n.name == "lif0") n.name = "hid";
    if (n.name == "lif1") n.name = "read";
  }
  for (auto& e : g.edges) {
    for (auto* end : {&e.source, &e.target}) {
      if (*end == "lif0") *end = "hid";
      if (*end == "lif1") *end = "read";
    }
  }
  const std::string path = temp_path("named.nir");
  write_nir(path, g);
  const auto b = network_from_model(path, NetworkConfig{});
  EXPECT_EQ(b->config().layer_names, (std::vector<std::string>{"hid", "read"}));
  const Graph back = network_graph(*b);
  ASSERT_TRUE(back.has_node("read"));
  EXPECT_FLOAT_EQ(back.node("read").arrays.at("w").item<float>(), 0.7f);
  EXPECT_FALSE(back.has_node("lif0"));
  std::remove(path.c_str());
}

}  // namespace
