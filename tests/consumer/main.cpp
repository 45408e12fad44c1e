// Uses the installed package through the umbrella header: encodes, runs a
// LIF layer, and checks a known result.
#include <snn/snn.h>

#include <iostream>

int main() {
  snn::PoissonEncoder encoder(snn::PoissonEncoderOptions().seed(1));
  snn::LIF lif(snn::LIFOptions().step_mode(snn::StepMode::kMulti));
  const torch::Tensor ones = torch::ones({2, 10});
  const torch::Tensor spikes = encoder->encode(ones, torch::arange(2), 0, 4);  // p = 1: always fires
  const torch::Tensor out = lif->forward(spikes * 2.0);                          // x = 2: fires every step
  const double count = out.sum().item<double>();
  std::cout << "snn " << snn::kVersion << ": " << count << " spikes\n";
  return count == 80.0 ? 0 : 1;
}
