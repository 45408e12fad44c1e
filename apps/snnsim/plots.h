#pragma once
// Plots of a recording's statistics (snnsim analyze --plots).

#include <cstdint>
#include <string>
#include <vector>

#include "snn/analysis/analysis.h"

namespace snn::app {

struct PlotOptions {
  std::string format = "png";  ///< png or svg
  int64_t raster_first = 0;    ///< first sample of the raster plot
  int64_t raster_count = 5;    ///< samples in the raster plot
};

/// Writes raster, rates (histograms), psth, accuracy and confusion plots
/// into `dir` (created if missing) and returns their paths. Throws
/// snn::Error when a file cannot be written.
std::vector<std::string> write_plots(const std::string& dir, const analysis::RecordingStats& stats,
                                     const PlotOptions& options);

/// One line of a line plot.
struct Series {
  std::string name;
  std::vector<double> x, y;
};

/// A line plot (points marked) with a legend, to `path` (.png or .svg by
/// its extension). Throws snn::Error when the file cannot be written.
void plot_lines(const std::string& path, const std::string& title, const std::string& x_label,
                const std::string& y_label, const std::vector<Series>& series);

}  // namespace snn::app
