#pragma once
// The config-file format of --config and of sweep files: TOML, or JSON
// translated to the same TOML.

#include <CLI/CLI.hpp>

#include <istream>
#include <iterator>
#include <nlohmann/json.hpp>  // includers (sweep_command.cpp) rely on it and its std headers
#include <sstream>
#include <string>
#include <vector>

namespace snn::app {

// --config reads TOML, or JSON when the file starts with '{': an object of
// subcommand objects ({"train": {"layers": "784-256-10", "T": 8}}), keys as
// in TOML. JSON is translated to the equivalent TOML, so both formats obey
// the same rules (typos rejected, flags override); arrays become the flags'
// comma-separated lists (["cpu", "cpu"] -> "cpu,cpu"), and so do TOML
// lists in --config.
//
// CLI11's reader takes the last of a repeated table or key without a word;
// here a table ([train] twice), a key or a JSON member given twice is an
// error naming it and its lines. Errors are CLI::ConfigError.
class TomlOrJsonConfig : public CLI::ConfigTOML {
 public:
  /// A reader for files read by hand (sweep files): the caller names the
  /// file in its messages and checks the keys.
  TomlOrJsonConfig() = default;
  /// The reader of `app`'s --config: its messages name the file (from the
  /// --config option) and its format, and every table and key must be one of
  /// `app`'s commands and their options, e.g. "config 'x.toml' (TOML),
  /// line 2: [train] has no key 'layer' (did you mean 'layers'?)".
  explicit TomlOrJsonConfig(const CLI::App* app) : app_(app) {}

  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

 private:
  const CLI::App* app_ = nullptr;
};

}  // namespace snn::app
