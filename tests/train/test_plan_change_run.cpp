// A plan change in the middle of training (through the planner hook) keeps the run
// deterministic and resumable, before and after the change.
#include <catch2/catch.hpp>
#include <fstream>

#include "headwise/dist/local_comm.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {

// Turns layer 0's heads into static and window heads and layer 1's head 1 into pruned at a
// fixed step.
class FixedPlanner final : public Planner {
 public:
  explicit FixedPlanner(int64_t at) : at_(at) {}
  std::string name() const override { return "fixed"; }
  int64_t fire_step() const override { return at_; }
  PlanChange plan(InterventionContext& ctx) override {
    PlanChange c;
    c.plan = ctx.model.config().head_plan;
    c.plan.layers[0][0] = attn::HeadSpec::parse("static");
    c.plan.layers[0][1] = attn::HeadSpec::parse("window:4");
    c.plan.layers[1][1] = attn::HeadSpec::parse("pruned");
    StaticHeadValues v = default_static_values(ctx.model.config().block_size);
    for (size_t i = 0; i < v.rho.size(); ++i) v.rho[i] = -0.25f * float(i);
    c.extras.statics[{0, 0}] = v;
    c.report = {{"planner", "fixed"}};
    return c;
  }

 private:
  int64_t at_;
};


}  // namespace

TEST_CASE("a mid-run plan change is deterministic and resumable", "[train][plan]") {
  const std::string dir = test::temp_dir("planchange");
  auto doc = test::tiny_run_doc(dir);
  doc["train"]["steps"] = 8;
  doc["train"]["checkpoint_every"] = 2;
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  {
    Trainer a(cfg, dir + "/a", comm, std::make_unique<FixedPlanner>(4));
    a.run();
    CHECK(a.model().config().head_plan.layers[1][1].kind == attn::HeadKind::Pruned);
    Trainer b(cfg, dir + "/b", comm, std::make_unique<FixedPlanner>(4));
    b.run();
  }
  const auto la = test::losses_of(dir + "/a/metrics.jsonl");
  REQUIRE(la.size() == 8);
  CHECK(la == test::losses_of(dir + "/b/metrics.jsonl"));
  // The intervention report is written into the run directory.
  CHECK(nlohmann::json::parse(std::ifstream(dir + "/a/intervention.json"))["step"] == 4);
  // Resume after the change (the checkpoint carries the plan and the compact moments) ...
  {
    Trainer r(cfg, dir + "/after", comm, std::make_unique<FixedPlanner>(4));
    r.resume(dir + "/a/checkpoints/step_6");
    CHECK(r.model().config().head_plan.layers[0][0].kind == attn::HeadKind::Static);
    r.run();
  }
  const auto after = test::losses_of(dir + "/after/metrics.jsonl");
  REQUIRE(after.size() == 2);
  CHECK(after[0] == la[6]);
  CHECK(after[1] == la[7]);
  // ... and before it: the planner fires at the same step with the same result.
  {
    Trainer r(cfg, dir + "/before", comm, std::make_unique<FixedPlanner>(4));
    r.resume(dir + "/a/checkpoints/step_2");
    r.run();
  }
  const auto before = test::losses_of(dir + "/before/metrics.jsonl");
  REQUIRE(before.size() == 6);
  for (size_t i = 0; i < 6; ++i) CHECK(before[i] == la[i + 2]);
}
