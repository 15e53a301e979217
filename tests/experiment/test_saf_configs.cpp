// The shipped SAF configs load (run config + experiment spec) and carry the paper's recipe.
#include <catch2/catch.hpp>
#include <filesystem>

#include "headwise/experiment/experiment.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/methods/saf/planner.hpp"

using namespace hw;

namespace {
ExperimentSetup load(const std::string& name) {
  return load_experiment(std::string(HEADWISE_SOURCE_DIR) + "/configs/" + name, {});
}
}  // namespace

TEST_CASE("every configs/saf_*.json loads as a run config with an experiment spec", "[configs]") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(HEADWISE_SOURCE_DIR) + "/configs")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("saf_", 0) != 0 || e.path().extension() != ".json") continue;
    INFO(name);
    const ExperimentSetup s = load(name);
    CHECK(s.spec.branches.front().method["name"] == "none");
    const RunConfig branch = branch_config(s, s.spec.branches.back(), s.spec.seeds.front());
    CHECK(first_action_step(make_planners(branch), s.base.train.steps) == s.base.train.steps / 2);  // the midpoint
    ++n;
  }
  CHECK(n == 8);
}

TEST_CASE("124M configs follow the paper's recipe", "[configs]") {
  for (const char* ctx : {"4k", "8k", "16k"})
    for (const char* pos : {"learned", "rope"}) {
      const std::string name = std::string("saf_124m_") + ctx + "_" + pos + ".json";
      INFO(name);
      const ExperimentSetup s = load(name);
      const RunConfig& c = s.base;
      CHECK(c.model.n_layer == 12);
      CHECK(c.model.n_head == 12);
      CHECK(c.model.n_embd == 768);
      CHECK(c.model.vocab_size == 50304);
      CHECK(!c.model.bias);
      CHECK(c.model.pos == pos);
      CHECK(c.model.block_size == c.train.seq_len);
      CHECK(c.train.seq_len == (std::string(ctx) == "4k" ? 4096 : std::string(ctx) == "8k" ? 8192 : 16384));
      CHECK(c.train.total_batch_tokens == 491520);
      CHECK(c.train.steps == 5000);
      CHECK(c.train.lr == 6e-4);
      CHECK(c.train.min_lr == 6e-5);
      CHECK(c.train.warmup_steps == 500);
      CHECK(c.train.weight_decay == 0.1);
      CHECK(c.train.beta1 == 0.9);
      CHECK(c.train.beta2 == 0.95);
      CHECK(c.train.grad_clip == 1.0);
      CHECK(c.train.precision == "bf16");  // the recipe trains in bf16
      CHECK(c.grad_accum(1) * c.train.micro_batch * c.train.seq_len == 491520);
      CHECK(c.grad_accum(2) > 0);  // divisible over 2 ranks as well
      // The paper's split, micro-batch x accumulation x T: 2 x 60 x 4096, 1 x 60 x 8192, 1 x 30 x 16384.
      const bool k4 = std::string(ctx) == "4k", k8 = std::string(ctx) == "8k";
      CHECK(c.train.micro_batch == (k4 ? 2 : 1));
      CHECK(c.grad_accum(1) == (k4 || k8 ? 60 : 30));
      const RunConfig sb = branch_config(s, s.spec.branches.at(1), s.spec.seeds.front());  // an SAF branch
      REQUIRE(sb.methods.size() == 1);
      CHECK(sb.methods.at(0)["name"] == "saf");
      CHECK(saf::SafConfig::from_json(sb.methods.at(0)).calib_seqs == (std::string(ctx) == "4k" ? 32 : 16));
      CHECK(saf::SafConfig::from_json(sb.methods.at(0)).fit_steps == 400);
      CHECK(saf::SafConfig::from_json(sb.methods.at(0)).max_kl == 0.2);
      CHECK(saf::SafConfig::from_json(sb.methods.at(0)).fire_step(c) == 2500);
      CHECK(s.spec.seeds == std::vector<int64_t>{1337, 1338, 1339});
      // Held-out evaluation: calibration on the first half of val, PPL on the second.
      CHECK(c.data.val_split == "halves");
      CHECK(c.data.calib.empty());
    }
}

TEST_CASE("1B config and the CPU table config", "[configs]") {
  const RunConfig b = load("saf_1b_8k_rope.json").base;
  CHECK(b.model.n_layer == 32);
  CHECK(b.model.n_head == 24);  // head_dim 64: the CUDA attention takes 64 or 128
  CHECK(b.model.n_embd == 1536);
  CHECK(b.model.rope());
  CHECK(b.train.seq_len == 8192);
  CHECK(b.train.total_batch_tokens == 524288);
  CHECK(b.train.steps == 37512);
  CHECK(b.train.warmup_steps == 375);
  CHECK(b.train.lr == 3e-4);
  CHECK(b.train.min_lr == 3e-5);
  CHECK(b.grad_accum(4) == 8);  // 4 GPUs
  CHECK(b.data.val_split == "halves");
  CHECK(b.data.calib.empty());
  const ExperimentSetup cpu = load("saf_cpu_table2.json");
  std::vector<std::string> names;
  for (const auto& br : cpu.spec.branches) names.push_back(br.name);
  CHECK(names == std::vector<std::string>{"ordinary", "saf_25", "saf_50", "prune_25", "random_25"});
  CHECK(cpu.base.data.train == "data/kjv/train_*.bin");
}
