#pragma once
// What a process measures about itself: wall time (Stopwatch) and resident memory (Linux
// /proc/self). One place for the timers and memory probes that the trainer, the experiment
// protocol, the methods' reports and the CLI's benchmarks print, so they all measure the same way.
#include <chrono>
#include <cstdint>

namespace hw {

// Wall time since construction (or the last restart) on the steady clock.
class Stopwatch {
 public:
  using Clock = std::chrono::steady_clock;
  Stopwatch() : start_(Clock::now()) {}
  void restart() { start_ = Clock::now(); }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double ms() const { return std::chrono::duration<double, std::milli>(Clock::now() - start_).count(); }

 private:
  Clock::time_point start_;
};

// The process's resident set (bytes) from /proc/self/status: current (VmRSS) and peak (VmHWM);
// -1 where it cannot be read. reset_peak_rss() sets the peak to the current RSS (writing "5" to
// /proc/self/clear_refs, Linux >= 4.0; false where the kernel refuses it).
int64_t current_rss_bytes();
int64_t peak_rss_bytes();
bool reset_peak_rss();

}  // namespace hw
