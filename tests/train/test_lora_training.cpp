// LoRA fine-tuning runs: a base checkpoint plus model.lora with frozen base weights trains only
// the adapters (the base tensors of every checkpoint equal the base model's bit for bit), with
// dropout the run resumes bit for bit, and a planner can add adapters mid-run without changing
// the model's outputs at that step.
#include <catch2/catch.hpp>
#include <cstring>

#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/model/adapter_files.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {

std::vector<float> tensor_in(const std::string& file, const std::string& name) {
  io::SafetensorsReader st(file);
  std::vector<float> v(size_t(st.info(name).numel()));
  st.read(name, DType::F32, st.info(name).shape, v.data());
  return v;
}

// Adds rank-2 adapters on q and o of layer 1 at step 2, keeping the plan.
class AddsAdapters final : public Planner {
 public:
  std::string name() const override { return "adds_adapters"; }
  nlohmann::json config() const override { return {{"name", "adds_adapters"}}; }
  bool acts_at(int64_t step) const override { return step == 2; }
  std::optional<PlanChange> act(PlannerContext& ctx) override {
    PlanChange c;
    c.plan = ctx.model.config().head_plan;
    LoraConfig l;
    l.rank = 2;
    l.layers = {1};
    l.targets = {true, false, false, true};
    c.adapters = l;
    return c;
  }
};

}  // namespace

TEST_CASE("LoRA fine-tuning from a base checkpoint trains only the adapters and resumes bit for bit",
          "[train][lora]") {
  const std::string dir = test::temp_dir("lora_finetune");
  dist::LocalComm comm;
  auto doc = test::tiny_run_doc(dir);
  doc["train"]["steps"] = 2;
  {
    Trainer base(RunConfig::from_json(doc), dir + "/base", comm);
    base.run();
  }
  const std::string base_ckpt = dir + "/base/checkpoints/step_2";
  doc["train"]["steps"] = 6;
  doc["train"]["checkpoint_every"] = 2;
  doc["model"]["lora"] = {{"rank", 2}, {"alpha", 4}, {"dropout", 0.2}, {"freeze_base", true}};
  const RunConfig cfg = RunConfig::from_json(doc);
  {
    Trainer full(cfg, dir + "/full", comm);
    full.init_from(base_ckpt);
    full.run();
  }
  const std::string last = dir + "/full/checkpoints/step_6";
  io::SafetensorsReader base(base_ckpt + "/model.safetensors"), tuned(last + "/model.safetensors");
  REQUIRE(base.names() == tuned.names());
  for (const auto& n : base.names()) {
    INFO(n);
    CHECK(tensor_in(base_ckpt + "/model.safetensors", n) == tensor_in(last + "/model.safetensors", n));
  }
  // The adapters moved away from B = 0.
  const auto b = tensor_in(last + "/" + kAdapterWeightsFile, "base_model.model.transformer.h.0.attn.c_proj.lora_B.weight");
  double norm = 0;
  for (float x : b) norm += double(x) * x;
  CHECK(norm > 1e-8);
  const auto full_losses = test::losses_of(dir + "/full/metrics.jsonl");
  REQUIRE(full_losses.size() == 6);
  // Resume from the step-2 checkpoint (its adapters, AdamW moments and dropout masks by batch).
  Trainer resumed(cfg, dir + "/resumed", comm);
  resumed.resume(dir + "/full/checkpoints/step_2");
  resumed.run();
  const auto resumed_losses = test::losses_of(dir + "/resumed/metrics.jsonl");
  REQUIRE(resumed_losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(resumed_losses[i] == full_losses[i + 2]);
  CHECK(io::read_file(dir + "/resumed/checkpoints/step_6/" + kAdapterWeightsFile) ==
        io::read_file(last + "/" + kAdapterWeightsFile));
}

TEST_CASE("a planner adds adapters mid-run: the step's loss is the adapter-free run's", "[train][lora]") {
  const std::string dir = test::temp_dir("lora_planner");
  dist::LocalComm comm;
  auto doc = test::tiny_run_doc(dir);
  doc["train"]["steps"] = 4;
  doc["train"]["checkpoint_every"] = 0;
  const RunConfig cfg = RunConfig::from_json(doc);
  {
    Trainer with(cfg, dir + "/with", comm, std::make_unique<AddsAdapters>());
    with.run();
    CHECK(with.config().model.lora.rank == 2);
  }
  Trainer without(cfg, dir + "/without", comm);
  without.run();
  const auto lw = test::losses_of(dir + "/with/metrics.jsonl"), lo = test::losses_of(dir + "/without/metrics.jsonl");
  REQUIRE(lw.size() == 4);
  // Steps 0, 1 identical; step 2 runs with fresh adapters (B = 0): the same forward, so the same
  // loss; from step 3 the adapters have trained and the runs differ.
  CHECK(lw[0] == lo[0]);
  CHECK(lw[1] == lo[1]);
  CHECK(lw[2] == lo[2]);
  CHECK(lw[3] != lo[3]);
}
