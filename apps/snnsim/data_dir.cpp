// default_data_dir(), alone in its file: it is the only code compiled with
// the source tree's absolute path (SNN_DEFAULT_DATA_DIR), so that the
// LibTorch-heavy batches of the app compile identically in every clone and
// hit ccache (see cmake/SnnUnity.cmake).
// Declared in commands.h, not included here: its CLI11 and json headers
// would make this file slow to compile.
#include <snn/datasets/data_location.h>

#include <string>

namespace snn::app {

// The embedded MNIST subset: the source tree's copy while it exists (a
// build tree), else the installed copy relative to the executable.
std::string default_data_dir() {
  return snn::installed_data_dir(snn::running_executable(), SNN_INSTALLED_DATA_DIR, SNN_DEFAULT_DATA_DIR);
}

}  // namespace snn::app
