// Spike recordings (HDF5): snn::analysis::analyze_recording and read_spikes.
//
// Flipping bytes of an HDF5 file mostly tests HDF5's own parser, which
// rejects the file before our code sees it. So most mutants are made
// through HDF5 instead: the file stays valid HDF5 and what changes is what
// our reader must validate (values of datasets and attributes, extents,
// ranks, types, missing objects).

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "snn/analysis/analysis.h"
#include "snn/core/error.h"
#include "targets.h"

namespace snn::fuzz {
namespace {

// Every object below the root, in name order (deterministic).
herr_t collect(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

int64_t interesting_int(Rng& rng) {
  const auto& ints = interesting_integers();
  return static_cast<int64_t>(ints[rng.below(ints.size())]);
}

double interesting_double(Rng& rng) {
  static const double values[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(), 0.0, -0.0, -1.0, 0.5, 1e-300, 1e300,
                                  std::numeric_limits<double>::denorm_min()};
  return rng.one_in(2) ? values[rng.below(std::size(values))] : static_cast<double>(interesting_int(rng));
}

const char* interesting_string(Rng& rng) {
  static const char* values[] = {"", "complete", "recovered", "running", "aborted", "snnsim-recording", "x", "hidden",
                                 "output", "input", "by_id", "by_time",
                                 "a string of many characters, longer than any field it replaces in the recording"};
  return values[rng.below(std::size(values))];
}

// Writes one value (or every value) of a numeric or fixed-string dataset or attribute.
void write_value(hid_t obj, bool is_attribute, Rng& rng) {
  const hid_t type = is_attribute ? H5Aget_type(obj) : H5Dget_type(obj);
  const hid_t space = is_attribute ? H5Aget_space(obj) : H5Dget_space(obj);
  const H5T_class_t cls = H5Tget_class(type);
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  const int rank = H5Sget_simple_extent_ndims(space);
  const bool fixed_string = cls == H5T_STRING && H5Tis_variable_str(type) <= 0;
  if (n > 0 && n < (1 << 20) && rank >= 0 && rank <= 3 && (cls == H5T_INTEGER || cls == H5T_FLOAT || fixed_string)) {
    // Unsigned as unsigned, so that 2^64 - 1 arrives as such (HDF5 clamps
    // a negative int64 to 0).
    hid_t mem_type = cls == H5T_FLOAT ? H5T_NATIVE_DOUBLE
                     : H5Tget_sign(type) == H5T_SGN_NONE ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64;
    std::vector<char> buffer;
    if (cls == H5T_STRING) {
      mem_type = H5Tcopy(type);
      buffer.assign(H5Tget_size(type) * static_cast<size_t>(n), '\0');
      const std::string s = interesting_string(rng);
      for (hssize_t i = 0; i < n; ++i) {
        std::copy_n(s.begin(), std::min(s.size(), H5Tget_size(type)), buffer.begin() + i * static_cast<hssize_t>(H5Tget_size(type)));
      }
    } else {
      buffer.resize(8 * static_cast<size_t>(n));
    }
    if (is_attribute || rng.one_in(4)) {
      // All values (attributes are written whole): read, change one or all, write back.
      if (cls != H5T_STRING) {
        if (is_attribute) H5Aread(obj, mem_type, buffer.data());
        else H5Dread(obj, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data());
        const bool all = rng.one_in(4);
        const size_t one = static_cast<size_t>(rng.below(static_cast<uint64_t>(n)));
        for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
          if (!all && i != one) continue;
          if (cls == H5T_FLOAT) {
            const double v = interesting_double(rng);
            std::memcpy(buffer.data() + 8 * i, &v, 8);
          } else {
            const int64_t v = interesting_int(rng);
            std::memcpy(buffer.data() + 8 * i, &v, 8);
          }
        }
      }
      if (is_attribute) H5Awrite(obj, mem_type, buffer.data());
      else H5Dwrite(obj, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data());
    } else if (cls != H5T_STRING && rank >= 1) {
      // One element.
      hsize_t dims[3] = {1, 1, 1}, start[3] = {0, 0, 0}, count[3] = {1, 1, 1};
      H5Sget_simple_extent_dims(space, dims, nullptr);
      for (int d = 0; d < rank; ++d) start[d] = rng.below(dims[d]);
      H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
      const hid_t mem = H5Screate_simple(1, count, nullptr);
      if (cls == H5T_FLOAT) {
        const double v = interesting_double(rng);
        H5Dwrite(obj, mem_type, mem, space, H5P_DEFAULT, &v);
      } else {
        const int64_t v = interesting_int(rng);
        H5Dwrite(obj, mem_type, mem, space, H5P_DEFAULT, &v);
      }
      H5Sclose(mem);
    }
    if (cls == H5T_STRING) H5Tclose(mem_type);
  }
  H5Sclose(space);
  H5Tclose(type);
}

// A dataset of a random shape and type where `name` was.
void replace_dataset(hid_t file, const std::string& name, Rng& rng) {
  H5Ldelete(file, name.c_str(), H5P_DEFAULT);
  const int rank = static_cast<int>(rng.below(4));
  hsize_t dims[3];
  for (int d = 0; d < rank; ++d) dims[d] = rng.below(6);
  const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, nullptr);
  const uint64_t kind = rng.below(3);
  const hid_t type = kind == 0 ? H5Tcopy(H5T_STD_I64LE) : kind == 1 ? H5Tcopy(H5T_IEEE_F64LE) : H5Tcopy(H5T_C_S1);
  if (kind == 2) H5Tset_size(type, 1 + rng.below(16));
  const hid_t ds = H5Dcreate2(file, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (ds >= 0) {
    write_value(ds, false, rng);
    H5Dclose(ds);
  }
  H5Tclose(type);
  H5Sclose(space);
}

void edit(hid_t file, Rng& rng) {
  std::vector<std::string> objects{"."};
  H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect, &objects);
  const std::string& name = objects[rng.below(objects.size())];
  const hid_t obj = H5Oopen(file, name.c_str(), H5P_DEFAULT);
  if (obj < 0) return;
  const bool dataset = H5Iget_type(obj) == H5I_DATASET;
  std::vector<std::string> attributes;
  hsize_t at = 0;
  H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &at, collect_attribute, &attributes);
  const uint64_t choice = rng.below(8);
  if (choice <= 2 && dataset) {
    write_value(obj, false, rng);
  } else if (choice <= 4 && !attributes.empty()) {
    const std::string& a = attributes[rng.below(attributes.size())];
    if (rng.one_in(5)) {
      H5Adelete(obj, a.c_str());
    } else {
      const hid_t attr = H5Aopen(obj, a.c_str(), H5P_DEFAULT);
      if (attr >= 0) {
        write_value(attr, true, rng);
        H5Aclose(attr);
      }
    }
  } else if (choice == 5 && dataset) {
    // Shrink or grow a chunked dataset's extent (its unwritten rows read as 0).
    const hid_t space = H5Dget_space(obj);
    hsize_t dims[3] = {0, 0, 0}, maxdims[3] = {0, 0, 0};
    const int rank = H5Sget_simple_extent_dims(space, dims, maxdims);
    H5Sclose(space);
    if (rank >= 1 && rank <= 3) {
      const hsize_t d = dims[0];
      const hsize_t options[] = {0, d > 0 ? d - 1 : 0, d / 2, d + 1, 2 * d + 1, d + 1000};
      dims[0] = options[rng.below(std::size(options))];
      H5Dset_extent(obj, dims);
    }
  } else if (choice == 6 && name != ".") {
    H5Oclose(obj);
    if (rng.one_in(2)) {
      H5Ldelete(file, name.c_str(), H5P_DEFAULT);
    } else {
      replace_dataset(file, name, rng);
    }
    return;
  } else if (choice == 7) {
    // A root attribute of the wrong type or value.
    const char* names[] = {"format", "format_version", "magic"};
    const char* a = names[rng.below(std::size(names))];
    const hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
    H5Adelete(root, a);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(root, a, rng.one_in(2) ? H5T_IEEE_F64LE : H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attr >= 0) {
      write_value(attr, true, rng);
      H5Aclose(attr);
    }
    H5Sclose(space);
    H5Gclose(root);
  }
  H5Oclose(obj);
}

