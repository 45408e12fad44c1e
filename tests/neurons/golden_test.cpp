// SpikingJelly's own traces (tests/data/lif_golden.json): spikes must match
// exactly and potentials to the last bit, since our charge equations copy its
// operation order.

#include <gtest/gtest.h>

#include "snn/neurons/lif.h"
#include "support/test_util.h"

namespace snn {
namespace {

struct Golden {
  std::string name;
  NeuronParams params;
  nlohmann::json entry;
};

std::vector<Golden> golden_configs() {
  const nlohmann::json doc = test::load_json("lif_golden.json");
  std::vector<Golden> out;
  for (const auto& c : doc["configs"]) {
    Golden g;
    g.name = c["name"];
    g.params.model = c["model"] == "IF" ? NeuronModel::kIF : NeuronModel::kLIF;
    if (!c["tau"].is_null()) g.params.tau = c["tau"];
    if (!c["decay_input"].is_null()) g.params.decay_input = c["decay_input"];
    g.params.v_threshold = c["v_threshold"];
    g.params.v_reset = c["v_reset"].is_null() ? std::nullopt : std::optional<double>(c["v_reset"].get<double>());
    g.params.detach_reset = c["detach_reset"];
    g.entry = c;
    out.push_back(g);
  }
  return out;
}

void expect_matches(const Golden& g, torch::ScalarType dtype, const torch::Tensor& s, const NeuronTrace& trace,
                    const std::string& how) {
  const nlohmann::json doc = test::load_json("lif_golden.json");
  const char* key = dtype == torch::kFloat ? "f32" : "f64";
  const auto& ref = g.entry[key];
  const torch::Tensor s_ref = test::json_matrix(ref["s"], dtype);
  const torch::Tensor h_ref = test::json_matrix(ref["h"], dtype);
  const torch::Tensor v_ref = test::json_matrix(ref["v"], dtype);
  EXPECT_TRUE(torch::equal(s, s_ref)) << g.name << " " << key << " " << how << ": spikes differ\n" << s << s_ref;
  EXPECT_TRUE(torch::equal(trace.h, h_ref)) << g.name << " " << key << " " << how << ": h differs, max |d| = "
                                            << (trace.h - h_ref).abs().max().item<double>();
  EXPECT_TRUE(torch::equal(trace.v, v_ref)) << g.name << " " << key << " " << how << ": v differs, max |d| = "
                                            << (trace.v - v_ref).abs().max().item<double>();
}

TEST(Golden, FusedMultiStepReproducesSpikingJellyTracesExactly) {
  const nlohmann::json doc = test::load_json("lif_golden.json");
  const auto configs = golden_configs();
  ASSERT_GE(configs.size(), 5u);
  for (const auto& g : configs) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      const torch::Tensor x = test::json_matrix(doc[dtype == torch::kFloat ? "x_f32" : "x_f64"], dtype);
      NeuronState state;
      NeuronTrace trace;
      const torch::Tensor s = functional::neuron_multistep(x, state, g.params, {}, &trace);
      expect_matches(g, dtype, s, trace, "fused multi-step");
    }
  }
}

TEST(Golden, SingleStepsReproduceSpikingJellyTracesExactly) {
  const nlohmann::json doc = test::load_json("lif_golden.json");
  for (const auto& g : golden_configs()) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      const torch::Tensor x = test::json_matrix(doc[dtype == torch::kFloat ? "x_f32" : "x_f64"], dtype);
      NeuronState state;
      std::vector<torch::Tensor> s, h, v;
      for (int64_t t = 0; t < x.size(0); ++t) {
        NeuronTrace step_trace;
        s.push_back(functional::neuron_multistep(x.slice(0, t, t + 1), state, g.params, {}, &step_trace)[0]);
        h.push_back(step_trace.h[0]);
        v.push_back(step_trace.v[0]);
      }
      expect_matches(g, dtype, torch::stack(s), NeuronTrace{torch::stack(h), torch::stack(v)}, "single steps");
    }
  }
}

TEST(Golden, TensorOpReferenceReproducesSpikingJellyTracesExactly) {
  const nlohmann::json doc = test::load_json("lif_golden.json");
  for (const auto& g : golden_configs()) {
    for (auto dtype : {torch::kFloat, torch::kDouble}) {
      const torch::Tensor x = test::json_matrix(doc[dtype == torch::kFloat ? "x_f32" : "x_f64"], dtype);
      NeuronState state;
      NeuronTrace trace;
      const torch::Tensor s = functional::neuron_multistep_reference(x, state, g.params, {}, &trace);
      expect_matches(g, dtype, s, trace, "reference");
    }
  }
}

}  // namespace
}  // namespace snn
