#pragma once
/// How much memory this process may use: the machine's physical memory, or
/// the limit of its control group where that is smaller. Batch schedulers
/// (Slurm's --mem, Kubernetes, docker --memory) set the latter; a run that
/// fits the machine but not the job is killed by the kernel without a word,
/// so the memory checks before a run compare against this.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace snn {

/// The memory a run may use, in bytes, and the words for it in a message
/// ("this machine's" or "this job's memory limit (cgroup) of").
struct MemoryLimit {
  double bytes = 0;   ///< 0 where unknown
  std::string whose;  ///< e.g. "this machine's"
};

namespace detail {

/// A cgroup limit file's value in bytes; 0 for "max", a missing file, or the
/// v1 "no limit" value (about 2^63, rounded to pages).
inline double read_cgroup_limit(const std::string& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return 0;
  try {
    const double v = std::stod(word);
    return v > 0 && v < 1e18 ? v : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

/// The smallest limit along `path` (a cgroup's path, "/a/b") and its
/// ancestors under `mount`, each in `file`: a scheduler often limits the
/// job's group and places the process in a child group of its own.
inline double smallest_limit_up(const std::string& mount, std::string path, const std::string& file) {
  double least = 0;
  if (path.empty()) path = "/";
  while (true) {
    const double v = read_cgroup_limit(mount + path + (path.empty() || path.back() == '/' ? "" : "/") + file);
    if (v > 0 && (least == 0 || v < least)) least = v;
    if (path.empty() || path == "/") break;
    const auto slash = path.find_last_of('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
    if (path.empty()) path = "/";
  }
  return least;
}

}  // namespace detail

/// The smallest memory limit of the control group described by
/// `proc_self_cgroup` (the text of /proc/self/cgroup) under `root` (normally
/// "/sys/fs/cgroup"): cgroup v2 ("0::/path", memory.max) and v1
/// ("N:memory:/path", memory/.../memory.limit_in_bytes), the group's and its
/// ancestors' up to the mount's root. 0 where there is none.
inline double cgroup_memory_limit(const std::string& root, const std::string& proc_self_cgroup) {
  double least = 0;
  auto take = [&](double v) {
    if (v > 0 && (least == 0 || v < least)) least = v;
  };
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      take(detail::smallest_limit_up(root, path, "memory.max"));
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      take(detail::smallest_limit_up(root + "/memory", path, "memory.limit_in_bytes"));
    }
  }
  return least;
}

/// This process's memory limit: physical memory, or its control group's
/// limit where smaller.
inline MemoryLimit memory_limit() {
  MemoryLimit m;
  m.bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  m.whose = "this machine's";
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  const double group = cgroup_memory_limit("/sys/fs/cgroup", text.str());
  if (group > 0 && (m.bytes <= 0 || group < m.bytes)) {
    m.bytes = group;
    m.whose = "this job's memory limit (cgroup) of";
  }
  return m;
}

/// snnsim's rule for refusing a request before anything is allocated:
/// where `bytes` would take more than 80% of memory_limit(), the end of the
/// caller's message, "more than 80% of this machine's 23.5 GiB"; "" where it
/// fits or the limit is unknown.
inline std::string beyond_memory(double bytes) {
  const MemoryLimit limit = memory_limit();
  if (!(limit.bytes > 0) || !(bytes > 0.8 * limit.bytes)) return "";
  char text[160];
  std::snprintf(text, sizeof text, "more than 80%% of %s %.1f GiB", limit.whose.c_str(),
                limit.bytes / double(int64_t{1} << 30));
  return text;
}

}  // namespace snn
