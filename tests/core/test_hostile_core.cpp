// The core helpers every loader uses on untrusted input (issue 35): JSON parsing with a depth
// limit and brief error messages, whole-number reads that never convert out of range, checked
// size arithmetic, and exceptions carried out of OpenMP regions.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <new>
#include <stdexcept>
#include <thread>

#include "headwise/core/arena.hpp"
#include "headwise/core/checked_math.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/core/parallel_errors.hpp"
#include "headwise/core/tensor.hpp"

using namespace hw;
using Catch::Contains;

namespace {
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("json: the nesting depth is counted outside strings and comments", "[core][json]") {
  CHECK(json_nesting_depth("[]", false) == 1);
  CHECK(json_nesting_depth("{\"a\": [[1], {\"b\": []}]}", false) == 4);
  CHECK(json_nesting_depth("[\"[[[[\\\"[[\"]", false) == 1);  // brackets in a string, an escaped quote
  CHECK(json_nesting_depth("[ // [[[[\n ]", true) == 1);
  CHECK(json_nesting_depth("[ /* [[[[ */ ]", true) == 1);
  // The scan stops just past the limit: a 10^6-level document costs nothing more.
  CHECK(json_nesting_depth(std::string(1000000, '['), false, 64) == 65);
}

TEST_CASE("json: parse_json refuses deep documents and names the place of a syntax error", "[core][json]") {
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  CHECK(parse_json(ok, "x").is_array());
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK(error_of([&] { parse_json(deep, "file 'd.json'"); }) ==
        "file 'd.json': JSON nested deeper than 64 levels");
  CHECK(error_of([&] { parse_json("{\"a\": 1,\n \"b\": tru}", "f"); }) == "f: not valid JSON (error at line 2, column 10)");
  // A long string before the error is not quoted back.
  const std::string long_bad = "[\"" + std::string(1 << 20, 'x') + "\\q\"]";
  const std::string e = error_of([&] { parse_json(long_bad, "f"); });
  CHECK_THAT(e, Contains("not valid JSON"));
  CHECK(e.size() < 100);
  // A number past a double's range is a json out_of_range, not a parse_error (found by fuzz_config_json).
  CHECK(error_of([] { parse_json("{\"a\": 1e400}", "f"); }) == "f: not valid JSON (a number beyond the range of a double)");
  CHECK(parse_json("{/* c */ \"a\": 1}", "f", JsonSyntax{.comments = true})["a"] == 1);
  CHECK_THAT(error_of([] { parse_json("{/* c */ \"a\": 1}", "f"); }), Contains("not valid JSON"));
}

TEST_CASE("json: briefs show a type and a short prefix, never a whole value", "[core][json]") {
  CHECK(json_brief(nlohmann::json(nullptr)) == "null");
  CHECK(json_brief(nlohmann::json(true)) == "true");
  CHECK(json_brief(nlohmann::json(2.5)) == "number 2.5");
  CHECK(json_brief(nlohmann::json("ab\ncd")) == "string \"ab\\x0acd\"");
  CHECK(json_brief(nlohmann::json(std::string(1000, 'y'))) == "string \"" + std::string(48, 'y') + " ... (1000 bytes)\"");
  CHECK(json_brief(nlohmann::json::array({1, 2, 3})) == "a list of 3 values");
  CHECK(json_brief(nlohmann::json::object({{"a", 1}})) == "an object of 1 keys");
  CHECK(text_brief("\xff\x01z") == "\\xff\\x01z");
}

TEST_CASE("json: whole numbers are read only when they fit", "[core][json]") {
  using nlohmann::json;
  CHECK(json_integer(json(5)) == 5);
  CHECK(json_integer(json(-5)) == -5);
  CHECK(json_integer(json(1e6)) == 1000000);
  CHECK(json_integer(json(INT64_MAX)) == INT64_MAX);
  CHECK_FALSE(json_integer(json(uint64_t(INT64_MAX) + 1)).has_value());
  CHECK_FALSE(json_integer(json(2.5)).has_value());
  CHECK_FALSE(json_integer(json(1e30)).has_value());      // a cast would be undefined
  CHECK_FALSE(json_integer(json(0x1p63)).has_value());    // 2^63: just out of int64
  CHECK(json_integer(json(-0x1p63)) == INT64_MIN);        // -2^63: just in
  CHECK_FALSE(json_integer(json(std::nan(""))).has_value());
  CHECK_FALSE(json_integer(json("7")).has_value());
  CHECK_FALSE(json_integer(json::parse("18446744073709551616")).has_value());  // 2^64 parses as a double
  CHECK(error_of([] { json_int(json(7), "k", 0, 5); }) == "k: 7 is outside [0, 5]");
  CHECK(error_of([] { json_int(json("7"), "k"); }) == "k: expected an integer, got string \"7\"");
}

TEST_CASE("sizes: checked products and tensor sizes refuse overflow", "[core][sizes]") {
  CHECK(checked_mul(int64_t(1) << 31, int64_t(1) << 31, "x") == int64_t(1) << 62);
  CHECK(error_of([] { checked_mul(int64_t(1) << 32, int64_t(1) << 32, "batch"); }) == "batch: size overflows 64 bits");
  CHECK_THROWS_AS(checked_mul(int64_t(-1), int64_t(2), "neg"), Error);
  CHECK(error_of([] { checked_add(INT64_MAX, int64_t(1), "sum"); }) == "sum: size overflows 64 bits");
  Tensor t;
  t.name = "w";
  t.shape = {int64_t(1) << 40, int64_t(1) << 30};
  CHECK(error_of([&] { (void)t.numel(); }) == "tensor 'w' of shape [1099511627776, 1073741824] is too large");
  t.shape = {int64_t(1) << 31, int64_t(1) << 31};  // 2^62 elements fit; 2^64 bytes do not
  CHECK(t.numel() == int64_t(1) << 62);
  CHECK_THAT(error_of([&] { (void)t.nbytes(); }), Contains("is too large"));
  // An arena refuses the shape when it is declared (naming it), before anything is allocated.
  Arena a("acts");
  CHECK_THAT(error_of([&] { a.declare("x", {int64_t(1) << 40, int64_t(1) << 40}); }), Contains("tensor 'x'"));
}

TEST_CASE("parallel: an exception inside an OpenMP loop is rethrown after it, the rest skipped", "[core][parallel]") {
  // What must hold: the exception comes out of rethrow(), and no iteration that calls run()
  // after the failure is recorded runs its body. The test orders the iterations itself, with
  // flags of its own (never ParallelErrors' state, which is what is under test): iteration 3
  // throws once 0..2 have returned from run(), and every later one calls run() only after 3's
  // run() returned. Deadlock-free with dynamic scheduling: an iteration is handed out after every
  // lower one, so those are running or done on other threads (or done on this one). One deadline
  // for the whole loop: a broken ordering fails in seconds, not as a ctest timeout.
  ParallelErrors errors;
  std::atomic<int> before_done{0}, body_after{0}, body_before{0};
  std::atomic<bool> thrower_done{false}, body_of_three{false}, timed_out{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto wait_for = [&](const std::function<bool()>& ready) {
    while (!ready()) {
      if (std::chrono::steady_clock::now() > deadline) {
        timed_out = true;
        return;
      }
      std::this_thread::yield();
    }
  };
#pragma omp parallel for schedule(dynamic, 1) num_threads(2)
  for (int i = 0; i < 1000; ++i) {
    if (i == 3) wait_for([&] { return before_done.load() == 3; });
    if (i > 3) wait_for([&] { return thrower_done.load(); });
    errors.run([&] {
      if (i < 3) ++body_before;
      if (i == 3) {
        body_of_three = true;
        throw std::bad_alloc();
      }
      if (i > 3) ++body_after;
    });
    if (i < 3) ++before_done;
    if (i == 3) thrower_done = true;
  }
  REQUIRE_FALSE(timed_out.load());
  CHECK(errors.failed());
  CHECK_THROWS_AS(errors.rethrow(), std::bad_alloc);
  CHECK(body_before.load() == 3);  // before the failure: every body ran
  CHECK(body_of_three.load());
  CHECK(body_after.load() == 0);   // after it: none did
  ParallelErrors quiet;
#pragma omp parallel for num_threads(2)
  for (int i = 0; i < 10; ++i) quiet.run([] {});
  CHECK_NOTHROW(quiet.rethrow());
}
