#pragma once
// Paths into the source tree (test data, examples, scripts) for the test
// executables, found from the executable's own place at run time.
//
// Why not an absolute path compiled in: it put the clone's path into every
// test source's compile command, so a clone elsewhere (CI's) missed ccache
// for them (cmake/SnnUnity.cmake keeps the batch files relative too).
// SNN_SOURCE_FROM_TESTS
// is the source tree relative to the test executables' folder ("../.."
// for a build folder inside the tree), the same in every clone.

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace snn::test {

/// `rel` (e.g. "tests/data") in the source tree; the tree itself when empty.
inline std::string source_path(const std::string& rel = "") {
  static const std::filesystem::path root = [] {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw std::runtime_error("cannot read /proc/self/exe to find the source tree: " + ec.message());
    std::filesystem::path p = (exe.parent_path() / SNN_SOURCE_FROM_TESTS).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // "/work/main/" -> "/work/main"
    return p;
  }();
  return rel.empty() ? root.string() : (root / rel).string();
}

/// The tests' data folder, tests/data.
inline std::string test_data_dir() { return source_path("tests/data"); }

#ifdef SNN_TEST_PYTHON
/// The project's Python: SNN_TEST_PYTHON is relative to the source tree
/// (its .venv) or, for an interpreter outside it, absolute.
inline std::string test_python() {
  const std::string p = SNN_TEST_PYTHON;
  return !p.empty() && p[0] == '/' ? p : source_path(p);
}
#endif

}  // namespace snn::test
