// The plots of `snnsim analyze --plots DIR`, drawn with PLplot (Debian's
// libplplot-dev): a scientific plotting library with axes, labels,
// histograms, images, legends and colour bars, callable from C++ without a
// Python runtime. PNG through its cairo driver, SVG through its own svg
// driver. tests/cli/plots_check.py reads the SVG: what a plot draws, and
// where, is checked against the recording.

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

// cmap0 entries set by PlotFile: 0 background, 1 ink, 2.. one colour per
// population or series (a population has the same colour in every plot),
// then the raster's sample boundaries, the shading of every other sample
// and the colour of a wrong prediction.
constexpr PLINT kInk = 1;
constexpr PLINT kFirstColour = 2;
constexpr int kColours = 6;
constexpr PLINT kBoundary = kFirstColour + kColours;  // grey
constexpr PLINT kBand = kBoundary + 1;                // very light grey
constexpr PLINT kWrong = kBand + 1;                   // dark red

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
// end) or a whole SVG document: PLplot's pngcairo and svg drivers write through stdio
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
  // A page of `width` x `height` pixels (points in SVG) split into
  // `subpages` plots one above the other.
  PlotFile(const std::string& path, const PlotOptions& o, int width, int height, int subpages = 1)
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
    // SVG through PLplot's own svg driver: it keeps text as <text> elements
    // (searchable, editable, readable by the tests) where cairo's turns each
    // character into an outline.
    plsdev(o.format == "svg" ? "svg" : "pngcairo");
    plsfnam(temporary_.c_str());
    plspage(0, 0, width, height, 0, 0);
    plscol0(0, 255, 255, 255);
    plscol0(kInk, 0, 0, 0);
    const int rgb[kColours][3] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40}, {148, 103, 189}, {140, 86, 75}};
    for (int i = 0; i < kColours; ++i) plscol0(kFirstColour + i, rgb[i][0], rgb[i][1], rgb[i][2]);
    plscol0(kBoundary, 120, 120, 120);
    plscol0(kBand, 236, 236, 236);
    plscol0(kWrong, 200, 20, 20);
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

// [lo, hi] widened by `fraction` of its length on both sides, so that
// nothing drawn at lo or hi touches the frame.
std::pair<double, double> padded(double lo, double hi, double fraction) {
  if (!(hi > lo)) hi = lo + 1;
  const double pad = fraction * (hi - lo);
  return {lo - pad, hi + pad};
}

// Starts the next subpage's plot: the standard viewport, less `right` (a
// fraction of the subpage's width kept on the right for a legend outside
// the data), and world coordinates [xmin, xmax] x [ymin, ymax] (ymin > ymax
// turns the y axis upside down). The frame comes with box(), after what
// lies behind it.
void viewport(double xmin, double xmax, double ymin, double ymax, double right = 0) {
  pladv(0);
  plvsta();
  if (right > 0) {  // on a page of one plot, where the page's coordinates are the subpage's
    PLFLT x0 = 0, x1 = 0, y0 = 0, y1 = 0;
    plgvpd(&x0, &x1, &y0, &y1);
    plvpor(x0, x1 - right, y0, y1);
  }
  plwind(xmin, xmax, ymin, ymax);
}

// The frame, its ticks and their numbers (x_tick 0: PLplot's choice).
void box(double x_tick = 0) {
  plcol0(kInk);
  plwidth(1.0);
  plbox("bcnst", x_tick, 0, "bcnstv", 0, 0);
}

// Labels of the axes and the title (above what plmtex("t", 0.8) writes).
void labels(const std::string& x, const std::string& y, const std::string& title) {
  plcol0(kInk);
  pllab(x.c_str(), y.c_str(), "");
  plmtex("t", 2.3, 0.5, 0.5, title.c_str());
}

PLINT colour_of(size_t i) { return kFirstColour + static_cast<PLINT>(i % kColours); }

