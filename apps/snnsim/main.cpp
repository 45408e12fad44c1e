// snnsim: the command-line front end. Every error becomes one line on stderr
// and a non-zero exit code: 2 for bad input (flags, files, values), 128 +
// the signal for a recording stopped by SIGINT or SIGTERM, 1 for
// anything else.

#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "commands.h"
#include "snn/core/build_info.h"
#include "snn/core/error.h"

namespace {

int fail(int code, const std::string& message) {
  // One line: c10 messages can hold newlines and a backtrace.
  std::string line = message.substr(0, message.find('\n'));
  std::cerr << "snnsim: error: " << line << "\n";
  return code;
}

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"snnsim: a spiking neural network simulator on LibTorch"};
  app.set_version_flag("--version", std::string("snnsim ") + snn::kVersion + " (" + snn::app::kGitCommit +
                                        ", LibTorch " + snn::kTorchVersion +
                                        (SNN_WITH_CUDA ? ", CUDA" : ", CPU only") + ")");
  app.require_subcommand(1);
  // Everything the flags say can come from a TOML or JSON file, one [section] per
  // subcommand (e.g. [train] layers = "784-256-10"); flags given on the
  // command line override it.
  app.set_config("--config", "",
                 "Read options from a TOML file ([neuron], [train] or [run] sections) or the same as JSON "
                 "({\"train\": {...}})");
  app.config_formatter(std::make_shared<TomlOrJsonConfig>());
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error, not ignored
  std::vector<snn::app::Run> runs;
  runs.push_back(snn::app::add_neuron_command(app));
  runs.push_back(snn::app::add_train_command(app));
  runs.push_back(snn::app::add_run_command(app));
  runs.push_back(snn::app::add_recover_command(app));
  runs.push_back(snn::app::add_analyze_command(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(2, std::string(e.what()) + " (see snnsim --help)");
  }
  try {
    for (const auto& run : runs) {
      if (run) run();
    }
  } catch (const snn::Interrupted& e) {
    // As a shell reports a process stopped by the signal: 128 + its number.
    return fail(128 + (snn::app::stop_signal() ? snn::app::stop_signal() : 2), e.what());
  } catch (const snn::Error& e) {
    return fail(2, e.what());
  } catch (const c10::Error& e) {
    return fail(2, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
  return 0;
}
