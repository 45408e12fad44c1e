#pragma once
/// Checkpoints in HDF5, readable from Python with h5py:
///   /parameters/<name>   float32 datasets, names as SpikingNetwork::named_parameters()
///                         ("fc0.weight", "fc0.bias", ..., "lif0.w" for PLIF)
///   attribute "config"   the full network config as JSON (root group)
///   attribute "snnsim_version", "epoch" (int64), "training" (JSON, optional)
///   /optimizer/<name>.exp_avg, .exp_avg_sq, /optimizer/steps (optional: Adam)
/// Written to NAME.partial and renamed, so a crash never leaves a torn file.
/// HDF5 types stay out of this header.

#include <cstdint>
#include <memory>
#include <string>

#include "snn/simulator/network.h"
#include "snn/simulator/run_options.h"
#include "snn/simulator/training.h"

namespace snn {

/// Saves the network's parameters and config, the number of epochs trained,
/// and, when a trainer is given, its options and Adam state (under
/// /optimizer/<name>.exp_avg, .exp_avg_sq and /optimizer/steps) so that
/// training can resume exactly.
void save_checkpoint(const std::string& path, const SpikingNetwork& network, int64_t epoch,
                     const Trainer* trainer = nullptr);

/// A network rebuilt from a checkpoint (config from the file, then its
/// parameters), the epoch it was saved at, and the training state if saved.
struct LoadedCheckpoint {
  std::unique_ptr<SpikingNetwork> network;
  int64_t epoch = 0;
  bool has_training_state = false;
  TrainOptions training;                ///< valid when has_training_state
  std::vector<AdamMoments> optimizer;   ///< valid when has_training_state
};
/// Throws snn::Error naming the file and what is wrong (not HDF5, missing or
/// mis-shaped parameters, a parameter or optimizer moment holding NaN or
/// infinity, a negative epoch, bad config).
LoadedCheckpoint load_checkpoint(const std::string& path);

/// A checkpoint's network made ready for a run: its config with `overrides`
/// applied and placed by `placement`, then its parameters.
struct LoadedNetwork {
  std::unique_ptr<SpikingNetwork> network;
  int64_t epoch = 0;             ///< epochs the checkpoint was trained for
  std::string parameters_hash;   ///< parameters_hash() of its parameters
};
/// Loads `path` (as load_checkpoint) and rebuilds its network with the
/// overrides and placement. Throws snn::Error as load_checkpoint, or naming
/// a bad override or placement.
LoadedNetwork load_network(const std::string& path, const NetworkOverrides& overrides = {},
                           const Placement& placement = {});

/// A copy of `from` (its parameters included) with `overrides` applied to
/// its config and placed by `placement`: how a trained network is made
/// ready for a run or a resumed training.
std::unique_ptr<SpikingNetwork> rebuild_network(const SpikingNetwork& from, const NetworkOverrides& overrides = {},
                                                const Placement& placement = {});

/// A 64-bit FNV-1a hash of a network's parameters (names, shapes and
/// float32 bytes, in named_parameters() order) as 16 hex digits: what a
/// recording keeps to prove that it is resumed with the same weights.
std::string parameters_hash(const SpikingNetwork& network);
/// The config stored in a checkpoint, without building the network.
NetworkConfig read_checkpoint_config(const std::string& path);

}  // namespace snn
