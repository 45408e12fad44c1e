// BatchNorm's CPU passes over one (step, channel): B rows of S values,
// `stride` apart (see batch_norm.cpp), compiled per instruction set like
// the other loops. Every value is taken to double and computed as the
// scalar formulas in batch_norm.cpp do. The sums keep four partial sums by
// position within the row (s mod 4), each added in order of (row,
// position): one 4-lane double vector, lane j holding positions s = j mod
// 4, on every build (the AVX-512 build too: 8 lanes would change the
// order). The element-wise passes have no order to keep and use the
// build's full width. So every build gives the same bits
// (tests/neurons/batch_norm_test.cpp).

#include <cstdint>

#include "simd_loops.h"

namespace snn::neurons::detail::SNN_ISA {
namespace {

typedef double D4 __attribute__((vector_size(32)));

template <typename T>
struct Of4;
template <>
struct Of4<float> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct Of4<double> {
  typedef double type __attribute__((vector_size(32)));
};

// Four values of a row as doubles.
template <typename T>
inline __attribute__((always_inline)) D4 load4(const T* p) {
  return __builtin_convertvector(load<typename Of4<T>::type>(p), D4);
}

inline void store4(double (&a)[4], const D4& v) {
  for (int j = 0; j < 4; ++j) a[j] = v[j];
}

}  // namespace

// The partial sums of (x - mean) or, with `squares`, of its square. A
// row's last S mod 4 positions go to their lanes as one vector whose other
// lanes are 0: a lane's sum never is -0 (it starts at +0), so adding 0
// leaves it as it is, and each lane still adds its terms in order.
template <typename T>
void bn_sums(const T* x, int64_t B, int64_t stride, int64_t S, double mean, bool squares, double (&out)[4]) {
  D4 acc = {0, 0, 0, 0};
  const D4 m = {mean, mean, mean, mean};
  const int64_t S4 = S - S % 4;
  for (int64_t b = 0; b < B; ++b) {
    const T* r = x + b * stride;
    int64_t s = 0;
    if (squares) {
      for (; s < S4; s += 4) {
        const D4 d = load4(r + s) - m;
        acc += d * d;
      }
    } else {
      for (; s < S4; s += 4) acc += load4(r + s) - m;
    }
    if (s < S) {
      D4 t = {0, 0, 0, 0};
      for (; s < S; ++s) {
        const double d = static_cast<double>(r[s]) - mean;
        t[s & 3] = squares ? d * d : d;
      }
      acc += t;
    }
  }
  store4(out, acc);
}

// y = (x - mean) invstd w + b, rounded once to T.
template <typename T>
void bn_normalise(const T* x, T* y, int64_t B, int64_t stride, int64_t S, double mean, double invstd, double w,
                  double bias) {
  for (int64_t b = 0; b < B; ++b) {
    const T* r = x + b * stride;
    T* o = y + b * stride;
#pragma omp simd
    for (int64_t s = 0; s < S; ++s) o[s] = static_cast<T>((static_cast<double>(r[s]) - mean) * invstd * w + bias);
  }
}

// The backward pass's four sums over g and xhat = (x - mean) invstd:
// g, g xhat, g w, g w xhat (out[0..3], each four partial sums).
template <typename T>
void bn_backward_sums(const T* x, const T* g, int64_t B, int64_t stride, int64_t S, double mean, double invstd,
                      double w, double (&out)[4][4]) {
  D4 sg = {0, 0, 0, 0}, sgx = sg, sp = sg, spx = sg;
  const D4 m = {mean, mean, mean, mean}, is = {invstd, invstd, invstd, invstd}, wc = {w, w, w, w};
  const int64_t S4 = S - S % 4;
  for (int64_t b = 0; b < B; ++b) {
    const T* xr = x + b * stride;
    const T* gr = g + b * stride;
    int64_t s = 0;
    for (; s < S4; s += 4) {
      const D4 gd = load4(gr + s);
      const D4 xhat = (load4(xr + s) - m) * is;
      const D4 gp = gd * wc;
      sg += gd;
      sgx += gd * xhat;
      sp += gp;
      spx += gp * xhat;
    }
    if (s < S) {
      D4 tg = {0, 0, 0, 0}, tgx = tg, tp = tg, tpx = tg;
      for (; s < S; ++s) {
        const int j = static_cast<int>(s & 3);
        const double gd = static_cast<double>(gr[s]);
        const double xhat = (static_cast<double>(xr[s]) - mean) * invstd;
        const double gp = gd * w;
        tg[j] = gd;
        tgx[j] = gd * xhat;
        tp[j] = gp;
        tpx[j] = gp * xhat;
      }
      // (Lanes without a tail position add 0: see bn_sums.)
      sg += tg;
      sgx += tgx;
      sp += tp;
      spx += tpx;
    }
  }
  store4(out[0], sg);
  store4(out[1], sgx);
  store4(out[2], sp);
  store4(out[3], spx);
}

// gx = invstd (g w - mean_gp - xhat mean_gpx), rounded once to T.
template <typename T>
void bn_backward_apply(const T* x, const T* g, T* gx, int64_t B, int64_t stride, int64_t S, double mean,
                       double invstd, double w, double mean_gp, double mean_gpx) {
  for (int64_t b = 0; b < B; ++b) {
    const T* xr = x + b * stride;
    const T* gr = g + b * stride;
    T* o = gx + b * stride;
#pragma omp simd
    for (int64_t s = 0; s < S; ++s) {
      const double xhat = (static_cast<double>(xr[s]) - mean) * invstd;
      const double gp = static_cast<double>(gr[s]) * w;
      o[s] = static_cast<T>(invstd * (gp - mean_gp - xhat * mean_gpx));
    }
  }
}

// Inference: y = x scale + shift over n values, rounded once to T.
template <typename T>
void bn_affine(const T* x, T* y, int64_t n, double scale, double shift) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(static_cast<double>(x[i]) * scale + shift);
}

#define SNN_BN_INSTANTIATE(T)                                                                                       \
  template void bn_sums<T>(const T*, int64_t, int64_t, int64_t, double, bool, double (&)[4]);                      \
  template void bn_normalise<T>(const T*, T*, int64_t, int64_t, int64_t, double, double, double, double);          \
  template void bn_backward_sums<T>(const T*, const T*, int64_t, int64_t, int64_t, double, double, double,         \
                                    double (&)[4][4]);                                                              \
  template void bn_backward_apply<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, double, double, double,    \
                                     double, double);                                                               \
  template void bn_affine<T>(const T*, T*, int64_t, double, double);
SNN_BN_INSTANTIATE(float)
SNN_BN_INSTANTIATE(double)
#undef SNN_BN_INSTANTIATE

}  // namespace snn::neurons::detail::SNN_ISA
