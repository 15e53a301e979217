// bench_attention_kinds: the rows it returns (shape and bookkeeping only; no timing asserted).
#include <catch2/catch.hpp>

#include "headwise/attention/kind_bench.hpp"
#include "headwise/core/error.hpp"

TEST_CASE("bench_attention_kinds returns one row per kind and length") {
  const nlohmann::json rows = hw::attn::bench_attention_kinds({16, 40}, 8, 2, 1);
  REQUIRE(rows.size() == 12);
  const std::vector<std::string> kinds = {"softmax", "window:4", "sink_window:4:4", "static", "linear", "pruned"};
  for (size_t i = 0; i < 6; ++i) {
    CHECK(rows[i]["kind"] == kinds[i]);
    CHECK(rows[i]["T"] == 16);
    CHECK(rows[i]["ms_fwd_bwd"].get<double>() >= 0.0);
  }
  CHECK(rows[6]["kind"] == "softmax");
  CHECK(rows[7]["kind"] == "window:10");
  CHECK(rows[6]["relative_to_softmax"].get<double>() == 1.0);
  const double ratio = rows[10]["ms_fwd_bwd"].get<double>() / rows[6]["ms_fwd_bwd"].get<double>();
  CHECK(rows[10]["relative_to_softmax"].get<double>() == Approx(ratio));
  const std::string md = hw::attn::bench_attention_markdown(rows);
  CHECK(std::count(md.begin(), md.end(), '\n') == 14);
  CHECK(md.find("| linear | 40 |") != std::string::npos);
}

TEST_CASE("bench_attention_kinds rejects bad arguments") {
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({}, 8, 1, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({0}, 8, 1, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({16}, 0, 1, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({16}, 8, 0, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({16}, 8, 1, 0), hw::Error);
}
