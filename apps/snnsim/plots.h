#pragma once
// Plots of a recording's statistics (snnsim analyze --plots).

#include <cctype>
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
/// into `dir` (created if missing) and returns their paths. Each file is
/// written as plot_lines() writes its file. Throws snn::Error when a file
/// cannot be written.
std::vector<std::string> write_plots(const std::string& dir, const analysis::RecordingStats& stats,
                                     const PlotOptions& options);

/// One line of a line plot.
struct Series {
  std::string name;
  std::vector<double> x, y;
};

/// "png" or "svg" for a path ending in .png or .svg (any case), else "": the
/// formats the plots are written in (PLplot's pngcairo and svg drivers).
/// analyze checks --plot with it before any work, so that p.gif is refused
/// rather than given PNG bytes.
inline std::string plot_format_of(const std::string& path) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "png" || ext == "svg" ? ext : "";
}

/// A line plot (points marked) with a legend, to `path` (.png or .svg by
/// its extension). The file is written to a temporary name and renamed
/// once complete: a failure (a full disk) leaves an existing `path` as it
/// was. Throws snn::Error when the file cannot be written.
void plot_lines(const std::string& path, const std::string& title, const std::string& x_label,
                const std::string& y_label, const std::vector<Series>& series);

}  // namespace snn::app
