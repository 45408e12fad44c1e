#pragma once
// The progress line of train and run: samples done / total, samples/s and
// the time left, redrawn in place on a terminal (stderr is a tty), at most
// a few times per second; nothing at all otherwise, so logs and pipes see
// only the results.

#include <chrono>
#include <cstdint>
#include <string>

namespace snn::app {

class Progress {
 public:
  /// `label` starts the line, e.g. "epoch 2/10" or "run".
  explicit Progress(std::string label);
  /// Clears the line if it is still drawn (an error line then starts clean).
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// `done` of `total` samples, `detail` appended (e.g. "loss 0.1234").
  /// The rate counts from the first call's `done` (a resumed run's samples
  /// read back are not simulated). Redraws at most every kInterval, and
  /// always once done reaches total.
  void update(int64_t done, int64_t total, const std::string& detail = "");
  /// Clears the line (the results are printed after it).
  void finish();

  static constexpr std::chrono::milliseconds kInterval{200};

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  bool tty_;
  bool drawn_ = false;
  bool started_ = false;
  int64_t first_done_ = 0;
  Clock::time_point start_;
  Clock::time_point last_draw_;
};

}  // namespace snn::app
