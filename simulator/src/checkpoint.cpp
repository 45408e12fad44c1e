#include "snn/simulator/checkpoint.h"

#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "snn/core/build_info.h"
#include "snn/core/error.h"

namespace snn {
namespace {

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

void check(herr_t status, const std::string& what) {
  if (status < 0) throw Error(what);
}

void write_string_attribute(hid_t loc, const char* name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  check(H5Tset_size(type.get(), value.size() + 1), "HDF5: cannot size a string attribute");
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(loc, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error(std::string("HDF5: cannot create attribute ") + name);
  check(H5Awrite(attr.get(), type.get(), value.c_str()), std::string("HDF5: cannot write attribute ") + name);
}

void write_int_attribute(hid_t loc, const char* name, int64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(loc, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error(std::string("HDF5: cannot create attribute ") + name);
  check(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), std::string("HDF5: cannot write attribute ") + name);
}

int64_t read_int_attribute(hid_t loc, const char* name, const std::string& path) {
  Handle attr(H5Aopen(loc, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error("checkpoint '" + path + "' has no attribute '" + name + "'");
  int64_t value = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), "checkpoint '" + path + "': cannot read attribute " + name);
  return value;
}

std::string read_string_attribute(hid_t loc, const char* name, const std::string& path) {
  Handle attr(H5Aopen(loc, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) throw Error("checkpoint '" + path + "' has no attribute '" + name + "'");
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  const size_t size = H5Tget_size(type.get());
  std::vector<char> buf(size + 1, '\0');
  Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.get(), size + 1);
  check(H5Aread(attr.get(), mem.get(), buf.data()), "checkpoint '" + path + "': cannot read attribute " + name);
  return std::string(buf.data());
}

}  // namespace

void save_checkpoint(const std::string& path, const SpikingNetwork& net, int64_t epoch) {
  QuietHdf5 quiet;
  const std::string tmp = path + ".partial";
  {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) throw Error("cannot create checkpoint '" + path + "' (is the folder writable?)");
    write_string_attribute(file.get(), "config", net.config().to_json());
    write_string_attribute(file.get(), "snnsim_version", kVersion);
    write_int_attribute(file.get(), "epoch", epoch);
    Handle group(H5Gcreate2(file.get(), "parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    for (const auto& [name, param] : net.named_parameters()) {
      const torch::Tensor t = param.detach().to(torch::kCPU, torch::kFloat).contiguous();
      std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
      Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                   H5Sclose);
      Handle ds(H5Dcreate2(group.get(), name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                H5Dclose);
      if (!ds.ok()) throw Error("checkpoint '" + path + "': cannot create dataset " + name);
      check(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr<float>()),
            "checkpoint '" + path + "': cannot write " + name);
    }
    check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "checkpoint '" + path + "': cannot flush");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error("cannot move '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
}

namespace {
Handle open_checkpoint(const std::string& path) {
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw Error("cannot open checkpoint '" + path + "': " + std::strerror(errno));
    std::fclose(f);
    throw Error("checkpoint '" + path + "' is not an HDF5 file");
  }
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) throw Error("cannot open checkpoint '" + path + "'");
  return file;
}
}  // namespace

NetworkConfig read_checkpoint_config(const std::string& path) {
  QuietHdf5 quiet;
  Handle file = open_checkpoint(path);
  return NetworkConfig::from_json(read_string_attribute(file.get(), "config", path));
}

LoadedCheckpoint load_checkpoint(const std::string& path) {
  QuietHdf5 quiet;
  Handle file = open_checkpoint(path);
  LoadedCheckpoint out;
  out.network = std::make_unique<SpikingNetwork>(NetworkConfig::from_json(read_string_attribute(file.get(), "config", path)));
  out.epoch = read_int_attribute(file.get(), "epoch", path);
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : out.network->named_parameters()) {
    const std::string ds_path = "parameters/" + name;
    if (H5Lexists(file.get(), "parameters", H5P_DEFAULT) <= 0 || H5Lexists(file.get(), ds_path.c_str(), H5P_DEFAULT) <= 0) {
      throw Error("checkpoint '" + path + "' lacks parameter " + name);
    }
    Handle ds(H5Dopen2(file.get(), ds_path.c_str(), H5P_DEFAULT), H5Dclose);
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
    if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    const std::vector<int64_t> shape(dims.begin(), dims.end());
    if (shape != param.sizes().vec()) {
      throw Error("checkpoint '" + path + "': parameter " + name + " has the wrong shape for its config");
    }
    torch::Tensor buf = torch::empty(param.sizes(), torch::kFloat);
    check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data_ptr<float>()),
          "checkpoint '" + path + "': cannot read " + name);
    param.copy_(buf);
  }
  return out;
}

}  // namespace snn
