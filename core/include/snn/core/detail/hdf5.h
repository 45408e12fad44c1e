#pragma once
// Small RAII and attribute helpers over the HDF5 C API, shared by the
// components that write HDF5 (checkpoints, recordings). Include only from
// targets that link HDF5.

#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

#include "snn/core/error.h"

namespace snn::hdf5 {

// HDF5's exit-time cleanup (H5_term_library) closes every file still open
// and flushes it. A file whose close failed (a full disk: its dirty
// metadata can never be written) stays registered half-destroyed, and that
// cleanup then crashes in H5F__close_cb (exit 139 after the error line).
// snnsim closes every file explicitly, in order, on success and on error,
// so the cleanup has nothing to do but crash: it is switched off before the
// library initialises (H5dont_atexit only works then). Consequence for
// programs linking snn: HDF5 files they leave open at exit are not flushed
// by HDF5; close them (as one must anyway to see errors).
inline const bool kNoExitTimeCleanup = (H5dont_atexit(), true);

// HDF5 identifiers closed on scope exit.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      if (id_ >= 0) close_(id_);
      id_ = other.id_;
      close_ = other.close_;
      other.id_ = -1;
    }
    return *this;
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// HDF5 prints its own error stack to stderr by default; we report one line.
struct QuietHdf5 {
  QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};

// Why a failed HDF5 call that wrote to disk failed, where the system said
// so (HDF5's own messages are off): ": No space left on device" and the
// like; "" for anything else.
inline std::string io_cause(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EIO:
    case EROFS:
      return std::string(": ") + std::strerror(err);
    default:
      return "";
  }
}

// The system's error number behind the HDF5 call that just failed, as
// HDF5's file driver recorded it in the call's error stack ("..., errno =
// 28, error message = 'No space left on device'"); 0 where no system call
// failed. Read from the stack rather than from errno, which nothing
// clears: a stale errno of an earlier, unrelated failure would name a
// cause this call did not have. Walked upward, from the first error
// pushed: HDF5 goes on after a failure and pushes its clean-up's errors
// after it (a failed H5Fcreate on /dev/full: "problems closing file"
// before "unable to flush superblock", walking downward). Call it before
// any other HDF5 call (each clears the stack).
inline int failed_call_errno() {
  int found = 0;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        const char* at = e->desc ? std::strstr(e->desc, "errno = ") : nullptr;
        if (!at) return 0;
        *static_cast<int*>(data) = std::atoi(at + 8);
        return 1;  // found: the walk stops
      },
      &found);
  return found;
}

// io_cause() of failed_call_errno(): for a failed HDF5 call that returned
// an invalid identifier rather than a status.
inline std::string failed_call_cause() { return io_cause(failed_call_errno()); }

inline void check(herr_t status, const std::string& what) {
  if (status < 0) throw Error(what + failed_call_cause());
}

// Attributes are written anew: an existing one of the same name is replaced.
inline void remove_attribute(hid_t loc, const char* name) {
  if (H5Aexists(loc, name) > 0) check(H5Adelete(loc, name), std::string("HDF5: cannot replace attribute ") + name);
}

inline void write_string_attribute(hid_t loc, const char* name, const std::string& value) {
  remove_attribute(loc, name);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  check(H5Tset_size(type.get(), value.size() + 1), "HDF5: cannot size a string attribute");
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error(std::string("HDF5: cannot create attribute ") + name + failed_call_cause());
  check(H5Awrite(attr.get(), type.get(), value.c_str()), std::string("HDF5: cannot write attribute ") + name);
}

inline void write_int_attribute(hid_t loc, const char* name, int64_t value) {
  remove_attribute(loc, name);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(loc, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error(std::string("HDF5: cannot create attribute ") + name + failed_call_cause());
  check(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), std::string("HDF5: cannot write attribute ") + name);
}

inline void write_double_attribute(hid_t loc, const char* name, double value) {
  remove_attribute(loc, name);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(loc, name, H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error(std::string("HDF5: cannot create attribute ") + name + failed_call_cause());
  check(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value), std::string("HDF5: cannot write attribute ") + name);
}

// Readers: `where` names the file for the error message, e.g. "checkpoint 'a.h5'".
// A scalar numeric attribute, converted by HDF5 to mem_type (T's native type).
template <typename T>
T read_scalar_attribute(hid_t loc, const char* name, hid_t mem_type, const std::string& where) {
  Handle attr(H5Aopen(loc, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error(where + " has no attribute '" + name + "'");
  T value{};
  check(H5Aread(attr.get(), mem_type, &value), where + ": cannot read attribute " + name);
  return value;
}

inline int64_t read_int_attribute(hid_t loc, const char* name, const std::string& where) {
  return read_scalar_attribute<int64_t>(loc, name, H5T_NATIVE_INT64, where);
}

inline double read_double_attribute(hid_t loc, const char* name, const std::string& where) {
  return read_scalar_attribute<double>(loc, name, H5T_NATIVE_DOUBLE, where);
}

inline std::string read_string_attribute(hid_t loc, const char* name, const std::string& where) {
  Handle attr(H5Aopen(loc, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error(where + " has no attribute '" + name + "'");
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) {
    throw Error(where + ": attribute '" + name + "' is not a fixed-length string");
  }
  const size_t size = H5Tget_size(type.get());
  std::string buf(size + 1, '\0');
  Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.get(), size + 1);
  check(H5Aread(attr.get(), mem.get(), buf.data()), where + ": cannot read attribute " + name);
  return std::string(buf.c_str());
}

inline Handle open_dataset(hid_t parent, const std::string& name, const std::string& where) {
  Handle ds(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw Error(where + " has no dataset '" + name + "'");
  return ds;
}

// The names of a group's members, in name order.
inline std::vector<std::string> members(hid_t group) {
  H5G_info_t info{};
  check(H5Gget_info(group, &info), "HDF5: cannot list a group");
  std::vector<std::string> out;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    std::string name(static_cast<size_t>(std::max<ssize_t>(n, 0)) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(static_cast<size_t>(std::max<ssize_t>(n, 0)));
    out.push_back(name);
  }
  return out;
}

// Rows [start, start + count) of a 1-D or 2-D dataset (rows of `width`
// values; width 1 for 1-D), converted by HDF5 to `mem_type`, into `out`.
template <typename T>
void read_rows(hid_t ds, hid_t mem_type, hsize_t start, hsize_t count, hsize_t width, std::vector<T>& out,
               const std::string& where) {
  out.resize(static_cast<size_t>(count * width));
  if (count == 0) return;
  Handle file_space(H5Dget_space(ds), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(file_space.get());
  hsize_t first[2] = {start, 0}, n[2] = {count, width};
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, first, nullptr, n, nullptr), where + ": bad rows");
  Handle mem_space(H5Screate_simple(rank, n, nullptr), H5Sclose);
  check(H5Dread(ds, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out.data()),
        where + ": cannot read rows");
}

}  // namespace snn::hdf5
