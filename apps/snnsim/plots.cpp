// The plots of `snnsim analyze --plots DIR`, drawn with PLplot (Debian's
// libplplot-dev, cairo driver): a scientific plotting library with axes,
// labels, histograms, images and legends, and PNG or SVG output through
// cairo, callable from C++ without a Python runtime.

#include "plots.h"

#include <fcntl.h>
#include <plplot/plplot.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>

#include "snn/core/atomic_file.h"
#include "snn/core/error.h"

namespace snn::app {
namespace {

// cmap0 entries set by begin(): 0 background, 1 ink, 2.. line colours.
constexpr PLINT kInk = 1;
constexpr PLINT kFirstColour = 2;
constexpr int kColours = 6;

// PLplot reports the errors it can survive into this buffer (plsError)
// instead of printing several lines; the rest end the process through
// on_plplot_exit.
PLINT g_plplot_error = 0;
char g_plplot_message[4096];
// The plot being drawn and the temporary PLplot writes it to.
std::string g_target, g_temporary;

int on_plplot_exit(const char* message) {
  // PLplot is about to exit(): leave no temporary behind, and one line.
  if (!g_temporary.empty()) ::unlink(g_temporary.c_str());
  std::fprintf(stderr, "snnsim: error: cannot draw plot '%s': %s\n", g_target.c_str(), message);
  std::fflush(stderr);
  ::_exit(2);
}

// Whether `bytes` is a whole PNG (every chunk present up to IEND at the very
// end) or a whole SVG document: PLplot's cairo drivers write through stdio
// and do not report a failed write, so a full disk shows only as a short file.
bool complete(const std::string& bytes, const std::string& format) {
  if (format == "svg") {
    const size_t end = bytes.find_last_not_of(" \t\r\n");
    return end != std::string::npos && end >= 5 && bytes.compare(end - 5, 6, "</svg>") == 0;
  }
  if (bytes.size() < 8 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return false;
  size_t pos = 8;
  while (pos + 12 <= bytes.size()) {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes.data() + pos);
    const size_t length = (size_t{b[0]} << 24) | (size_t{b[1]} << 16) | (size_t{b[2]} << 8) | b[3];
    const size_t next = pos + 12 + length;
    if (next > bytes.size()) return false;
    if (bytes.compare(pos + 4, 4, "IEND") == 0) return next == bytes.size();
    pos = next;
  }
  return false;
}

// One plot file. PLplot writes by name, so it writes the temporary name
// beside `path`; close() checks that PLplot reported no error and that the
// file is complete and on disk, then renames it over `path`. Until then, and
// on any failure, `path` keeps its previous content and the temporary is
// removed.
class PlotFile {
 public:
  PlotFile(const std::string& path, const PlotOptions& o, int subpages = 1)
      : path_(path), temporary_(atomic_temporary_name(path)), format_(o.format) {
    // PLplot exits the process on a file it cannot open: check first.
    std::FILE* f = std::fopen(temporary_.c_str(), "wb");
    if (!f) throw Error("cannot write plot '" + path + "': " + std::strerror(errno));
    std::fclose(f);
    g_target = path_;
    g_temporary = temporary_;
    plsexit(on_plplot_exit);
    g_plplot_error = 0;
    g_plplot_message[0] = '\0';
    plsError(&g_plplot_error, g_plplot_message);
    plsdev(o.format == "svg" ? "svgcairo" : "pngcairo");
    plsfnam(temporary_.c_str());
    plspage(0, 0, 1000, 300 + 300 * subpages, 0, 0);
    plscol0(0, 255, 255, 255);
    plscol0(kInk, 0, 0, 0);
    const int rgb[kColours][3] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}, {148, 103, 189}, {140, 86, 75}};
    for (int i = 0; i < kColours; ++i) plscol0(kFirstColour + i, rgb[i][0], rgb[i][1], rgb[i][2]);
    plssub(1, subpages);
    plinit();
    open_ = true;
    plcol0(kInk);
    plschr(0, 0.9);
  }
  PlotFile(const PlotFile&) = delete;
  PlotFile& operator=(const PlotFile&) = delete;

