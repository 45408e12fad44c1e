#pragma once

#include <torch/optim/adam.h>

namespace snn {

/// One step of `adam`, the same values as adam.step() bit for bit, in two
/// fused passes over each parameter around ATen's own sqrt, instead of
/// torch's seven element-wise ops and three temporaries per parameter.
///
/// It reproduces the rounding of LibTorch's AVX2 and AVX-512 CPU kernels
/// (the same per element), fused multiply-adds included, so it fuses only
/// where those kernels run: ATen's CPU capability AVX2 or AVX512 (not
/// DEFAULT, whose kernels have no FMA), float32 or float64 parameters on
/// the CPU, dense and
/// contiguous, weight decay 0 and no AMSGrad. Anything else sends the whole
/// step to adam.step() itself: results never depend on which path ran. The
/// optimizer's state (step, exp_avg, exp_avg_sq) is torch's own, so
/// checkpoints read and write it as before.
void fused_adam_step(torch::optim::Adam& adam);

/// Whether fused_adam_step fuses on this machine (ATen's CPU capability is
/// AVX2 or AVX512, as ATEN_CPU_CAPABILITY may lower it); it calls
/// adam.step() otherwise.
bool fused_adam_available();

}  // namespace snn
