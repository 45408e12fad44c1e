#include "snn/recording/recording_info.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"
#include "snn/recording/detail/open_read_only.h"
#include "snn/recording/detail/schema_check.h"
#include "snn/recording/schema.h"

namespace snn::recording {
namespace {

using hdf5::check;
using hdf5::Handle;
namespace sc = schema;

// A damaged attribute table must not be listed: /meta holds about 20.
constexpr hsize_t kMaxMetaAttributes = 4096;
constexpr hsize_t kRowBlock = 65536;  // label and prediction rows read at once

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Collects attribute names (H5Aiterate2's callback); stops past the limit.
herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* data) {
  auto* names = static_cast<std::vector<std::string>*>(data);
  names->emplace_back(name);
  return names->size() > kMaxMetaAttributes ? 1 : 0;
}

// The string attributes of /meta, in name order (others are skipped: the
// optional numbers are read by name).
std::vector<std::pair<std::string, std::string>> string_attributes(hid_t meta, const std::string& where) {
  std::vector<std::string> names;
  hsize_t index = 0;
  check(H5Aiterate2(meta, H5_INDEX_NAME, H5_ITER_INC, &index, collect_name, &names),
        where + ": cannot list the attributes of /meta");
  if (names.size() > kMaxMetaAttributes) {
    throw Error(where + ": /meta has more than the " + std::to_string(kMaxMetaAttributes) +
                " attributes a recording can hold (a damaged file?)");
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& name : names) {
    Handle attr(H5Aopen(meta, name.c_str(), H5P_DEFAULT), H5Aclose);
    if (!attr.ok()) throw Error(where + ": cannot open attribute '" + name + "' of /meta");
    Handle type(H5Aget_type(attr.get()), H5Tclose);
    if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) continue;
    out.emplace_back(name, hdf5::read_string_attribute(meta, name.c_str(), where));
  }
  return out;
}

// Committed samples whose prediction equals their label, read in blocks.
int64_t count_correct(hid_t f, int64_t samples, const std::string& where) {
  Handle label = hdf5::open_dataset(f, sc::label.path, where);
  Handle predicted = hdf5::open_dataset(f, sc::predicted.path, where);
  std::vector<int16_t> y, p;
  int64_t correct = 0;
  for (hsize_t start = 0; start < static_cast<hsize_t>(samples); start += kRowBlock) {
    const hsize_t n = std::min(kRowBlock, static_cast<hsize_t>(samples) - start);
    hdf5::read_rows(label.get(), H5T_NATIVE_INT16, start, n, 1, y, where + ": /" + sc::label.path);
    hdf5::read_rows(predicted.get(), H5T_NATIVE_INT16, start, n, 1, p, where + ": /" + sc::predicted.path);
    for (size_t i = 0; i < y.size(); ++i) correct += y[i] == p[i];
  }
  return correct;
}

RecordingInfo read(const std::string& file, bool unfinished) {
  const std::string where = "recording '" + file + "'";
  Handle f = detail::open_read_only(file);
  RecordingInfo r;
  r.path = file;
  r.unfinished_file = unfinished;
  r.status = sc::read_status(f.get(), where);
  // Every extent and pointer checked before anything is read by them; an
  // unfinished file may hold rows past its last commit.
  const sc::Contents c = sc::check(f.get(), where, sc::Rows::kAtLeast);
  r.samples = c.samples;
  r.steps = c.steps;
  r.dt_ms = c.dt_ms;
  r.classes = c.classes;
  r.trials = c.kind == sc::kPopulationsKind;
  for (const auto& p : c.populations) {
    r.populations.push_back({p.name, p.layer, p.n_nodes, static_cast<int64_t>(p.recorded.size()),
                             static_cast<int64_t>(p.events)});
  }
  for (const auto& rep : c.reports) r.reports.push_back({rep.name, rep.node_ids});
  {
    Handle label = hdf5::open_dataset(f.get(), sc::label.path, where);
    Handle space(H5Dget_space(label.get()), H5Sclose);
    hsize_t rows = 0;
    H5Sget_simple_extent_dims(space.get(), &rows, nullptr);
    r.rows_written = static_cast<int64_t>(rows);
  }
  r.correct = count_correct(f.get(), c.samples, where);
  Handle meta(H5Gopen2(f.get(), sc::meta.path, H5P_DEFAULT), H5Gclose);
  if (!meta.ok()) throw Error(where + " has no group /meta");
  r.meta = string_attributes(meta.get(), where);
  if (H5Aexists(meta.get(), sc::attr_resumed_at_sample.name) > 0) {
    r.resumed_at_sample = hdf5::read_int_attribute(meta.get(), sc::attr_resumed_at_sample.name, where);
  }
  r.recovered_from_status = r.meta_value(sc::attr_recovered_from_status.name);
  return r;
}

}  // namespace

std::string RecordingInfo::meta_value(const std::string& key) const {
  for (const auto& [k, v] : meta) {
    if (k == key) return v;
  }
  return "";
}

RecordingInfo read_recording_info(const std::string& path) {
  hdf5::QuietHdf5 quiet;
  const std::string suffix = ".partial";
  const bool named_partial =
      path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  std::string file = path;
  if (!named_partial && !is_regular_file(path) && is_regular_file(path + suffix)) file = path + suffix;
  if (!is_regular_file(file)) throw Error("no recording '" + path + "'");
  const bool unfinished = file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0;
  // A run still writing the file may be mid-commit when it is read (its
  // extents ahead of its counter, a checksum mid-update): an unfinished
  // file gets two more tries before its error counts.
  for (int attempt = 0;; ++attempt) {
    try {
      return read(file, unfinished);
    } catch (const Error&) {
      if (!unfinished || attempt == 2) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace snn::recording