// The fraction of the page's width that a legend of `names` outside the
// frame needs: the line sample, the longest name and the box's margins.
double legend_room(const std::vector<std::string>& names) {
  size_t longest = 0;
  for (const auto& n : names) longest = std::max(longest, n.size());
  return std::min(0.4, 0.09 + 0.0095 * static_cast<double>(longest));
}

// A legend of lines to the right of the frame, outside the data (viewport()
// kept legend_room(names) for it). `styles`: PLplot's line styles (1 solid).
void legend(const std::vector<std::string>& names, std::vector<PLINT> colours = {}, std::vector<PLINT> styles = {}) {
  const size_t n = names.size();
  if (colours.empty()) {
    for (size_t i = 0; i < n; ++i) colours.push_back(colour_of(i));
  }
  if (styles.empty()) styles.assign(n, 1);
  std::vector<PLINT> opts(n, PL_LEGEND_LINE), text_colours(n, kInk);
  std::vector<PLFLT> widths(n, 2.0);
  std::vector<const char*> text;
  for (const auto& name : names) text.push_back(name.c_str());
  PLFLT w = 0, h = 0;
  plschr(0, 0.8);
  pllegend(&w, &h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX, PL_POSITION_OUTSIDE | PL_POSITION_RIGHT | PL_POSITION_TOP,
           0.015, 0.0, 0.05, 0, kInk, 1, 0, 0, static_cast<PLINT>(n), opts.data(), 1.0, 1.0, 2.0, 0.0,
           text_colours.data(), text.data(), nullptr, nullptr, nullptr, nullptr, colours.data(), styles.data(),
           widths.data(), nullptr, nullptr, nullptr, nullptr);
  plschr(0, 0.9);
}

// A line through the points, each point marked with a dot.
void line(const std::vector<double>& x, const std::vector<double>& y, PLINT colour, PLINT style = 1, bool marks = true) {
  plcol0(colour);
  pllsty(style);
  plwidth(2.0);
  plline(static_cast<PLINT>(x.size()), x.data(), y.data());
  plwidth(1.0);
  pllsty(1);
  if (marks) {
    plssym(0, 0.8);
    plpoin(static_cast<PLINT>(x.size()), x.data(), y.data(), 17);  // 17: a filled dot
  }
  plcol0(kInk);
}

void rectangle(double x0, double x1, double y0, double y1) {
  PLFLT x[4] = {x0, x1, x1, x0}, y[4] = {y0, y0, y1, y1};
  plfill(4, x, y);
}

std::string join(const std::string& dir, const std::string& name, const PlotOptions& o) {
  return dir + (!dir.empty() && dir.back() == '/' ? "" : "/") + name + "." + o.format;
}

// "7 → 7": a sample's label and prediction, as the raster writes them
// ("7→7" in narrow windows).
std::string label_and_prediction(int64_t label, int64_t predicted, bool narrow) {
  return fmt::format(narrow ? "{}\u2192{}" : "{} \u2192 {}", label, predicted);
}

