#include "snn/simulator/torch_config.h"

#include <ATen/Version.h>
#include <torch/version.h>

#include <regex>
#include <sstream>

namespace snn {

std::string torch_config_summary(int threads) {
  std::ostringstream out;
  out << "LibTorch " << TORCH_VERSION << ", intra-op threads: " << threads << "\n";
  std::istringstream config(at::show_config());
  std::string line;
  while (std::getline(config, line)) {
    if (line.find("Build settings") == std::string::npos && (line.find("Math Kernel") != std::string::npos || line.find("MKL-DNN") != std::string::npos ||
        line.find("OpenBLAS") != std::string::npos || line.find("LAPACK") != std::string::npos ||
        line.find("CPU capability") != std::string::npos)) {
      out << "  " << line.substr(line.find_first_not_of(" -")) << "\n";
    }
    const auto b = line.find("BLAS_INFO=");
    if (b != std::string::npos) out << "  BLAS_INFO=" << line.substr(b + 10, line.find(',', b) - b - 10) << "\n";
  }
  return out.str();
}

std::string torch_blas_name() {
  const std::string config = at::show_config();
  std::smatch m;
  std::string blas = "unknown";
  if (std::regex_search(config, m, std::regex("BLAS_INFO=(\\w+)"))) blas = m[1];
  if (std::regex_search(config, m, std::regex("Math Kernel Library Version ([\\w.-]+)"))) {
    blas = "MKL " + m[1].str();
  }
  return blas;
}

}  // namespace snn
