// plan_cost against hand-computed numbers and a brute-force count of visible pairs.
#include <catch2/catch.hpp>

#include "headwise/attention/cost.hpp"

using namespace hw::attn;

namespace {

HeadPlan plan_of(std::vector<std::vector<const char*>> layers) {
  HeadPlan p;
  for (auto& l : layers) {
    LayerPlan lp;
    for (const char* s : l) lp.push_back(HeadSpec::parse(s));
    p.layers.push_back(lp);
  }
  return p;
}

}  // namespace

TEST_CASE("plan_cost: hand-computed ACR and FLOPs for a mixed two-layer plan") {
  // T = 128, D = 64.
  // ACR layer 0: softmax 128 + window:32 -> clamp 64 + sink_window:4:100 -> 104 + pruned 0 = 296 / 512
  //     layer 1: static 0 + linear 0 + window:1000 -> 128 + softmax 128 = 256 / 512; mean 0.5390625.
  // FLOPs: softmax 4*64*(128*129/2) = 2113536; window:32 pairs 32*33/2 + 96*32 = 3600 -> 921600;
  // sink_window:4:100 pairs 5050 + 28*100 + (4*5/2 + 24*4) = 7956 -> 2036736; static 2*64*8256 = 1056768;
  // linear: Fw = 1 + 64 + 2080 = 2145, 128*4*2145*65 = 71385600 plus 2 chunks * 2080 pairs * (128 + 130)
  // = 1073280 -> 72458880; window:1000 at T = 128 equals softmax.
  const HeadPlan p = plan_of({{"softmax", "window:32", "sink_window:4:100", "pruned"},
                              {"static", "linear", "window:1000", "softmax"}});
  const PlanCost c = plan_cost(p, 128, 64);
  CHECK(c.acr == Approx(0.5390625).epsilon(1e-15));
  CHECK(c.attn_flops == Approx(82814592.0).epsilon(1e-15));
  CHECK(c.attn_flops_softmax == Approx(16908288.0).epsilon(1e-15));
  CHECK(c.relative() == Approx(82814592.0 / 16908288.0).epsilon(1e-15));
}

TEST_CASE("plan_cost: the linearization baselines' FLOPs and coverage by hand") {
  // T = 100, D = 8: one full chunk of 64 and 36 rows, intra-chunk pairs 64*65/2 + 36*37/2 = 2746.
  // taylorshift (the linear engine): Fw = 1 + 8 + 36 = 45, 100*4*45*9 = 162000 + 2746*(16 + 18) = 93364.
  // performer:12: 100*(4*8*12 + 4*12*9) = 81600 + 2746*(2*12 + 18) = 115332.
  // dijiang (M = D = 8): 100*(4*8*8 + 4*8*9) = 54400 + 2746*(16 + 18) = 93364.
  // None computes scores: coverage 0.
  const double want[3] = {162000.0 + 93364.0, 81600.0 + 115332.0, 54400.0 + 93364.0};
  const char* kinds[3] = {"taylorshift", "performer:12", "dijiang"};
  for (int i = 0; i < 3; ++i) {
    INFO(kinds[i]);
    const PlanCost c = plan_cost(plan_of({{kinds[i]}}), 100, 8);
    CHECK(c.attn_flops == Approx(want[i]).epsilon(1e-15));
    CHECK(c.acr == 0.0);
  }
}

TEST_CASE("plan_cost: all-softmax plan has ACR 1 and relative cost 1, pruned plan 0") {
  const PlanCost full = plan_cost(HeadPlan::uniform(3, 4), 1000, 32);
  CHECK(full.acr == Approx(1.0));
  CHECK(full.relative() == Approx(1.0));
  CHECK(full.attn_flops == Approx(12 * 4.0 * 32 * 1000 * 1001 / 2));
  const PlanCost none = plan_cost(HeadPlan::uniform(3, 4, HeadSpec::parse("pruned")), 1000, 32);
  CHECK(none.acr == 0.0);
  CHECK(none.attn_flops == 0.0);
  CHECK(none.relative() == 0.0);
  CHECK(plan_cost(HeadPlan{}, 100, 8).acr == 0.0);
}

TEST_CASE("plan_cost: ACR clamps windows to [64, T], T below 64 caps at T") {
  CHECK(plan_cost(plan_of({{"window:8", "window:100", "window:5000", "sink_window:500:600"}}), 1024, 64).acr ==
        Approx((64.0 + 100 + 1024 + 1024) / (4 * 1024)));
  CHECK(plan_cost(plan_of({{"window:8", "softmax"}}), 32, 64).acr == Approx(1.0));
}

TEST_CASE("plan_cost: window FLOPs equal a brute-force count of visible pairs") {
  for (int64_t T : {1, 5, 64, 129})
    for (int S : {0, 1, 3, 70, 500})
      for (int W : {1, 2, 7, 64, 300}) {
        int64_t pairs = 0;
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j <= i; ++j) pairs += (j < S || j > i - W);
        const std::string spec = S == 0 ? "window:" + std::to_string(W)
                                        : "sink_window:" + std::to_string(S) + ":" + std::to_string(W);
        INFO(spec << " T=" << T);
        CHECK(plan_cost(plan_of({{spec.c_str()}}), T, 16).attn_flops == Approx(4.0 * 16 * double(pairs)));
      }
}