// Spikes of --raster's samples, one plot per population: a short vertical
// tick per spike at (time, neuron id). Each sample's T steps sit in their own
// window, shaded every other sample and bounded by grey lines half a step
// from the nearest spikes (never under a spike column); above each window,
// the sample's label and prediction (red when wrong). The frame leaves room
// around neuron 0, the top neuron, the first and the last step.
std::string raster(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "raster", o);
  const int pops = static_cast<int>(r.populations.size());
  PlotFile file(path, o, 1000, 300 + 300 * pops, pops);
  for (size_t i = 0; i < r.populations.size(); ++i) {
    const auto& p = r.populations[i];
    const analysis::SpikeTrains s = analysis::read_spikes(r.path, p.name, o.raster_first, o.raster_count);
    const int64_t shown = static_cast<int64_t>(s.labels.size());
    const int64_t top = p.node_ids.empty() ? 1 : *std::max_element(p.node_ids.begin(), p.node_ids.end()) + 1;
    // Spikes of step k of a sample lie at its start + k dt: its window is
    // [start - dt/2, next start - dt/2].
    const double half = 0.5 * r.dt_ms;
    std::vector<double> edge;
    for (double start : s.sample_start_ms) edge.push_back(start - half);
    const auto [x0, x1] = padded(edge.front(), edge.back(), 0.01);
    const double rows = static_cast<double>(top);
    const auto [y0, y1] = padded(-0.5, rows - 0.5, 0.01);
    viewport(x0, x1, y0, y1);
    for (int64_t j = 1; j < shown; j += 2) {  // every other sample shaded
      plcol0(kBand);
      rectangle(edge[j], edge[j + 1], y0, y1);
    }
    plcol0(kBoundary);
    plwidth(1.5);
    for (double e : edge) pljoin(e, y0, e, y1);
    // A tick 0.8 rows tall, but at least 1% of the frame's height so that it
    // shows when there are hundreds of rows.
    const double reach = std::max(0.4, 0.005 * (y1 - y0));
    plcol0(colour_of(i));
    plwidth(top > 200 ? 1.0 : 2.0);
    for (size_t e = 0; e < s.t_ms.size(); ++e) {
      const double y = static_cast<double>(s.node_ids[e]);
      pljoin(s.t_ms[e], y - reach, s.t_ms[e], y + reach);
    }
    plwidth(1.0);
    box();
    const int64_t last = o.raster_first + shown - 1;
    std::string title = fmt::format("{}: spikes of samples {}-{}", p.name, o.raster_first, last);
    if (shown <= 24) {  // windows wider than a label: above each, label -> prediction
      plschr(0, shown <= 12 ? 0.8 : 0.6);
      for (int64_t j = 0; j < shown; ++j) {
        const double centre = 0.5 * (edge[j] + edge[j + 1]);
        plcol0(s.labels[j] == s.predicted[j] ? kInk : kWrong);
        plmtex("t", 0.7, (centre - x0) / (x1 - x0), 0.5,
               label_and_prediction(s.labels[j], s.predicted[j], shown > 12).c_str());
      }
      plschr(0, 0.9);
      title += "; above each: label \u2192 predicted (red: wrong)";
    } else {
      title += " (labels above the samples for --raster of 24 samples at most)";
    }
    labels(fmt::format("time (ms); samples of T = {} steps of {} ms, between grey lines", r.steps, r.dt_ms),
           "neuron id", title);
  }
  return file.close();
}

// Per population, a histogram of its recorded neurons' firing rates: 30
// bins from 0 to the highest rate, filled bars from the x axis, with room
// on both sides and above the highest bar.
std::string rate_histograms(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "rates", o);
  const int pops = static_cast<int>(r.populations.size());
  PlotFile file(path, o, 1000, 300 + 300 * pops, pops);
  for (size_t i = 0; i < r.populations.size(); ++i) {
    const auto& p = r.populations[i];
    const int bins = 30;
    const double top_rate = p.neuron_rate_hz.empty() ? 1
                            : std::max(*std::max_element(p.neuron_rate_hz.begin(), p.neuron_rate_hz.end()), 1e-9);
    std::vector<double> count(bins, 0);
    const double width = top_rate / bins;
    for (double v : p.neuron_rate_hz) count[std::min(bins - 1, static_cast<int>(v / width))] += 1;
    const double highest = *std::max_element(count.begin(), count.end());
    const auto [x0, x1] = padded(0, top_rate, 0.03);
    viewport(x0, x1, 0, std::max(1.0, highest) * 1.1);
    for (int b = 0; b < bins; ++b) {
      if (count[b] == 0) continue;
      plcol0(colour_of(i));
      rectangle(b * width, (b + 1) * width, 0, count[b]);
      PLFLT bx[5] = {b * width, (b + 1) * width, (b + 1) * width, b * width, b * width};
      PLFLT by[5] = {0, 0, count[b], count[b], 0};
      plcol0(0);  // a thin gap between neighbouring bars
      plwidth(0.5);
      plline(5, bx, by);
      plwidth(1.0);
    }
    box();
    labels(fmt::format("firing rate (Hz); {} bins of {:.3g} Hz", bins, width), "neurons",
           fmt::format("{}: firing rates of {} neurons (mean {:.1f} Hz, {} silent)", p.name, p.node_ids.size(),
                       p.rate_hz, p.silent_neurons));
  }
  return file.close();
}

