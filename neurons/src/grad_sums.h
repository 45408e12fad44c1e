#pragma once
// Parameter gradients summed in double across backward calls and published
// as their float rounding (linear.h's carry_grad_sums): a training step's
// gradients then do not depend on how its steps were split into blocks.
// Shared by snn::Linear and snn::BatchNorm; defined in linear.cpp.

#include <torch/types.h>

#include <cstdint>

namespace snn::functional {

/// Makes `sum` (double, shaped like param.grad() or, if `transposed`, its
/// transpose) hold what param.grad() holds: kept if the gradient is still
/// the one written last (`written` at `version`: the sum holds more bits),
/// zero if there is none, else copied from it (zero_grad, a user's edit).
void sync_sum(torch::Tensor& sum, const torch::Tensor& param, const torch::Tensor& written, uint32_t version,
              bool transposed);

/// Writes the rounding of `sum` to param.grad() and remembers the tensor
/// written and its version for the next sync_sum.
void publish_sum(const torch::Tensor& sum, torch::Tensor& param, torch::Tensor& written, uint32_t& version,
                 bool transposed);

}  // namespace snn::functional
