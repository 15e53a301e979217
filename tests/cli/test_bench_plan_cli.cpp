// `headwise bench --plan`: head plans timed side by side, each row with its update speedup and
// attention-time ratio against the first plan beside ACR and the computed multiply-adds.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <cmath>
#include <sstream>
#include <string>

#include "cli/cli_util.hpp"

using namespace hw::test;

namespace {
// A 2-layer, 4-head, 32-wide model at T = 128 (the hand counts below depend on this shape).
void write_bench_config(const std::string& dir) {
  write_text(dir + "/cfg.json", R"({
    "model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 128, "vocab_size": 64},
    "train": {"micro_batch": 1, "seq_len": 128, "steps": 4, "threads": 1},
    "data": {}
  })");
}
}  // namespace

TEST_CASE("bench --plan prints one row per plan with ratios beside ACR", "[cli][bench]") {
  const std::string dir = cli_temp_dir("bench_plan");
  write_bench_config(dir);
  write_text(dir + "/w16.json", R"([["window:16", "window:16", "window:16", "window:16"],
                                    ["window:16", "window:16", "window:16", "window:16"]])");
  // An intervention report's head_plan is read too.
  write_text(dir + "/report.json", R"({"head_plan": [["window:64", "softmax", "softmax", "softmax"],
                                                      ["softmax", "softmax", "softmax", "softmax"]]})");
  const CmdResult r = run_headwise("bench --config " + dir + "/cfg.json --steps 1 --warmup 0 --plan softmax --plan " +
                                   dir + "/w16.json --plan " + dir + "/report.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::vector<nlohmann::json> rows;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("plan")) rows.push_back(j);
  }
  REQUIRE(rows.size() == 3);
  CHECK(rows[0]["update_speedup"] == 1.0);
  CHECK(rows[0]["attn_time_ratio"] == 1.0);
  CHECK(rows[0]["acr"] == 1.0);
  // ACR by hand: clamp(16, 64, 128) = 64 per head -> 64 / 128 = .5; band 16*17/2 + 112*16 = 1928
  // of 128*129/2 = 8256 pairs.
  CHECK(rows[1]["acr"].get<double>() == Approx(0.5));
  CHECK(rows[1]["attn_flops_relative"].get<double>() == Approx(1928.0 / 8256.0));
  // Layer 0: (64 + 3 x 128) / 512 = .875, layer 1: 1 -> .9375.
  CHECK(rows[2]["acr"].get<double>() == Approx(0.9375));
  for (const auto& row : rows) {
    CHECK(row["T"] == 128);
    CHECK(std::isfinite(row["update_speedup"].get<double>()));
    CHECK(row["update_speedup"].get<double>() > 0);
    CHECK(row["attn_ms"].get<double>() > 0);
  }
  write_text(dir + "/bad.json", R"([["window:16"]])");
  const CmdResult bad = run_headwise("bench --config " + dir + "/cfg.json --steps 1 --plan " + dir + "/bad.json");
  CHECK(bad.code == 1);
  CHECK(bad.out.find("error: --plan " + dir + "/bad.json") != std::string::npos);
}

TEST_CASE("bench reports the dense FLOPs per token by hand count, the rate they give and peak RSS", "[cli][bench]") {
  const std::string dir = cli_temp_dir("bench_flops");
  write_bench_config(dir);
  const CmdResult r = run_headwise("bench --config " + dir + "/cfg.json --steps 1 --warmup 0");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = last_json_line(r.out);
  // Parameters: wte 64 x 32 + wpe 128 x 32 + 2 layers x (12 C^2 + 13 C) + ln_f 2 C = 31,616;
  // 6 per parameter plus attention's 6 n_layer T C = 6 x 2 x 128 x 32.
  CHECK(j["flops_per_token"].get<double>() == 6.0 * 31616 + 6.0 * 2 * 128 * 32);
  CHECK(j["achieved_gflops"].get<double>() ==
        Approx(j["flops_per_token"].get<double>() * j["tok_per_s"].get<double>() / 1e9).epsilon(1e-12));
  CHECK(j["peak_rss_bytes"].get<double>() > 1e6);
}
