#include "snn/recording/detail/schema_check.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"

namespace snn::recording::schema {
namespace {

using hdf5::Handle;

constexpr hsize_t kBlock = 65536;  // pointer rows read at once while checking

std::string str(uint64_t v) { return std::to_string(v); }

const char* type_name(Type t) {
  switch (t) {
    case Type::kI16: return "int16";
    case Type::kU32: return "uint32";
    case Type::kU64: return "uint64";
    case Type::kI64: return "int64";
    case Type::kF32: return "float32";
    case Type::kF64: return "float64";
    case Type::kStr: return "a fixed-length string";
    case Type::kEnumU8: return "a uint8 enum";
  }
  return "?";
}

// Whether an HDF5 type can be read as `want` (HDF5 converts within a class:
// a file may hold int64 labels; it may not hold strings where numbers go).
bool type_fits(hid_t type, Type want) {
  const H5T_class_t c = H5Tget_class(type);
  switch (want) {
    case Type::kI16:
    case Type::kU32:
    case Type::kU64:
    case Type::kI64:
      return c == H5T_INTEGER && H5Tget_size(type) <= 8;
    case Type::kF32:
    case Type::kF64:
      return c == H5T_FLOAT && H5Tget_size(type) <= 8;
    case Type::kStr:
      return c == H5T_STRING && H5Tis_variable_str(type) == 0;
    case Type::kEnumU8:
      return c == H5T_ENUM;
  }
  return false;
}

// The quantities shapes refer to; -1 = not known yet (learnt from the first
// dataset that has it).
struct Known {
  int64_t samples = -1, steps = -1, events = -1, classes = -1, layers = -1, recorded = -1, width = -1;
};

// The value an extent must have, or -1 when it is learnt from the file.
// Sets `learn` to the variable to fill in that case.
int64_t expected(const Extent& e, Known& k, int64_t*& learn, const std::string& what) {
  learn = nullptr;
  auto product = [&](int64_t a, int64_t b) {
    int64_t out = 0;
    if (__builtin_mul_overflow(a, b, &out)) throw Error(what + ": " + str(a) + " x " + str(b) + " rows overflow");
    return out;
  };
  int64_t* slot = nullptr;
  switch (e.kind) {
    case Extent::kFixed: return e.fixed;
    case Extent::kSamples: return k.samples;
    case Extent::kSamplesPlus1: return k.samples + 1;
    case Extent::kSamplesTimesSteps: return product(k.samples, k.steps);
    case Extent::kEvents: slot = &k.events; break;
    case Extent::kSteps: return k.steps;
    case Extent::kClasses: slot = &k.classes; break;
    case Extent::kLayers: slot = &k.layers; break;
    case Extent::kRecorded: slot = &k.recorded; break;
    case Extent::kWidth: slot = &k.width; break;
    case Extent::kWidthPlus1: return k.width < 0 ? -1 : k.width + 1;
  }
  if (*slot >= 0) return *slot;
  learn = slot;
  return -1;
}

std::string shape_text(const hsize_t* dims, int rank) {
  std::string out = "[";
  for (int i = 0; i < rank; ++i) out += (i ? ", " : "") + str(dims[i]);
  return out + "]";
}

// Every source of the virtual dataset `ds` exists (named relative to the
// file's folder, as HDF5 resolves it) and its dataset covers the mapping.
void check_virtual_sources(hid_t file, hid_t ds, hid_t dcpl, const std::string& what) {
  size_t count = 0;
  if (H5Pget_virtual_count(dcpl, &count) < 0) throw Error(what + ": its virtual mappings cannot be read");
  const ssize_t name_length = H5Fget_name(file, nullptr, 0);
  std::string name(static_cast<size_t>(std::max<ssize_t>(name_length, 0)) + 1, '\0');
  H5Fget_name(file, name.data(), name.size());
  name.resize(static_cast<size_t>(std::max<ssize_t>(name_length, 0)));
  const auto slash = name.rfind('/');
  const std::string folder = slash == std::string::npos ? "" : name.substr(0, slash + 1);
  (void)ds;
  for (size_t i = 0; i < count; ++i) {
    const ssize_t fl = H5Pget_virtual_filename(dcpl, i, nullptr, 0), dl = H5Pget_virtual_dsetname(dcpl, i, nullptr, 0);
    if (fl < 0 || dl < 0) throw Error(what + ": virtual mapping " + str(i) + " cannot be read");
    std::string source(static_cast<size_t>(fl) + 1, '\0'), dataset(static_cast<size_t>(dl) + 1, '\0');
    H5Pget_virtual_filename(dcpl, i, source.data(), source.size());
    H5Pget_virtual_dsetname(dcpl, i, dataset.data(), dataset.size());
    source.resize(static_cast<size_t>(fl));
    dataset.resize(static_cast<size_t>(dl));
    const std::string path = source.empty() || source[0] == '/' ? source : folder + source;
    Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, H5P_DEFAULT), H5Fclose);
    if (!f.ok()) {
      throw Error(what + " is a view of '" + path + "', which is missing or unreadable: keep a merged recording's "
                  "parts beside it");
    }
    Handle src(H5Dopen2(f.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
    Handle mapped(H5Pget_virtual_srcspace(dcpl, i), H5Sclose);
    if (!src.ok() || !mapped.ok()) throw Error(what + ": '" + path + "' has no dataset " + dataset);
    Handle have(H5Dget_space(src.get()), H5Sclose);
    if (H5Sget_simple_extent_npoints(have.get()) < H5Sget_select_npoints(mapped.get())) {
      throw Error(what + ": '" + path + "' holds fewer values in " + dataset + " than the view maps");
    }
  }
}

// Opens dataset `d` (for population `pop`) and checks its type, rank and
// extents against the schema and what is known; learns unknown quantities.
// An absent optional dataset gives an invalid handle.
Handle open_checked(hid_t file, const Dataset& d, const std::string& pop, Known& k, Rows rows, const std::string& where) {
  const std::string path = at(d, pop);
  const std::string what = where + ": dataset /" + path;
  if (H5Lexists(file, path.c_str(), H5P_DEFAULT) <= 0 || H5Oexists_by_name(file, path.c_str(), H5P_DEFAULT) <= 0) {
    if (d.optional) return Handle(-1, H5Dclose);
    throw Error(where + " has no dataset /" + path + " (the recording format requires it)");
  }
  Handle ds(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw Error(what + " is not a dataset");
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  if (!type.ok() || !type_fits(type.get(), d.type)) throw Error(what + " is not " + type_name(d.type));
  if (d.type == Type::kStr && d.length > 0 && H5Tget_size(type.get()) != d.length) {
    throw Error(what + " is not a string of " + str(d.length) + " bytes");
  }
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  hsize_t dims[H5S_MAX_RANK] = {};
  if (rank >= 0 && rank <= H5S_MAX_RANK) H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  if (rank != d.rank) {
    throw Error(what + " has shape " + shape_text(dims, std::max(rank, 0)) + ", the format gives it " +
                std::to_string(d.rank) + " dimension(s)");
  }
  hsize_t used[H5S_MAX_RANK] = {};  // what must be stored: an unfinished file's rows past the commit need not
  for (int i = 0; i < rank; ++i) {
    used[i] = dims[i];
    if (dims[i] > static_cast<hsize_t>(std::numeric_limits<int64_t>::max() / 16)) {
      throw Error(what + " has an impossible extent " + str(dims[i]));
    }
    const auto got = static_cast<int64_t>(dims[i]);
    int64_t* learn = nullptr;
    const int64_t want = expected(d.shape[i], k, learn, what);
    if (learn) {
      *learn = got;
      continue;
    }
    const bool at_least = rows == Rows::kAtLeast && i == 0 && d.growing();
    if (at_least ? got < want : got != want) {
      throw Error(what + " has shape " + shape_text(dims, rank) + ": dimension " + std::to_string(i) + " should be " +
                  (at_least ? "at least " : "") + std::to_string(want) + describe_extent(d.shape[i]));
    }
    used[i] = static_cast<hsize_t>(want);
  }
  // The storage must be able to hold the values the dataset claims: a
  // damaged extent (a huge number over unwritten chunks) would otherwise
  // make a reader allocate for, or spend hours on, fill values. Scale-offset
  // packs constant ids into almost nothing; those datasets match a
  // sibling's extent instead.
  Handle layout_plist(H5Dget_create_plist(ds.get()), H5Pclose);
  if (layout_plist.ok() && H5Pget_layout(layout_plist.get()) == H5D_VIRTUAL) {
    // A view of other files (the parts of a run over several processes):
    // each must be there and hold what is mapped, or readers would get
    // fill values for it without a word.
    check_virtual_sources(file, ds.get(), layout_plist.get(), what);
  } else if (rank > 0 && d.filter != Filter::kSpikeIds) {
    double elements = 1;
    for (int i = 0; i < rank; ++i) elements *= static_cast<double>(used[i]);
    Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
    const bool filtered = dcpl.ok() && H5Pget_nfilters(dcpl.get()) > 0;
    const double bytes = elements * static_cast<double>(H5Tget_size(type.get()));
    const double stored = static_cast<double>(H5Dget_storage_size(ds.get()));
    const double ratio = filtered ? static_cast<double>(kMax_compression_ratio) : 1.0;
    if (bytes > stored * ratio + 65536.0) {
      throw Error(what + " claims " + shape_text(dims, rank) + " values but stores only " +
                  str(static_cast<uint64_t>(stored)) + " bytes: its extent is damaged");
    }
  }
  if (*d.units) {
    if (H5Aexists(ds.get(), "units") <= 0) throw Error(what + " has no attribute 'units' (\"" + d.units + "\")");
    const std::string units = hdf5::read_string_attribute(ds.get(), "units", what);
    if (units != d.units) throw Error(what + " is in '" + units + "', the format says '" + d.units + "'");
  }
  return ds;
}

// Reads a scalar numeric or string attribute after checking its type.
void check_attribute(hid_t loc, const Attribute& a, const std::string& what) {
  if (H5Aexists(loc, a.name) <= 0) {
    if (a.optional) return;
    throw Error(what + " has no attribute '" + a.name + "' (the recording format requires it)");
  }
  Handle attr(H5Aopen(loc, a.name, H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (!attr.ok() || !type.ok() || !type_fits(type.get(), a.type)) {
    throw Error(what + ": attribute '" + a.name + "' is not " + type_name(a.type));
  }
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  hsize_t dims[H5S_MAX_RANK] = {};
  if (rank >= 0 && rank <= H5S_MAX_RANK) H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  bool ok = rank == a.rank;
  for (int i = 0; ok && i < rank; ++i) ok = a.shape[i].kind == Extent::kFixed && dims[i] == static_cast<hsize_t>(a.shape[i].fixed);
  if (!ok) throw Error(what + ": attribute '" + a.name + "' has shape " + shape_text(dims, std::max(rank, 0)));
}

int64_t int_attribute(hid_t loc, const Attribute& a, const std::string& what, int64_t lo, int64_t hi) {
  check_attribute(loc, a, what);
  const int64_t v = hdf5::read_int_attribute(loc, a.name, what);
  if (v < lo || v > hi) {
    throw Error(what + ": attribute '" + a.name + "' is " + std::to_string(v) + ", outside " + std::to_string(lo) +
                ".." + std::to_string(hi));
  }
  return v;
}

Handle open_group(hid_t file, const std::string& path, const std::string& where) {
  if (H5Lexists(file, path.c_str(), H5P_DEFAULT) <= 0) throw Error(where + " has no group /" + path);
  Handle g(H5Gopen2(file, path.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.ok()) throw Error(where + ": /" + path + " is not a group");
  return g;
}

// A whole small 1-D integer dataset (its extent was checked) as int64.
std::vector<int64_t> read_ids(hid_t ds, int64_t n, const std::string& what) {
  std::vector<uint64_t> raw;
  hdf5::read_rows(ds, H5T_NATIVE_UINT64, 0, static_cast<hsize_t>(n), 1, raw, what);
  std::vector<int64_t> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || (i > 0 && raw[i] <= raw[i - 1])) {
      throw Error(what + ": id " + str(raw[i]) + " at row " + str(i) + " is not above the one before (ids must ascend)");
    }
    out[i] = static_cast<int64_t>(raw[i]);
  }
  return out;
}

void same_names(const std::vector<std::string>& a, const std::vector<std::string>& b, const std::string& where,
                const std::string& ga, const std::string& gb) {
  if (a == b) return;
  std::vector<std::string> only;
  std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only));
  throw Error(where + ": population '" + only.front() + "' is in only one of /" + ga + " and /" + gb);
}

}  // namespace

std::string describe_extent(const Extent& e) {
  switch (e.kind) {
    case Extent::kFixed: return "";
    case Extent::kSamples: return " (the committed samples)";
    case Extent::kSamplesPlus1: return " (the committed samples + 1)";
    case Extent::kSamplesTimesSteps: return " (committed samples x T)";
    case Extent::kEvents: return " (the population's spikes, spike_ptr's last value)";
    case Extent::kSteps: return " (T)";
    case Extent::kClasses: return " (the classes)";
    case Extent::kLayers: return " (the neuron layers)";
    case Extent::kRecorded: return " (the recorded neurons)";
    case Extent::kWidth: return " (the report's neurons)";
    case Extent::kWidthPlus1: return " (the report's neurons + 1)";
  }
  return "";
}

hid_t file_type(Type t) {
  switch (t) {
    case Type::kI16: return H5T_STD_I16LE;
    case Type::kU32: return H5T_STD_U32LE;
    case Type::kU64: return H5T_STD_U64LE;
    case Type::kI64: return H5T_STD_I64LE;
    case Type::kF32: return H5T_IEEE_F32LE;
    case Type::kF64: return H5T_IEEE_F64LE;
    case Type::kStr:
    case Type::kEnumU8: break;
  }
  throw Error("recording schema: no fixed HDF5 file type for this entry");
}

hid_t memory_type(Type t) {
  switch (t) {
    case Type::kI16: return H5T_NATIVE_INT16;
    case Type::kU32: return H5T_NATIVE_UINT32;
    case Type::kU64: return H5T_NATIVE_UINT64;
    case Type::kI64: return H5T_NATIVE_INT64;
    case Type::kF32: return H5T_NATIVE_FLOAT;
    case Type::kF64: return H5T_NATIVE_DOUBLE;
    case Type::kStr:
    case Type::kEnumU8: break;
  }
  throw Error("recording schema: no fixed HDF5 memory type for this entry");
}

std::vector<std::string> members(hid_t group, const std::string& what, const std::string& where) {
  H5G_info_t info{};
  if (H5Gget_info(group, &info) < 0) throw Error(where + ": cannot list " + what);
  if (info.nlinks > static_cast<hsize_t>(kMax_populations)) {
    throw Error(where + ": " + what + " has " + str(info.nlinks) + " members, more than the " +
                std::to_string(kMax_populations) + " a recording can have");
  }
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n <= 0 || n > 4096) throw Error(where + ": " + what + " has a member with a damaged name");
    std::string name(static_cast<size_t>(n) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(static_cast<size_t>(n));
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void check_format(hid_t file, const std::string& where) {
  const htri_t has_format = H5Aexists(file, attr_format.name);
  if (has_format < 0) throw Error(where + " is damaged: HDF5 cannot read the attributes of its root group");
  if (has_format == 0) {
    throw Error(where + " is not an snnsim recording (no format attribute '" + kFormat + "')");
  }
  check_attribute(file, attr_format, where);
  if (hdf5::read_string_attribute(file, attr_format.name, where) != kFormat) {
    throw Error(where + " is not an snnsim recording (no format attribute '" + kFormat + "')");
  }
  const int64_t version = int_attribute(file, attr_format_version, where, 0, std::numeric_limits<int64_t>::max());
  if (version != kFormatVersion) {
    throw Error(where + " has format_version " + std::to_string(version) + "; this snnsim reads version " +
                std::to_string(kFormatVersion));
  }
}

std::string read_status(hid_t file, const std::string& where) {
  Known k;
  Handle ds = open_checked(file, status, "", k, Rows::kExact, where);
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  const size_t size = H5Tget_size(type.get());
  std::string buf(size + 1, '\0');
  Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.get(), size + 1);
  hdf5::check(H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()),
              where + ": cannot read /" + status.path);
  const std::string s(buf.c_str());
  for (const char* known : k_statuses) {
    if (s == known) return s;
  }
  throw Error(where + ": /" + status.path + " is '" + s + "', not one of running, complete, aborted, recovered");
}

