#pragma once
// The flags of a run over several processes (train and run), and this
// process's membership of it, which main() needs to tell the other ranks
// when this one fails.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "snn/dist/world.h"

namespace snn::app {

struct DistFlags {
  int64_t rank = 0;
  int64_t world_size = 0;  // 0: not given (torchrun's WORLD_SIZE, else one process)
  std::string master;      // HOST:PORT
  double timeout_s = 300;
  std::string parallel = "data";  // data: each rank its samples; pipeline: each rank a stage
  std::string cpu_bind = "cores";  // cores: the ranks sharing a machine each on cores of their own; none
};

/// Adds --parallel, --rank, --world-size, --master, --dist-timeout and
/// --cpu-bind;
/// `pipeline`: the command can run as a pipeline over ranks (run), else
/// only data parallel (train), and --parallel's help says so.
void add_dist_flags(CLI::App* cmd, DistFlags& flags, bool pipeline = false);

/// The run this process belongs to: the flags (--world-size given), else
/// torchrun's environment (WORLD_SIZE), else none (nullopt: one process, as
/// also for a world size of 1). Throws snn::Error naming a bad value.
std::optional<dist::WorldOptions> world_options(const DistFlags& flags, const std::vector<std::string>& given);

/// Joins the run (see snn::dist::World); a peer's failure ends this process
/// with "snnsim: error: rank R failed: ..." and that rank's exit code.
dist::World& join_world(const dist::WorldOptions& options);

/// --cpu-bind: binds this rank's threads (`threads` of them) to cores of
/// its own where the ranks sharing its machine fill its cores exactly
/// (snn::dist::bind_to_cores; a collective), and returns the "cores: ..."
/// line that says what was done.
std::string bind_cores(const DistFlags& flags, dist::World& world, int64_t threads);

/// Leaves the run (main() does, before static destruction): closes the
/// connections without waiting for anyone.
void leave_world();

/// The run this process joined, or nullptr.
dist::World* current_world();

/// main()'s last word on an error: prefixes "rank R: " in a run over
/// several processes and tells the other ranks (they end with it). Returns
/// the line to print, or nullopt when a peer's failure is already ending
/// this process (its line is printed by the watch thread).
std::optional<std::string> error_line(const std::string& line, int code);

}  // namespace snn::app
