#pragma once
/// A promise that no module parameter changes for a while, so that modules
/// may keep what they derive from their parameters (snn::Linear's packed
/// weights) from one forward call to the next.
///
/// Why a promise and not a check: optimisers update parameters through
/// .data(), whose in-place changes tensor version counters do not see, so
/// a module cannot tell by itself that a cache went stale. ModelPipeline
/// holds a guard for each run (the parameters cannot change in the middle
/// of one), and evaluation loops hold one for all their batches; without a
/// guard, modules rebuild what they derive on every call.
///
/// The promise is process-wide and guards nest: caches stay valid from the
/// moment a first guard is taken until the last one is released.

#include <atomic>
#include <cstdint>

namespace snn {

class FrozenWeights {
 public:
  FrozenWeights() {
    // A new epoch only when no guard was alive: parameters may have changed since.
    if (state().active.fetch_add(1) == 0) state().epoch.fetch_add(1);
  }
  ~FrozenWeights() { state().active.fetch_sub(1); }
  FrozenWeights(const FrozenWeights&) = delete;
  FrozenWeights& operator=(const FrozenWeights&) = delete;

  /// A number that stays the same for as long as caches may be kept (a
  /// new one each time a guard is taken while none lived), or 0 when no
  /// guard lives.
  static uint64_t epoch() { return state().active.load() > 0 ? state().epoch.load() : 0; }

 private:
  struct State {
    std::atomic<int64_t> active{0};
    std::atomic<uint64_t> epoch{0};
  };
  static State& state() {
    static State s;
    return s;
  }
};

}  // namespace snn
