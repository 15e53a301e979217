// `headwise bench-attention --layer`: the plan compositions it times, in fp32 and bf16 (the CPU
// runs the bf16 emulation; the same command times the CUDA kernels with --device cuda).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_util.hpp"

using namespace hw::test;

namespace {
// The JSON rows (the last line of the output).
nlohmann::json rows_of(const std::string& out) {
  std::istringstream in(out);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty() && line.front() == '[') last = line;
  return nlohmann::json::parse(last);
}
}  // namespace

TEST_CASE("bench-attention --layer times every composition in fp32 and bf16", "[cli][bench]") {
  for (const char* precision : {"fp32", "bf16"}) {
    INFO(precision);
    const CmdResult r = run_headwise(std::string("bench-attention --layer --T 40 --heads 4 --head-dim 16 --batch 1 "
                                                 "--repeats 1 --precision ") + precision);
    INFO(r.out);
    REQUIRE(r.code == 0);
    const nlohmann::json rows = rows_of(r.out);
    REQUIRE(rows.size() == 8);
    // The compositions in order (windows T / 8 = 5 and T / 4 = 10, sinks 4), each timed (a
    // positive, finite time) with its relative column the same division by softmax's time.
    const std::vector<std::string> plans = {"softmax",    "static 25%",        "static 50%",
                                            "window:5",   "window:10",         "sink_window:4:5",
                                            "linear",     "mix 25% static + 25% window:5"};
    const double softmax_ms = rows.at(0).at("ms_fwd_bwd").get<double>();
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& row = rows.at(i);
      INFO("row " << i);
      CHECK(row.at("plan") == plans[i]);
      CHECK(row.at("T") == 40);
      CHECK(row.at("device") == "cpu");
      CHECK(row.at("precision") == precision);
      const double ms = row.at("ms_fwd_bwd").get<double>();
      CHECK(std::isfinite(ms));
      CHECK(ms > 0.0);
      CHECK(row.at("relative_to_softmax").get<double>() == ms / softmax_ms);
      CHECK(row.at("acr").get<double>() > -1e-12);
      CHECK(row.at("acr").get<double>() <= 1.0);
    }
    CHECK(rows.at(0).at("relative_to_softmax").get<double>() == 1.0);
    CHECK(rows.at(0).at("acr").get<double>() == 1.0);  // all softmax: every head reads every key
  }
}

TEST_CASE("bench-attention rejects an unknown precision in one line", "[cli][bench][errors]") {
  const CmdResult r = run_headwise("bench-attention --layer --T 16 --heads 4 --head-dim 8 --precision fp16");
  CHECK(r.code != 0);
  CHECK(r.out.find("--precision") != std::string::npos);
}
