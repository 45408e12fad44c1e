#include "snn/recording/recording_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstring>

#include "snn/core/atomic_file.h"
#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"
#include "snn/recording/detail/open_read_only.h"
#include "snn/recording/detail/progress.h"
#include "snn/recording/detail/schema_check.h"
#include "snn/recording/schema.h"

namespace snn::recording {
namespace {

using hdf5::check;
using hdf5::Handle;
using hdf5::open_dataset;
using detail::open_read_only;
using detail::write_status;
namespace sc = schema;

constexpr hsize_t kSpikeChunk = 65536;  // elements per chunk of the spike datasets
constexpr hsize_t kRowChunk = 1024;     // rows per chunk of the per-sample datasets
constexpr unsigned kDeflate = 1;  // level 1: most of the gain after shuffle, at a fraction of level 4's time

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

// A 1-D or 2-D dataset growing along its first dimension. (Not in the
// anonymous namespace: RecordingFile::State, of external linkage, holds it.)
namespace detail {
struct Growing {
  Handle ds{-1, H5Dclose};
  hid_t mem_type = -1;
  hsize_t rows = 0;
  hsize_t width = 0;  // 0: one-dimensional

  // Appends `n` rows from `data` (mem_type, row-major).
  void append(const void* data, hsize_t n, const std::string& what) {
    if (n == 0) return;
    hsize_t dims[2] = {rows + n, width};
    check(H5Dset_extent(ds.get(), dims), "recording: cannot extend " + what);
    Handle file_space(H5Dget_space(ds.get()), H5Sclose);
    hsize_t start[2] = {rows, 0}, count[2] = {n, width};
    check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
          "recording: cannot select rows of " + what);
    Handle mem_space(H5Screate_simple(width ? 2 : 1, count, nullptr), H5Sclose);
    check(H5Dwrite(ds.get(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data),
          "recording: cannot write " + what);
    rows += n;
  }
};
}  // namespace detail

namespace {
using detail::Growing;

Handle make_group(hid_t file, const sc::Group& g, const std::string& pop = "") {
  const std::string path = sc::at(g, pop);
  Handle h(H5Gcreate2(file, path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!h.ok()) throw Error("recording: cannot create group /" + path + hdf5::failed_call_cause());
  return h;
}

void write_units(hid_t ds, const sc::Dataset& d) {
  if (*d.units) hdf5::write_string_attribute(ds, "units", d.units);
}

// The growing dataset `d` of the schema (for population `pop`), `width`
// values a row (0 for one-dimensional ones), chunked and compressed as the
// schema says.
Growing make_growing(hid_t file, const sc::Dataset& d, const std::string& pop, hsize_t width, bool deflate_spikes) {
  const std::string path = sc::at(d, pop);
  Growing g;
  g.mem_type = sc::memory_type(d.type);
  g.width = width;
  const int rank = d.rank;
  // Spike events and report frames in ~64K-element chunks, sample rows in 1K-row ones.
  const bool events = d.shape[0].kind == sc::Extent::kEvents || d.shape[0].kind == sc::Extent::kSamplesTimesSteps;
  const hsize_t chunk_rows = events ? std::max<hsize_t>(1, kSpikeChunk / std::max<hsize_t>(width, 1)) : kRowChunk;
  hsize_t dims[2] = {0, width}, maxdims[2] = {H5S_UNLIMITED, width};
  hsize_t chunk[2] = {chunk_rows, width ? width : 1};
  Handle space(H5Screate_simple(rank, dims, maxdims), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  check(H5Pset_chunk(dcpl.get(), rank, chunk), "recording: cannot chunk /" + path);
  const bool deflate = d.filter == sc::Filter::kDeflate ||
                       ((d.filter == sc::Filter::kSpikes || d.filter == sc::Filter::kSpikeIds) && deflate_spikes);
  if (deflate) {
    check(H5Pset_shuffle(dcpl.get()), "recording: no shuffle filter");
    check(H5Pset_deflate(dcpl.get(), kDeflate), "recording: no deflate filter");
  } else if (d.filter == sc::Filter::kSpikeIds) {
    check(H5Pset_scaleoffset(dcpl.get(), H5Z_SO_INT, H5Z_SO_INT_MINBITS_DEFAULT), "recording: no scale-offset filter");
  }
  g.ds = Handle(H5Dcreate2(file, path.c_str(), sc::file_type(d.type), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                H5Dclose);
  if (!g.ds.ok()) throw Error("recording: cannot create dataset /" + path + hdf5::failed_call_cause());
  write_units(g.ds.get(), d);
  return g;
}

// A small fixed one-dimensional dataset of the schema, written once.
Handle write_fixed(hid_t file, const sc::Dataset& d, const std::string& pop, hsize_t n, const void* data) {
  const std::string path = sc::at(d, pop);
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle ds(H5Dcreate2(file, path.c_str(), sc::file_type(d.type), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok()) throw Error("recording: cannot create dataset /" + path + hdf5::failed_call_cause());
  if (n > 0) {
    check(H5Dwrite(ds.get(), sc::memory_type(d.type), H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
          "recording: cannot write /" + path);
  }
  write_units(ds.get(), d);
  return ds;
}

// SONATA's sorting attribute: an HDF5 enum over uint8 (libsonata reads it as one).
void write_sorting_by_time(hid_t group) {
  Handle type(H5Tenum_create(H5T_NATIVE_UINT8), H5Tclose);
  const uint8_t none = sc::kSorting_none, by_id = sc::kSorting_by_id, by_time = sc::kSorting_by_time;
  H5Tenum_insert(type.get(), "none", &none);
  H5Tenum_insert(type.get(), "by_id", &by_id);
  H5Tenum_insert(type.get(), "by_time", &by_time);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(group, sc::attr_sorting.name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error("recording: cannot create the sorting attribute" + hdf5::failed_call_cause());
  check(H5Awrite(attr.get(), type.get(), &by_time), "recording: cannot write the sorting attribute");
}

void write_scalar(hid_t ds, hid_t mem_type, const void* value, const std::string& what) {
  check(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, value), "recording: cannot write " + what);
}


// Throws unless ids are ascending, distinct and within the population.
void check_ids(const std::string& name, const std::vector<int64_t>& ids, int64_t size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= size || (i > 0 && ids[i] <= ids[i - 1])) {
      throw Error("layer '" + name + "' has neurons 0.." + std::to_string(size - 1) +
                  "; recorded ids must be ascending, distinct and in range, got " + std::to_string(ids[i]));
    }
  }
}

// Everything wrong with a layout, found before the file is created.
// The limits are the schema's: no run writes a file its readers refuse.
void validate(const RecordingLayout& L) {
  auto within = [](const std::string& what, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
      throw Error("recording: " + what + " must be " + std::to_string(lo) + ".." + std::to_string(hi) +
                  " (the recording format's limit), got " + std::to_string(v));
    }
  };
  within("T", L.steps, 1, sc::kMax_steps);
  within("the number of classes", L.classes, 1, sc::kMax_classes);
  within("the number of neuron layers", L.layers, 0, sc::kMax_layers);
  if (!(L.dt_ms > 0) || !std::isfinite(L.dt_ms)) throw Error("recording: dt must be positive");
  for (const auto& p : L.spikes) within("the size of layer '" + p.name + "'", p.size, 1, sc::kMax_n_nodes);
  for (const auto& p : L.traces) within("the size of layer '" + p.name + "'", p.size, 1, sc::kMax_n_nodes);
  within("the number of recorded populations", static_cast<int64_t>(std::max(L.spikes.size(), L.traces.size())), 0,
         sc::kMax_populations);
  auto check_names = [](const auto& pops, const char* what) {
    for (size_t i = 0; i < pops.size(); ++i) {
      const std::string& name = pops[i].name;
      if (name.empty() || name.find('/') != std::string::npos) {
        throw Error("recording: bad population name '" + name + "'");
      }
      for (size_t j = 0; j < i; ++j) {
        if (pops[j].name == name) throw Error("recording: layer '" + name + "' appears twice among the " + what);
      }
      check_ids(name, pops[i].node_ids, pops[i].size);
    }
  };
  check_names(L.spikes, "recorded spikes");
  check_names(L.traces, "recorded potentials");
  for (const auto& p : L.traces) {
    if (p.node_ids.empty()) throw Error("recording: layer '" + p.name + "' records no neuron's potential");
  }
}

// An existing growing dataset (of a file being resumed, already checked).
Growing open_growing(hid_t file, const sc::Dataset& d, const std::string& pop, const std::string& where) {
  Growing g;
  g.mem_type = sc::memory_type(d.type);
  g.ds = open_dataset(file, sc::at(d, pop), where);
  Handle space(H5Dget_space(g.ds.get()), H5Sclose);
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  g.rows = dims[0];
  g.width = d.rank == 2 ? dims[1] : 0;
  return g;
}

// Shrinks a growing dataset (checked to hold at least n rows) to n rows.
void truncate_rows(hid_t file, const std::string& path, hsize_t n, const std::string& where) {
  Handle ds = open_dataset(file, path, where);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  if (dims[0] == n) return;
  dims[0] = n;
  check(H5Dset_extent(ds.get(), dims), where + ": cannot truncate /" + path);
}

// A whole dataset as int64 (HDF5 converts), in a tensor of its shape.
torch::Tensor read_int64(hid_t ds, const std::string& where) {
  Handle space(H5Dget_space(ds), H5Sclose);
  hsize_t dims[2] = {0, 0};
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > 2) throw Error(where + ": a dataset is not a table");
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  std::vector<int64_t> shape{static_cast<int64_t>(dims[0])};
  if (rank == 2) shape.push_back(static_cast<int64_t>(dims[1]));
  torch::Tensor t = torch::empty(shape, torch::kLong);
  if (t.numel() > 0) {
    check(H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr<int64_t>()),
          where + ": cannot read a dataset");
  }
  return t;
}


// Opens a checked recording for repair or resumption. A killed SWMR writer
// leaves the superblock marked "open for writing", which HDF5 refuses;
// clearing that mark is what `h5clear -s` does, through the same
// file-access property. Call only once every check has passed: this
// changes the file.
Handle open_writable(const std::string& file) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), "recording: HDF5 lacks SWMR");
  hbool_t clear = 1;
  check(H5Pset(fapl.get(), "clear_status_flags", &clear), "recording: this HDF5 cannot clear status flags");
  Handle f(H5Fopen(file.c_str(), H5F_ACC_RDWR, fapl.get()), H5Fclose);
  if (!f.ok()) throw Error("'" + file + "' cannot be opened for writing");
  // A SWMR writer does not keep the end of allocation that the superblock
  // records up to date: data it appended after its last superblock write
  // lies past it, and without SWMR reading HDF5 refuses to touch it
  // ("addr overflow"). Moving the end to the file's end is `h5clear -i 0`.
  check(H5Fincrement_filesize(f.get(), 0), "'" + file + "': cannot extend its end of allocation");
  return f;
}

