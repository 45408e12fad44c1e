#pragma once
/// The interface through which the model pipeline (and any simulation loop)
/// drives modules whose output depends on time: neuron layers carry state
/// from step to step, encoders draw their spikes by step and sample index.
/// The pipeline finds these modules among a stage's submodules with
/// dynamic_cast, so it stays model-agnostic.

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace snn {

/// What a module's forward(x) means: one step on [B, ...] or a block of
/// steps on [T, B, ...] (time first, as SpikingJelly's multi-step mode).
enum class StepMode {
  kSingle,  ///< forward(x): x is one step [B, ...]
  kMulti,   ///< forward(x): x is a sequence [T, B, ...]
};

class Temporal {
 public:
  virtual ~Temporal() = default;

  /// Forgets all state: the next call is step 0 of a new simulation.
  virtual void reset_state() = 0;

  /// The state as tensors (empty after a reset), and its restoration: lets a
  /// caller park one batch's state and resume another's.
  virtual std::vector<torch::Tensor> save_state() const = 0;
  virtual void load_state(const std::vector<torch::Tensor>& state) = 0;

  /// Says which steps and samples the next forward covers: steps
  /// first_step, first_step + 1, ... of the samples with these global indices
  /// ([B] int64). Modules that do not depend on them ignore it.
  virtual void set_time(int64_t first_step, const torch::Tensor& sample_index) {
    (void)first_step;
    (void)sample_index;
  }
};

}  // namespace snn
