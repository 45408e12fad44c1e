// The population model file: units converted to the documented ones, TOML
// and JSON read alike, defaults, and the entry named in every error.

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "snn/core/error.h"
#include "snn/populations/model_file.h"
#include "snn/populations/quantity.h"

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

TEST(Quantity, UnitsAndArithmetic) {
  const auto as = [](const std::string& text, Kind k) { return value_as(evaluate_expression(text), k); };
  // Written in the documented unit, or a power of ten from it: exact.
  EXPECT_EQ(as("20 kHz", Kind::kRate), 20000.0);
  EXPECT_EQ(as("12.5 Hz", Kind::kRate), 12.5);
  EXPECT_EQ(as("0.5 nA", Kind::kCurrent), 500.0);
  EXPECT_EQ(as("1.5 ms", Kind::kTime), 1.5);
  EXPECT_EQ(as("0.25 s", Kind::kTime), 250.0);
  EXPECT_EQ(as("-0.05 V", Kind::kPotential), -50.0);
  EXPECT_EQ(as("250 pF", Kind::kCapacitance), 250.0);
  EXPECT_EQ(as("7", Kind::kTime), 7.0);  // a plain number is in the field's unit
  // pF = pA ms / mV; Hz = 1 / s.
  EXPECT_DOUBLE_EQ(as("500 pA * 2 ms / 4 mV", Kind::kCapacitance), 250.0);
  EXPECT_DOUBLE_EQ(as("1 / (20 ms)", Kind::kRate), 50.0);
  EXPECT_DOUBLE_EQ(as("2 * (1 + 2) * 3 - 4 / 2", Kind::kNumber), 16.0);
  EXPECT_DOUBLE_EQ(as("-(0.1 + 0.4) mV", Kind::kPotential), -0.5);
  EXPECT_DOUBLE_EQ(as("1 s + 500 ms", Kind::kTime), 1500.0);
  EXPECT_DOUBLE_EQ(as("2e-3 s", Kind::kTime), 2.0);
  const NameLookup names = [](const std::string& n, Quantity& q) {
    if (n == "g") q = evaluate_expression("5");
    else if (n == "J") q = evaluate_expression("0.1 mV");
    else return false;
    return true;
  };
  EXPECT_DOUBLE_EQ(value_as(evaluate_expression("-g * J", names), Kind::kPotential), -0.5);
  EXPECT_EQ(kind_name(Kind::kRate), "a rate (Hz)");
  EXPECT_EQ(dimension_name(evaluate_expression("1 mV * 1 ms").dim), "a quantity in ms mV");
  const auto error_of = [&](const std::string& text) {
    try {
      evaluate_expression(text, names);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no exception)");
  };
  EXPECT_EQ(error_of("1 ms + 1 mV"), "'1 ms + 1 mV': adds a potential (mV) to a time (ms) at character 12");
  EXPECT_EQ(error_of("g * K"), "'g * K': 'K' is neither a parameter nor a unit at character 5");
  EXPECT_EQ(error_of("2 mv"), "'2 mv' has an unknown unit 'mv' (units: ms s us mV V uV pA nA uA pF nF Hz kHz)");
  EXPECT_EQ(error_of("(1 + 2"), "'(1 + 2': expected ')' at character 7");
  EXPECT_EQ(error_of("1 / (g - 5)"), "'1 / (g - 5)': division by zero at character 12");
  EXPECT_EQ(error_of(""), "'' is empty");
  EXPECT_EQ(error_of("1 2"), "'1 2': unexpected '2' at character 3");
  try {
    value_as(evaluate_expression("3 ms"), Kind::kRate);
    ADD_FAILURE() << "a time taken as a rate";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "is a time (ms), not a rate (Hz)");
  }
}

const char* kParameterised = R"toml(
duration = "10 ms"
[parameters]
g = 5
eta = 2
J = "0.1 mV"
C_E = 20
nu_th = "V_th / (J * C_E * tau_m)"   # refers to parameters defined before and after it
V_th = "20 mV"
tau_m = "20 ms"
[[population]]
name = "E"
model = "iaf_psc_delta"
size = "4 * C_E"
params = { V_th = "V_th", tau_m = "tau_m" }
[[projection]]
source = "E"
target = "E"
rule = "fixed_indegree"
indegree = "C_E / 2"
weight = "-g * J"
[[poisson]]
target = "E"
rate = "eta * nu_th * C_E"
weight = "J"
)toml";

