#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace snn::app {

Progress::Progress(std::string label) : label_(std::move(label)), tty_(::isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() { finish(); }

void Progress::update(int64_t done, int64_t total, const std::string& detail) {
  if (!tty_) return;
  const Clock::time_point now = Clock::now();
  if (!started_) {
    started_ = true;
    first_done_ = done;
    start_ = now;
  } else if (done < total && now - last_draw_ < kInterval) {
    return;
  }
  last_draw_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done - first_done_) / secs : 0;
  const std::string eta = rate > 0 ? fmt::format("ETA {:.0f}s", static_cast<double>(total - done) / rate) : "ETA ?";
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * std::clamp<int64_t>(done, 0, total) / std::max<int64_t>(total, 1));
  // \r and "erase to the end of the line": a shorter line leaves nothing behind.
  const std::string line =
      fmt::format("\r{} [{}{}] {}/{}{}{} {:.0f} samples/s {}\033[K", label_, std::string(filled, '#'),
                  std::string(kWidth - filled, '.'), done, total, detail.empty() ? "" : " ", detail, rate, eta);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace snn::app
