#pragma once
// The first difference between two JSON texts, for messages that name it
// ("neuron.tau: 2.0 then, 3.0 now", "steps: 8 on rank 0, 4 on rank 1").
// Shared by the settings check across ranks and the resume check of
// recordings. Include only from targets that link nlohmann_json.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

namespace snn::detail {

/// Where two JSON documents first differ: the dotted key ("neuron.tau";
/// "settings" for the whole document) and each side's value as JSON text,
/// or "not set" where that side lacks the key or holds null.
struct JsonDifference {
  bool found = false;  ///< false: the texts are equal as JSON
  std::string key;
  std::string first;
  std::string second;
};

/// The first difference in nlohmann's diff order. Throws
/// nlohmann::json::parse_error where either text is not JSON.
inline JsonDifference first_json_difference(const std::string& first_text, const std::string& second_text) {
  const nlohmann::json a = nlohmann::json::parse(first_text), b = nlohmann::json::parse(second_text);
  const nlohmann::json patch = nlohmann::json::diff(a, b);
  JsonDifference d;
  if (patch.empty() || !patch[0].contains("path")) return d;
  const std::string where = patch[0]["path"].get<std::string>();
  const nlohmann::json::json_pointer p(where);
  const auto shown = [&](const nlohmann::json& j) {
    return !j.contains(p) || j.at(p).is_null() ? std::string("not set") : j.at(p).dump();
  };
  d.found = true;
  d.key = where.empty() ? "settings" : where.substr(1);
  std::replace(d.key.begin(), d.key.end(), '/', '.');
  d.first = shown(a);
  d.second = shown(b);
  return d;
}

}  // namespace snn::detail
