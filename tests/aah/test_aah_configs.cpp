// The shipped AAH configs load and carry the recipe.
#include <catch2/catch.hpp>

#include "headwise/experiment/experiment.hpp"
#include "headwise/methods/method_registry.hpp"

using namespace hw;

namespace {
RunConfig load(const std::string& name) { return RunConfig::load(std::string(HEADWISE_SOURCE_DIR) + "/configs/" + name, {}); }
}  // namespace

TEST_CASE("configs/aah_cpu.json: context 512, windows {64, 128, 256, 512}", "[aah][configs]") {
  const RunConfig c = load("aah_cpu.json");
  CHECK(c.model.block_size == 512);
  CHECK(c.train.seq_len == 512);
  const auto p = make_planners(c);
  REQUIRE(p.size() == 1);
  CHECK(p[0]->name() == "aah");
  CHECK(p[0]->config()["windows"] == nlohmann::json::parse("[64, 128, 256, 512]"));
}

TEST_CASE("configs/aah_1b_4k.json follows the paper's recipe", "[aah][configs]") {
  const RunConfig c = load("aah_1b_4k.json");
  CHECK(c.model.n_layer == 16);
  CHECK(c.model.n_head == 12);
  CHECK(c.model.n_embd == 1536);
  CHECK(c.model.head_dim() == 128);
  CHECK(c.model.block_size == 4096);
  CHECK(c.model.pos == "learned");
  CHECK(c.train.seq_len == 4096);
  CHECK(c.train.micro_batch == 1);
  CHECK(c.grad_accum(1) == 1);
  CHECK(c.train.lr == 3e-4);
  CHECK(c.train.min_lr == 0.0);
  CHECK(c.train.weight_decay == 0.1);
  CHECK(c.train.warmup_steps == 100);
  CHECK(c.train.steps == 10000);
  CHECK(c.train.grad_clip == 0.0);
  CHECK(c.train.seed == 0);
  const auto p = make_planners(c);
  REQUIRE(p.size() == 1);
  const nlohmann::json m = p[0]->config();
  CHECK(m["windows"] == nlohmann::json::parse("[512, 1024, 2048, 4096]"));
  CHECK(m["warmup_steps"] == 100);
  CHECK(m["control_every"] == 5);
  CHECK(m["feature_ema"] == 0.9);
  CHECK(m["resolution_ema"] == 0.15);
}

TEST_CASE("configs/experiment_aah_cpu.json: the five regimes from one trunk", "[aah][configs]") {
  const ExperimentSetup s = load_experiment(std::string(HEADWISE_SOURCE_DIR) + "/configs/experiment_aah_cpu.json", {});
  REQUIRE(s.spec.branches.size() == 5);
  const char* names[5] = {"full", "grouping_off", "full_adaptive", "shallow_freeze", "deep_reuse"};
  const int64_t first[5] = {-1, 20, 20, 20, 1};  // deep_reuse: level 0 from update 0's features
  for (int i = 0; i < 5; ++i) {
    INFO(names[i]);
    CHECK(s.spec.branches[size_t(i)].name == names[i]);
    const RunConfig c = branch_config(s, s.spec.branches[size_t(i)], 1337);
    const auto p = make_planners(c);
    CHECK(first_action_step(p, c.train.steps) == first[i]);
    if (i > 0) CHECK(p.at(0)->config()["regime"] == names[i]);
  }
}

TEST_CASE("configs/experiment_aah_ablations_cpu.json: the paper's Table 5 rows", "[aah][configs]") {
  const ExperimentSetup s =
      load_experiment(std::string(HEADWISE_SOURCE_DIR) + "/configs/experiment_aah_ablations_cpu.json", {});
  // (branch, regime, ablation as the planner reports it); the baseline has no planner.
  const char* rows[][3] = {{"pure_baseline", "", ""},
                           {"shallow_control_interval_10", "shallow_freeze", "control_interval:10"},
                           {"shallow_freeze", "shallow_freeze", "none"},
                           {"fixed_random_grouping", "shallow_freeze", "fixed_random_grouping"},
                           {"fixed_128", "shallow_freeze", "fixed_window:128"},
                           {"shallow_shuffle_post_select", "shallow_freeze", "shuffle_post_select"},
                           {"full_adaptive_shuffle_post_select", "full_adaptive", "shuffle_post_select"}};
  REQUIRE(s.spec.branches.size() == 7);
  for (size_t i = 0; i < 7; ++i) {
    INFO(rows[i][0]);
    CHECK(s.spec.branches[i].name == rows[i][0]);
    const RunConfig c = branch_config(s, s.spec.branches[i], 1337);
    CHECK(c.train.seq_len == 512);
    const auto p = make_planners(c);
    if (i == 0) {
      CHECK(p.empty());
      continue;
    }
    REQUIRE(p.size() == 1);
    CHECK(p[0]->config()["regime"] == rows[i][1]);
    CHECK(p[0]->config()["ablation"] == rows[i][2]);
  }
}

TEST_CASE("the 1B experiment configs follow the paper's protocol: WikiText-2, bf16, dropout 0.1, Table 5 at 3,000",
          "[aah][configs]") {
  const RunConfig one = load("aah_1b_4k.json");
  for (const char* name : {"experiment_aah_1b_4k.json", "experiment_aah_ablations_1b_4k.json"}) {
    INFO(name);
    const ExperimentSetup s = load_experiment(std::string(HEADWISE_SOURCE_DIR) + "/configs/" + name, {});
    const RunConfig c = branch_config(s, s.spec.branches[1], 0);
    // The recipe of aah_1b_4k.json (the model, data and optimizer; steps apart).
    CHECK(c.model.to_json() == one.model.to_json());
    CHECK(c.model.resid_pdrop == 0.1);
    CHECK(c.model.embd_pdrop == 0.1);
    CHECK(c.train.precision == one.train.precision);
    CHECK(c.train.precision == "bf16");
    CHECK(c.data.train == "data/wikitext2/train_*.bin");
    CHECK(c.data.val == "data/wikitext2/val_*.bin");
    CHECK(c.train.lr == one.train.lr);
    CHECK(c.train.warmup_steps == 100);
    CHECK(s.spec.seeds == std::vector<int64_t>{0});
    CHECK(c.train.steps == (std::string(name).find("ablations") != std::string::npos ? 3000 : 10000));
  }
  const ExperimentSetup t5 =
      load_experiment(std::string(HEADWISE_SOURCE_DIR) + "/configs/experiment_aah_ablations_1b_4k.json", {});
  REQUIRE(t5.spec.branches.size() == 7);
  CHECK(t5.spec.branches[4].name == "fixed_1024");
  const auto p = make_planners(branch_config(t5, t5.spec.branches[4], 0));
  REQUIRE(p.size() == 1);
  CHECK(p[0]->config()["ablation"] == "fixed_window:1024");
  const ExperimentSetup t4 = load_experiment(std::string(HEADWISE_SOURCE_DIR) + "/configs/experiment_aah_1b_4k.json", {});
  REQUIRE(t4.spec.branches.size() == 5);
  CHECK(t4.spec.branches[0].name == "full");
  CHECK(t4.spec.branches[4].name == "deep_reuse");
}
