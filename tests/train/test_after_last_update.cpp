// A planner that acts at step == train.steps acts once, after the last update: the final
// evaluation, the final checkpoint and summary.json hold its change, and the training itself
// is that of a run without it.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {

struct MetricsCounts {
  size_t losses = 0, vals = 0;
};

MetricsCounts counts_of(const std::string& metrics) {
  MetricsCounts c;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    c.losses += j.contains("loss") ? 1 : 0;
    c.vals += j.contains("val_loss") ? 1 : 0;
  }
  return c;
}

// The last val_loss of a run's metrics.jsonl.
double last_val_loss(const std::string& metrics) {
  double v = -1.0;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) v = j["val_loss"].get<double>();
  }
  return v;
}

// Prunes layer 1's head 0 at one step and records, each time it acts, the step it was given
// and what the run's metrics.jsonl held at that moment.
class PruneAt final : public Planner {
 public:
  PruneAt(int64_t at, std::string metrics) : at_(at), metrics_(std::move(metrics)) {}
  std::string name() const override { return "prune_at"; }
  nlohmann::json config() const override { return {{"name", "prune_at"}, {"at", at_}}; }
  bool acts_at(int64_t step) const override { return step == at_; }
  std::optional<PlanChange> act(PlannerContext& ctx) override {
    steps_seen.push_back(ctx.step);
    seen.push_back(counts_of(metrics_));
    PlanChange c;
    c.plan = ctx.model.config().head_plan;
    c.plan.layers[1][0] = attn::HeadSpec::parse("pruned");
    return c;
  }
  std::vector<int64_t> steps_seen;
  std::vector<MetricsCounts> seen;

 private:
  int64_t at_;
  std::string metrics_;
};

}  // namespace

TEST_CASE("a planner acting at train.steps acts once after the last update, before the final eval and checkpoint",
          "[train][plan]") {
  const std::string dir = test::temp_dir("after_last");
  auto doc = test::tiny_run_doc(dir);  // 6 updates, eval and checkpoint every 3
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  {
    Trainer plain(cfg, dir + "/plain", comm);
    plain.run();
  }
  auto owned = std::make_unique<PruneAt>(6, dir + "/a/metrics.jsonl");
  PruneAt* planner = owned.get();
  Planners list;
  list.push_back(std::move(owned));
  Trainer a(cfg, dir + "/a", comm, std::move(list));  // owns the planner: kept alive to read it
  const nlohmann::json summary = a.run();
  CHECK(a.model().config().head_plan.layers[1][0].kind == attn::HeadKind::Pruned);
  // Called exactly once, at step 6, when all 6 updates and only the step-3 evaluation were logged.
  REQUIRE(planner->steps_seen == std::vector<int64_t>{6});
  CHECK(planner->seen[0].losses == 6);
  CHECK(planner->seen[0].vals == 1);
  const MetricsCounts after = counts_of(dir + "/a/metrics.jsonl");
  CHECK(after.losses == 6);
  CHECK(after.vals == 2);
  CHECK(std::ifstream(intervention_file(dir + "/a", 6, 0, "prune_at")).good());
  // The updates are the plain run's; so is the checkpoint before the change.
  CHECK(test::losses_of(dir + "/a/metrics.jsonl") == test::losses_of(dir + "/plain/metrics.jsonl"));
  CHECK(io::read_file(dir + "/a/checkpoints/step_3/model.safetensors") ==
        io::read_file(dir + "/plain/checkpoints/step_3/model.safetensors"));
  // The final checkpoint holds the new plan.
  const auto tj = nlohmann::json::parse(std::ifstream(dir + "/a/checkpoints/step_6/trainer.json"));
  CHECK(tj["step"] == 6);
  const auto plan = attn::HeadPlan::from_json(tj["run_config"]["model"]["head_plan"]);
  CHECK(plan.layers[1][0].kind == attn::HeadKind::Pruned);
  CHECK(plan.count(attn::HeadKind::Pruned) == 1);
  // The final evaluation is of the pruned model: a fresh trainer resumed from the final
  // checkpoint (no planner) evaluates to the same loss, and the plain run's differs.
  Trainer check_eval(cfg, "", comm);
  check_eval.resume(dir + "/a/checkpoints/step_6");
  CHECK(check_eval.model().config().head_plan.layers[1][0].kind == attn::HeadKind::Pruned);
  const double reeval = check_eval.eval().loss;
  CHECK(last_val_loss(dir + "/a/metrics.jsonl") == reeval);
  CHECK(summary["val_loss"].get<double>() == reeval);
  CHECK(nlohmann::json::parse(std::ifstream(dir + "/a/summary.json"))["val_loss"].get<double>() == reeval);
  CHECK(last_val_loss(dir + "/plain/metrics.jsonl") != reeval);
  // Resumed from that final checkpoint, the run has nothing left to do and does not act again.
  auto again = std::make_unique<PruneAt>(6, dir + "/a/metrics.jsonl");
  PruneAt* again_ptr = again.get();
  Planners again_list;
  again_list.push_back(std::move(again));
  Trainer r(cfg, dir + "/r", comm, std::move(again_list));
  r.resume(dir + "/a/checkpoints/step_6");
  r.run();
  CHECK(again_ptr->steps_seen.empty());
  // Resumed before the end, it acts once, after the last update, as the uninterrupted run did.
  auto mid = std::make_unique<PruneAt>(6, dir + "/m/metrics.jsonl");
  PruneAt* mid_ptr = mid.get();
  Planners mid_list;
  mid_list.push_back(std::move(mid));
  Trainer m(cfg, dir + "/m", comm, std::move(mid_list));
  m.resume(dir + "/a/checkpoints/step_3");
  m.run();
  CHECK(mid_ptr->steps_seen == std::vector<int64_t>{6});
  CHECK(io::read_file(dir + "/m/checkpoints/step_6/model.safetensors") ==
        io::read_file(dir + "/a/checkpoints/step_6/model.safetensors"));
}