// Reads and checks an unfinished recording without changing it.
sc::Contents check_unfinished(const std::string& file, const std::string& where) {
  Handle f = open_read_only(file);
  return sc::check(f.get(), where, sc::Rows::kAtLeast);
}

// The rows a growing dataset keeps of the committed samples.
hsize_t committed_rows(const sc::Dataset& d, const sc::Contents& c, uint64_t events) {
  const auto S = static_cast<hsize_t>(c.samples);
  switch (d.shape[0].kind) {
    case sc::Extent::kSamples: return S;
    case sc::Extent::kSamplesPlus1: return S + 1;
    case sc::Extent::kSamplesTimesSteps: return S * static_cast<hsize_t>(c.steps);
    case sc::Extent::kEvents: return events;
    default: return 0;
  }
}

// Drops everything after the last commit (rows, spikes, trace frames) of a
// file checked as `c`: every growing dataset of the schema is cut to what
// the committed samples own.
void truncate_to_committed(hid_t f, const sc::Contents& c, const std::string& where) {
  for (const sc::Dataset* d : sc::kDatasets) {
    if (!d->growing()) continue;
    const std::string path = d->path;
    if (path.find("{pop}") == std::string::npos) {
      if (d->optional && H5Lexists(f, path.c_str(), H5P_DEFAULT) <= 0) continue;
      truncate_rows(f, path, committed_rows(*d, c, 0), where);
    } else if (path.rfind(std::string(sc::report.path) + "/", 0) == 0) {
      for (const auto& r : c.reports) truncate_rows(f, sc::at(*d, r.name), committed_rows(*d, c, 0), where);
    } else {
      for (const auto& p : c.populations) truncate_rows(f, sc::at(*d, p.name), committed_rows(*d, c, p.events), where);
    }
  }
  // The time axis may run ahead of the counter (commit() writes it first).
  for (const auto& r : c.reports) {
    Handle time = open_dataset(f, sc::at(sc::report_time, r.name), where);
    double t[3] = {0, 0, 0};
    check(H5Dread(time.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t), where + ": cannot read a time axis");
    t[1] = t[0] + static_cast<double>(c.samples * c.steps) * t[2];
    write_scalar(time.get(), H5T_NATIVE_DOUBLE, t, "report time");
  }
}

