// What AAH logs about a plan, against hand computations.
#include <catch2/catch.hpp>

#include "headwise/methods/aah/report.hpp"

using namespace hw;

TEST_CASE("aah: ACR, band coverage and window fractions of a plan, by hand", "[aah][report]") {
  const auto plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["window:64", "window:128", "window:256", "softmax"], ["window:32", "window:64", "window:64", "window:64"]])"));
  const nlohmann::json r = aah::plan_report(plan, 512, 32, {});
  // ACR (rectangle, clamp(W, 64, T)): layer 0 (64 + 128 + 256 + 512) / (4 x 512) = .46875; layer
  // 1 (64 + 64 + 64 + 64) / 2048 = .125 (32 is clamped up to 64); mean .296875.
  CHECK(r["acr"].get<double>() == Approx(0.296875).epsilon(1e-15));
  // Causal band: a window W sees W(W+1)/2 + (T-W) W pairs of the T(T+1)/2 = 131328: 64 -> 30752,
  // 128 -> 57408, 256 -> 98432, 32 -> 15888; (317920 + 108144) / (8 x 131328).
  CHECK(r["causal_band_coverage"].get<double>() == Approx(426064.0 / 1050624.0).epsilon(1e-15));
  CHECK(r["attn_madds_relative"].get<double>() == Approx(426064.0 / 1050624.0).epsilon(1e-15));
  const auto& w = r["window_fractions"];
  CHECK(w["64"].get<double>() == 0.5);
  CHECK(w["32"].get<double>() == 0.125);
  CHECK(w["128"].get<double>() == 0.125);
  CHECK(w["256"].get<double>() == 0.125);
  CHECK(w["512"].get<double>() == 0.125);
  aah::Hierarchy h;
  h.levels = {aah::Groups{{0, 3}, {1, 2}}, aah::Groups{{0, 1}}};
  CHECK(aah::plan_report(plan, 512, 32, {h, aah::Hierarchy{{aah::Groups{{0}, {1}, {2}, {3}}}}})["group_counts"] ==
        nlohmann::json::parse("[[2, 1], [4]]"));
}
