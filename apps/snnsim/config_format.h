#pragma once
// The config-file format of --config and of sweep files: TOML, or JSON
// translated to the same TOML.

#include <CLI/CLI.hpp>

#include <istream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace snn::app {

// --config reads TOML, or JSON when the file starts with '{': an object of
// subcommand objects ({"train": {"layers": "784-256-10", "T": 8}}), keys as
// in TOML. JSON is translated to the equivalent TOML, so both formats obey
// the same rules (typos rejected, flags override); arrays become the flags'
// comma-separated lists (["cpu", "cpu"] -> "cpu,cpu").
class TomlOrJsonConfig : public CLI::ConfigTOML {
 public:
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    const std::string text((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || text[first] != '{') {
      std::istringstream toml(text);
      return CLI::ConfigTOML::from_config(toml);
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw CLI::ConfigError(std::string("the JSON config does not parse: ") + e.what());
    }
    if (!j.is_object()) throw CLI::ConfigError("the JSON config must be an object of sections");
    std::ostringstream toml, sections;
    for (const auto& [key, value] : j.items()) {
      if (value.is_object()) {
        sections << "[" << key << "]\n";
        for (const auto& [k, v] : value.items()) sections << k << " = " << toml_value(key + "." + k, v) << "\n";
      } else {
        toml << key << " = " << toml_value(key, value) << "\n";
      }
    }
    std::istringstream in(toml.str() + sections.str());
    return CLI::ConfigTOML::from_config(in);
  }

 private:
  static std::string toml_value(const std::string& key, const nlohmann::json& v) {
    if (v.is_string() || v.is_number() || v.is_boolean()) return v.dump();  // JSON's literals are TOML's
    if (v.is_array()) {
      std::string joined;
      for (const auto& e : v) {
        if (!(e.is_string() || e.is_number())) throw CLI::ConfigError("JSON config: " + key + " holds a nested value");
        joined += (joined.empty() ? "" : ",") + (e.is_string() ? e.get<std::string>() : e.dump());
      }
      return nlohmann::json(joined).dump();
    }
    throw CLI::ConfigError("JSON config: " + key + " must be a string, number, boolean or list");
  }
};

}  // namespace snn::app
