#pragma once
/// Checkpoints in HDF5, readable from Python with h5py:
///   /parameters/<name>   float32 datasets, names as SpikingNetwork::named_parameters()
///                         ("fc0.weight", "fc0.bias", ..., "lif0.w" for PLIF)
///   attribute "config"   the full network config as JSON (root group)
///   attribute "snnsim_version", "epoch"
/// Written to NAME.partial and renamed, so a crash never leaves a torn file.
/// HDF5 types stay out of this header.

#include <cstdint>
#include <memory>
#include <string>

#include "snn/simulator/network.h"

namespace snn {

/// Saves the network's parameters and config; epoch is informational.
void save_checkpoint(const std::string& path, const SpikingNetwork& network, int64_t epoch);

/// A network rebuilt from a checkpoint (config from the file, then its
/// parameters), and the epoch it was saved at.
struct LoadedCheckpoint {
  std::unique_ptr<SpikingNetwork> network;
  int64_t epoch = 0;
};
/// Throws snn::Error naming the file and what is wrong (not HDF5, missing or
/// mis-shaped parameters, bad config).
LoadedCheckpoint load_checkpoint(const std::string& path);
/// The config stored in a checkpoint, without building the network.
NetworkConfig read_checkpoint_config(const std::string& path);

}  // namespace snn
