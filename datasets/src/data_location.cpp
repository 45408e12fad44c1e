#include "snn/datasets/data_location.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <memory>

namespace snn {

std::string running_executable() {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  return n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
}

// POSIX rather than std::filesystem, as in idx.cpp: libtorch.so exports
// std::filesystem symbols of its own libstdc++ build.
std::string installed_data_dir(const std::string& executable, const std::string& relative,
                               const std::string& fallback) {
  std::string candidate;
  if (!relative.empty() && relative.front() == '/') {
    candidate = relative;
  } else {
    const size_t slash = executable.rfind('/');
    if (slash == std::string::npos) return fallback;
    candidate = executable.substr(0, slash + 1) + relative;
  }
  struct stat st {};
  if (::stat(candidate.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return fallback;
  // realpath: "PREFIX/share/..." rather than "PREFIX/bin/../share/..." in
  // the provenance that runs record.
  const std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(candidate.c_str(), nullptr), &std::free);
  return resolved ? std::string(resolved.get()) : candidate;
}

}  // namespace snn