TEST(PopulationModelFile, ParametersAndTheirOverrides) {
  const PopulationModel m = parse_population_model(kParameterised, "model 'p'");
  EXPECT_EQ(m.network.populations.at(0).size, 80);
  EXPECT_EQ(m.network.projections.at(0).connection.indegree, 10);
  EXPECT_DOUBLE_EQ(m.network.projections.at(0).synapse.weight.a, -0.5);
  EXPECT_DOUBLE_EQ(m.network.drives.at(0).rate_hz, 2 * 500.0 * 20);  // nu_th = 500 Hz per input
  EXPECT_DOUBLE_EQ(m.network.populations.at(0).neuron.V_th(), 20.0);
  // A sweep's point: g, eta and J replaced; what ran is in the provenance.
  const PopulationModel s = parse_population_model(kParameterised, "model 'p'", {{"g", "3"}, {"eta", "0.9"}, {"J", "0.2 mV"}});
  EXPECT_DOUBLE_EQ(s.network.projections.at(0).synapse.weight.a, -0.6);
  EXPECT_DOUBLE_EQ(s.network.drives.at(0).rate_hz, 0.9 * 250.0 * 20);
  EXPECT_DOUBLE_EQ(s.network.drives.at(0).weight, 0.2);
  EXPECT_NE(s.json.find("\"eta\":\"0.9\""), std::string::npos) << s.json;
  EXPECT_DOUBLE_EQ(parse_population_model(s.json, "json").network.drives.at(0).rate_hz, s.network.drives.at(0).rate_hz);

  const auto fails_with = [](const std::string& text, const std::vector<std::pair<std::string, std::string>>& set,
                             const std::string& expected) {
    std::string what = "(no exception)";
    try {
      parse_population_model(text, "model 'p'", set);
    } catch (const Error& e) {
      what = e.what();
    }
    EXPECT_NE(what.find(expected), std::string::npos) << "got: " << what;
  };
  fails_with(kParameterised, {{"gg", "3"}},
             "model 'p', parameters has no 'gg' to set (it defines C_E, J, V_th, eta, g, nu_th, tau_m)");
  fails_with(kParameterised, {{"J", "0.2 pA"}},
             "model 'p', projection 0 (E -> E): 'weight': '-g * J' is a current (pA), but 'weight' is a potential (mV)");
  fails_with(kParameterised, {{"g", "h"}}, "model 'p', parameters, 'g': 'h': 'h' is neither a parameter nor a unit");
  fails_with(kParameterised, {{"C_E", "2.5"}}, "model 'p', projection 0 (E -> E): 'indegree' must be a whole number, but 'C_E / 2' is 1.25");
  fails_with(kParameterised, {{"g", "eta * g"}}, "model 'p', parameters: 'g' is defined through itself (g -> g)");
  fails_with(kParameterised, {{"eta", "g"}, {"g", "eta"}}, "is defined through itself (eta -> g -> eta)");
  fails_with(std::string(kParameterised) + "", {{"eta", "1 +"}}, "model 'p', parameters, 'eta': '1 +': expected a value");
  fails_with("duration = 1\n[parameters]\nms = 3\n", {}, "model 'p', parameters: 'ms' is a unit and cannot name a parameter");
  fails_with("duration = 1\n[parameters]\nunused = \"2 mv\"\n", {}, "model 'p', parameters, 'unused': '2 mv' has an unknown unit");
  fails_with("duration = 1\n[parameters]\nx = [1]\n", {}, "model 'p', parameters, 'x': expected a number or an expression");
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
  // A misspelt name with a unit is named as unknown, not blamed on its unit.
  fails_with(head + "params = { t_rf = \"2 ms\" }\n", "population 'a': params: unknown parameter 't_rf' of iaf_psc_delta");
  fails_with(head + "params = { dt = 0.2 }\n", "'dt' is the model's, set at the top of the file");
  // More voltmeter neurons than the population has: refused, not cut.
  fails_with(head + "[record]\nv = \"a\"\nv_neurons = 5\n", "'v_neurons' = 5 is more than population 'a''s 4 neurons");
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
  // What nlohmann accepts silently (the last of two members) or in its own
  // words (a float64 overflow, which left the command with exit 1).
  const std::string pop = "{\"dt\": 0.1, \"duration\": 10, \"population\": [{\"name\": \"E\", \"model\": \"iaf_psc_delta\", ";
  fails_with(pop + "\"size\": 10, \"size\": 20}]}", "model 'm' (JSON): \"population\"[0] has the member \"size\" twice");
  fails_with(pop + "\"size\": 10, \"params\": {\"tau_m\": 1e400}}]}",
             "model 'm' (JSON): the number 1e400 is beyond float64's range");
}

}  // namespace
}  // namespace snn::populations
