#pragma once
/// Where a program finds the data sets installed with it: an installed
/// program (PREFIX/bin/snnsim) uses the copy installed beside it
/// (PREFIX/share/snnsim/mnist), so that it runs after the source tree has
/// moved or gone; the program in the build tree, which has no such copy,
/// uses the source tree's.

#include <string>

namespace snn {

/// The running program's file, symlinks resolved (Linux: /proc/self/exe);
/// empty when it cannot be read.
std::string running_executable();

/// `<executable's folder>/<relative>` with symlinks and ".." resolved (e.g.
/// relative "../share/snnsim/mnist" for PREFIX/bin/snnsim) when that folder
/// exists, else `fallback` unchanged (e.g. the source tree's copy). An empty
/// executable also gives `fallback`; an absolute `relative` is used as it is.
std::string installed_data_dir(const std::string& executable, const std::string& relative,
                               const std::string& fallback);

}  // namespace snn
