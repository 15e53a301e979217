#pragma once
// Internal to src/eval: a progress line on stderr (done of total units, units/s, ETA), rewritten in
// place on a terminal, else one line every 10 s and one at the end.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "headwise/core/process_stats.hpp"

namespace hw::eval {

class ProgressLine {
 public:
  // units: what is counted ("examples", "windows"); total: how many.
  ProgressLine(bool on, std::string name, std::string units, int64_t total)
      : on_(on), tty_(::isatty(2) == 1), name_(std::move(name)), units_(std::move(units)), total_(total) {}
  // done of all requests (the scorer's count) -> the same fraction of the units.
  void update(int64_t done, int64_t all) {
    if (!on_) return;
    const bool last = done == all;
    const double t = since_start_.seconds();
    if (!last && t - shown_ < (tty_ ? 0.5 : 10.0)) return;
    shown_ = t;
    const double frac = all > 0 ? double(done) / double(all) : 1.0;
    const double n = frac * double(total_), rate = t > 0 ? n / t : 0.0;
    const double eta = rate > 0 ? (double(total_) - n) / rate : 0.0;
    std::fprintf(stderr, "%s%s: %.0f of %lld %s (%.0f%%), %.1f %s/s, ETA %.0f s%s", tty_ ? "\r" : "", name_.c_str(), n,
                 static_cast<long long>(total_), units_.c_str(), 100.0 * frac, rate, units_.c_str(), eta,
                 tty_ && !last ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  bool on_, tty_;
  std::string name_, units_;
  int64_t total_;
  Stopwatch since_start_;
  double shown_ = -1e9;
};

}  // namespace hw::eval