void prepare_recording(const std::string& bytes, bool bytes_mutated, Rng& rng, const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  write_file(path, bytes);
  // Edits go into intact files only: HDF5 1.10 cannot close a damaged file
  // it has written to (H5Fclose fails and the file stays open; closing the
  // library then crashes in H5F__close_cb).
  if (bytes_mutated) return;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return;
  for (uint64_t k = 1 + rng.below(rng.one_in(4) ? 8 : 2); k > 0; --k) edit(file, rng);
  H5Fclose(file);
  // The leak check after the readers must blame them only.
  if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) > 0) {
    hid_t ids[8];
    const ssize_t n = H5Fget_obj_ids(H5F_OBJ_ALL, H5F_OBJ_ALL, 8, ids);
    std::string what;
    for (ssize_t i = 0; i < n; ++i) what += " " + std::to_string(static_cast<int>(H5Iget_type(ids[i])));  // H5I_type_t
    throw std::logic_error("fuzz harness: editing left HDF5 objects open:" + what);
  }
}

void check_stats(const analysis::RecordingStats& r) {
  int64_t confused = 0;
  for (const auto& row : r.confusion) {
    if (static_cast<int64_t>(row.size()) != r.classes) throw Defect("confusion matrix is not classes x classes");
    for (int64_t c : row) confused += c;
  }
  if (confused != r.samples) throw Defect("confusion matrix does not count every sample once");
  for (const auto& p : r.populations) {
    if (p.neuron_spikes.size() != p.node_ids.size()) throw Defect("per-neuron counts of another size than the neurons");
    int64_t sum = 0;
    for (int64_t c : p.neuron_spikes) sum += c;
    if (sum != p.spikes) throw Defect("per-neuron spike counts do not add up");
  }
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

void check_recording(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  std::exception_ptr rejected;
  // The spikes of every population analysis found, or (when it rejected
  // the file) of those the corpus has.
  std::set<std::string> populations = {"input", "hidden", "output"};
  try {
    const analysis::RecordingStats r = analysis::analyze_recording(path);
    check_stats(r);
    populations.clear();
    for (const auto& p : r.populations) populations.insert(p.name);
    // Chunk by chunk (16 bytes: one event at a time) must give the same.
    analysis::AnalysisOptions tiny;
    tiny.chunk_bytes = 16;
    const analysis::RecordingStats s = analysis::analyze_recording(path, tiny);
    if (s.populations.size() != r.populations.size()) throw Defect("chunked analysis found other populations");
    for (size_t i = 0; i < r.populations.size(); ++i) {
      const auto &a = r.populations[i], &b = s.populations[i];
      if (a.neuron_spikes != b.neuron_spikes || a.isi_histogram != b.isi_histogram || !same(a.fano, b.fano)) {
        throw Defect("chunked analysis differs from the whole-sample one for population " + a.name);
      }
    }
  } catch (const Error&) {
    rejected = std::current_exception();
  }
  for (const std::string& name : populations) {
    try {
      const analysis::SpikeTrains t = analysis::read_spikes(path, name, 0, int64_t{1} << 40);
      if (t.t_ms.size() != t.node_ids.size()) throw Defect("read_spikes: times and ids differ in number");
      if (t.sample_start_ms.empty()) throw Defect("read_spikes: no sample boundaries");
    } catch (const Error& e) {
      // A population analysis did not find is no defect of the file.
      const bool absent = std::string(e.what()).find("records no population") != std::string::npos;
      if (!rejected && !absent) rejected = std::current_exception();
    }
  }
  // Every HDF5 object the readers opened is closed again, error or not.
  const ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open > 0) throw Defect("the readers left " + std::to_string(open) + " HDF5 objects open");
  if (rejected) std::rethrow_exception(rejected);
}

}  // namespace

Target recording_target() {
  Target t;
  t.name = "recording";
  t.file_name = "input.h5";
  t.mutator.max_size = 1 << 20;
  t.mutator.dictionary = {"HDF", "TREE", "SNOD", "OHDR", "BTHD", "FRHP", "snnsim-recording"};
  t.mutate_bytes_one_in = 4;
  t.grow_pool = false;
  t.prepare = prepare_recording;
  t.check = check_recording;
  return t;
}

}  // namespace snn::fuzz