// Throws unless the checked file `c` holds what a run with layout L writes,
// and its /meta attributes `must_match` equal the given values.
void check_resumable(hid_t f, const sc::Contents& c, const RecordingLayout& L,
                     const std::vector<std::pair<std::string, std::string>>& must_match, const std::string& where) {
  auto differs = [&](const std::string& what, const std::string& file, const std::string& run) {
    throw Error(where + " was recorded with " + what + " " + file + ", this run has " + run +
                ": resume it with the settings it was started with");
  };
  if (c.steps != L.steps) differs("T =", std::to_string(c.steps), std::to_string(L.steps));
  if (c.dt_ms != L.dt_ms) differs("dt =", std::to_string(c.dt_ms), std::to_string(L.dt_ms));
  if (c.classes != L.classes) differs("classes", std::to_string(c.classes), std::to_string(L.classes));
  if ((c.layers > 0) != (L.layers > 0)) differs("layer_spikes", c.layers > 0 ? "on" : "off", L.layers > 0 ? "on" : "off");
  if (c.layers != L.layers) differs("neuron layers", std::to_string(c.layers), std::to_string(L.layers));
  if (c.prediction_by_step != L.prediction_by_step) {
    differs("prediction_by_step", c.prediction_by_step ? "on" : "off", L.prediction_by_step ? "on" : "off");
  }
  auto joined = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
    return out.empty() ? std::string("none") : out;
  };
  auto names = [&](const auto& pops) {
    std::vector<std::string> out;
    for (const auto& p : pops) out.push_back(p.name);
    return joined(out);
  };
  if (names(c.populations) != names(L.spikes)) differs("spikes of", names(c.populations), names(L.spikes));
  if (names(c.reports) != names(L.traces)) differs("potentials of", names(c.reports), names(L.traces));
  for (const auto& p : L.spikes) {
    const auto& got = *std::find_if(c.populations.begin(), c.populations.end(), [&](const auto& x) { return x.name == p.name; });
    if (got.n_nodes != p.size) differs("a layer '" + p.name + "' of", std::to_string(got.n_nodes) + " neurons", std::to_string(p.size));
    std::vector<int64_t> want = p.node_ids;  // empty = every neuron
    for (int64_t i = 0; p.node_ids.empty() && i < p.size; ++i) want.push_back(i);
    if (got.recorded != want) differs("other neurons of", p.name, "a different --record list");
  }
  for (const auto& p : L.traces) {
    const auto& got = *std::find_if(c.reports.begin(), c.reports.end(), [&](const auto& x) { return x.name == p.name; });
    if (got.node_ids != p.node_ids) differs("other potentials of", p.name, "a different --record-v list");
  }
  Handle meta(H5Gopen2(f, sc::meta.path, H5P_DEFAULT), H5Gclose);
  for (const auto& [key, value] : must_match) {
    const std::string got =
        H5Aexists(meta.get(), key.c_str()) > 0 ? hdf5::read_string_attribute(meta.get(), key.c_str(), where) : "";
    if (got != value) {
      throw Error(where + " was made with another " + key + " (/meta attribute '" + key +
                  "'): resume it with what it was started with (checkpoint or model file, and settings)");
    }
  }
}

// Whether event i follows event i - 1 in file order (sample, step, id).
bool in_file_order(const int64_t* sample, const int64_t* step, const int64_t* node, int64_t i) {
  if (i == 0) return true;
  if (sample[i] != sample[i - 1]) return sample[i] > sample[i - 1];
  if (step[i] != step[i - 1]) return step[i] > step[i - 1];
  return node[i] > node[i - 1];
}

}  // namespace

namespace detail {

Handle status_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), sc::kStatusLength);
  H5Tset_strpad(t.get(), H5T_STR_NULLTERM);
  return t;
}