Contents check(hid_t f, const std::string& where, Rows rows) {
  check_format(f, where);
  check_attribute(f, attr_magic, where);
  check_attribute(f, attr_version, where);
  for (const Group* g : {&meta, &populations, &spikes, &report, &samples, &spike_ptrs}) open_group(f, g->path, where);
  Contents c;
  c.status = read_status(f, where);
  Known k;

  // /meta: T, dt and the committed samples everything else is measured by.
  {
    Handle m = open_group(f, meta.path, where);
    const std::string what = where + ": /" + std::string(meta.path);
    c.steps = int_attribute(m.get(), attr_steps_per_sample, what, 1, kMax_steps);
    check_attribute(m.get(), attr_dt_ms, what);
    c.dt_ms = hdf5::read_double_attribute(m.get(), attr_dt_ms.name, what);
    if (!std::isfinite(c.dt_ms) || c.dt_ms <= 0) {
      throw Error(what + ": attribute 'dt_ms' is " + std::to_string(c.dt_ms) + ", not a positive number");
    }
    check_attribute(m.get(), attr_resumed_at_sample, what);
    check_attribute(m.get(), attr_recovered_from_status, what);
    check_attribute(m.get(), attr_kind, what);
    if (H5Aexists(m.get(), attr_first_sample.name) > 0) {
      c.first_sample = int_attribute(m.get(), attr_first_sample, what, 0, int64_t{1} << 48);
    }
    if (H5Aexists(m.get(), attr_kind.name) > 0) {
      c.kind = hdf5::read_string_attribute(m.get(), attr_kind.name, what);
      if (c.kind != kPopulationsKind) {
        throw Error(what + ": attribute 'kind' is '" + c.kind + "', not '" + kPopulationsKind +
                    "' (the only kind a recording states; a network's has none)");
      }
    }
    Handle counter = open_checked(f, samples_committed, "", k, rows, where);
    uint64_t n = 0;
    hdf5::check(H5Dread(counter.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &n),
                where + ": cannot read /" + samples_committed.path);
    if (n > (uint64_t{1} << 48)) throw Error(where + ": /" + samples_committed.path + " is " + str(n) + ", not a sample count");
    c.samples = static_cast<int64_t>(n);
    k.samples = c.samples;
    k.steps = c.steps;
  }

  // /samples: one row per sample; the widths give the classes and layers.
  for (const Dataset* d : {&label, &predicted, &output_counts, &t_start_ms, &t_stop_ms, &layer_spikes,
                           &prediction_by_step}) {
    Handle ds = open_checked(f, *d, "", k, rows, where);
    if (d == &layer_spikes) c.layers = ds.ok() ? k.layers : 0;
    if (d == &prediction_by_step) c.prediction_by_step = ds.ok();
  }
  c.classes = k.classes;
  if (c.classes < 1 || c.classes > kMax_classes) {
    throw Error(where + ": /" + output_counts.path + " has " + std::to_string(c.classes) + " classes, not 1.." +
                std::to_string(kMax_classes));
  }
  if (c.layers > kMax_layers) throw Error(where + ": /" + layer_spikes.path + " has " + std::to_string(c.layers) + " layers");

  // Spike populations: the same names in /meta/populations, /spikes and
  // /samples/spike_ptr; ids within the population; pointers rising from 0
  // to the spike count, no sample with more spikes than its neuron-steps.
  Handle pops_group = open_group(f, populations.path, where);
  Handle spikes_group = open_group(f, spikes.path, where);
  Handle ptr_group = open_group(f, spike_ptrs.path, where);
  const std::vector<std::string> names = members(spikes_group.get(), "/spikes", where);
  same_names(names, members(pops_group.get(), "/meta/populations", where), where, spikes.path, populations.path);
  same_names(names, members(ptr_group.get(), "/samples/spike_ptr", where), where, spikes.path, spike_ptrs.path);
  for (const std::string& name : names) {
    Contents::Population p;
    p.name = name;
    Handle pg = open_group(f, at(population, name), where);
    const std::string what = where + ": /" + at(population, name);
    p.n_nodes = int_attribute(pg.get(), attr_n_nodes, what, 1, kMax_n_nodes);
    p.layer = int_attribute(pg.get(), attr_layer, what, 0, kMax_layers);
    Handle sg = open_group(f, at(spike_population, name), where);
    check_attribute(sg.get(), attr_sorting, where + ": /" + at(spike_population, name));
    Known pk = k;
    {
      Handle ids = open_checked(f, recorded_node_ids, name, pk, rows, where);
      if (pk.recorded < 1 || pk.recorded > p.n_nodes) {
        throw Error(where + ": /" + at(recorded_node_ids, name) + " lists " + std::to_string(pk.recorded) +
                    " neurons of a population of " + std::to_string(p.n_nodes));
      }
      p.recorded = read_ids(ids.get(), pk.recorded, where + ": /" + at(recorded_node_ids, name));
      if (p.recorded.back() >= p.n_nodes) {
        throw Error(where + ": /" + at(recorded_node_ids, name) + " has node id " + std::to_string(p.recorded.back()) +
                    ", but the population has n_nodes = " + std::to_string(p.n_nodes));
      }
    }
    Handle ptr = open_checked(f, spike_ptr, name, pk, rows, where);
    const std::string pwhat = where + ": /" + at(spike_ptr, name);
    const uint64_t most = static_cast<uint64_t>(pk.recorded) * static_cast<uint64_t>(c.steps);  // spikes a sample can hold
    std::vector<uint64_t> v;
    uint64_t previous = 0;
    for (hsize_t s0 = 0; s0 <= static_cast<hsize_t>(c.samples); s0 += kBlock) {
      const hsize_t n = std::min<hsize_t>(kBlock, static_cast<hsize_t>(c.samples) + 1 - s0);
      hdf5::read_rows(ptr.get(), H5T_NATIVE_UINT64, s0, n, 1, v, pwhat);
      for (hsize_t i = 0; i < n; ++i) {
        const uint64_t x = v[i];
        if (s0 + i == 0) {
          if (x != 0) throw Error(pwhat + ": the first pointer is " + str(x) + ", not 0");
        } else if (x < previous) {
          throw Error(pwhat + ": pointer " + str(x) + " at row " + str(s0 + i) + " is below the one before (" +
                      str(previous) + "): pointers must not decrease");
        } else if (x - previous > most) {
          throw Error(pwhat + ": sample " + str(s0 + i - 1) + " has " + str(x - previous) + " spikes, more than its " +
                      std::to_string(pk.recorded) + " neurons x " + std::to_string(c.steps) + " steps can fire");
        }
        previous = x;
      }
    }
    p.events = previous;
    if (p.events > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 16)) {
      throw Error(pwhat + ": the last pointer " + str(p.events) + " is not a spike count");
    }
    pk.events = static_cast<int64_t>(p.events);
    Handle ts = open_checked(f, timestamps, name, pk, rows, where);
    if (rows == Rows::kExact) pk.events = -1;  // node_ids must then match the timestamps' length
    Handle ids = open_checked(f, node_ids, name, pk, rows, where);
    if (rows == Rows::kExact && pk.events != static_cast<int64_t>(p.events)) {
      throw Error(where + ": /" + at(node_ids, name) + " holds " + std::to_string(pk.events) + " ids but /" +
                  at(timestamps, name) + " holds " + str(p.events) + " timestamps (the spike count)");
    }
    c.populations.push_back(std::move(p));
  }

  // Reports: frames of the committed samples, one column per mapped neuron.
  Handle reports_group = open_group(f, report.path, where);
  for (const std::string& name : members(reports_group.get(), "/report", where)) {
    Contents::Report r;
    r.name = name;
    open_group(f, at(report_population, name), where);
    open_group(f, at(report_mapping, name), where);
    Known rk = k;
    Handle ids = open_checked(f, report_node_ids, name, rk, rows, where);
    if (rk.width < 1 || rk.width > kMax_n_nodes) {
      throw Error(where + ": /" + at(report_node_ids, name) + " maps " + std::to_string(rk.width) + " neurons");
    }
    r.node_ids = read_ids(ids.get(), rk.width, where + ": /" + at(report_node_ids, name));
    open_checked(f, report_index_pointers, name, rk, rows, where);
    open_checked(f, report_element_ids, name, rk, rows, where);
    Handle time = open_checked(f, report_time, name, rk, rows, where);
    double t[3] = {0, 0, 0};
    hdf5::check(H5Dread(time.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t),
                where + ": cannot read /" + at(report_time, name));
    if (!std::isfinite(t[0]) || !std::isfinite(t[1]) || !(t[2] > 0) || !std::isfinite(t[2])) {
      throw Error(where + ": /" + at(report_time, name) + " is not {start, stop, positive dt}");
    }
    open_checked(f, report_data, name, rk, rows, where);
    c.reports.push_back(std::move(r));
  }
  return c;
}

}  // namespace snn::recording::schema
