// The plot functions of a snnsim built without PLplot (-DSNN_WITH_PLOTS=OFF,
// as on machines that cannot install it, e.g. the GPU check): every other
// command works; asking for a plot fails with one line that says why.

#include "plots.h"
#include "snn/core/error.h"

namespace snn::app {
namespace {
[[noreturn]] void no_plots() {
  throw Error("this snnsim was built without PLplot (-DSNN_WITH_PLOTS=OFF): plots are unavailable; "
              "rebuild with libplplot-dev installed and SNN_WITH_PLOTS=ON");
}
}  // namespace

std::vector<std::string> write_plots(const std::string&, const analysis::RecordingStats&, const PlotOptions&) {
  no_plots();
}

void plot_lines(const std::string&, const std::string&, const std::string&, const std::string&,
                const std::vector<Series>&) {
  no_plots();
}

}  // namespace snn::app
