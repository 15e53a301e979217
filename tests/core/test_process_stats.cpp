// The process's own measures (core/process_stats.hpp): the resident-set high-water mark against a
// 64 MiB block this test touches and frees, and the stopwatch against a sleep of known length.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "headwise/core/process_stats.hpp"

using namespace hw;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST_CASE("peak RSS: the high-water mark sees a touched allocation and resets to the current RSS", "[core]") {
  REQUIRE(reset_peak_rss());
  const int64_t base = current_rss_bytes();
  REQUIRE(base > 0);
  CHECK(peak_rss_bytes() >= base);
  CHECK(peak_rss_bytes() < base + (4 << 20));  // just reset: the current RSS (page-granular)
  const int64_t size = int64_t(64) << 20;
  int64_t peak_with = 0;
  {
    std::vector<char> block(size_t(size), 1);  // 64 MiB, every page touched
    volatile char sink = block[size_t(size) - 1];
    (void)sink;
    peak_with = peak_rss_bytes();
    CHECK(peak_with >= base + size - (1 << 20));
  }
  // Freed: the mark stays (within the kernel's lazily synced per-thread RSS counters, < 1 MiB).
  CHECK(peak_rss_bytes() >= peak_with - (1 << 20));
  REQUIRE(reset_peak_rss());
  // 64 MiB went back to the kernel, the mark follows (not under AddressSanitizer, whose
  // quarantine keeps freed blocks mapped: sanitize:test_core runs this file)
  if (!kAddressSanitizer) CHECK(peak_rss_bytes() < peak_with - size / 2);
}

TEST_CASE("stopwatch: a 30 ms sleep reads as at least 30 ms, in ms and in seconds, and restart starts over",
          "[core]") {
  Stopwatch w;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const double ms = w.ms(), s = w.seconds();
  CHECK(ms >= 30.0);
  CHECK(ms < 30.0 + 2000.0);  // a loaded machine may wake the sleeper late, not seconds late
  CHECK(s >= ms / 1000.0);    // read after ms
  CHECK(s < 2.1);
  w.restart();
  CHECK(w.ms() < ms);  // (the sleep is behind it)
}
