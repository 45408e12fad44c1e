#include "snn/simulator/fused_adam.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>

#include <cmath>
#include <string>

namespace snn {
namespace {

// torch::optim::Adam::step for one parameter is, element by element (T the
// parameter's dtype; every scalar is rounded to T first, as ATen does):
//   m = m * beta1;             m = fma(g, 1 - beta1, m)           (mul_, add_)
//   v = v * beta2;             v = fma((1 - beta2) * g, g, v)     (mul_, addcmul_)
//   d = sqrt(v) / sqrt(bc2);   d = d + eps                        (sqrt, div, add_)
//   p = p + (-lr / bc1) * m / d                                   (addcdiv_)
// with bc1 = 1 - beta1^step, bc2 = 1 - beta2^step. The fused multiply-adds
// are ATen's: its AVX2 add_ is an explicit fma, and the compiler contracted
// its addcmul_ (vector and scalar loops alike). Its sqrt is MKL's vector
// sqrt, which is not always the correctly rounded one, so that op is ATen's
// own call between the two fused passes. FusedAdam.EqualsTorchAdamBitForBit
// pins all of it.
struct Coefficients {
  double beta1, one_minus_beta1, beta2, one_minus_beta2, sqrt_bc2, eps, neg_step;
};

// The moments of [i0, i1).
template <typename T>
__attribute__((target("avx2,fma"))) void adam_moments(const T* g, T* m, T* v, int64_t i0, int64_t i1,
                                                        const Coefficients& c) {
  const T b1 = static_cast<T>(c.beta1), a1 = static_cast<T>(c.one_minus_beta1);
  const T b2 = static_cast<T>(c.beta2), a2 = static_cast<T>(c.one_minus_beta2);
  for (int64_t i = i0; i < i1; ++i) {
    m[i] = std::fma(g[i], a1, m[i] * b1);
    v[i] = std::fma(a2 * g[i], g[i], v[i] * b2);
  }
}

// The parameters of [i0, i1), from the new first moment and sqrt(v).
template <typename T>
__attribute__((target("avx2,fma"))) void adam_update(T* p, const T* m, const T* sqrt_v, int64_t i0, int64_t i1,
                                                       const Coefficients& c) {
  const T s2 = static_cast<T>(c.sqrt_bc2), eps = static_cast<T>(c.eps), step = static_cast<T>(c.neg_step);
  for (int64_t i = i0; i < i1; ++i) {
    const T d = sqrt_v[i] / s2 + eps;
    p[i] = p[i] + step * m[i] / d;
  }
}

bool fusable(const torch::Tensor& p, const torch::Tensor& g, const torch::optim::OptimizerParamState* state) {
  auto plain = [&](const torch::Tensor& t) {
    return t.defined() && t.device().is_cpu() && t.layout() == torch::kStrided && t.is_contiguous() &&
           t.scalar_type() == p.scalar_type() && t.sizes() == p.sizes() && !t.is_conj() && !t.is_neg();
  };
  if (!((p.scalar_type() == torch::kFloat || p.scalar_type() == torch::kDouble) && plain(p) && plain(g))) return false;
  if (state == nullptr) return true;  // the state is made like torch makes it
  const auto* s = dynamic_cast<const torch::optim::AdamParamState*>(state);
  return s != nullptr && plain(s->exp_avg()) && plain(s->exp_avg_sq());
}

const torch::optim::OptimizerParamState* state_of(torch::optim::Adam& adam, const torch::Tensor& p) {
  const auto it = adam.state().find(p.unsafeGetTensorImpl());
  return it == adam.state().end() ? nullptr : it->second.get();
}

}  // namespace

// AVX-512 only widens ATen's vectors: its add_ is the same explicit fused
// multiply-add, its addcmul_ contracted the same way, its divisions
// correctly rounded at any width (and sqrt is ATen's own call here in
// either case), so each element rounds as under AVX2
// (FusedAdam.EqualsTorchAdamBitForBit checks both capabilities, the AVX2
// one on an AVX-512 CPU through ATEN_CPU_CAPABILITY=avx2). ATen's DEFAULT
// kernels are built without FMA: their add_ rounds the product first, which
// this loop does not reproduce, so they keep adam.step().
bool fused_adam_available() {
  const std::string capability = at::get_cpu_capability();
  return capability == "AVX2" || capability == "AVX512";
}

void fused_adam_step(torch::optim::Adam& adam) {
  // All or nothing: any parameter or setting that the fused loop does not
  // reproduce sends the whole step to torch.
  bool fuse = fused_adam_available();
  for (auto& group : adam.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    fuse = fuse && o.weight_decay() == 0 && !o.amsgrad();
    for (auto& p : group.params()) {
      if (fuse && p.grad().defined()) fuse = fusable(p, p.grad(), state_of(adam, p));
    }
  }
  if (!fuse) {
    adam.step();
    return;
  }
  torch::NoGradGuard no_grad;
  thread_local torch::Tensor scratch;  // sqrt(v) of the largest parameter: no allocation per step
  for (auto& group : adam.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (auto& p : group.params()) {
      const torch::Tensor& g = p.grad();
      if (!g.defined()) continue;
      auto it = adam.state().find(p.unsafeGetTensorImpl());
      if (it == adam.state().end()) {  // a first step makes the state as torch does
        auto state = std::make_unique<torch::optim::AdamParamState>();
        state->step(0);
        state->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        state->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = adam.state().emplace(p.unsafeGetTensorImpl(), std::move(state)).first;
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
      s.step(s.step() + 1);
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      const double bc1 = 1 - std::pow(beta1, s.step()), bc2 = 1 - std::pow(beta2, s.step());
      const Coefficients c{beta1, 1 - beta1, beta2, 1 - beta2, std::sqrt(bc2), o.eps(), -(o.lr() / bc1)};
      const int64_t n = p.numel();
      constexpr int64_t kGrain = 16384;
      AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "snn_fused_adam", [&] {
        scalar_t* pp = p.data_ptr<scalar_t>();
        const scalar_t* gp = g.data_ptr<scalar_t>();
        scalar_t* mp = s.exp_avg().data_ptr<scalar_t>();
        scalar_t* vp = s.exp_avg_sq().data_ptr<scalar_t>();
        at::parallel_for(0, n, kGrain, [&](int64_t i0, int64_t i1) { adam_moments(gp, mp, vp, i0, i1, c); });
        if (!scratch.defined() || scratch.numel() < n || scratch.scalar_type() != p.scalar_type()) {
          scratch = torch::empty({n}, p.options());
        }
        torch::Tensor sqrt_v = scratch.narrow(0, 0, n).view(p.sizes());
        at::sqrt_out(sqrt_v, s.exp_avg_sq());
        const scalar_t* sv = sqrt_v.data_ptr<scalar_t>();
        at::parallel_for(0, n, kGrain, [&](int64_t i0, int64_t i1) { adam_update(pp, mp, sv, i0, i1, c); });
      });
    }
  }
}

}  // namespace snn
