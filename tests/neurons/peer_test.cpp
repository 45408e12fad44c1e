// SpikingJelly as the oracle: its spikes, potentials (h after charging, v
// after reset) and surrogate gradients on seeded random inputs over the full
// product of the neuron options, each varied independently (written by
// tests/python/spikingjelly_reference.py, run by CTest before this test)
// against snnsim's fused kernels.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <set>

#include "snn/neurons/functional.h"
#include "support/test_util.h"

namespace snn {
namespace {

torch::Tensor tensor_of(const nlohmann::json& values, const std::vector<int64_t>& shape, torch::ScalarType dtype) {
  std::vector<double> v = values.get<std::vector<double>>();
  return torch::from_blob(v.data(), {static_cast<int64_t>(v.size())}, torch::kDouble).clone().reshape(shape).to(dtype);
}

TEST(SpikingJellyPeer, SpikesPotentialsAndGradientsMatch) {
  const char* path = std::getenv("SNN_SPIKINGJELLY_REFERENCE");
  ASSERT_NE(path, nullptr) << "SNN_SPIKINGJELLY_REFERENCE is not set (CTest sets it)";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot open " << path << "; run tests/python/spikingjelly_reference.py";
  const nlohmann::json doc = nlohmann::json::parse(in);
  // The full product: lif and plif 2 decay_input x 2 thresholds x 4 resets x
  // 2 detach_reset x 2 surrogates (64 each), if 32, times 2 dtypes.
  ASSERT_EQ(doc["cases"].size(), 320u) << "the reference must cover every combination of the options";
  std::set<std::string> combinations;
  int checked = 0;
  for (const auto& c : doc["cases"]) {
    const auto dtype = c["dtype"] == "float64" ? torch::kDouble : torch::kFloat;
    const std::vector<int64_t> shape = c["shape"].get<std::vector<int64_t>>();
    NeuronParams p;
    p.model = parse_neuron_model(c["model"]);
    p.tau = c["tau"];
    p.decay_input = c["decay_input"];
    p.v_threshold = c["v_threshold"];
    p.v_reset = c["v_reset"].is_null() ? std::nullopt : std::optional<double>(c["v_reset"].get<double>());
    p.detach_reset = c["detach_reset"];
    p.surrogate = c["surrogate"] == "atan" ? Surrogate::atan(c["alpha"]) : Surrogate::sigmoid(c["alpha"]);
    const std::string name = c["model"].get<std::string>() + " " + c["dtype"].get<std::string>() +
                             " decay_input=" + c["decay_input"].dump() + " v_threshold=" + c["v_threshold"].dump() +
                             " v_reset=" + c["v_reset"].dump() + " detach_reset=" + c["detach_reset"].dump() + " " +
                             c["surrogate"].get<std::string>() + "(" + c["alpha"].dump() + ")";
    combinations.insert(name);

    const torch::Tensor x = tensor_of(c["x"], shape, dtype).requires_grad_();
    const torch::Tensor gs = tensor_of(c["gs"], shape, dtype);
    torch::Tensor w;
    torch::Tensor rate;
    if (p.model == NeuronModel::kParametricLIF) {
      w = torch::tensor(c["w"].get<double>(), torch::TensorOptions().dtype(dtype)).requires_grad_();
      rate = w.sigmoid();
    }
    NeuronState state;
    NeuronTrace trace;
    const torch::Tensor s = functional::neuron_multistep(x, state, p, rate, &trace);
    (s * gs).sum().backward();

    const torch::Tensor s_ref = tensor_of(c["spikes"], shape, dtype);
    const torch::Tensor h_ref = tensor_of(c["h_seq"], shape, dtype);
    const torch::Tensor v_ref = tensor_of(c["v_seq"], shape, dtype);
    const torch::Tensor gx_ref = tensor_of(c["grad_x"], shape, dtype);
    EXPECT_TRUE(torch::equal(s.detach(), s_ref)) << name << ": spikes differ";
    EXPECT_TRUE(torch::equal(trace.h, h_ref)) << name << ": h (after charging) differs, max |d| = "
                                              << (trace.h - h_ref).abs().max().item<double>();
    EXPECT_TRUE(torch::equal(trace.v, v_ref)) << name << ": v differs, max |d| = "
                                              << (trace.v - v_ref).abs().max().item<double>();
    const double rtol = dtype == torch::kDouble ? 1e-10 : 1e-4;
    const double atol = dtype == torch::kDouble ? 1e-12 : 1e-5;
    EXPECT_TRUE(torch::allclose(x.grad(), gx_ref, rtol, atol))
        << name << ": input gradient differs, max |d| = " << (x.grad() - gx_ref).abs().max().item<double>();
    if (w.defined()) {
      const double gw_ref = c["grad_w"];
      EXPECT_NEAR(w.grad().item<double>(), gw_ref, rtol * std::abs(gw_ref) + 10 * atol) << name << ": w gradient";
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(doc["cases"].size()));
  EXPECT_EQ(combinations.size(), doc["cases"].size()) << "a combination of options appears twice";
}

}  // namespace
}  // namespace snn