  ~PlotFile() {
    if (open_) plend();
    if (!committed_) ::unlink(temporary_.c_str());
    g_target.clear();
    g_temporary.clear();
  }

  // Writes the plot; returns its path.
  std::string close() {
    plend();
    open_ = false;
    if (g_plplot_error != 0) {
      std::string message = g_plplot_message;
      message.erase(0, message.find_first_not_of('\n'));
      message.erase(0, message.find('\n') + 1);  // PLplot's "*** PLPLOT ERROR ..." banner
      throw Error("cannot draw plot '" + path_ + "': " + message.substr(0, message.find('\n')));
    }
    std::string bytes;
    const int fd = ::open(temporary_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot write plot '" + path_ + "': " + std::strerror(errno));
    char buffer[65536];
    ssize_t n = 0;
    while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) bytes.append(buffer, static_cast<size_t>(n));
    const bool synced = n == 0 && (::fsync(fd) == 0 || errno == EINVAL || errno == EROFS);
    const int err = errno;
    ::close(fd);
    if (!synced) throw Error("cannot write plot '" + path_ + "': " + std::strerror(err));
    if (!complete(bytes, format_)) {
      // The usual cause is a full disk; say so when it is one.
      struct statvfs fs {};
      const std::string dir = path_.find('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/') + 1);
      const bool full = ::statvfs(dir.c_str(), &fs) == 0 && fs.f_bavail == 0;
      throw Error("cannot write plot '" + path_ + "': " +
                  (full ? std::string(std::strerror(ENOSPC)) : std::string("PLplot wrote an incomplete file")) +
                  " (" + std::to_string(bytes.size()) + " bytes written)");
    }
    commit_temporary(path_);
    committed_ = true;
    return path_;
  }

 private:
  std::string path_, temporary_, format_;
  bool open_ = false, committed_ = false;
};

// Axes with a little room above ymax, on the next subpage (plenv advances).
void axes(double xmin, double xmax, double ymin, double ymax) {
  if (!(xmax > xmin)) xmax = xmin + 1;
  if (!(ymax > ymin)) ymax = ymin + 1;
  plcol0(kInk);
  plenv(xmin, xmax, ymin, ymax + 0.05 * (ymax - ymin), 0, 0);
}

void legend(const std::vector<std::string>& names) {
  std::vector<PLINT> opts(names.size(), PL_LEGEND_LINE), colours, styles(names.size(), 1);
  std::vector<PLINT> text_colours(names.size(), kInk);
  std::vector<PLFLT> widths(names.size(), 2.0);
  std::vector<const char*> text;
  for (size_t i = 0; i < names.size(); ++i) {
    colours.push_back(kFirstColour + static_cast<PLINT>(i % kColours));
    text.push_back(names[i].c_str());
  }
  PLFLT w = 0, h = 0;
  pllegend(&w, &h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, PL_POSITION_RIGHT | PL_POSITION_TOP, 0.02, 0.02, 0.08,
           0, kInk, 1, 0, 0, static_cast<PLINT>(names.size()), opts.data(), 1.0, 1.0, 2.0, 0.0, text_colours.data(),
           text.data(), nullptr, nullptr, nullptr, nullptr, colours.data(), styles.data(), widths.data(), nullptr,
           nullptr, nullptr, nullptr);
}

void line(const std::vector<double>& x, const std::vector<double>& y, PLINT colour) {
  plcol0(colour);
  plwidth(2.0);
  plline(static_cast<PLINT>(x.size()), x.data(), y.data());
  plwidth(1.0);
  plcol0(kInk);
}

std::string join(const std::string& dir, const std::string& name, const PlotOptions& o) {
  return dir + "/" + name + "." + o.format;
}

