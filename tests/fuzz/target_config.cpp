// --config files, TOML or JSON (snn::app::TomlOrJsonConfig over CLI11), read
// into an app whose subcommands have options of each kind snnsim uses:
// strings, integers and numbers with range checks, choices, lists, flags.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "config_format.h"
#include "targets.h"

namespace snn::fuzz {
namespace {

struct Values {
  std::string layers = "784-10", model = "lif", v_reset = "0", dtype = "float32";
  int64_t T = 8, epochs = 1, limit = -1;
  double tau = 2, lr = 1e-3, threshold = 1;
  bool shuffle = false, overwrite = false;
  std::vector<std::string> devices;
  std::vector<double> grid;
};

void parse(const std::string& path, const char* subcommand) {
  Values v;
  CLI::App app{"fuzz"};
  app.require_subcommand(1);
  app.set_config("--config", "", "config file");
  // As snnsim's main() makes it: the reader that knows the app checks every
  // table and key against it (where the reader has that constructor).
  if constexpr (std::is_constructible_v<snn::app::TomlOrJsonConfig, const CLI::App*>) {
    app.config_formatter(std::make_shared<snn::app::TomlOrJsonConfig>(&app));
  } else {
    app.config_formatter(std::make_shared<snn::app::TomlOrJsonConfig>());
  }
  app.allow_config_extras(CLI::config_extras_mode::error);
  CLI::App* neuron = app.add_subcommand("neuron");
  neuron->add_option("--model", v.model)->check(CLI::IsMember({"lif", "if", "plif"}));
  neuron->add_option("--tau", v.tau)->check(CLI::Range(1.0, 1e6));
  neuron->add_option("--v-reset", v.v_reset);
  neuron->add_option("--dtype", v.dtype)->check(CLI::IsMember({"float32", "float64"}));
  for (CLI::App* cmd : {app.add_subcommand("train"), app.add_subcommand("run")}) {
    cmd->add_option("--layers", v.layers);
    cmd->add_option("--T", v.T)->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--epochs", v.epochs)->check(CLI::NonNegativeNumber);
    cmd->add_option("--limit", v.limit);
    cmd->add_option("--lr", v.lr)->check(CLI::PositiveNumber);
    cmd->add_option("--v-threshold", v.threshold);
    cmd->add_option("--devices", v.devices)->delimiter(',');
    cmd->add_option("--grid", v.grid)->delimiter(',');
    cmd->add_flag("--shuffle", v.shuffle);
    cmd->add_flag("--overwrite", v.overwrite);
  }
  std::string a0 = "fuzz", a1 = "--config", a2 = path, a3 = subcommand;
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data()};
  app.parse(4, argv);
}

void check_config(const std::string& path) {
  // Each subcommand: a section is applied only when its subcommand runs.
  for (const char* sub : {"neuron", "train", "run"}) parse(path, sub);
}

}  // namespace

Target config_target() {
  Target t;
  t.name = "config";
  t.file_name = "input.toml";
  t.mutator.max_size = 1 << 13;
  t.mutator.dictionary = {"[train]", "[run]", "[neuron]", "[[train]]", "[train.sub]", "layers", "T", "lr", "devices",
                          "grid", "shuffle", "tau", "model", "v-reset", " = ", "=", "\"", "'", "'''", "\"\"\"",
                          "[", "]", "{", "}", ",", ":", "#", "\n", "true", "false", "1e999", "-1",
                          "9223372036854775808", "nan", "inf", "\\", "\\u0000", "null", ".", "train.layers",
                          "{\"train\": {", "[1, [2]]", "\"\"", "{}", "[]", std::string(1, '\0'), "\xff"};
  t.check = check_config;
  return t;
}

}  // namespace snn::fuzz
