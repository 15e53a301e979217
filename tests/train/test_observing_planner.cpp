// A planner that observes ordinary training forwards, keeps statistics between its acts and
// re-plans from them: the trainer shows it exactly the updates it asks for (every layer of every
// micro-step), its state survives a resume bit for bit, and a run whose planner never asks
// equals a run with no planner at all.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {

uint64_t bits_of(double x) {
  uint64_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
double from_bits(uint64_t u) {
  double x = 0;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Observes the updates with step % 3 != 1 (or none), keeps an EMA of layer 1 head 0's
// mean |q|, and every 2 updates sets that head's window from the EMA.
class ObservingWindow final : public Planner, public AttentionObserver {
 public:
  explicit ObservingWindow(bool observe = true) : observe_(observe) {}
  std::string name() const override { return "observing"; }
  nlohmann::json config() const override { return {{"name", "observing"}}; }
  bool acts_at(int64_t step) const override { return observe_ && step > 0 && step % 2 == 0; }
  bool observes_at(int64_t step) const override {
    asked_.push_back(step);
    return observe_ && step % 3 != 1;
  }
  AttentionObserver* observer() override { return this; }
  void on_forward(const AttentionView& v) override {
    ++calls_[v.layer];
    if (v.layer != 1) return;
    const auto& lay = *v.layout;
    double sum = 0;
    for (int64_t r = 0; r < v.B * v.T; ++r)
      for (int d = 0; d < lay.head_dim; ++d) sum += std::fabs((*v.qkv)[size_t(r * lay.qkv_width() + lay.q_col(0) + d)]);
    ema_ = 0.9 * ema_ + 0.1 * sum / double(v.B * v.T * lay.head_dim);
  }
  std::optional<PlanChange> act(PlannerContext& ctx) override {
    const int window = 2 + int(bits_of(ema_) % 9);  // every bit of the EMA decides
    PlanChange c;
    c.plan = ctx.model.config().head_plan;
    c.plan.layers[1][0] = attn::HeadSpec::parse("window:" + std::to_string(window));
    c.report = {{"window", window}};
    return c;
  }
  nlohmann::json state() const override { return {{"ema_bits", std::to_string(bits_of(ema_))}}; }
  void restore(const nlohmann::json& s) override { ema_ = from_bits(std::stoull(s.at("ema_bits").get<std::string>())); }

  std::map<int, int64_t> calls_;          // forward observations per layer
  mutable std::vector<int64_t> asked_;    // the steps observes_at was asked about

 private:
  bool observe_;
  double ema_ = 0.0;
};

}  // namespace

TEST_CASE("an observing planner sees exactly the updates it asks for and resumes bit for bit", "[train][observe]") {
  const std::string dir = test::temp_dir("observing");
  auto doc = test::tiny_run_doc(dir);
  doc["train"]["steps"] = 8;
  doc["train"]["checkpoint_every"] = 1;
  const RunConfig cfg = RunConfig::from_json(doc);
  REQUIRE(cfg.grad_accum() == 2);
  dist::LocalComm comm;
  std::vector<double> la;
  {
    auto p = std::make_unique<ObservingWindow>();
    ObservingWindow* planner = p.get();
    Trainer a(cfg, dir + "/a", comm, std::move(p));
    a.run();
    // Updates 0..7; observed: those with step % 3 != 1 (0, 2, 3, 5, 6), each with 2 micro-steps.
    CHECK(planner->asked_ == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
    CHECK(planner->calls_[0] == 5 * 2);
    CHECK(planner->calls_[1] == 5 * 2);
    la = test::losses_of(dir + "/a/metrics.jsonl");
  }
  REQUIRE(la.size() == 8);
  std::set<int> windows;
  for (int s : {2, 4, 6})
    windows.insert(nlohmann::json::parse(std::ifstream(intervention_file(dir + "/a", s, 0, "observing")))["window"]
                       .get<int>());
  CHECK(windows.size() >= 2);  // the statistics moved the window (a lost EMA would show)
  for (int from = 1; from < 8; ++from) {
    INFO("resumed at step " << from);
    const std::string rd = dir + "/r" + std::to_string(from);
    Trainer r(cfg, rd, comm, std::make_unique<ObservingWindow>());
    r.resume(dir + "/a/checkpoints/step_" + std::to_string(from));
    r.run();
    const auto lr = test::losses_of(rd + "/metrics.jsonl");
    REQUIRE(lr.size() == size_t(8 - from));
    for (size_t i = 0; i < lr.size(); ++i) CHECK(lr[i] == la[size_t(from) + i]);
    CHECK(io::read_file(rd + "/checkpoints/step_8/model.safetensors") ==
          io::read_file(dir + "/a/checkpoints/step_8/model.safetensors"));
  }
}

TEST_CASE("a planner that never asks to observe leaves the run as if it were absent", "[train][observe]") {
  const std::string dir = test::temp_dir("never_observes");
  auto doc = test::tiny_run_doc(dir);
  doc["train"]["checkpoint_every"] = 0;
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  auto p = std::make_unique<ObservingWindow>(/*observe=*/false);
  ObservingWindow* planner = p.get();
  Trainer with(cfg, dir + "/with", comm, std::move(p));
  with.run();
  Trainer without(cfg, dir + "/without", comm);
  without.run();
  CHECK(planner->calls_.empty());
  CHECK(test::losses_of(dir + "/with/metrics.jsonl") == test::losses_of(dir + "/without/metrics.jsonl"));
  CHECK(io::read_file(dir + "/with/checkpoints/step_6/model.safetensors") ==
        io::read_file(dir + "/without/checkpoints/step_6/model.safetensors"));
}
