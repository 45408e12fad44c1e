// `snnsim inspect FILE`: what a checkpoint, recording or sweep manifest
// holds, its status and provenance (snn::describe_file does the reading).

#include <iostream>
#include <memory>

#include "commands.h"
#include "snn/simulator/inspect.h"

namespace snn::app {

Run add_inspect_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "inspect",
      "What a checkpoint, a recording (finished, or a running or killed run's FILE.partial) or a sweep manifest "
      "holds: its contents, status and provenance, in a few lines");
  cmd->add_option("FILE", *path, "A checkpoint (.h5), a recording (.h5 or .h5.partial), or a sweep's manifest.json "
                                 "or output folder")
      ->required();
  cmd->add_flag("--json", *json, "Print one JSON object instead of text");
  return [cmd, path, json] {
    if (!cmd->parsed()) return;
    const FileDescription d = describe_file(*path);
    if (*json) {
      std::cout << d.json << "\n";
    } else {
      for (const auto& line : d.lines) std::cout << line << "\n";
    }
  };
}

}  // namespace snn::app
