// The OAL planner in a tiny run: config errors, the plan change it hands back (linear heads with
// the fitted L and groups, LoRA adapters), and a run that converts at step 0 and fine-tunes.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "headwise/core/error.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/methods/oal/config.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {

nlohmann::json oal_doc(const std::string& dir, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json doc = test::tiny_run_doc(dir);
  doc["data"]["calib"] = dir + "/val_*.bin";
  doc["train"]["steps"] = 4;
  doc["train"]["checkpoint_every"] = 0;
  nlohmann::json m = {{"name", "oal"},     {"layers", "1"},   {"stats_prompts", 6}, {"fit_seqs", 2},
                      {"val_seqs", 1},     {"bootstrap", 50}, {"max_updates", 60},  {"val_every", 20},
                      {"patience", 40}};
  for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
  doc["method"] = m;
  return doc;
}

}  // namespace

TEST_CASE("oal config: layers parse as ranges and lists and bad values name their key", "[oal][config]") {
  CHECK(oal::parse_layers("3-5", 8, "k") == std::vector<int>{3, 4, 5});
  CHECK(oal::parse_layers("1,4,2-3", 8, "k") == std::vector<int>{1, 2, 3, 4});
  CHECK(oal::parse_layers(nlohmann::json::array({5, 0}), 8, "k") == std::vector<int>{0, 5});
  CHECK(oal::parse_layers("", 3, "k") == std::vector<int>{0, 1, 2});
  CHECK_THROWS_WITH(oal::parse_layers("3-20", 8, "method.layers"),
                    Catch::Contains("method.layers: layer 8 is outside the model's layers 0..7"));
  CHECK_THROWS_WITH(oal::parse_layers("a-b", 8, "method.layers"), Catch::Contains("not an integer"));
  CHECK_THROWS_WITH(oal::parse_layers("5-3", 8, "method.layers"), Catch::Contains("backwards"));

  const std::string dir = test::temp_dir("oal_config");
  CHECK_THROWS_WITH(make_planners(RunConfig::from_json(oal_doc(dir, {{"layers", "0-2"}}))),
                    Catch::Contains("method.layers: layer 2 is outside"));
  CHECK_THROWS_WITH(make_planners(RunConfig::from_json(oal_doc(dir, {{"grouping", "fixed:9"}}))),
                    Catch::Contains("method.grouping: G = 9 is outside 1..head_dim (8)"));
  CHECK_THROWS_WITH(make_planners(RunConfig::from_json(oal_doc(dir, {{"grouping", "fixed:0"}}))),
                    Catch::Contains("method.grouping"));
  CHECK_THROWS_WITH(make_planners(RunConfig::from_json(oal_doc(dir, {{"tail", 0.2}}))), Catch::Contains("tail"));
  CHECK_THROWS_WITH(make_planners(RunConfig::from_json(oal_doc(dir, {{"at_step", 9}}))), Catch::Contains("method.at_step"));
  // Defaults are the paper's.
  const oal::OalConfig d = oal::OalConfig::from_json({{"name", "oal"}}, "method");
  CHECK(d.group.tail_fraction == 0.25);
  CHECK(d.group.ratio_threshold == 1.5);
  CHECK(d.group.support == 0.9);
  CHECK(d.calib.lr == 0.02);
  CHECK(d.calib.max_updates == 1000);
  CHECK(d.calib.positions == 32);
  CHECK(d.lora_rank == 8);
  CHECK(d.lora_alpha == 16.0);
  CHECK(d.lora_dropout == 0.05);
  CHECK(oal::OalConfig::from_json(d.to_json(), "method").to_json() == d.to_json());
}

