#pragma once
// Helpers shared by the test executables.

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "support/source_path.h"

namespace snn::test {

inline nlohmann::json load_json(const std::string& name) {
  const std::string path = test_data_dir() + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open test data " + path);
  return nlohmann::json::parse(in);
}

/// [rows][cols] JSON numbers (null = NaN) to a tensor of the given dtype.
/// Float32 entries are parsed as float, not rounded from double.
inline torch::Tensor json_matrix(const nlohmann::json& m, torch::ScalarType dtype) {
  const int64_t rows = static_cast<int64_t>(m.size());
  const int64_t cols = rows ? static_cast<int64_t>(m[0].size()) : 0;
  torch::Tensor out = torch::empty({rows, cols}, dtype);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const auto& e = m[r][c];
      if (dtype == torch::kFloat) {
        out.index_put_({r, c}, e.is_null() ? NAN : std::stof(e.dump()));
      } else {
        out.index_put_({r, c}, e.is_null() ? NAN : e.get<double>());
      }
    }
  }
  return out;
}

/// What `f` throws (its what()), or "(no exception)".
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

/// The test property that marks a skip as allowed (see test_main.cpp).
inline constexpr const char* kSkipAllowedProperty = "snn_skip_allowed";

/// Skips the current test for `reason`, a case test_main.cpp lets pass (an
/// optional system package missing). Any GTEST_SKIP without it fails the
/// run, except in tests named *_CUDA.
#define SNN_SKIP_ALLOWED(reason)                                                 \
  do {                                                                           \
    ::testing::Test::RecordProperty(::snn::test::kSkipAllowedProperty, reason); \
    GTEST_SKIP() << reason;                                                      \
  } while (0)

#define SNN_REQUIRE_CUDA()                                         \
  do {                                                             \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device present"; \
  } while (0)

}  // namespace snn::test
