#include "snn/dist/cores.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#ifdef __linux__
#include <sched.h>
#endif

namespace snn::dist {

namespace {
std::string read_first_line(const char* path) {
  std::string line;
  if (std::FILE* f = std::fopen(path, "r")) {
    char buf[128] = {};
    if (std::fgets(buf, sizeof(buf), f)) line = buf;
    std::fclose(f);
  }
  return line;
}
}  // namespace

CoreBinding bind_to_cores(World& world, int64_t threads) {
  CoreBinding b;
  // This machine (hostname and boot: containers on two hosts may share a
  // hostname) and the cores this process may run on, from every rank.
  const std::string machine = host_name() + "/" + read_first_line("/proc/sys/kernel/random/boot_id");
  std::vector<int> cpus;
#ifdef __linux__
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &mask)) cpus.push_back(c);
    }
  }
#endif
  std::string cpu_list;
  for (const int c : cpus) cpu_list += std::to_string(c) + ",";
  // As hashes (63 bits: int64 tensors); a collective on every platform.
  const auto hash = [](const std::string& s) { return static_cast<int64_t>(std::hash<std::string>{}(s) >> 1); };
  const torch::Tensor all = world.all_gather_rows(torch::tensor({{hash(machine), hash(cpu_list)}}, torch::kLong));
  const auto a = all.accessor<int64_t, 2>();
  bool same_cores = true;
  b.local_ranks = 0;
  for (int64_t r = 0; r < all.size(0); ++r) {
    if (a[r][0] != a[world.rank()][0]) continue;
    b.local_rank += r < world.rank() ? 1 : 0;
    ++b.local_ranks;
    same_cores = same_cores && a[r][1] == a[world.rank()][1];
  }
  const int64_t cores = static_cast<int64_t>(cpus.size()), wanted = b.local_ranks * threads;
#ifndef __linux__
  b.reason = "binding to cores is implemented on Linux only";
  return b;
#else
  if (b.local_ranks == 1) {
    b.reason = "the only rank on its machine";
  } else if (!same_cores) {
    b.reason = "the ranks on this machine were started on different cores (bound by their launcher)";
  } else if (threads < 1 || wanted > cores) {
    b.reason = fmt::format("more threads than cores: {} ranks of {} threads, {} cores", b.local_ranks, threads, cores);
  } else if (wanted < cores) {
    b.reason = fmt::format("{} ranks of {} threads leave cores free ({} cores): the system places them",
                           b.local_ranks, threads, cores);
  } else {
    cpu_set_t own;
    CPU_ZERO(&own);
    for (int64_t i = b.local_rank * threads; i < (b.local_rank + 1) * threads; ++i) {
      CPU_SET(cpus[static_cast<size_t>(i)], &own);
      b.cores.push_back(cpus[static_cast<size_t>(i)]);
    }
    // Every thread this process has (the Gloo and OpenMP threads too);
    // threads started later inherit their starter's mask.
    if (::sched_setaffinity(0, sizeof(own), &own) != 0) {
      b.reason = fmt::format("sched_setaffinity: {}", std::strerror(errno));
      b.cores.clear();
      return b;
    }
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
      const pid_t tid = static_cast<pid_t>(std::atol(task.path().filename().c_str()));
      if (tid > 0) ::sched_setaffinity(tid, sizeof(own), &own);  // a thread that just ended: nothing to do
    }
    // Its cores are its own: polling for a collective's end costs nobody
    // (world.h). A 2-rank training epoch spent 0.8 s in its exchanges
    // against 1.2 s sleeping at once (docs/BENCHMARKS.md). Up to about two
    // of that training's steps of waiting.
    world.spin_before_waiting(kBoundSpin);
  }
  return b;
#endif
}

std::string describe(const CoreBinding& b, int64_t threads) {
  if (b.cores.empty()) return "not bound (" + b.reason + ")";
  return fmt::format("each rank on {} of its own ({} ranks on this machine)",
                     threads == 1 ? std::string("a core") : fmt::format("{} cores", threads), b.local_ranks);
}

}  // namespace snn::dist
