// `headwise bench-attention --layer`: the plan compositions it times, in fp32 and bf16 (the CPU
// runs the bf16 emulation; the same command times the CUDA kernels with --device cuda).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

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
    for (const auto& row : rows) {
      CHECK(row.at("precision") == precision);
      CHECK(row.at("ms_fwd_bwd").get<double>() > 0.0);
      CHECK(row.at("acr").get<double>() > -1e-12);
      CHECK(row.at("acr").get<double>() <= 1.0);
    }
    CHECK(rows.at(0).at("plan") == "softmax");
    CHECK(rows.at(0).at("relative_to_softmax").get<double>() == 1.0);
  }
}

TEST_CASE("bench-attention rejects an unknown precision in one line", "[cli][bench][errors]") {
  const CmdResult r = run_headwise("bench-attention --layer --T 16 --heads 4 --head-dim 8 --precision fp16");
  CHECK(r.code != 0);
  CHECK(r.out.find("--precision") != std::string::npos);
}
