// bench_attention_kinds: the rows it returns. Timings cannot be asserted, but everything around
// them can: every kind at every length in order, each time positive and finite, and the relative
// column equal to its own division by the same length's softmax time.
#include <catch2/catch.hpp>

#include "headwise/attention/kind_bench.hpp"
#include "headwise/core/error.hpp"

#include <algorithm>
#include <cmath>

TEST_CASE("bench_attention_kinds returns one row per kind and length") {
  const nlohmann::json rows = hw::attn::bench_attention_kinds({16, 40}, 8, 2, 1);
  REQUIRE(rows.size() == 12);
  // Windows are T / 4 (4 and 10), sinks 4.
  const std::vector<std::vector<std::string>> kinds = {
      {"softmax", "window:4", "sink_window:4:4", "static", "linear", "pruned"},
      {"softmax", "window:10", "sink_window:4:10", "static", "linear", "pruned"}};
  const std::string md = hw::attn::bench_attention_markdown(rows);
  CHECK(std::count(md.begin(), md.end(), '\n') == 14);
  for (size_t t = 0; t < 2; ++t) {
    const double softmax_ms = rows[6 * t]["ms_fwd_bwd"].get<double>();
    for (size_t i = 0; i < 6; ++i) {
      const auto& row = rows[6 * t + i];
      INFO("row " << 6 * t + i);
      CHECK(row["kind"] == kinds[t][i]);
      CHECK(row["T"] == (t == 0 ? 16 : 40));
      const double ms = row["ms_fwd_bwd"].get<double>();
      CHECK(std::isfinite(ms));
      CHECK(ms > 0.0);
      CHECK(row["relative_to_softmax"].get<double>() == ms / softmax_ms);  // the same division, bit for bit
      const std::string line = "| " + kinds[t][i] + " | " + (t == 0 ? "16" : "40") + " |";
      CHECK(md.find(line) != std::string::npos);
    }
  }
  CHECK(rows[0]["relative_to_softmax"].get<double>() == 1.0);
}

TEST_CASE("bench_attention_kinds rejects bad arguments") {
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({}, 8, 1, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({0}, 8, 1, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({16}, 0, 1, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({16}, 8, 0, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_kinds({16}, 8, 1, 0), hw::Error);
}

TEST_CASE("bench_attention_curve: the Fig. 3 kinds per length, kernel workspaces independent of T") {
  const nlohmann::json rows = hw::attn::bench_attention_curve({16, 200}, 8, 1);
  const std::vector<std::string> kinds = {"softmax",   "linear G=1", "linear G=4",
                                          "performer", "dijiang",    "taylorshift"};
  REQUIRE(rows.size() == 12);
  for (size_t i = 0; i < 6; ++i) {
    INFO(kinds[i]);
    CHECK(rows[i]["kind"] == kinds[i]);
    CHECK(rows[6 + i]["kind"] == kinds[i]);
    CHECK(rows[6 + i]["T"] == 200);
    CHECK(rows[i]["ms_fwd_bwd"].get<double>() > 0.0);
    CHECK(rows[i]["cpu_ms_fwd_bwd"].get<double>() > 0.0);
    // the attention's own scratch does not grow with T; inputs and outputs do
    CHECK(rows[i]["workspace_bytes"] == rows[6 + i]["workspace_bytes"]);
    CHECK(rows[6 + i]["total_bytes"].get<int64_t>() > rows[i]["total_bytes"].get<int64_t>());
  }
  const std::string csv = hw::attn::bench_curve_csv(rows);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 13);
  CHECK(csv.rfind("kind,T,ms_fwd_bwd,cpu_ms_fwd_bwd,relative_to_softmax,workspace_bytes,total_bytes\n", 0) == 0);
  CHECK(csv.find("\nlinear G=4,200,") != std::string::npos);
  CHECK_THROWS_AS(hw::attn::bench_attention_curve({}, 8, 1), hw::Error);
  CHECK_THROWS_AS(hw::attn::bench_attention_curve({16}, 8, 0), hw::Error);
}
