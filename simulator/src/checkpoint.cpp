#include "snn/simulator/checkpoint.h"

#include <hdf5.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <vector>

#include "snn/core/atomic_file.h"
#include "snn/core/build_info.h"
#include "snn/core/detail/hdf5.h"
#include "snn/core/error.h"
#include "snn/graph/nir_file.h"
#include "snn/simulator/file_kind.h"
#include "snn/simulator/network_graph.h"

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
  if (!ds.ok()) throw Error("checkpoint '" + path + "': cannot create dataset " + name + hdf5::failed_call_cause());
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

// read_tensor, refusing NaN and infinities: a network with them runs
// "fine" and silently predicts class 0 (a diverged training's checkpoint).
torch::Tensor read_finite_tensor(hid_t file, const std::string& name, c10::IntArrayRef shape, const std::string& path) {
  torch::Tensor t = read_tensor(file, name, shape, path);
  const int64_t bad = t.numel() - torch::isfinite(t).sum().item<int64_t>();
  if (bad > 0) {
    throw Error("checkpoint '" + path + "': " + name + " holds " + std::to_string(bad) + " of " +
                std::to_string(t.numel()) + " values that are NaN or infinite (a diverged training?)");
  }
  return t;
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

void save_checkpoint(const std::string& path, const SpikingNetwork& net, int64_t epoch, const Trainer* trainer,
                     const CheckpointProvenance& provenance) {
  check_output_file(path);
  QuietHdf5 quiet;
  const std::string tmp = path + ".partial";
  const hid_t file = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    const int err = hdf5::failed_call_errno();  // any: a create's EACCES or ENOENT says what to fix
    ::unlink(tmp.c_str());  // HDF5 may have made it before failing to write its superblock
    throw Error("cannot write checkpoint '" + path + "': " +
                (err ? std::strerror(err) : "HDF5 cannot create '" + tmp + "' (is the folder writable?)"));
  }
  // A failed write (a full disk) must leave the previous checkpoint as it
  // was and no HDF5 file open: one left open with unwritable dirty metadata
  // is flushed again by HDF5's exit-time cleanup, which then crashes.
  auto abandon = [&](std::string why) {
    const std::string prefix = "checkpoint '" + path + "': ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    H5Fclose(file);
    ::unlink(tmp.c_str());
    // (hdf5::check and the failed creates name the failed call's own I/O
    // cause: errno here could be any earlier call's.)
    throw Error("cannot write checkpoint '" + path + "': " + why);
  };
  try {
    write_string_attribute(file, "config", net.config().to_json());
    write_string_attribute(file, "snnsim_version", kVersion);
    write_int_attribute(file, "epoch", epoch);
    const std::time_t now = std::time(nullptr);
    char saved_at[32];
    std::strftime(saved_at, sizeof(saved_at), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    write_string_attribute(file, "saved_at", saved_at);
    if (!provenance.git_commit.empty()) write_string_attribute(file, "git_commit", provenance.git_commit);
    if (provenance.test_accuracy) hdf5::write_double_attribute(file, "test_accuracy", *provenance.test_accuracy);
    Handle group(H5Gcreate2(file, "parameters", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
    const auto named = net.named_parameters();
    for (const auto& [name, param] : named) write_tensor(group.get(), name, param, path);
    const auto buffers = net.named_buffers();
    if (!buffers.empty()) {
      Handle bg(H5Gcreate2(file, "buffers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      for (const auto& [name, buffer] : buffers) write_tensor(bg.get(), name, buffer, path);
    }
    if (trainer != nullptr) {
      write_string_attribute(file, "training", training_json(trainer->options()));
      Handle opt(H5Gcreate2(file, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
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
    check(H5Fflush(file, H5F_SCOPE_GLOBAL), "cannot flush");
  } catch (const Error& e) {
    abandon(e.what());
  }
  if (H5Fclose(file) < 0) {
    const int err = hdf5::failed_call_errno();
    ::unlink(tmp.c_str());
    throw Error("cannot write checkpoint '" + path + "': closing it failed" +
                (err ? std::string(": ") + std::strerror(err) : ""));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot move '" + tmp + "' to '" + path + "': " + std::strerror(err));
  }
}

namespace {
Handle open_checkpoint(const std::string& path) {
  const Hdf5Kind kind = hdf5_kind(path);
  if (kind == Hdf5Kind::kNotHdf5) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw Error("cannot open checkpoint '" + path + "': " + std::strerror(errno));
    std::fclose(f);
    throw Error("checkpoint '" + path + "' is not an HDF5 file (a checkpoint of snnsim train, or a .nir file; a TOML or "
                "JSON graph has no weights: train it with snnsim train --model)");
  }
  // Another kind of HDF5 file: say what it is rather than which attribute
  // it lacks.
  if (kind != Hdf5Kind::kCheckpoint) {
    const bool other = kind == Hdf5Kind::kDamaged || kind == Hdf5Kind::kNirWithoutVersion;  // says what is wrong
    throw Error("checkpoint '" + path + "' is " + describe(kind) + (other ? "" : ", not a checkpoint of snnsim train") +
                (kind == Hdf5Kind::kRecording ? " (snnsim inspect names the checkpoint it was made with)" : ""));
  }
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) throw Error("cannot open checkpoint '" + path + "'");
  return file;
}
}  // namespace

NetworkConfig read_checkpoint_config(const std::string& path) {
  if (graph::is_nir_file(path)) return network_from_model(path)->config();
  QuietHdf5 quiet;
  Handle file = open_checkpoint(path);
  return NetworkConfig::from_json(read_string_attribute(file.get(), "config", path));
}

LoadedCheckpoint load_checkpoint(const std::string& path) {
  LoadedCheckpoint out;
  if (graph::is_nir_file(path)) {
    // A NIR graph with its weights: a network that was never trained here.
    out.network = network_from_model(path);
    return out;
  }
  QuietHdf5 quiet;
  Handle file = open_checkpoint(path);
  try {
    out.network = std::make_unique<SpikingNetwork>(NetworkConfig::from_json(read_string_attribute(file.get(), "config", path)));
  } catch (const Error& e) {
    // Named as the file's, so that no message of its own values is taken
    // for one about a flag (snnsim's naming_flags).
    const std::string what = e.what(), prefix = "checkpoint '" + path + "'";
    if (what.rfind(prefix, 0) == 0) throw;
    throw Error(prefix + ": " + what);
  }
  out.epoch = read_int_attribute(file.get(), "epoch", path);
  if (out.epoch < 0) throw Error("checkpoint '" + path + "': epoch is " + std::to_string(out.epoch) + ", not >= 0");
  torch::NoGradGuard no_grad;
  const auto named = out.network->named_parameters();
  for (const auto& [name, param] : named) {
    param.copy_(read_finite_tensor(file.get(), "parameters/" + name, param.sizes(), path));
  }
  for (const auto& [name, buffer] : out.network->named_buffers()) {
    buffer.copy_(read_finite_tensor(file.get(), "buffers/" + name, buffer.sizes(), path));
  }
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
        m.exp_avg =
            read_finite_tensor(file.get(), "optimizer/" + named[i].first + ".exp_avg", named[i].second.sizes(), path);
        m.exp_avg_sq =
            read_finite_tensor(file.get(), "optimizer/" + named[i].first + ".exp_avg_sq", named[i].second.sizes(), path);
      }
      out.optimizer.push_back(m);
    }
  }
  return out;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  LoadedCheckpoint ckpt = load_checkpoint(path);  // every check a run or a resume makes
  CheckpointInfo info;
  info.config = ckpt.network->config();
  info.epoch = ckpt.epoch;
  info.has_training_state = ckpt.has_training_state;
  info.training = ckpt.training;
  for (const auto& [name, param] : ckpt.network->named_parameters()) info.parameter_count += param.numel();
  info.parameters_hash = parameters_hash(*ckpt.network);
  QuietHdf5 quiet;
  Handle file = open_checkpoint(path);
  const auto optional_string = [&](const char* name) {
    return H5Aexists(file.get(), name) > 0 ? read_string_attribute(file.get(), name, path) : std::string();
  };
  info.snnsim_version = optional_string("snnsim_version");
  info.git_commit = optional_string("git_commit");
  info.saved_at = optional_string("saved_at");
  if (H5Aexists(file.get(), "test_accuracy") > 0) {
    info.test_accuracy = hdf5::read_double_attribute(file.get(), "test_accuracy", "checkpoint '" + path + "'");
  }
  return info;
}

}  // namespace snn

namespace snn {

std::unique_ptr<SpikingNetwork> rebuild_network(const SpikingNetwork& from, const NetworkOverrides& overrides,
                                                const Placement& placement) {
  NetworkConfig c = from.config();
  overrides.apply(c);
  placement.apply(c);
  auto out = std::make_unique<SpikingNetwork>(c);
  torch::NoGradGuard no_grad;
  const auto src = from.named_parameters();
  const auto dst = out->named_parameters();
  // Overrides and placement never add or reshape parameters.
  if (src.size() != dst.size()) throw InternalError("rebuild_network: the rebuilt network has other parameters");
  for (size_t i = 0; i < dst.size(); ++i) dst[i].second.copy_(src[i].second);
  const auto src_buffers = from.named_buffers();
  const auto dst_buffers = out->named_buffers();
  for (size_t i = 0; i < dst_buffers.size(); ++i) dst_buffers[i].second.copy_(src_buffers.at(i).second);
  return out;
}

LoadedNetwork load_network(const std::string& path, const NetworkOverrides& overrides, const Placement& placement) {
  LoadedCheckpoint ckpt = load_checkpoint(path);
  LoadedNetwork out;
  out.epoch = ckpt.epoch;
  out.parameters_hash = parameters_hash(*ckpt.network);
  if (overrides.changes_network()) {
    out.network = rebuild_network(*ckpt.network, overrides, placement);
    if (auto folded = inference_network(*out.network)) out.network = std::move(folded);
    return out;
  }
  // Only how it is simulated changes: the loaded network itself, placed.
  if (overrides.steps) {
    if (*overrides.steps < 1) throw Error("T: expected a whole number >= 1, got " + std::to_string(*overrides.steps));
    SimulationConfig s = ckpt.network->config().simulation();
    s.steps = *overrides.steps;
    ckpt.network->set_simulation(s);
  }
  placement.apply(*ckpt.network);
  out.network = std::move(ckpt.network);
  // A run simulates the inference network: BatchNorm folded, Dropout gone.
  if (auto folded = inference_network(*out.network)) out.network = std::move(folded);
  return out;
}

std::string parameters_hash(const SpikingNetwork& network) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a offset basis
  auto add = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (const auto& [name, param] : network.named_parameters()) {
    add(name.data(), name.size() + 1);  // with the terminating zero: "a"+"bc" differs from "ab"+"c"
    for (const int64_t d : param.sizes()) add(&d, sizeof(d));
    const torch::Tensor t = param.detach().to(torch::kCPU, torch::kFloat).contiguous();
    add(t.data_ptr<float>(), static_cast<size_t>(t.numel()) * sizeof(float));
  }
  // BatchNorm statistics decide the results too (none in networks without, whose hashes stay as they were).
  for (const auto& [name, buffer] : network.named_buffers()) {
    add(name.data(), name.size() + 1);
    const torch::Tensor t = buffer.detach().to(torch::kCPU, torch::kFloat).contiguous();
    add(t.data_ptr<float>(), static_cast<size_t>(t.numel()) * sizeof(float));
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace snn
