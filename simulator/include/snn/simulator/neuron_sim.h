#pragma once
/// Simulating one neuron layer from an input-current matrix (`snnsim neuron`).

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <memory>
#include <ostream>

#include "snn/neurons/iaf.h"
#include "snn/neurons/lif.h"

namespace snn {

/// A layer's response to T steps of input: all tensors [T, N].
struct NeuronSimResult {
  torch::Tensor h;  ///< potential after charging, before fire/reset
  torch::Tensor s;  ///< spikes (0/1, in the input's dtype)
  torch::Tensor v;  ///< potential after reset
};

/// A neuron module both as a module (for containers) and as a NeuronLayer.
struct NeuronModule {
  torch::nn::AnyModule module;
  std::shared_ptr<NeuronLayer> layer;
};

/// The module for params (LIF, IF or parametric LIF with init tau = params.tau).
NeuronModule make_neuron_layer(const NeuronParams& params, StepMode mode = StepMode::kSingle);

/// Runs the layer described by params from reset over currents [T, N]
/// (float32 or float64), one fused multi-step pass.
NeuronSimResult simulate_neuron_layer(const torch::Tensor& currents, const NeuronParams& params);

/// Runs a NEST model (iaf_psc_delta, iaf_psc_exp) from rest with currents
/// [T, N] (float32 or float64) as an external current in pA, which, like a
/// NEST current generator's, acts from the step after the one it is given
/// for. h and v are absolute potentials in mV: before and after the
/// threshold test and reset.
NeuronSimResult simulate_iaf_layer(const torch::Tensor& currents, const IafOptions& options);

/// Writes the result as CSV with the header `t,neuron,h,s,v`, one row per
/// step and neuron; floats in the shortest form that round-trips in their
/// dtype.
void write_neuron_trace_csv(std::ostream& out, const NeuronSimResult& result);

}  // namespace snn
