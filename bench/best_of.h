#pragma once
// Timing shared by the C++ benchmarks.

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace snn::bench {

/// Seconds per call of each function: the best of `reps` rounds, each round
/// timing every function in turn (so that this VM's slow spells, which last
/// seconds, hit all of them alike), each time the mean over enough calls to
/// last at least 20 ms (a narrow layer's call takes ~0.1 ms, too short for
/// the timer noise).
inline std::vector<double> seconds_best_of(int reps, const std::vector<std::function<void()>>& fns) {
  using clock = std::chrono::steady_clock;
  std::vector<int> calls;
  for (const auto& fn : fns) {
    fn();
    const auto t0 = clock::now();
    fn();
    const double once = std::max(1e-7, std::chrono::duration<double>(clock::now() - t0).count());
    calls.push_back(static_cast<int>(std::min(1000.0, std::max(1.0, 0.02 / once))));
  }
  std::vector<double> best(fns.size(), 1e30);
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < fns.size(); ++i) {
      const auto t1 = clock::now();
      for (int c = 0; c < calls[i]; ++c) fns[i]();
      best[i] = std::min(best[i], std::chrono::duration<double>(clock::now() - t1).count() / calls[i]);
    }
  }
  return best;
}

}  // namespace snn::bench
