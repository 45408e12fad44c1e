#include "snn/recording/merged_recording.h"

#include <hdf5.h>
#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>

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
namespace sc = schema;


std::string name_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Every attribute of `from` onto `to` (type, shape and bytes as they are).
herr_t copy_one_attribute(hid_t from, const char* name, const H5A_info_t*, void* to_ptr) {
  const hid_t to = *static_cast<hid_t*>(to_ptr);
  Handle a(H5Aopen(from, name, H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(a.get()), H5Tclose), space(H5Aget_space(a.get()), H5Sclose);
  std::vector<char> bytes(H5Aget_storage_size(a.get()) + 1);
  if (H5Aread(a.get(), type.get(), bytes.data()) < 0) return -1;
  Handle b(H5Acreate2(to, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!b.ok() || H5Awrite(b.get(), type.get(), bytes.data()) < 0) return -1;
  return 0;
}
void copy_attributes(hid_t from, hid_t to, const std::string& what) {
  hid_t target = to;
  check(H5Aiterate2(from, H5_INDEX_NAME, H5_ITER_INC, nullptr, copy_one_attribute, &target),
        "recording: cannot copy the attributes of " + what);
}

Handle group_of(hid_t file, const std::string& path, hid_t source) {
  Handle g(H5Gcreate2(file, path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!g.ok()) throw Error("recording: cannot create group /" + path + hdf5::failed_call_cause());
  Handle src(H5Gopen2(source, path.c_str(), H5P_DEFAULT), H5Gclose);
  if (src.ok()) copy_attributes(src.get(), g.get(), "/" + path);
  return g;
}

struct Part {
  std::string path;
  sc::Contents c;  // c.first_sample: where the part starts in the run
};

// The rows of dataset `d` (for population `pop`) that part `p` holds.
hsize_t rows_of(const sc::Dataset& d, const Part& p, const std::string& pop) {
  switch (d.shape[0].kind) {
    case sc::Extent::kSamples: return static_cast<hsize_t>(p.c.samples);
    case sc::Extent::kSamplesPlus1: return static_cast<hsize_t>(p.c.samples + 1);
    case sc::Extent::kSamplesTimesSteps: return static_cast<hsize_t>(p.c.samples * p.c.steps);
    case sc::Extent::kEvents:
      for (const auto& q : p.c.populations) {
        if (q.name == pop) return q.events;
      }
      break;
    default: break;
  }
  throw InternalError("merged recording: no rows for /" + sc::at(d, pop));
}

// Dataset `d` (population `pop`) as a virtual dataset over the parts' rows.
void write_virtual(hid_t out, hid_t first_part, const std::vector<Part>& parts, const sc::Dataset& d,
                   const std::string& pop, const std::string& folder) {
  const std::string path = sc::at(d, pop);
  Handle src0 = hdf5::open_dataset(first_part, path, "recording '" + parts[0].path + "'");
  Handle type(H5Dget_type(src0.get()), H5Tclose);
  Handle space0(H5Dget_space(src0.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space0.get());
  hsize_t dims[2] = {0, 0};
  H5Sget_simple_extent_dims(space0.get(), dims, nullptr);
  hsize_t total = 0;
  for (const auto& p : parts) total += rows_of(d, p, pop);
  hsize_t vdims[2] = {total, dims[1]};
  Handle vspace(H5Screate_simple(rank, vdims, nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  hsize_t at = 0;
  for (const auto& p : parts) {
    const hsize_t n = rows_of(d, p, pop);
    if (n == 0) continue;
    hsize_t start[2] = {at, 0}, count[2] = {n, dims[1]};
    check(H5Sselect_hyperslab(vspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
          "recording: cannot map /" + path);
    Handle sspace(H5Screate_simple(rank, count, nullptr), H5Sclose);
    // Beside the merged file: named relative to its folder, which HDF5
    // searches first, so the parts move with it.
    const std::string source = parent_folder(p.path) == folder ? name_of(p.path) : p.path;
    check(H5Pset_virtual(dcpl.get(), vspace.get(), source.c_str(), path.c_str(), sspace.get()),
          "recording: cannot map /" + path + " onto '" + p.path + "'");
    at += n;
  }
  check(H5Sselect_all(vspace.get()), "recording: cannot map /" + path);
  Handle ds(H5Dcreate2(out, path.c_str(), type.get(), vspace.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw Error("recording: cannot create the virtual dataset /" + path + hdf5::failed_call_cause());
  copy_attributes(src0.get(), ds.get(), "/" + path);
}

// A population's spike pointers over all parts: each part's counted on
// from the spikes of the parts before it.
void write_spike_ptr(hid_t out, const std::vector<Part>& parts, const std::string& pop) {
  const std::string path = sc::at(sc::spike_ptr, pop);
  std::vector<uint64_t> all{0};
  uint64_t before = 0;
  for (const auto& p : parts) {
    Handle f = detail::open_read_only(p.path);
    Handle ds = hdf5::open_dataset(f.get(), path, "recording '" + p.path + "'");
    std::vector<uint64_t> ptr;
    hdf5::read_rows(ds.get(), H5T_NATIVE_UINT64, 0, static_cast<hsize_t>(p.c.samples + 1), 1, ptr,
                    "recording '" + p.path + "'");
    for (size_t s = 1; s < ptr.size(); ++s) all.push_back(before + ptr[s]);
    before += ptr.back();
  }
  const hsize_t n = all.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle ds(H5Dcreate2(out, path.c_str(), sc::file_type(sc::spike_ptr.type), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                       H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok()) throw Error("recording: cannot create /" + path + hdf5::failed_call_cause());
  check(H5Dwrite(ds.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()),
        "recording: cannot write /" + path);
}

void write_scalar_dataset(hid_t out, const char* path, hid_t mem_type, const void* value) {
  Handle ds(H5Dopen2(out, path, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw Error(std::string("recording: no /") + path);
  check(H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, value), std::string("recording: cannot write /") + path);
}

std::string describe(const sc::Contents& c) {
  nlohmann::json j{{"steps", c.steps}, {"dt_ms", c.dt_ms}, {"classes", c.classes}, {"layers", c.layers},
                   {"prediction_by_step", c.prediction_by_step}};
  for (const auto& p : c.populations) j["spikes"][p.name] = {{"n_nodes", p.n_nodes}, {"recorded", p.recorded}};
  for (const auto& r : c.reports) j["report"][r.name] = r.node_ids;
  return j.dump();
}

}  // namespace

std::string part_path(const std::string& path, int64_t rank, int64_t world_size) {
  const bool h5 = path.size() > 3 && path.compare(path.size() - 3, 3, ".h5") == 0;
  const std::string stem = h5 ? path.substr(0, path.size() - 3) : path;
  return stem + ".rank" + std::to_string(rank) + "-of-" + std::to_string(world_size) + ".h5";
}

void write_merged_recording(const std::string& path, const std::vector<std::string>& part_paths, bool overwrite,
                            const std::vector<std::pair<std::string, std::string>>& extra_meta) {
  hdf5::QuietHdf5 quiet;
  if (part_paths.empty()) throw InternalError("write_merged_recording: no parts");
  struct stat st {};
  if (!overwrite && ::stat(path.c_str(), &st) == 0) {
    throw Error("recording '" + path + "' exists; pass --overwrite to replace it");
  }
  // Every check first: nothing is written for parts that do not fit.
  std::vector<Part> parts;
  for (const auto& pp : part_paths) {
    Part p;
    p.path = pp;
    const std::string where = "recording '" + pp + "'";
    Handle f = detail::open_read_only(pp);
    p.c = sc::check(f.get(), where, sc::Rows::kExact);
    if (p.c.status != "complete") {
      throw Error("part " + where + " is " + p.c.status + ", not complete: finish it (snnsim run --resume) first");
    }
    if (!parts.empty()) {
      const Part& prev = parts.back();
      if (p.c.first_sample != prev.c.first_sample + prev.c.samples) {
        throw Error("part " + where + " starts at sample " + std::to_string(p.c.first_sample) + ", but part '" +
                    prev.path + "' ends before sample " + std::to_string(prev.c.first_sample + prev.c.samples) +
                    ": the parts must follow each other");
      }
      if (describe(p.c) != describe(parts[0].c)) {
        throw Error("part " + where + " records other populations, neurons, T, dt or classes than part '" +
                    parts[0].path + "'");
      }
    }
    parts.push_back(std::move(p));
  }
  int64_t total = 0;
  for (const auto& p : parts) total += p.c.samples;

  check_output_file(path);
  const std::string partial = path + ".partial";
  std::remove(partial.c_str());
  {
    Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_LATEST), "recording: no file-format bounds");
    Handle out(H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
    if (!out.ok()) throw Error("recording: cannot create '" + partial + "'" + hdf5::failed_call_cause());
    const hid_t o = out.get();
    Handle first = detail::open_read_only(parts[0].path);
    const hid_t f0 = first.get();
    const std::string folder = parent_folder(path);
    copy_attributes(f0, o, "the root");

    // /meta: the first part's provenance, with the whole's counter and status.
    Handle ocpy(H5Pcreate(H5P_OBJECT_COPY), H5Pclose);
    check(H5Ocopy(f0, sc::meta.path, o, sc::meta.path, ocpy.get(), H5P_DEFAULT), "recording: cannot copy /meta");
    const uint64_t committed = static_cast<uint64_t>(total);
    write_scalar_dataset(o, sc::samples_committed.path, H5T_NATIVE_UINT64, &committed);
    {
      Handle status(H5Dopen2(o, sc::status.path, H5P_DEFAULT), H5Dclose);
      if (!status.ok()) throw Error(std::string("recording: no /") + sc::status.path);
      detail::write_status(status.get(), "complete");
    }
    {
      Handle meta(H5Gopen2(o, sc::meta.path, H5P_DEFAULT), H5Gclose);
      nlohmann::json names = nlohmann::json::array();
      for (const auto& p : parts) names.push_back(name_of(p.path));
      hdf5::write_string_attribute(meta.get(), "parts", names.dump());
      hdf5::remove_attribute(meta.get(), "rank");        // the first part's own
      hdf5::remove_attribute(meta.get(), "run_output");  // (the parts' pointer to this file)
      for (const auto& [k, v] : extra_meta) hdf5::write_string_attribute(meta.get(), k.c_str(), v);
    }

    // The groups, with their attributes (SONATA's sorting among them).
    const sc::Contents& c = parts[0].c;
    group_of(o, sc::spikes.path, f0);
    for (const auto& p : c.populations) group_of(o, sc::at(sc::spike_population, p.name), f0);
    // /report too where nothing was recorded there: the format requires the
    // group (a run without --record-v has it empty), and without it the
    // merged file was refused by every reader.
    group_of(o, sc::report.path, f0);
    for (const auto& r : c.reports) {
      group_of(o, sc::at(sc::report_population, r.name), f0);
      group_of(o, sc::at(sc::report_mapping, r.name), f0);
    }
    group_of(o, sc::samples.path, f0);
    group_of(o, sc::spike_ptrs.path, f0);

    for (const sc::Dataset* d : sc::kDatasets) {
      const std::string p = d->path;
      if (p.rfind(sc::meta.path, 0) == 0) continue;  // copied with /meta
      const bool per_report = p.rfind(std::string(sc::report.path) + "/", 0) == 0;
      const bool per_population = !per_report && p.find("{pop}") != std::string::npos;
      std::vector<std::string> pops{""};
      if (per_report) {
        pops.clear();
        for (const auto& r : c.reports) pops.push_back(r.name);
      } else if (per_population) {
        pops.clear();
        for (const auto& q : c.populations) pops.push_back(q.name);
      }
      for (const auto& pop : pops) {
        const std::string at = sc::at(*d, pop);
        if (d->optional && H5Lexists(f0, at.c_str(), H5P_DEFAULT) <= 0) continue;
        if (d == &sc::spike_ptr) {
          write_spike_ptr(o, parts, pop);
        } else if (d == &sc::report_time) {
          check(H5Ocopy(f0, at.c_str(), o, at.c_str(), ocpy.get(), H5P_DEFAULT), "recording: cannot copy /" + at);
          const double t0 = static_cast<double>(parts[0].c.first_sample * c.steps) * c.dt_ms;
          const double time[3] = {t0, t0 + static_cast<double>(total * c.steps) * c.dt_ms, c.dt_ms};
          write_scalar_dataset(o, at.c_str(), H5T_NATIVE_DOUBLE, time);
        } else if (d->growing()) {
          write_virtual(o, f0, parts, *d, pop, folder);
        } else {
          check(H5Ocopy(f0, at.c_str(), o, at.c_str(), ocpy.get(), H5P_DEFAULT), "recording: cannot copy /" + at);
        }
      }
    }
    check(H5Fflush(o, H5F_SCOPE_GLOBAL), "recording: cannot write '" + partial + "'");
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    throw Error("recording: cannot rename '" + partial + "' to '" + path + "'");
  }
}

}  // namespace snn::recording
