// A plan change in the middle of training (through the planner hook) keeps the run
// deterministic and resumable, before and after the change.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
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
  nlohmann::json config() const override { return {{"name", "fixed"}, {"at", at_}}; }
  bool acts_at(int64_t step) const override { return step == at_; }
  std::optional<PlanChange> act(PlannerContext& ctx) override {
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

// Acts every `every` updates and keeps state between acts: a counter and an RNG whose draws
// pick the window of layer 1's head 0 (a layout-keeping change). A resume that lost the state
// would draw other windows from the first act after it.
class WanderingWindow final : public Planner {
 public:
  explicit WanderingWindow(int64_t every) : every_(every) {}
  std::string name() const override { return "wandering"; }
  nlohmann::json config() const override { return {{"name", "wandering"}, {"every", every_}}; }
  bool acts_at(int64_t step) const override { return step > 0 && step % every_ == 0; }
  std::optional<PlanChange> act(PlannerContext& ctx) override {
    ++acts_;
    rng_state_ = rng_state_ * 6364136223846793005ull + 1442695040888963407ull;
    const int window = 2 + int((rng_state_ >> 33) % 9);  // 2..10
    PlanChange c;
    c.plan = ctx.model.config().head_plan;
    c.plan.layers[1][0] = attn::HeadSpec::parse("window:" + std::to_string(window));
    c.report = {{"window", window}, {"acts", acts_}};
    return c;
  }
  nlohmann::json state() const override { return {{"acts", acts_}, {"rng", std::to_string(rng_state_)}}; }
  void restore(const nlohmann::json& s) override {
    acts_ = s.at("acts").get<int64_t>();
    rng_state_ = std::stoull(s.at("rng").get<std::string>());
  }
  int64_t acts() const { return acts_; }

 private:
  int64_t every_;
  int64_t acts_ = 0;
  uint64_t rng_state_ = 12345;
};

// Sets one head's kind at one step.
class SetHead final : public Planner {
 public:
  SetHead(int64_t at, int l, int h, std::string kind) : at_(at), l_(l), h_(h), kind_(std::move(kind)) {}
  std::string name() const override { return "set_head"; }
  nlohmann::json config() const override { return {{"name", "set_head"}, {"kind", kind_}}; }
  bool acts_at(int64_t step) const override { return step == at_; }
  std::optional<PlanChange> act(PlannerContext& ctx) override {
    PlanChange c;
    c.plan = ctx.model.config().head_plan;
    c.plan.layers[size_t(l_)][size_t(h_)] = attn::HeadSpec::parse(kind_);
    return c;
  }

 private:
  int64_t at_;
  int l_, h_;
  std::string kind_;
};

std::vector<unsigned char> bytes_of(const Arena& a) {
  const auto* p = static_cast<const unsigned char*>(a.base());
  return std::vector<unsigned char>(p, p + a.bytes());
}

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
  // The intervention report is written into the run directory's log.
  const auto report = nlohmann::json::parse(std::ifstream(intervention_file(dir + "/a", 4, 0, "fixed")));
  CHECK(report["step"] == 4);
  CHECK(report["layout_kept"] == false);  // static and pruned heads move parameters
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

TEST_CASE("a planner that acts many times keeps its state across a resume, bit for bit", "[train][plan]") {
  const std::string dir = test::temp_dir("wandering");
  auto doc = test::tiny_run_doc(dir);
  doc["train"]["steps"] = 9;
  doc["train"]["checkpoint_every"] = 1;
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  {
    Trainer a(cfg, dir + "/a", comm, std::make_unique<WanderingWindow>(2));
    a.run();
  }
  const auto la = test::losses_of(dir + "/a/metrics.jsonl");
  REQUIRE(la.size() == 9);
  // The acts drew different windows (otherwise a lost RNG state could not show).
  std::set<int> windows;
  for (int s : {2, 4, 6, 8})
    windows.insert(nlohmann::json::parse(std::ifstream(intervention_file(dir + "/a", s, 0, "wandering")))["window"]
                       .get<int>());
  CHECK(windows.size() >= 2);
  for (int from = 1; from < 9; ++from) {
    INFO("resumed at step " << from);
    Trainer r(cfg, dir + "/r" + std::to_string(from), comm, std::make_unique<WanderingWindow>(2));
    r.resume(dir + "/a/checkpoints/step_" + std::to_string(from));
    r.run();
    const auto lr = test::losses_of(dir + "/r" + std::to_string(from) + "/metrics.jsonl");
    REQUIRE(lr.size() == size_t(9 - from));
    for (size_t i = 0; i < lr.size(); ++i) CHECK(lr[i] == la[size_t(from) + i]);
    CHECK(io::read_file(dir + "/r" + std::to_string(from) + "/checkpoints/step_9/model.safetensors") ==
          io::read_file(dir + "/a/checkpoints/step_9/model.safetensors"));
  }
  // A resume with a different method list is refused.
  Trainer wrong(cfg, dir + "/wrong", comm, std::make_unique<FixedPlanner>(100));
  CHECK_THROWS_WITH(wrong.resume(dir + "/a/checkpoints/step_3"), Catch::Contains("'wandering' in the checkpoint"));
}

TEST_CASE("a layout-keeping plan change leaves parameters, gradients and AdamW moments in place", "[train][plan]") {
  const std::string dir = test::temp_dir("keep_layout");
  auto doc = test::tiny_run_doc(dir);
  doc["model"]["head_plan"] = nlohmann::json::parse(R"([["softmax", "window:4"], ["sink_window:1:3", "softmax"]])");
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  Trainer tr(cfg, "", comm);
  tr.run(3);
  const void* params_at = tr.model().params().base();
  const void* m_at = tr.optimizer().m().base();
  const auto params = bytes_of(tr.model().params()), m = bytes_of(tr.optimizer().m()),
             v = bytes_of(tr.optimizer().v());
  PlanChange c;
  c.plan = attn::HeadPlan::from_json(nlohmann::json::parse(R"([["window:7", "softmax"], ["softmax", "sink_window:2:5"]])"));
  CHECK(tr.install(c));  // kept
  CHECK(tr.model().config().head_plan == c.plan);
  CHECK(tr.config().model.head_plan == c.plan);  // one plan: the model's
  CHECK(tr.model().params().base() == params_at);
  CHECK(tr.optimizer().m().base() == m_at);
  CHECK(bytes_of(tr.model().params()) == params);
  CHECK(bytes_of(tr.optimizer().m()) == m);
  CHECK(bytes_of(tr.optimizer().v()) == v);
  // The new windows are the ones that run: the loss equals that of a model built with the new
  // plan and the same parameter block (the layouts are equal, so the bytes map one to one), and
  // differs from the old plan's.
  ModelConfig fresh_cfg = cfg.model;
  fresh_cfg.head_plan = c.plan;
  Model<float> fresh(fresh_cfg, cpu_backend<float>());
  REQUIRE(fresh.params().bytes() == params.size());
  std::memcpy(fresh.params().base(), params.data(), params.size());
  std::vector<int32_t> x(32), y(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t((7 * i) % 32), y[i] = int32_t((3 * i + 1) % 32);
  const double got = tr.model().forward(x.data(), y.data(), 2, 16);
  CHECK(got == fresh.forward(x.data(), y.data(), 2, 16));
  Model<float> old_plan(cfg.model, cpu_backend<float>());
  std::memcpy(old_plan.params().base(), params.data(), params.size());
  CHECK(got != old_plan.forward(x.data(), y.data(), 2, 16));
  CHECK(std::isfinite(tr.train_step()));
  // A change of kind that moves parameters (softmax -> static) is not kept.
  PlanChange moved;
  moved.plan = c.plan;
  moved.plan.layers[0][1] = attn::HeadSpec::parse("static");
  CHECK_FALSE(tr.install(moved));
  CHECK(tr.model().params().bytes() != params.size());
}

TEST_CASE("stacked planners apply in order, and the final plan equals applying them one by one", "[train][plan]") {
  const std::string dir = test::temp_dir("stacked");
  auto doc = test::tiny_run_doc(dir);
  doc["train"]["steps"] = 6;
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  auto stack = [] {
    Planners p;
    p.push_back(std::make_unique<SetHead>(0, 0, 0, "window:3"));
    p.push_back(std::make_unique<SetHead>(2, 1, 1, "static"));
    p.push_back(std::make_unique<SetHead>(2, 1, 1, "pruned"));  // same step, later in the list: wins
    p.push_back(std::make_unique<SetHead>(4, 0, 0, "sink_window:1:2"));
    return p;
  };
  Trainer all(cfg, dir + "/all", comm, stack());
  all.run();
  // By hand: the same four changes, in order, through install().
  Trainer byhand(cfg, "", comm);
  auto expect = byhand.model().config().head_plan;
  expect.layers[0][0] = attn::HeadSpec::parse("window:3");
  expect.layers[1][1] = attn::HeadSpec::parse("pruned");
  expect.layers[0][0] = attn::HeadSpec::parse("sink_window:1:2");
  CHECK(all.model().config().head_plan == expect);
  CHECK(std::ifstream(intervention_file(dir + "/all", 0, 0, "set_head")).good());
  CHECK(std::ifstream(intervention_file(dir + "/all", 4, 3, "set_head")).good());
  CHECK(std::ifstream(intervention_file(dir + "/all", 2, 1, "set_head")).good());
  CHECK(std::ifstream(intervention_file(dir + "/all", 2, 2, "set_head")).good());
  // Applying the planners one by one at the same steps gives the same losses bit for bit.
  for (int64_t step = 0; step < 6; ++step) {
    auto p = stack();
    for (auto& planner : p)
      if (planner->acts_at(step)) {
        PlannerContext ctx{byhand.model(), cfg, comm, step};
        byhand.install(*planner->act(ctx));
      }
    byhand.train_step();
  }
  CHECK(byhand.model().config().head_plan == expect);
  CHECK(bytes_of(byhand.model().params()) == bytes_of(all.model().params()));
  // The run records the planners' configurations as its method list.
  const auto recorded = nlohmann::json::parse(std::ifstream(dir + "/all/config.json"))["method"];
  REQUIRE(recorded.is_array());
  CHECK(recorded.size() == 4);
  CHECK(recorded[1]["kind"] == "static");
}
