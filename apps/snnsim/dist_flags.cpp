#include "dist_flags.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "snn/core/error.h"
#include "snn/dist/cores.h"
#include "validators.h"

namespace snn::app {

namespace {
std::unique_ptr<dist::World> g_world;
}

void add_dist_flags(CLI::App* cmd, DistFlags& f, bool pipeline) {
  // Offered to train as well, so that `train --parallel pipeline` is refused
  // with a line saying why rather than as an unknown option.
  cmd->add_option("--parallel", f.parallel,
                  pipeline ? "How the ranks share the run: data (each simulates its share of the samples) or "
                             "pipeline (each holds a stage of the network, blocks of K steps pass from rank to rank)"
                           : "How the ranks share the training: data (each computes its share of every batch's "
                             "gradients; the only way so far)")
      ->capture_default_str()
      ->check(CLI::IsMember({"data", "pipeline"}));
  cmd->add_option("--world-size", f.world_size,
                  "Processes (ranks) in a run over several processes (default: torchrun's WORLD_SIZE, else 1)")
      ->check(whole_number(1));
  cmd->add_option("--rank", f.rank, "This process's rank, 0 .. world size - 1 (with --world-size)")
      ->check(whole_number(0));
  cmd->add_option("--master", f.master,
                  "HOST:PORT of rank 0's rendezvous store (with --world-size; default 127.0.0.1:29500, or "
                  "torchrun's MASTER_ADDR:MASTER_PORT)");
  cmd->add_option("--dist-timeout", f.timeout_s,
                  "Seconds to wait for the other ranks (arrival, each exchange, the end) before giving up")
      ->capture_default_str()
      ->check(number_above(0));
  cmd->add_option("--cpu-bind", f.cpu_bind,
                  "cores: the ranks that share a machine each run on cores of their own where their threads fill "
                  "its cores exactly (faster: no thread moves between cores); none: leave placement to the system "
                  "(or to a launcher that binds, such as srun --cpu-bind)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cores", "none"}));
}

std::optional<dist::WorldOptions> world_options(const DistFlags& f, const std::vector<std::string>& given) {
  const auto has = [&](const char* flag) { return std::find(given.begin(), given.end(), flag) != given.end(); };
  std::optional<dist::WorldOptions> o;
  bool rank_missing = false;
  if (has("--world-size")) {
    const char* env = std::getenv("WORLD_SIZE");
    const char* rank = std::getenv("RANK");
    if (env != nullptr && rank != nullptr) {
      // Under a launcher (torchrun sets both) its variables say, and its
      // agent may host the store on its own port; flags that disagree would
      // start another run, each process rank 0 of its own ("port in use").
      o = dist::options_from_environment();
      dist::WorldOptions flags = *o;
      flags.world_size = f.world_size;
      if (has("--rank")) flags.rank = f.rank;
      if (has("--master")) dist::parse_master(f.master, flags);
      if (flags.world_size != o->world_size || flags.rank != o->rank || flags.master_addr != o->master_addr ||
          flags.master_port != o->master_port) {
        throw Error(fmt::format("--world-size, --rank or --master disagree with the launcher's WORLD_SIZE={}, "
                                "RANK={}, MASTER_ADDR:MASTER_PORT={}:{} (as torchrun sets them): leave them out",
                                env, rank, o->master_addr, o->master_port));
      }
    } else {
      rank_missing = f.world_size > 1 && !has("--rank");
      o = dist::WorldOptions{};
      o->world_size = f.world_size;
      o->rank = f.rank;
      if (has("--master")) dist::parse_master(f.master, *o);  // (an empty one too: it names no store)
    }
  } else {
    for (const char* flag : {"--rank", "--master"}) {
      if (has(flag)) throw Error(std::string(flag) + " needs --world-size (the run's number of processes)");
    }
    o = dist::options_from_environment();
  }
  if (!o) return std::nullopt;
  o->timeout_s = f.timeout_s;
  o->validate();
  if (rank_missing) {
    throw Error(fmt::format("--world-size {} needs --rank (this process's rank, 0 .. {}): without it every process "
                            "would be rank 0",
                            o->world_size, o->world_size - 1));
  }
  if (o->world_size == 1) return std::nullopt;
  return o;
}

dist::World& join_world(const dist::WorldOptions& options) {
  g_world = std::make_unique<dist::World>(options, [](const std::string& message, int code) {
    std::cerr << "snnsim: error: " << message << std::endl;
    std::_Exit(code);
  });
  return *g_world;
}

std::string bind_cores(const DistFlags& f, dist::World& world, int64_t threads) {
  if (f.cpu_bind == "none") return "cores: not bound (--cpu-bind none)";
  return "cores: " + dist::describe(dist::bind_to_cores(world, threads), threads);
}

dist::World* current_world() { return g_world.get(); }

void leave_world() { g_world.reset(); }

std::optional<std::string> error_line(const std::string& line, int code) {
  if (!g_world) return line;
  const std::string mine = line.rfind("rank ", 0) == 0 ? line : "rank " + std::to_string(g_world->rank()) + ": " + line;
  if (!g_world->report_failure(mine, code)) {
    // A peer's failure came first: the watch thread prints it and ends the process.
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return mine;
}

}  // namespace snn::app