// The time axis of psth and accuracy: step t = 1..T of a sample, the same
// range, ticks and frame in both plots (both keep the same legend room).
constexpr double kStepPlotRoom = 0.2;
std::pair<double, double> step_axis(int64_t steps) {
  return padded(1, static_cast<double>(std::max<int64_t>(steps, 1)), steps > 1 ? 0.5 / static_cast<double>(steps - 1) : 0.5);
}
double step_ticks(int64_t steps) { return steps <= 12 ? 1 : 0; }
std::vector<double> steps_1_to(int64_t steps) {
  std::vector<double> t;
  for (int64_t i = 1; i <= steps; ++i) t.push_back(static_cast<double>(i));
  return t;
}

// Each population's rate per neuron at each step t of a sample, averaged
// over the samples; the legend outside the frame.
std::string psth(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "psth", o);
  PlotFile file(path, o, 1000, 600);
  double top = 0;
  for (const auto& p : r.populations) {
    for (double v : p.psth_hz) top = std::max(top, v);
  }
  const auto [x0, x1] = step_axis(r.steps);
  const auto [y0, y1] = padded(0, top > 0 ? top : 1, 0.04);
  viewport(x0, x1, y0, y1, kStepPlotRoom);
  box(step_ticks(r.steps));
  labels(fmt::format("step t of the sample (dt = {} ms)", r.dt_ms), "rate per neuron (Hz)",
         fmt::format("PSTH: spikes per neuron at step t, averaged over {} samples", r.samples));
  const std::vector<double> t = steps_1_to(r.steps);
  std::vector<std::string> names;
  for (size_t i = 0; i < r.populations.size(); ++i) {
    line(t, r.populations[i].psth_hz, colour_of(i));
    names.push_back(r.populations[i].name);
  }
  legend(names);
  return file.close();
}

// Accuracy of the prediction from steps 1..t, on psth's time axis, with
// chance (one over the classes) dashed.
std::string accuracy(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "accuracy", o);
  PlotFile file(path, o, 1000, 600);
  const auto [x0, x1] = step_axis(r.steps);
  const auto [y0, y1] = padded(0, 1, 0.04);
  viewport(x0, x1, y0, y1, kStepPlotRoom);
  box(step_ticks(r.steps));
  labels(fmt::format("step t of the sample (dt = {} ms)", r.dt_ms), "accuracy of the prediction from steps 1..t",
         fmt::format("accuracy as a function of t ({} samples; final {:.4f})", r.samples, r.accuracy));
  std::vector<std::string> names = {"accuracy"};
  std::vector<PLINT> colours = {kFirstColour}, styles = {1};
  if (r.classes > 0) {
    const double chance = 1.0 / static_cast<double>(r.classes);
    line({x0, x1}, {chance, chance}, kBoundary, 2, false);
    names.push_back(fmt::format("chance (1/{})", r.classes));
    colours.push_back(kBoundary);
    styles.push_back(2);
  }
  line(steps_1_to(r.steps), r.accuracy_by_step, kFirstColour);
  legend(names, colours, styles);
  return file.close();
}

