// The population model file: units converted to the documented ones, TOML
// and JSON read alike, defaults, and the entry named in every error.

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "snn/core/error.h"
#include "snn/populations/model_file.h"

namespace snn::populations {
namespace {

const char* kModel = R"(
dt = 0.1
duration = "0.25 s"
trials = 2
seed = 5

[[population]]
name = "exc"
model = "iaf_psc_exp"
size = 3
params = { C_m = "0.5 nF", tau_syn_ex = "500 us", I_e = ["0.1 nA", 20, "30 pA"], V_th = "-0.05 V" }

[[projection]]
source = "exc"
target = "exc"
rule = "pairwise_bernoulli"
p = 0.5
autapses = false
weight = { distribution = "normal", mean = "0.02 nA", std = 5 }
delay = { distribution = "uniform", low = "1 ms", high = 2 }

[[poisson]]
target = "exc"
rate = "1.5 kHz"
weight = 80

[record]
v = "exc"
v_neurons = 2
)";

TEST(PopulationModelFile, UnitsBecomeTheDocumentedOnes) {
  const PopulationModel m = parse_population_model(kModel, "test");
  EXPECT_EQ(m.duration_ms, 250.0);
  EXPECT_EQ(m.steps(), 2500);
  EXPECT_EQ(m.trials, 2);
  EXPECT_EQ(m.seed, 5u);
  EXPECT_EQ(m.input_seed, 1u);
  ASSERT_EQ(m.network.populations.size(), 1u);
  const IafOptions& o = m.network.populations[0].neuron;
  EXPECT_EQ(o.model(), IafModel::kPscExp);
  EXPECT_DOUBLE_EQ(o.C_m(), 500.0);
  EXPECT_DOUBLE_EQ(o.tau_syn_ex(), 0.5);
  EXPECT_DOUBLE_EQ(o.V_th(), -50.0);
  EXPECT_EQ(o.tau_m(), 10.0) << "NEST's default";
  ASSERT_TRUE(o.I_e_neurons().defined());
  EXPECT_TRUE(torch::equal(o.I_e_neurons(), torch::tensor({100.0, 20.0, 30.0}, torch::kDouble)));
  const ProjectionSpec& pr = m.network.projections.at(0);
  EXPECT_EQ(pr.connection.rule, ConnectionRule::kPairwiseBernoulli);
  EXPECT_FALSE(pr.connection.autapses);
  EXPECT_TRUE(pr.connection.multapses);
  EXPECT_EQ(pr.synapse.weight.kind, Distribution::Kind::kNormal);
  EXPECT_DOUBLE_EQ(pr.synapse.weight.a, 20.0);
  EXPECT_DOUBLE_EQ(pr.synapse.weight.b, 5.0);
  EXPECT_DOUBLE_EQ(pr.synapse.delay.a, 1.0);
  EXPECT_DOUBLE_EQ(pr.synapse.delay.b, 2.0);
  EXPECT_EQ(m.network.drives.at(0).name, "poisson0");
  EXPECT_DOUBLE_EQ(m.network.drives.at(0).rate_hz, 1500.0);
  EXPECT_EQ(m.record.record_v, std::vector<std::string>{"exc"});
  EXPECT_EQ(m.record.voltmeter_neurons, 2);
  // The same model as JSON (what m.json holds) reads back the same.
  const PopulationModel again = parse_population_model(m.json, "json");
  EXPECT_EQ(again.json, m.json);
  EXPECT_DOUBLE_EQ(again.network.populations[0].neuron.C_m(), 500.0);
  // It builds and runs.
  const PopulationNetwork net(m.network, m.seed);
  PopulationRunOptions run = m.record;
  run.steps = 100;
  EXPECT_EQ(net.simulate(run).trials, 2);
}

TEST(PopulationModelFile, ErrorsNameTheEntry) {
  const auto fails_with = [](const std::string& text, const std::string& expected) {
    std::string what = "(no exception)";
    try {
      parse_population_model(text, "model 'm'");
    } catch (const Error& e) {
      what = e.what();
    }
    EXPECT_NE(what.find(expected), std::string::npos) << "got: " << what;
  };
  const std::string head = "duration = 10\n[[population]]\nname = \"a\"\nmodel = \"iaf_psc_delta\"\nsize = 4\n";
  fails_with(head + "params = { I_e = [1, 2] }\n", "model 'm', population 'a': params: 'I_e' lists 2 currents for 4 neurons");
  fails_with(head + "params = { tau_syn_ex = 2 }\n", "population 'a': params: unknown parameter 'tau_syn_ex' of iaf_psc_delta");
  fails_with(head + "params = { dt = 0.2 }\n", "'dt' is the model's, set at the top of the file");
  fails_with(head + "[[poisson]]\ntarget = \"a\"\nrate = \"5 mV\"\nweight = 1\n",
             "Poisson drive 'poisson0': 'rate': '5 mV' is a potential (mV), but 'rate' is a rate (Hz)");
  fails_with(head + "[[projection]]\nsource = \"a\"\ntarget = \"a\"\nrule = \"fixed_indegree\"\n",
             "projection 0 (a -> a): rule fixed_indegree needs 'indegree'");
  fails_with(head + "[[projection]]\nsource = \"a\"\ntarget = \"a\"\np = 0.1\n",
             "projection 0 (a -> a): 'p' is not a parameter of rule all_to_all");
  fails_with(head + "[[projection]]\nsource = \"a\"\ntarget = \"a\"\nweight = { distribution = \"lognormal\" }\n",
             "'weight': unknown distribution 'lognormal' (expected normal or uniform)");
  fails_with(head + "[record]\nv = \"b\"\n", "model 'm', record: population 'b' is not defined");
  fails_with(head + "[[population]]\nname = \"a\"\nmodel = \"iaf_psc_exp\"\nsize = 1\n", "population 'a' is defined twice");
  fails_with("duration = 10\n", "model 'm': 'population' is missing");
  fails_with("trials = 0\n" + head, "'trials' must be at least 1, got 0");
  fails_with("{\"duration\": 1, ", "model 'm' (JSON)");
}

}  // namespace
}  // namespace snn::populations
