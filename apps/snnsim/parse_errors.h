#pragma once
// The one-line message of a command-line error, as every snnsim error reads:
// it names the command, flag or key, the value, the rule and, where one is
// close, the nearest valid name:
//   unknown command 'trian' (did you mean 'train'?; commands: neuron, train, ...)
//   unknown option '--tua' for 'snnsim neuron' (did you mean '--tau'?)
//   --T: expected a whole number >= 1, got '0'
// CLI11 reports what it meets last (a misspelt command as "A subcommand is
// required", a misspelt flag's value before the flag), so the arguments are
// first read again against the app's commands and options; CLI11's own
// messages that remain are rewritten into the same form.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace snn::app {

/// The message (without "snnsim: error: ") for `error`, thrown by
/// app.parse(args) (args without the program name).
std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& error, const std::vector<std::string>& args);

}  // namespace snn::app