std::string raster(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "raster", o);
  PlotFile file(path, o, static_cast<int>(r.populations.size()));
  for (const auto& p : r.populations) {
    const analysis::SpikeTrains s = analysis::read_spikes(r.path, p.name, o.raster_first, o.raster_count);
    const int64_t top = p.node_ids.empty() ? 1 : *std::max_element(p.node_ids.begin(), p.node_ids.end()) + 1;
    axes(s.sample_start_ms.front(), s.sample_start_ms.back(), 0, static_cast<double>(top));
    const int64_t last = o.raster_first + static_cast<int64_t>(s.sample_start_ms.size()) - 2;
    pllab("time (ms)", "neuron id",
          fmt::format("{}: spikes of samples {}-{} (dashed: sample boundaries)", p.name, o.raster_first, last).c_str());
    pllsty(2);
    for (size_t i = 1; i + 1 < s.sample_start_ms.size(); ++i) {
      pljoin(s.sample_start_ms[i], 0, s.sample_start_ms[i], static_cast<double>(top));
    }
    pllsty(1);
    std::vector<double> y(s.node_ids.begin(), s.node_ids.end());
    plcol0(kFirstColour);
    plssym(0, top > 200 ? 0.35 : 0.7);
    plpoin(static_cast<PLINT>(y.size()), s.t_ms.data(), y.data(), 17);  // 17: a filled dot
    plcol0(kInk);
  }
  return file.close();
}

std::string rate_histograms(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "rates", o);
  PlotFile file(path, o, static_cast<int>(r.populations.size()));
  for (const auto& p : r.populations) {
    const auto [lo, hi] = std::minmax_element(p.neuron_rate_hz.begin(), p.neuron_rate_hz.end());
    const int bins = 30;
    const double top_rate = *hi > *lo ? *hi : *lo + 1;
    std::vector<double> centre(bins), count(bins, 0);
    const double width = (top_rate - 0) / bins;
    for (int b = 0; b < bins; ++b) centre[b] = (b + 0.5) * width;
    for (double v : p.neuron_rate_hz) count[std::min(bins - 1, static_cast<int>(v / width))] += 1;
    axes(0, top_rate, 0, *std::max_element(count.begin(), count.end()));
    pllab("firing rate (Hz)", "neurons",
          fmt::format("{}: firing rates of {} neurons (mean {:.1f} Hz, {} silent)", p.name, p.node_ids.size(),
                      p.rate_hz, p.silent_neurons)
              .c_str());
    plcol0(kFirstColour);
    plbin(bins, centre.data(), count.data(), PL_BIN_CENTRED);
    plcol0(kInk);
  }
  return file.close();
}

std::string psth(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "psth", o);
  PlotFile file(path, o);
  double top = 0;
  for (const auto& p : r.populations) {
    for (double v : p.psth_hz) top = std::max(top, v);
  }
  std::vector<double> t;
  for (int64_t i = 0; i < r.steps; ++i) t.push_back(static_cast<double>(i) * r.dt_ms);
  axes(0, std::max(t.back(), r.dt_ms), 0, top);
  pllab("time within the sample (ms)", "rate per neuron (Hz)",
        fmt::format("PSTH: population rates averaged over {} samples", r.samples).c_str());
  std::vector<std::string> names;
  for (size_t i = 0; i < r.populations.size(); ++i) {
    line(t, r.populations[i].psth_hz, kFirstColour + static_cast<PLINT>(i % kColours));
    names.push_back(r.populations[i].name);
  }
  legend(names);
  return file.close();
}

std::string accuracy(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "accuracy", o);
  PlotFile file(path, o);
  std::vector<double> t;
  for (int64_t i = 0; i < r.steps; ++i) t.push_back(static_cast<double>(i + 1) * r.dt_ms);
  axes(0, t.back(), 0, 1);
  pllab("time in the sample (ms): prediction from the output spikes so far", "accuracy",
        fmt::format("accuracy as a function of t ({} samples; final {:.4f})", r.samples, r.accuracy).c_str());
  line(t, r.accuracy_by_step, kFirstColour);
  plcol0(kFirstColour);
  plpoin(static_cast<PLINT>(t.size()), t.data(), r.accuracy_by_step.data(), 17);
  plcol0(kInk);
  return file.close();
}

