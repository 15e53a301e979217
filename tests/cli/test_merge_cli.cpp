// End-to-end LoRA: `train --init-from BASE --set model.lora.*` fine-tunes adapters on a frozen
// base, `merge` folds them in, and `eval` of the merged checkpoint reports the unmerged one's
// validation loss; bad input is one error line.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "cli/cli_util.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/model.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {

std::string tiny_config(const std::string& dir) {
  // Byte-level shards from a small repeated text.
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i % 7) + "\n";
  test::write_text(dir + "/corpus.txt", text);
  const std::string cfg = dir + "/config.json";
  test::write_text(cfg, R"({
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 32, "vocab_size": 256},
    "train": {"micro_batch": 2, "seq_len": 32, "total_batch_tokens": 64, "steps": 4, "lr": 3e-3,
              "warmup_steps": 1, "eval_every": 4, "eval_batches": 2, "seed": 3, "threads": 1},
    "data": {"train": ")" + dir + R"(/data/train_*.bin", "val": ")" + dir + R"(/data/val_*.bin"}
  })");
  return cfg;
}

double val_loss_of(const std::string& out) {
  const auto j = test::last_json_line(out);
  REQUIRE(j.contains("loss"));
  return j["loss"].get<double>();
}

}  // namespace

TEST_CASE("LoRA fine-tune, merge and evaluate from the command line", "[cli][lora]") {
  const std::string dir = test::cli_temp_dir("lora");
  const std::string cfg = tiny_config(dir);
  auto prep = test::run_headwise("prepare --input " + dir + "/corpus.txt --output " + dir + "/data");
  REQUIRE(prep.code == 0);
  auto base = test::run_headwise("train --config " + cfg + " --out " + dir + "/base");
  INFO(base.out);
  REQUIRE(base.code == 0);
  auto tune = test::run_headwise("train --config " + cfg + " --out " + dir + "/tuned --init-from " + dir +
                                 "/base/checkpoints/step_4 --set model.lora.rank=4 --set model.lora.freeze_base=true"
                                 " --set model.lora.targets='[\"q\",\"v\",\"o\"]' --set train.lr=3e-2");
  INFO(tune.out);
  REQUIRE(tune.code == 0);
  const std::string tuned = dir + "/tuned/checkpoints/step_4";
  REQUIRE(fs::exists(tuned + "/adapter_model.safetensors"));
  auto merged = test::run_headwise("merge --checkpoint " + tuned + " --out " + dir + "/merged");
  INFO(merged.out);
  REQUIRE(merged.code == 0);
  CHECK(merged.out.find("merged LoRA rank 4") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/merged/adapter_model.safetensors"));
  auto eval_tuned = test::run_headwise("eval --checkpoint " + tuned + " --data '" + dir + "/data/val_*.bin' --batches 2 --micro-batch 2");
  auto eval_merged = test::run_headwise("eval --checkpoint " + dir + "/merged --data '" + dir + "/data/val_*.bin' --batches 2 --micro-batch 2");
  auto eval_base = test::run_headwise("eval --checkpoint " + dir + "/base/checkpoints/step_4 --data '" + dir +
                                      "/data/val_*.bin' --batches 2 --micro-batch 2");
  INFO(eval_tuned.out << eval_merged.out);
  REQUIRE(eval_tuned.code == 0);
  REQUIRE(eval_merged.code == 0);
  const double lt = val_loss_of(eval_tuned.out), lm = val_loss_of(eval_merged.out), lb = val_loss_of(eval_base.out);
  CHECK(std::abs(lt - lm) < 1e-5 * lt);
  CHECK(std::abs(lt - lb) > 1e-4);  // the adapters did change the model
  // generate merges a checkpoint's adapters on load: greedy text equals the merged checkpoint's.
  const std::string gen = " --prompt 'the quick' --max-new 12 --temperature 0";
  auto g_tuned = test::run_headwise("generate --checkpoint " + tuned + gen);
  auto g_merged = test::run_headwise("generate --checkpoint " + dir + "/merged" + gen);
  INFO(g_tuned.out << "\n---\n" << g_merged.out);
  CHECK(g_tuned.code == 0);
  auto text = [](const std::string& out) { return out.substr(0, out.rfind("\n{")); };  // before the summary
  CHECK(text(g_tuned.out).size() >= 12);
  CHECK(text(g_tuned.out) == text(g_merged.out));
}

TEST_CASE("merge and model.lora: bad input is one error line", "[cli][lora]") {
  const std::string dir = test::cli_temp_dir("lora_bad");
  ModelConfig mc;
  mc.n_layer = 1;
  mc.n_head = 2;
  mc.n_embd = 16;
  mc.block_size = 8;
  mc.validate();
  Model<float> m(mc, cpu_backend<float>());
  m.init_weights(1);
  save_model_files(m, dir + "/plain");
  auto r = test::run_headwise("merge --checkpoint " + dir + "/plain --out " + dir + "/out");
  CHECK(r.code == 1);
  CHECK(test::error_lines(r.out) == 1);
  CHECK(r.out.find("has no LoRA adapters to merge") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/out"));
  const std::string cfg = tiny_config(dir);
  r = test::run_headwise("train --config " + cfg + " --out " + dir + "/run --set model.lora.rank=40");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(test::error_lines(r.out) == 1);
  CHECK(r.out.find("model.lora.rank 40 exceeds") != std::string::npos);
}
