#pragma once
/// Checkpoints in HDF5, readable from Python with h5py:
///   /parameters/<name>   float32 datasets, names as SpikingNetwork::named_parameters()
///                         ("fc0.weight", "fc0.bias", ..., "lif0.w" for PLIF)
///   attribute "config"   the full network config as JSON (root group)
///   attribute "snnsim_version", "epoch" (int64), "training" (JSON, optional)
///   attribute "saved_at" (UTC, ISO 8601), "git_commit" and "test_accuracy"
///             (float64) (optional: provenance, absent from older files)
///   /optimizer/<name>.exp_avg, .exp_avg_sq, /optimizer/steps (optional: Adam)
/// Written to NAME.partial and renamed, so a crash never leaves a torn file.
/// HDF5 types stay out of this header.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "snn/simulator/network.h"
#include "snn/simulator/run_options.h"
#include "snn/simulator/training.h"

namespace snn {

/// Where a checkpoint came from, kept beside it for `snnsim inspect`.
struct CheckpointProvenance {
  std::string git_commit;              ///< the source's commit; "" (default) = not written
  std::optional<double> test_accuracy; ///< accuracy on the test split after this epoch; unset = not written
};

/// Saves the network's parameters and config, the number of epochs trained,
/// the time (UTC) and the given provenance, and, when a trainer is given,
/// its options and Adam state (under /optimizer/<name>.exp_avg, .exp_avg_sq
/// and /optimizer/steps) so that training can resume exactly.
void save_checkpoint(const std::string& path, const SpikingNetwork& network, int64_t epoch,
                     const Trainer* trainer = nullptr, const CheckpointProvenance& provenance = {});

/// A network rebuilt from a checkpoint (config from the file, then its
/// parameters), the epoch it was saved at, and the training state if saved.
/// A NIR file (network_graph.h's network_from_model) loads too: its network
/// with its weights, epoch 0, no training state.
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

/// What a checkpoint holds (`snnsim inspect`): everything load_checkpoint
/// reads and checks, with its provenance.
struct CheckpointInfo {
  NetworkConfig config;
  int64_t epoch = 0;                    ///< epochs trained
  bool has_training_state = false;      ///< training options and Adam state saved (resumable)
  TrainOptions training;                ///< valid when has_training_state (epochs: the total planned)
  int64_t parameter_count = 0;          ///< float32 values over all parameters
  std::string parameters_hash;          ///< parameters_hash() of its parameters
  std::string snnsim_version;           ///< the snnsim that wrote it
  std::string git_commit;               ///< "" when not stored
  std::string saved_at;                 ///< UTC, ISO 8601; "" when not stored
  std::optional<double> test_accuracy;  ///< unset when not stored
};
/// Reads and checks the checkpoint at `path` as load_checkpoint does.
/// Throws snn::Error as load_checkpoint.
CheckpointInfo read_checkpoint_info(const std::string& path);

}  // namespace snn
