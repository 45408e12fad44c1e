// NEST as the oracle of the Iaf layers: iaf_psc_delta and iaf_psc_exp on
// the inputs NEST was driven with (written by tests/python/nest_reference.py,
// run by CTest before this test): the same spike steps, and V_m after every
// step within 1e-9 relative in float64.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>

#include "snn/neurons/iaf.h"
#include "support/test_util.h"

namespace snn {
namespace {

torch::Tensor matrix(const nlohmann::json& rows) { return test::json_matrix(rows, torch::kDouble); }

TEST(NestPeer, IafPscDeltaAndExpGiveNestsSpikesAndPotentials) {
  const char* path = std::getenv("SNN_NEST_REFERENCE");
  ASSERT_NE(path, nullptr) << "SNN_NEST_REFERENCE is not set (CTest sets it)";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path << "; run tests/python/nest_reference.py";
  const nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["cases"].size(), 5u);
  int64_t spikes = 0, compared = 0;
  double worst_all = 0;
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"];
    const auto& p = c["params"];
    IafOptions o(parse_iaf_model(c["model"]));
    o.dt(c["dt"]).C_m(p["C_m"]).tau_m(p["tau_m"]).t_ref(p["t_ref"]).E_L(p["E_L"]).V_th(p["V_th"]).V_reset(p["V_reset"]);
    o.I_e(p["I_e"]);
    if (p.contains("V_min")) o.V_min(p["V_min"]);
    if (p.contains("tau_syn_ex")) o.tau_syn_ex(p["tau_syn_ex"]).tau_syn_in(p["tau_syn_in"]);
    // Inputs [T, N] as [T, 1, N]: one batch of N neurons.
    const torch::Tensor ex = matrix(c["ex"]).unsqueeze(1), inh = matrix(c["in"]).unsqueeze(1),
                        current = matrix(c["current"]).unsqueeze(1);
    const torch::Tensor nest_v = matrix(c["v"]);
    IafState state;
    torch::Tensor v;
    const torch::Tensor s = functional::iaf_multistep(ex, inh, current, state, o, &v).squeeze(1);
    v = v.squeeze(1);
    const int64_t n = s.size(1);
    for (int64_t i = 0; i < n; ++i) {
      std::vector<int64_t> ours;
      for (int64_t t = 0; t < s.size(0); ++t) {
        if (s[t][i].item<double>() != 0) ours.push_back(t);
      }
      EXPECT_EQ(ours, c["spikes"][i].get<std::vector<int64_t>>()) << name << ", neuron " << i;
      spikes += static_cast<int64_t>(ours.size());
    }
    const torch::Tensor rel = (v - nest_v).abs() / nest_v.abs().clamp_min(1e-300);
    const double worst = rel.max().item<double>();
    EXPECT_LE(worst, 1e-9) << name << ": V_m differs from NEST's by up to " << worst << " relative";
    compared += v.numel();
    worst_all = std::max(worst_all, worst);
  }
  EXPECT_GT(spikes, 50);
  std::cout << "NEST " << doc["nest_version"].get<std::string>() << ": " << compared << " potentials (largest relative "
            << "difference " << worst_all << ") and " << spikes << " spikes of " << doc["cases"].size()
            << " cases agree\n";
}

}  // namespace
}  // namespace snn