void write_status(hid_t ds, const std::string& status) {
  std::string out = status.substr(0, sc::kStatusLength);
  out.resize(sc::kStatusLength, '\0');
  check(H5Dwrite(ds, status_type().get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "recording: cannot write the status");
}

// Nothing a check needs changes the file.
Handle open_read_only(const std::string& file) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), "recording: HDF5 lacks SWMR");
  // A SWMR reader retries metadata that fails its checksum (100 times, with
  // sleeps: a live writer may be mid-update). Our files' writers are gone:
  // a bad checksum is damage, and retrying it looked like a hang.
  check(H5Pset_metadata_read_attempts(fapl.get(), 1), "recording: cannot set metadata read attempts");
  Handle f(H5Fopen(file.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl.get()), H5Fclose);
  if (!f.ok()) f = Handle(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);  // not SWMR
  if (!f.ok()) throw Error("'" + file + "' is not a readable HDF5 file");
  sc::check_format(f.get(), "'" + file + "'");
  return f;
}

}  // namespace detail


struct RecordingFile::State {
  std::string path;
  RecordingLayout layout;
  Handle file{-1, H5Fclose};
  Handle counter{-1, H5Dclose};  // /meta/samples_committed
  Handle status{-1, H5Dclose};   // /meta/status
  struct Pop {
    Growing timestamps, node_ids, ptr;
    uint64_t spikes = 0;
  };
  std::vector<Pop> pops;
  std::vector<Growing> reports;
  std::vector<Handle> report_times;
  Growing label, predicted, counts, t_start, t_stop, layer_spikes, prediction_by_step;
  int64_t appended = 0;
  int64_t committed = 0;
  bool finished = false;
};

