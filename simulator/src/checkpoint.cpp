#include "snn/simulator/checkpoint.h"

#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "snn/core/build_info.h"
#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"

namespace snn {
namespace {

using hdf5::check;
using hdf5::Handle;
using hdf5::QuietHdf5;
using hdf5::write_int_attribute;
using hdf5::write_string_attribute;


int64_t read_int_attribute(hid_t loc, const char* name, const std::string& path) {
  return hdf5::read_int_attribute(loc, name, "checkpoint '" + path + "'");
}

std::string read_string_attribute(hid_t loc, const char* name, const std::string& path) {
  return hdf5::read_string_attribute(loc, name, "checkpoint '" + path + "'");
}

void write_tensor(hid_t group, const std::string& name, const torch::Tensor& tensor, const std::string& path) {
  const torch::Tensor t = tensor.detach().to(torch::kCPU, torch::kFloat).contiguous();
  std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle ds(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (!ds.ok()) throw Error("checkpoint '" + path + "': cannot create dataset " + name);
  check(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr<float>()),
        "checkpoint '" + path + "': cannot write " + name);
}

// Reads dataset `name` (a path in the file) of exactly `shape` as float32.
torch::Tensor read_tensor(hid_t file, const std::string& name, c10::IntArrayRef shape, const std::string& path) {
  const auto slash = name.find('/');
  if (H5Lexists(file, name.substr(0, slash).c_str(), H5P_DEFAULT) <= 0 || H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) {
    throw Error("checkpoint '" + path + "' lacks " + name);
  }
  Handle ds(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  if (std::vector<int64_t>(dims.begin(), dims.end()) != shape.vec()) {
    throw Error("checkpoint '" + path + "': " + name + " has the wrong shape for its config");
  }
  torch::Tensor buf = torch::empty(shape, torch::kFloat);
  check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data_ptr<float>()),
        "checkpoint '" + path + "': cannot read " + name);
  return buf;
}

std::string training_json(const TrainOptions& o) {
  const nlohmann::json j{{"batch_size", o.batch_size},
                         {"lr", o.lr},
                         {"loss", to_string(o.loss)},
                         {"shuffle_seed", o.shuffle_seed},
                         {"limit", o.limit},
                         {"weight_decay", o.weight_decay},
                         {"lr_schedule", to_string(o.lr_schedule)},
                         {"epochs", o.epochs},
                         {"augment_shift", o.augment_shift}};
  return j.dump();
}

TrainOptions training_from_json(const std::string& text, const std::string& path) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    TrainOptions o;
    o.batch_size = j.at("batch_size").get<int64_t>();
    o.lr = j.at("lr").get<double>();
    o.loss = parse_loss(j.at("loss").get<std::string>());
    o.shuffle_seed = j.at("shuffle_seed").get<uint64_t>();
    o.limit = j.at("limit").get<int64_t>();
    // Absent from checkpoints of snnsim 0.1 (no regularisation yet): their defaults.
    o.weight_decay = j.value("weight_decay", 0.0);
    o.lr_schedule = parse_lr_schedule(j.value("lr_schedule", std::string("constant")));
    o.epochs = j.value("epochs", int64_t{1});
    o.augment_shift = j.value("augment_shift", int64_t{0});
    return o;
  } catch (const nlohmann::json::exception& e) {
    throw Error("checkpoint '" + path + "': bad training options: " + e.what());
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const SpikingNetwork& net, int64_t epoch, const Trainer* trainer) {
  QuietHdf5 quiet;
  const std::string tmp = path + ".partial";
  {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file.ok()) throw Error("cannot create checkpoint '" + path + "' (is the folder writable?)");
    write_string_attribute(file.get(), "config", net.config().to_json());
    write_string_attribute(file.get(), "snnsim_version", kVersion);
    write_int_attribute(file.get(), "epoch", epoch);
    Handle group(H5Gcreate2(file.get(), "parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    const auto named = net.named_parameters();
    for (const auto& [name, param] : named) write_tensor(group.get(), name, param, path);
    if (trainer != nullptr) {
      write_string_attribute(file.get(), "training", training_json(trainer->options()));
      Handle opt(H5Gcreate2(file.get(), "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      const auto moments = trainer->optimizer_state();
      std::vector<int64_t> steps;
      for (size_t i = 0; i < named.size(); ++i) {
        const AdamMoments& m = moments[i];
        steps.push_back(m.step);
        const torch::Tensor zeros = torch::zeros_like(named[i].second);
        write_tensor(opt.get(), named[i].first + ".exp_avg", m.exp_avg.defined() ? m.exp_avg : zeros, path);
        write_tensor(opt.get(), named[i].first + ".exp_avg_sq", m.exp_avg_sq.defined() ? m.exp_avg_sq : zeros, path);
      }
      const hsize_t n = steps.size();
      Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
      Handle ds(H5Dcreate2(opt.get(), "steps", H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                H5Dclose);
      check(H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, steps.data()),
            "checkpoint '" + path + "': cannot write optimizer steps");
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
  const auto named = out.network->named_parameters();
  for (const auto& [name, param] : named) param.copy_(read_tensor(file.get(), "parameters/" + name, param.sizes(), path));
  if (H5Aexists(file.get(), "training") > 0) {
    out.has_training_state = true;
    out.training = training_from_json(read_string_attribute(file.get(), "training", path), path);
    std::vector<int64_t> steps(named.size());
    if (H5Lexists(file.get(), "optimizer", H5P_DEFAULT) <= 0 || H5Lexists(file.get(), "optimizer/steps", H5P_DEFAULT) <= 0) {
      throw Error("checkpoint '" + path + "' has training options but no optimizer state");
    }
    Handle ds(H5Dopen2(file.get(), "optimizer/steps", H5P_DEFAULT), H5Dclose);
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    if (H5Sget_simple_extent_npoints(space.get()) != static_cast<hssize_t>(steps.size())) {
      throw Error("checkpoint '" + path + "': optimizer state does not match the network");
    }
    check(H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, steps.data()),
          "checkpoint '" + path + "': cannot read optimizer steps");
    for (size_t i = 0; i < named.size(); ++i) {
      AdamMoments m;
      m.step = steps[i];
      if (m.step > 0) {
        m.exp_avg = read_tensor(file.get(), "optimizer/" + named[i].first + ".exp_avg", named[i].second.sizes(), path);
        m.exp_avg_sq =
            read_tensor(file.get(), "optimizer/" + named[i].first + ".exp_avg_sq", named[i].second.sizes(), path);
      }
      out.optimizer.push_back(m);
    }
  }
  return out;
}

}  // namespace snn
