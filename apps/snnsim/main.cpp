// snnsim: the command-line front end. Every error becomes one line on stderr
// and a non-zero exit code: 2 for bad input (flags, files, values), 128 +
// the signal for a recording stopped by SIGINT or SIGTERM, 1 for
// anything else.

#include <c10/util/Exception.h>
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "config_format.h"
#include "dist_flags.h"
#include "parse_errors.h"
#include "snn/core/build_info.h"
#include "snn/core/error.h"

namespace {

int fail(int code, const std::string& message) {
  // One line: c10 messages can hold newlines and a backtrace.
  const std::string line = message.substr(0, message.find('\n'));
  // In a run over several processes the other ranks hear of it too.
  if (const auto said = snn::app::error_line(line, code)) std::cerr << "snnsim: error: " << *said << "\n";
  return code;
}

// LibTorch's allocator failing says so in its own words, with the call site
// ("[enforce fail at alloc_cpu.cpp:127] ... DefaultCPUAllocator: can't
// allocate memory: you tried to allocate N bytes. Error code 12 ..."): the
// line says what ran out and what to change instead.
std::string out_of_memory(const std::string& what) {
  const std::string key = "you tried to allocate ";
  const auto at = what.find(key);
  std::string size;
  if (at != std::string::npos) {
    const double bytes = std::strtod(what.c_str() + at + key.size(), nullptr);
    char text[64];
    std::snprintf(text, sizeof text, " %.3g GiB", bytes / double(int64_t{1} << 30));
    size = text;
  }
  return "not enough memory: an allocation of" + (size.empty() ? std::string(" memory") : size) +
         " failed: what the command was asked to build or hold (a network's layers, channels or delays, a batch, T, "
         "a population model) is too large for this machine";
}

}  // namespace

int main(int argc, char** argv) {
  // A run over several processes is left before static destruction begins.
  struct LeaveWorld {
    ~LeaveWorld() { snn::app::leave_world(); }
  } leave_world;
  // Keep freed memory for reuse instead of returning it to the kernel: a
  // simulation allocates the same [K, B, N] blocks over and over, and glibc
  // would otherwise map and unmap every block above 128 KiB, paying a page
  // fault per 4 KiB on each use (15-30% of a run's time in `snnsim bench`).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"snnsim: a spiking neural network simulator on LibTorch"};
  app.set_version_flag("--version", std::string("snnsim ") + snn::kVersion + " (" + snn::app::kGitCommit +
                                        ", LibTorch " + snn::kTorchVersion +
                                        (SNN_WITH_CUDA ? ", CUDA" : ", CPU only") + ")");
  app.require_subcommand(1);
  // Everything the flags say can come from a TOML or JSON file, one [section] per
  // subcommand (e.g. [train] layers = "784-256-10"); flags given on the
  // command line override it.
  app.set_config("--config", "",
                 "Read options from a TOML file, one [section] per command ([train], [run], [neuron], "
                 "[analyze], ...), or the same as JSON ({\"train\": {...}})");
  // The reader names the file and its format in its messages and checks
  // every table and key against the commands and their options.
  app.config_formatter(std::make_shared<snn::app::TomlOrJsonConfig>(&app));
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error, not ignored
  // --config and --version after the command too (snnsim train --config c.toml).
  app.fallthrough();
  std::vector<snn::app::Run> runs;
  runs.push_back(snn::app::add_neuron_command(app));
  runs.push_back(snn::app::add_train_command(app));
  runs.push_back(snn::app::add_run_command(app));
  runs.push_back(snn::app::add_recover_command(app));
  runs.push_back(snn::app::add_analyze_command(app));
  runs.push_back(snn::app::add_sweep_command(app));
  runs.push_back(snn::app::add_bench_command(app));
  runs.push_back(snn::app::add_inspect_command(app));
  runs.push_back(snn::app::add_export_command(app));
  runs.push_back(snn::app::add_simulate_command(app));
  try {
    snn::app::set_command_line(argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(2, snn::app::describe_parse_error(app, e, std::vector<std::string>(argv + 1, argv + argc)));
  }
  snn::app::end_on_stop_signals();
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
    const std::string what = e.what_without_backtrace();
    return fail(2, what.find("can't allocate memory") != std::string::npos ? out_of_memory(what) : what);
  } catch (const std::bad_alloc&) {
    return fail(2, out_of_memory(""));
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }
  return 0;
}