RecordingFile::RecordingFile(std::string path, RecordingLayout layout,
                             const std::vector<std::pair<std::string, std::string>>& meta, bool overwrite)
    : s_(std::make_unique<State>()) {
  hdf5::QuietHdf5 quiet;
  s_->path = std::move(path);
  s_->layout = std::move(layout);
  const RecordingLayout& L = s_->layout;
  validate(L);
  check_output_file(s_->path);
  if (!overwrite && exists(s_->path)) {
    throw Error("recording '" + s_->path + "' exists; pass --overwrite to replace it");
  }
  // The file is made under another name and becomes the .partial file only
  // once its structure is complete on disk: a run killed while creating it
  // leaves no half-made .partial (HDF5 metadata cut short) for --resume or
  // recover to trip over, only this name, which the next run overwrites.
  const std::string partial = partial_path();
  const std::string creating = partial + ".creating";
  // Whatever fails after this run made the file and before the rename (a
  // full disk, most often) takes the half-made file with it; HDF5 closes it
  // when s_ goes.
  struct RemoveOnFailure {
    const std::string& name;
    bool armed = false;
    ~RemoveOnFailure() {
      if (armed) ::unlink(name.c_str());
    }
  } remove_on_failure{creating};
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  // SWMR needs the latest file format.
  check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_LATEST, H5F_LIBVER_LATEST), "recording: HDF5 lacks SWMR");
  s_->file = Handle(H5Fcreate(creating.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!s_->file.ok()) {
    const int err = hdf5::failed_call_errno();
    // An empty file is what a failed create left (a full disk); a file with
    // bytes may be another run's, still being made (HDF5's lock refused it).
    struct stat st {};
    if (::stat(creating.c_str(), &st) == 0 && st.st_size == 0) ::unlink(creating.c_str());
    throw Error("recording: cannot create '" + creating + "'" + hdf5::io_cause(err));
  }
  remove_on_failure.armed = true;
  const hid_t f = s_->file.get();

  // Root: SONATA's magic and version, and ours.
  {
    Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
    Handle a(H5Acreate2(f, sc::attr_magic.name, sc::file_type(sc::attr_magic.type), scalar.get(), H5P_DEFAULT,
                        H5P_DEFAULT),
             H5Aclose);
    check(H5Awrite(a.get(), H5T_NATIVE_UINT32, &sc::kSonataMagic), "recording: cannot write magic");
    const hsize_t two = 2;
    Handle pair(H5Screate_simple(1, &two, nullptr), H5Sclose);
    Handle v(H5Acreate2(f, sc::attr_version.name, sc::file_type(sc::attr_version.type), pair.get(), H5P_DEFAULT,
                        H5P_DEFAULT),
             H5Aclose);
    check(H5Awrite(v.get(), H5T_NATIVE_UINT32, sc::kSonataVersion), "recording: cannot write version");
    hdf5::write_string_attribute(f, sc::attr_format.name, sc::kFormat);
    hdf5::write_int_attribute(f, sc::attr_format_version.name, sc::kFormatVersion);
  }

  // /meta: provenance attributes, status and the committed-samples counter.
  {
    Handle g = make_group(f, sc::meta);
    for (const auto& [k, v] : meta) hdf5::write_string_attribute(g.get(), k.c_str(), v);
    hdf5::write_int_attribute(g.get(), sc::attr_steps_per_sample.name, L.steps);
    hdf5::write_double_attribute(g.get(), sc::attr_dt_ms.name, L.dt_ms);
    if (L.first_sample > 0) hdf5::write_int_attribute(g.get(), sc::attr_first_sample.name, L.first_sample);
    Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
    s_->counter = Handle(H5Dcreate2(f, sc::samples_committed.path, sc::file_type(sc::samples_committed.type),
                                    scalar.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                         H5Dclose);
    if (!s_->counter.ok())
      throw Error("recording: cannot create /" + std::string(sc::samples_committed.path) + hdf5::failed_call_cause());
    const uint64_t zero = 0;
    write_scalar(s_->counter.get(), H5T_NATIVE_UINT64, &zero, "samples_committed");
    Handle st = detail::status_type();
    s_->status = Handle(H5Dcreate2(f, sc::status.path, st.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                        H5Dclose);
    if (!s_->status.ok())
      throw Error("recording: cannot create /" + std::string(sc::status.path) + hdf5::failed_call_cause());
    write_status(s_->status.get(), "running");
    make_group(f, sc::populations);
    for (const auto& p : L.spikes) {
      Handle pg = make_group(f, sc::population, p.name);
      hdf5::write_int_attribute(pg.get(), sc::attr_n_nodes.name, p.size);
      hdf5::write_int_attribute(pg.get(), sc::attr_layer.name, p.layer);
      std::vector<uint64_t> ids;
      for (int64_t i = 0; i < (p.node_ids.empty() ? p.size : 0); ++i) ids.push_back(static_cast<uint64_t>(i));
      for (auto i : p.node_ids) ids.push_back(static_cast<uint64_t>(i));
      write_fixed(f, sc::recorded_node_ids, p.name, ids.size(), ids.data());
    }
  }

  // /spikes/<pop>: one SONATA population per recorded layer. What SONATA
  // readers open stays readable by every HDF5 build (libsonata's PyPI wheels
  // have no zlib) unless deflate is asked for (the schema's filters).
  {
    make_group(f, sc::spikes);
    for (const auto& p : L.spikes) {
      Handle pg = make_group(f, sc::spike_population, p.name);
      write_sorting_by_time(pg.get());
      State::Pop pop;
      pop.timestamps = make_growing(f, sc::timestamps, p.name, 0, L.deflate_spikes);
      pop.node_ids = make_growing(f, sc::node_ids, p.name, 0, L.deflate_spikes);
      s_->pops.push_back(std::move(pop));
    }
  }

  // /report/<pop>: membrane potentials of the chosen neurons.
  {
    make_group(f, sc::report);
    for (const auto& p : L.traces) {
      const hsize_t n = p.node_ids.size();
      make_group(f, sc::report_population, p.name);
      s_->reports.push_back(make_growing(f, sc::report_data, p.name, n, L.deflate_spikes));
      make_group(f, sc::report_mapping, p.name);
      std::vector<uint64_t> ids(p.node_ids.begin(), p.node_ids.end()), ptr(n + 1);
      std::vector<uint32_t> elements(n, 0);
      for (hsize_t i = 0; i <= n; ++i) ptr[i] = i;
      write_fixed(f, sc::report_node_ids, p.name, n, ids.data());
      write_fixed(f, sc::report_index_pointers, p.name, n + 1, ptr.data());
      write_fixed(f, sc::report_element_ids, p.name, n, elements.data());
      const double t0 = static_cast<double>(L.first_sample * L.steps) * L.dt_ms;
      const double time[3] = {t0, t0, L.dt_ms};
      s_->report_times.push_back(write_fixed(f, sc::report_time, p.name, 3, time));
    }
  }

  // /samples: one row per sample, and each population's spike pointers.
  {
    make_group(f, sc::samples);
    const bool d = L.deflate_spikes;
    s_->label = make_growing(f, sc::label, "", 0, d);
    s_->predicted = make_growing(f, sc::predicted, "", 0, d);
    s_->counts = make_growing(f, sc::output_counts, "", static_cast<hsize_t>(L.classes), d);
    s_->t_start = make_growing(f, sc::t_start_ms, "", 0, d);
    s_->t_stop = make_growing(f, sc::t_stop_ms, "", 0, d);
    if (L.layers > 0) s_->layer_spikes = make_growing(f, sc::layer_spikes, "", static_cast<hsize_t>(L.layers), d);
    if (L.prediction_by_step) {
      s_->prediction_by_step = make_growing(f, sc::prediction_by_step, "", static_cast<hsize_t>(L.steps), d);
    }
    make_group(f, sc::spike_ptrs);
    for (size_t i = 0; i < L.spikes.size(); ++i) {
      s_->pops[i].ptr = make_growing(f, sc::spike_ptr, L.spikes[i].name, 0, d);
      const uint64_t zero = 0;
      s_->pops[i].ptr.append(&zero, 1, "spike_ptr");
    }
  }

  // Everything exists: from here on only raw data changes (SWMR's rule).
  check(H5Fstart_swmr_write(f), "recording: cannot start SWMR writing on '" + creating + "'");
  check(H5Fflush(f, H5F_SCOPE_GLOBAL), "recording: cannot flush '" + creating + "'");
  // (HDF5 keeps writing through its open descriptor, whatever the name.)
  if (std::rename(creating.c_str(), partial.c_str()) != 0) {
    throw Error("recording: cannot rename '" + creating + "' to '" + partial + "': " + std::strerror(errno));
  }
  remove_on_failure.armed = false;
}

std::string RecordingFile::final_path(const std::string& path) {
  const std::string suffix = ".partial";
  if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return path.substr(0, path.size() - suffix.size());
  }
  return path;
}

RecordingFile::RecordingFile() = default;
RecordingFile::RecordingFile(RecordingFile&&) noexcept = default;
RecordingFile& RecordingFile::operator=(RecordingFile&&) noexcept = default;

RecordingFile RecordingFile::resume(std::string path, RecordingLayout layout,
                                    const std::vector<std::pair<std::string, std::string>>& must_match) {
  hdf5::QuietHdf5 quiet;
  validate(layout);
  const std::string final_path = RecordingFile::final_path(path);
  const std::string partial = final_path + ".partial";
  // The file to continue: the unfinished one, or a recovered normal file.
  const bool recovered = !exists(partial);
  const std::string source = recovered ? final_path : partial;
  if (recovered && !exists(final_path)) throw Error("no unfinished recording '" + partial + "' to resume");
  const std::string where = "recording '" + source + "'";

  // Every check reads the file opened read-only: a refused resume leaves it
  // exactly as it was (bytes, name, status).
  sc::Contents c;
  {
    Handle f = open_read_only(source);
    if (recovered) {
      const std::string status = sc::read_status(f.get(), where);
      if (status != "recovered") {
        throw Error("recording '" + final_path + "' is finished (status " + status + "): nothing to resume");
      }
    }
    c = sc::check(f.get(), where, sc::Rows::kAtLeast);
    check_resumable(f.get(), c, layout, must_match, where);
    if (c.first_sample != layout.first_sample) {
      throw Error(where + " holds the samples from " + std::to_string(c.first_sample) + " on, this run's part starts at " +
                  std::to_string(layout.first_sample) + ": resume it with the world size it was started with");
    }
  }

  // All checks passed: from here on the file changes.
  RecordingFile r;
  r.s_ = std::make_unique<State>();
  State& s = *r.s_;
  s.path = final_path;
  s.layout = std::move(layout);
  const RecordingLayout& L = s.layout;
  s.file = open_writable(source);
  const hid_t f = s.file.get();
  truncate_to_committed(f, c, where);

  // Reopen every growing dataset where the last commit left it.
  s.label = open_growing(f, sc::label, "", where);
  s.predicted = open_growing(f, sc::predicted, "", where);
  s.counts = open_growing(f, sc::output_counts, "", where);
  s.t_start = open_growing(f, sc::t_start_ms, "", where);
  s.t_stop = open_growing(f, sc::t_stop_ms, "", where);
  if (L.layers > 0) s.layer_spikes = open_growing(f, sc::layer_spikes, "", where);
  if (L.prediction_by_step) s.prediction_by_step = open_growing(f, sc::prediction_by_step, "", where);
  for (const auto& p : L.spikes) {
    State::Pop pop;
    pop.timestamps = open_growing(f, sc::timestamps, p.name, where);
    pop.node_ids = open_growing(f, sc::node_ids, p.name, where);
    pop.ptr = open_growing(f, sc::spike_ptr, p.name, where);
    pop.spikes = std::find_if(c.populations.begin(), c.populations.end(), [&](const auto& x) { return x.name == p.name; })->events;
    s.pops.push_back(std::move(pop));
  }
  for (const auto& p : L.traces) {
    s.reports.push_back(open_growing(f, sc::report_data, p.name, where));
    s.report_times.push_back(open_dataset(f, sc::at(sc::report_time, p.name), where));
  }
  s.counter = open_dataset(f, sc::samples_committed.path, where);
  s.status = open_dataset(f, sc::status.path, where);
  write_status(s.status.get(), "running");
  Handle meta(H5Gopen2(f, sc::meta.path, H5P_DEFAULT), H5Gclose);
  if (!meta.ok()) throw Error(where + " has no group /meta");
  hdf5::write_int_attribute(meta.get(), sc::attr_resumed_at_sample.name, c.samples);
  s.appended = s.committed = c.samples;
  check(H5Fstart_swmr_write(f), "recording: cannot start SWMR writing on '" + source + "'");
  // A recovered file continues where it stopped, as an unfinished one.
  if (recovered && std::rename(final_path.c_str(), partial.c_str()) != 0) {
    throw Error("cannot rename '" + final_path + "' to '" + partial + "': " + std::strerror(errno));
  }
  return r;
}

SampleRows RecordingFile::read_rows() const {
  hdf5::QuietHdf5 quiet;
  const std::string where = "recording '" + partial_path() + "'";
  auto rows = [&](const Growing& g) { return read_int64(g.ds.get(), where).narrow(0, 0, s_->committed); };
  SampleRows r;
  r.labels = rows(s_->label);
  r.predicted = rows(s_->predicted);
  r.output_counts = rows(s_->counts);
  if (s_->layer_spikes.ds.ok()) r.layer_spikes = rows(s_->layer_spikes);
  if (s_->prediction_by_step.ds.ok()) r.prediction_by_step = rows(s_->prediction_by_step);
  return r;
}

std::string RecordingFile::meta_attribute(const std::string& key) const {
  hdf5::QuietHdf5 quiet;
  Handle meta(H5Gopen2(s_->file.get(), sc::meta.path, H5P_DEFAULT), H5Gclose);
  if (!meta.ok() || H5Aexists(meta.get(), key.c_str()) <= 0) return "";
  return hdf5::read_string_attribute(meta.get(), key.c_str(), "recording '" + partial_path() + "'");
}

std::string read_meta_attribute(const std::string& path, const std::string& key) {
  hdf5::QuietHdf5 quiet;
  const std::string final_path = RecordingFile::final_path(path);
  const std::string file = exists(final_path + ".partial") ? final_path + ".partial" : final_path;
  if (!exists(file)) throw Error("no recording '" + final_path + "' (nor '" + final_path + ".partial')");
  Handle f = open_read_only(file);
  Handle meta(H5Gopen2(f.get(), sc::meta.path, H5P_DEFAULT), H5Gclose);
  if (!meta.ok()) throw Error("recording '" + file + "' has no group /meta");
  if (H5Aexists(meta.get(), key.c_str()) <= 0) return "";
  return hdf5::read_string_attribute(meta.get(), key.c_str(), "recording '" + file + "'");
}

Recovered recover(const std::string& path, bool overwrite) {
  hdf5::QuietHdf5 quiet;
  Recovered r;
  r.path = RecordingFile::final_path(path);
  const std::string partial = r.path + ".partial";
  if (!exists(partial)) {
    if (!exists(r.path)) throw Error("no recording '" + partial + "' to recover");
    Handle f = open_read_only(r.path);
    throw Error("recording '" + r.path + "' is finished (status " + sc::read_status(f.get(), "'" + r.path + "'") +
                "): nothing to recover");
  }
  if (!overwrite && exists(r.path)) {
    throw Error("'" + r.path + "' exists; pass --overwrite to replace it with the recovered recording");
  }
  const std::string where = "recording '" + partial + "'";
  // Checked read-only first: a file recover refuses is left as it was.
  sc::Contents c;
  {
    Handle f = open_read_only(partial);
    r.previous_status = sc::read_status(f.get(), where);
    c = sc::check(f.get(), where, sc::Rows::kAtLeast);
  }
  {
    Handle f = open_writable(partial);
    truncate_to_committed(f.get(), c, where);
    Handle status = open_dataset(f.get(), sc::status.path, where);
    write_status(status.get(), "recovered");
    Handle meta(H5Gopen2(f.get(), sc::meta.path, H5P_DEFAULT), H5Gclose);
    if (!meta.ok()) throw Error(where + " has no group /meta");
    hdf5::write_string_attribute(meta.get(), sc::attr_recovered_from_status.name, r.previous_status);
    check(H5Fflush(f.get(), H5F_SCOPE_GLOBAL), "recording: cannot flush '" + partial + "'");
  }
  r.samples = c.samples;
  if (std::rename(partial.c_str(), r.path.c_str()) != 0) {
    throw Error("recording: cannot rename '" + partial + "' to '" + r.path + "': " + std::strerror(errno));
  }
  return r;
}

RecordingFile::~RecordingFile() {
  if (!s_ || s_->finished || !s_->file.ok()) return;
  try {
    finish("aborted");
  } catch (...) {
    // The file keeps what was committed; nothing more can be done here.
  }
}

void RecordingFile::append(const SampleBatch& b) {
  hdf5::QuietHdf5 quiet;
  const RecordingLayout& L = s_->layout;
  if (s_->finished) throw Error("recording: append after finish");
  const int64_t n = b.labels.size(0);
  TORCH_CHECK(b.predicted.size(0) == n && b.output_counts.dim() == 2 && b.output_counts.size(0) == n &&
                  b.output_counts.size(1) == L.classes,
              "recording: a batch of ", n, " samples needs predicted [", n, "] and output_counts [", n, ", ",
              L.classes, "], got ", b.predicted.sizes(), " and ", b.output_counts.sizes());
  TORCH_CHECK(b.spikes.size() == L.spikes.size() && b.traces.size() == L.traces.size(),
              "recording: the batch has ", b.spikes.size(), " spike and ", b.traces.size(),
              " trace populations, the layout ", L.spikes.size(), " and ", L.traces.size());
  if (L.layers > 0) {
    TORCH_CHECK(b.layer_spikes.defined() && b.layer_spikes.dim() == 2 && b.layer_spikes.size(0) == n &&
                    b.layer_spikes.size(1) == L.layers,
                "recording: layer_spikes must be [", n, ", ", L.layers, "]");
  }
  if (L.prediction_by_step) {
    TORCH_CHECK(b.prediction_by_step.defined() && b.prediction_by_step.dim() == 2 &&
                    b.prediction_by_step.size(0) == n && b.prediction_by_step.size(1) == L.steps,
                "recording: prediction_by_step must be [", n, ", ", L.steps, "]");
  }
  const double T = static_cast<double>(L.steps);
  const int64_t first = L.first_sample + s_->appended;  // the run's index of the batch's first sample

  // Spikes, then traces, then the sample rows and spike pointers.
  std::vector<std::vector<uint64_t>> ptr_rows(L.spikes.size());
  for (size_t p = 0; p < L.spikes.size(); ++p) {
    const SpikeEvents& e = b.spikes[p];
    const torch::Tensor sample = e.sample.to(torch::kLong).contiguous();
    const torch::Tensor step = e.step.to(torch::kLong).contiguous();
    const torch::Tensor node = e.node.to(torch::kLong).contiguous();
    const int64_t m = sample.numel();
    std::vector<double> ts(static_cast<size_t>(m));
    std::vector<uint64_t> ids(static_cast<size_t>(m));
    const int64_t* sp = sample.data_ptr<int64_t>();
    const int64_t* tp = step.data_ptr<int64_t>();
    const int64_t* np = node.data_ptr<int64_t>();
    std::vector<uint64_t> per(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < m; ++i) {
      TORCH_CHECK(sp[i] >= 0 && sp[i] < n && tp[i] >= 0 && tp[i] < L.steps && np[i] >= 0 &&
                      np[i] < L.spikes[p].size && in_file_order(sp, tp, np, i),
                  "recording: population '", L.spikes[p].name, "': event ", i,
                  " is out of range or out of (sample, step, id) order");
      ts[i] = (static_cast<double>(first + sp[i]) * T + static_cast<double>(tp[i])) * L.dt_ms;
      ids[i] = static_cast<uint64_t>(np[i]);
      ++per[static_cast<size_t>(sp[i])];
    }
    auto& pop = s_->pops[p];
    pop.timestamps.append(ts.data(), static_cast<hsize_t>(m), "timestamps");
    pop.node_ids.append(ids.data(), static_cast<hsize_t>(m), "node_ids");
    for (int64_t s = 0; s < n; ++s) {
      pop.spikes += per[static_cast<size_t>(s)];
      ptr_rows[p].push_back(pop.spikes);
    }
  }
  for (size_t r = 0; r < L.traces.size(); ++r) {
    const torch::Tensor v = b.traces[r].to(torch::kCPU, torch::kFloat).contiguous();
    const int64_t width = static_cast<int64_t>(L.traces[r].node_ids.size());
    TORCH_CHECK(v.dim() == 3 && v.size(0) == n && v.size(1) == L.steps && v.size(2) == width,
                "recording: traces of '", L.traces[r].name, "' must be [", n, ", ", L.steps, ", ", width, "], got ",
                v.sizes());
    s_->reports[r].append(v.data_ptr<float>(), static_cast<hsize_t>(n * L.steps), "report data");
  }
  std::vector<int16_t> label(n), pred(n);
  std::vector<double> t0(n), t1(n);
  const torch::Tensor lab = b.labels.to(torch::kLong).contiguous(), prd = b.predicted.to(torch::kLong).contiguous();
  for (int64_t s = 0; s < n; ++s) {
    label[s] = static_cast<int16_t>(lab.data_ptr<int64_t>()[s]);
    pred[s] = static_cast<int16_t>(prd.data_ptr<int64_t>()[s]);
    t0[s] = static_cast<double>(first + s) * T * L.dt_ms;
    t1[s] = static_cast<double>(first + s + 1) * T * L.dt_ms;
  }
  const torch::Tensor counts = b.output_counts.to(torch::kCPU, torch::kDouble).round().to(torch::kInt).contiguous();
  s_->label.append(label.data(), n, "label");
  s_->predicted.append(pred.data(), n, "predicted");
  s_->counts.append(counts.data_ptr<int32_t>(), n, "output_counts");
  s_->t_start.append(t0.data(), n, "t_start_ms");
  s_->t_stop.append(t1.data(), n, "t_stop_ms");
  if (L.layers > 0) {
    const torch::Tensor ls = b.layer_spikes.to(torch::kCPU, torch::kDouble).round().to(torch::kInt).contiguous();
    s_->layer_spikes.append(ls.data_ptr<int32_t>(), n, "layer_spikes");
  }
  if (L.prediction_by_step) {
    const torch::Tensor p = b.prediction_by_step.to(torch::kCPU, torch::kShort).contiguous();
    s_->prediction_by_step.append(p.data_ptr<int16_t>(), n, "prediction_by_step");
  }
  for (size_t p = 0; p < L.spikes.size(); ++p) s_->pops[p].ptr.append(ptr_rows[p].data(), n, "spike_ptr");
  s_->appended += n;
}

void RecordingFile::commit() {
  hdf5::QuietHdf5 quiet;
  if (s_->finished) throw Error("recording: commit after finish");
  // Everything appended reaches the file before what vouches for it (the
  // report's time axes, then the counter), each step flushed before the
  // next: every small contiguous dataset keeps its own sieve buffer, and one
  // H5Fflush writes those out in its own order (the counter went first, so a
  // run killed in between claimed samples its time axis did not cover).
  // Killed anywhere, the file holds at least what the counter claims.
  check(H5Fflush(s_->file.get(), H5F_SCOPE_GLOBAL), "recording: cannot flush '" + partial_path() + "'");
  const RecordingLayout& L = s_->layout;
  const double t_start = static_cast<double>(L.first_sample * L.steps) * L.dt_ms;
  const double t_stop = static_cast<double>((L.first_sample + s_->appended) * L.steps) * L.dt_ms;
  for (auto& t : s_->report_times) {
    const double time[3] = {t_start, t_stop, L.dt_ms};
    write_scalar(t.get(), H5T_NATIVE_DOUBLE, time, "report time");
    check(H5Dflush(t.get()), "recording: cannot flush a report's time axis in '" + partial_path() + "'");
  }
  const uint64_t n = static_cast<uint64_t>(s_->appended);
  write_scalar(s_->counter.get(), H5T_NATIVE_UINT64, &n, "samples_committed");
  check(H5Fflush(s_->file.get(), H5F_SCOPE_GLOBAL), "recording: cannot flush '" + partial_path() + "'");
  s_->committed = s_->appended;
}

void RecordingFile::finish(const std::string& status, const std::vector<std::pair<std::string, std::string>>& final_meta) {
  hdf5::QuietHdf5 quiet;
  if (s_->finished) return;
  commit();
  write_status(s_->status.get(), status);
  s_->finished = true;
  // Close every object, then reopen without SWMR to add attributes.
  s_->pops.clear();
  s_->reports.clear();
  s_->report_times.clear();
  s_->label = Growing{};
  s_->predicted = Growing{};
  s_->counts = Growing{};
  s_->t_start = Growing{};
  s_->t_stop = Growing{};
  s_->layer_spikes = Growing{};
  s_->prediction_by_step = Growing{};
  s_->counter = Handle(-1, H5Dclose);
  s_->status = Handle(-1, H5Dclose);
  s_->file = Handle(-1, H5Fclose);
  const std::string partial = partial_path();
  {
    Handle f(H5Fopen(partial.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    if (!f.ok()) throw Error("recording: cannot reopen '" + partial + "' to finish it" + hdf5::failed_call_cause());
    Handle meta(H5Gopen2(f.get(), sc::meta.path, H5P_DEFAULT), H5Gclose);
    for (const auto& [k, v] : final_meta) hdf5::write_string_attribute(meta.get(), k.c_str(), v);
  }
  if (status == "complete" && std::rename(partial.c_str(), s_->path.c_str()) != 0) {
    throw Error("recording: cannot rename '" + partial + "' to '" + s_->path + "': " + std::strerror(errno));
  }
}

std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

int64_t RecordingFile::samples_appended() const { return s_->appended; }
int64_t RecordingFile::samples_committed() const { return s_->committed; }
const std::string& RecordingFile::path() const { return s_->path; }
std::string RecordingFile::partial_path() const { return s_->path + ".partial"; }

}  // namespace snn::recording