// Rows: label 0 at the top down to the last; columns: predicted class 0 at
// the left, as analyze's text table. Each cell holds its sample count,
// shaded by the share of its label's samples (the row), with a colour bar.
std::string confusion(const std::string& dir, const analysis::RecordingStats& r, const PlotOptions& o) {
  const std::string path = join(dir, "confusion", o);
  PlotFile file(path, o, 1000, 820);
  const PLINT n = static_cast<PLINT>(r.classes);
  std::vector<std::vector<PLFLT>> share(n, std::vector<PLFLT>(n, 0));  // [label][predicted]
  for (PLINT y = 0; y < n; ++y) {
    int64_t row = 0;
    for (PLINT x = 0; x < n; ++x) row += r.confusion[y][x];
    for (PLINT x = 0; x < n; ++x) share[y][x] = row > 0 ? static_cast<double>(r.confusion[y][x]) / row : 0;
  }
  const PLFLT pos[2] = {0, 1}, red[2] = {1, 0.12}, green[2] = {1, 0.34}, blue[2] = {1, 0.62};
  plscmap1n(256);
  plscmap1l(1, 2, pos, red, green, blue, nullptr);
  // A square matrix on the left, room on the right for the colour bar.
  pladv(0);
  plvpor(0.1, 0.1 + 0.76 * 820.0 / 1000.0, 0.1, 0.86);
  plwind(-0.5, n - 0.5, n - 0.5, -0.5);  // y upside down: label 0 at the top
  for (PLINT y = 0; y < n; ++y) {
    for (PLINT x = 0; x < n; ++x) {
      plcol1(share[y][x]);
      rectangle(x - 0.5, x + 0.5, y - 0.5, y + 0.5);
    }
  }
  plcol0(kBand);  // the grid between cells
  for (PLINT k = 1; k < n; ++k) {
    pljoin(k - 0.5, -0.5, k - 0.5, n - 0.5);
    pljoin(-0.5, k - 0.5, n - 0.5, k - 0.5);
  }
  plcol0(kInk);
  plbox("bcnt", 1, 0, "bcntv", 1, 0);
  pllab("predicted class", "label", "");
  plmtex("t", 2.0, 0.5, 0.5,
         fmt::format("confusion matrix ({} samples): counts, shade = share of the label", r.samples).c_str());
  if (n <= 30) {
    plschr(0, n <= 12 ? 0.8 : 0.5);
    for (PLINT y = 0; y < n; ++y) {
      for (PLINT x = 0; x < n; ++x) {
        if (r.confusion[y][x] == 0) continue;
        plcol0(share[y][x] > 0.5 ? 0 : kInk);  // white on dark cells
        plptex(x, y, 1, 0, 0.5, std::to_string(r.confusion[y][x]).c_str());
      }
    }
    plschr(0, 0.9);
  }
  plcol0(kInk);
  PLFLT w = 0, h = 0;
  const PLINT label_opts[1] = {PL_COLORBAR_LABEL_RIGHT};
  const char* bar_label[1] = {"share of the label's samples (row)"};
  const char* axis_opts[1] = {"bcvtm"};
  const PLFLT ticks[1] = {0.2};
  const PLINT sub_ticks[1] = {2};
  const PLINT n_values[1] = {2};
  const PLFLT range[2] = {0, 1};
  const PLFLT* values[1] = {range};
  plcolorbar(&w, &h, PL_COLORBAR_GRADIENT, PL_POSITION_OUTSIDE | PL_POSITION_RIGHT, 0.04, 0, 0.04, 1.0, 0, kInk, 1, 0,
             0, 0, 0, 1, label_opts, bar_label, 1, axis_opts, ticks, sub_ticks, n_values, values);
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
  std::vector<std::string> names;
  for (const auto& one : series) names.push_back(one.name);
  PlotFile file(path, o, 1000, 600);
  const auto [x0, x1] = padded(xmin, xmax, 0.03);
  const auto [y0, y1] = padded(ymin, ymax, 0.04);
  viewport(x0, x1, y0, y1, legend_room(names));
  box();
  labels(x_label, y_label, title);
  for (size_t i = 0; i < series.size(); ++i) line(series[i].x, series[i].y, colour_of(i));
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
