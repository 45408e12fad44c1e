#pragma once
// What the per-ISA loop sources (SNN_ISA, see cmake/SnnComponent.cmake) use
// instead of the standard library's containers and algorithms. Everything
// here has internal linkage: an inline function with external linkage
// (std::vector's members, std::min) compiled in the AVX-512 build could be
// the one copy the linker keeps for the whole library, and then run on a
// CPU without AVX-512. Include this only from those sources.

#include <cstdint>
#include <new>

namespace snn::detail {
namespace {

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a < b ? b : a; }

// A growable buffer of a trivially copyable T, uninitialised, for one
// thread's scratch (declare it thread_local): no allocation once it is large
// enough. Allocation failure throws std::bad_alloc (from ::operator new,
// which is not inline).
template <typename T>
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { ::operator delete(data_); }

  /// At least n elements; the old contents are lost when it grows.
  T* reserve(int64_t n) {
    if (n > capacity_) {
      ::operator delete(data_);
      data_ = nullptr;
      data_ = static_cast<T*>(::operator new(static_cast<size_t>(n) * sizeof(T)));
      capacity_ = n;
    }
    return data_;
  }

 private:
  T* data_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace
}  // namespace snn::detail