TEST_CASE("oal planner turns the chosen layers linear with fitted L and groups, plus adapters", "[oal][planner]") {
  const std::string dir = test::temp_dir("oal_planner");
  const RunConfig cfg = RunConfig::from_json(oal_doc(dir));
  dist::LocalComm comm;
  Trainer tr(cfg, "", comm, make_planners(cfg));
  PlannerContext ctx{tr.model(), cfg, comm, 0};
  auto planners = make_planners(cfg);
  REQUIRE(planners.size() == 1);
  REQUIRE(planners[0]->acts_at(0));
  CHECK_FALSE(planners[0]->acts_at(1));
  const std::optional<PlanChange> change = planners[0]->act(ctx);
  REQUIRE(change.has_value());
  for (int h = 0; h < 2; ++h) {
    CHECK(change->plan.layers[0][size_t(h)].kind == attn::HeadKind::Softmax);
    CHECK(change->plan.layers[1][size_t(h)].kind == attn::HeadKind::Linear);
    const LinearHeadValues& v = change->extras.linears.at({1, h});
    CHECK(v.groups.size() == 8);
    CHECK(v.L.size() == size_t((v.n_groups + 1) * (v.n_groups + 1)));
    CHECK(v.n_groups >= 2);  // bootstrap: at least two groups
    CHECK(v.n_groups <= 5);
    const auto& rep = change->report["heads"][size_t(h)];
    CHECK(rep["layer"] == 1);
    CHECK(rep["grouping"]["groups"] == nlohmann::json(v.groups));
    CHECK(rep["calibration"]["kernel"]["val_mse"].get<double>() <= rep["calibration"]["taylor_val_mse"].get<double>());
    CHECK(rep["contribution"]["chi"].size() == 8);
  }
  REQUIRE(change->adapters.has_value());
  CHECK(change->adapters->rank == 8);
  CHECK(change->adapters->alpha == 16.0);
  CHECK(change->adapters->dropout == 0.05);
  CHECK(change->adapters->freeze_base);
  CHECK(change->adapters->layers.empty());  // every layer
  CHECK(change->extras.linears.size() == 2);
}

TEST_CASE("oal in a run: converts at step 0, then the adapters and L train", "[oal][planner]") {
  const std::string dir = test::temp_dir("oal_run");
  const RunConfig cfg = RunConfig::from_json(oal_doc(dir, {{"grouping", "fixed:3"}}));
  dist::LocalComm comm;
  Trainer tr(cfg, dir + "/run", comm, make_planners(cfg));
  const nlohmann::json summary = tr.run();
  const ModelConfig& mc = tr.model().config();
  CHECK(mc.head_plan.layers[1][0].kind == attn::HeadKind::Linear);
  CHECK(mc.head_plan.layers[0][0].kind == attn::HeadKind::Softmax);
  CHECK(mc.lora.rank == 8);
  CHECK(tr.model().head_extras().linears.at({1, 0}).n_groups == 3);
  CHECK(std::isfinite(summary["val_loss"].get<double>()));
  bool logged = false;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/run/interventions"))
    logged = logged || e.path().filename().string().find("oal") != std::string::npos;
  CHECK(logged);
}

TEST_CASE("the shipped OAL configs load and carry the paper's conversion recipe", "[oal][configs]") {
  for (const char* name : {"oal_cpu.json", "oal_0p5b_4k.json"}) {
    INFO(name);
    const RunConfig cfg = RunConfig::load(std::string(HEADWISE_SOURCE_DIR) + "/configs/" + name, {});
    const auto planners = make_planners(cfg);
    REQUIRE(planners.size() == 1);
    CHECK(planners[0]->name() == "oal");
    const auto& t = cfg.train;
    CHECK(t.lr == 5e-4);
    CHECK(t.min_lr == 0.0);
    CHECK(t.weight_decay == 0.01);
    CHECK(t.beta1 == 0.9);
    CHECK(t.beta2 == 0.999);
    CHECK(t.grad_clip == 1.0);
    CHECK(t.keep_best);
    CHECK(t.warmup_steps == (t.steps * 5 + 99) / 100);  // 5% warm-up, rounded up
    const nlohmann::json m = planners[0]->config();
    CHECK(m["lora_rank"] == 8);
    CHECK(m["lora_alpha"] == 16.0);
    CHECK(m["lora_dropout"] == 0.05);
  }
  const RunConfig big = RunConfig::load(std::string(HEADWISE_SOURCE_DIR) + "/configs/oal_0p5b_4k.json", {});
  CHECK(oal::parse_layers(big.methods[0]["layers"], big.model.n_layer, "k").size() == 18);  // layers 3..20 of 24
  CHECK(big.train.steps == 512);
  CHECK(big.train.eval_every == 128);
  CHECK(big.train.eval_batches == 32);
}