std::string confusion(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "confusion", o);
  PlotFile file(path, o);
  const PLINT n = static_cast<PLINT>(r.classes);
  // Shade: the fraction of each label's samples given each prediction.
  std::vector<std::vector<PLFLT>> frac(n, std::vector<PLFLT>(n, 0));  // [predicted][label]
  for (PLINT y = 0; y < n; ++y) {
    int64_t row = 0;
    for (PLINT x = 0; x < n; ++x) row += r.confusion[y][x];
    for (PLINT x = 0; x < n; ++x) frac[x][y] = row > 0 ? static_cast<double>(r.confusion[y][x]) / row : 0;
  }
  const PLFLT pos[2] = {0, 1}, red[2] = {1, 0.12}, green[2] = {1, 0.34}, blue[2] = {1, 0.62};
  plscmap1n(256);
  plscmap1l(1, 2, pos, red, green, blue, nullptr);
  plcol0(kInk);
  plenv(-0.5, n - 0.5, -0.5, n - 0.5, 1, -2);
  for (PLINT y = 0; y < n; ++y) {  // one filled cell per (label, prediction), shaded by the fraction
    for (PLINT x = 0; x < n; ++x) {
      PLFLT cx[4] = {x - 0.5, x + 0.5, x + 0.5, x - 0.5}, cy[4] = {y - 0.5, y - 0.5, y + 0.5, y + 0.5};
      plcol1(frac[x][y]);
      plfill(4, cx, cy);
    }
  }
  plcol0(kInk);
  plbox("bcnt", 1, 0, "bcnt", 1, 0);
  pllab("predicted class", "label", fmt::format("confusion matrix: sample counts; shade = share of the label ({} samples)", r.samples).c_str());
  plschr(0, 0.7);
  for (PLINT y = 0; y < n; ++y) {
    for (PLINT x = 0; x < n; ++x) {
      if (r.confusion[y][x] == 0) continue;
      plcol0(frac[x][y] > 0.5 ? 0 : kInk);  // white on dark cells
      plptex(x, y, 1, 0, 0.5, std::to_string(r.confusion[y][x]).c_str());
    }
  }
  plcol0(kInk);
  return file.close();
}

}  // namespace

void plot_lines(const std::string& path, const std::string& title, const std::string& x_label,
                const std::string& y_label, const std::vector<Series>& series) {
  PlotOptions o;
  o.format = plot_format_of(path);
  if (o.format.empty()) throw Error("cannot write plot '" + path + "': its name must end in .png or .svg");
  double xmin = 1e300, xmax = -1e300, ymin = 0, ymax = -1e300;
  for (const auto& s : series) {
    for (double x : s.x) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
    for (double y : s.y) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
  }
  if (series.empty() || xmin > xmax) throw Error("nothing to plot for '" + path + "'");
  PlotFile file(path, o);
  const double pad = 0.03 * (xmax - xmin);
  axes(xmin - pad, xmax + pad, ymin, ymax);
  pllab(x_label.c_str(), y_label.c_str(), title.c_str());
  std::vector<std::string> names;
  for (size_t i = 0; i < series.size(); ++i) {
    const PLINT colour = kFirstColour + static_cast<PLINT>(i % kColours);
    line(series[i].x, series[i].y, colour);
    plcol0(colour);
    plpoin(static_cast<PLINT>(series[i].x.size()), series[i].x.data(), series[i].y.data(), 17);
    names.push_back(series[i].name);
  }
  plcol0(kInk);
  legend(names);
  file.close();
}

std::vector<std::string> write_plots(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  if (o.format != "png" && o.format != "svg") throw Error("plot format must be png or svg, got '" + o.format + "'");
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw Error("cannot create the plot folder '" + dir + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error("cannot write plots into '" + dir + "': it exists and is not a folder");
  }
  std::vector<std::string> out;
  if (!r.populations.empty()) {
    out.push_back(raster(dir, r, o));
    out.push_back(rate_histograms(dir, r, o));
    out.push_back(psth(dir, r, o));
  }
  if (!r.accuracy_by_step.empty()) out.push_back(accuracy(dir, r, o));
  if (r.classes > 0) out.push_back(confusion(dir, r, o));
  return out;
}

}  // namespace snn::app
