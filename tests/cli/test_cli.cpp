// End-to-end: the headwise binary on tiny runs, and one clear error line for bad input.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cli/cli_util.hpp"
#include "headwise/data/shards.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {

// Shards of a learnable token stream and a tiny config pointing at them.
std::string make_tiny_run(const std::string& dir) {
  std::vector<uint16_t> toks(3000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 5 + i / 7) % 40);
  data::write_shard(dir + "/train_0.bin", toks);
  data::write_shard(dir + "/val_0.bin", std::vector<uint16_t>(toks.begin(), toks.begin() + 700));
  const std::string cfg = dir + "/tiny.json";
  test::write_text(cfg, R"({
    "model": {"n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 16, "vocab_size": 64},
    "train": {"micro_batch": 2, "seq_len": 16, "steps": 4, "lr": 1e-2, "warmup_steps": 1, "eval_every": 2,
              "eval_batches": 4, "checkpoint_every": 2, "seed": 3},
    "data": {"train": ")" + dir + R"(/train_*.bin", "val": ")" + dir + R"(/val_*.bin", "shuffle": false}
  })");
  return cfg;
}

using test::expect_one_error;

}  // namespace

TEST_CASE("train writes metrics, checkpoints and a summary, and eval reads them back", "[cli]") {
  const std::string dir = test::cli_temp_dir("train");
  const std::string cfg = make_tiny_run(dir);
  auto r = test::run_headwise("train --config " + cfg + " --out " + dir + "/run");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto lines = test::read_jsonl(dir + "/run/metrics.jsonl");
  int steps = 0, vals = 0;
  for (const auto& j : lines) {
    if (j.contains("loss")) {
      ++steps;
      for (const char* k : {"step", "loss", "lr", "grad_norm", "ms", "tok_per_s"}) CHECK(j.contains(k));
    }
    if (j.contains("val_loss")) ++vals;
  }
  CHECK(steps == 4);
  CHECK(vals == 2);
  for (const char* f : {"model.safetensors", "config.json", "optimizer.safetensors", "trainer.json"})
    CHECK(fs::exists(dir + "/run/checkpoints/step_4/" + f));
  CHECK(fs::exists(dir + "/run/checkpoints/step_2/model.safetensors"));
  CHECK(!fs::exists(dir + "/run/checkpoints/step_4.tmp"));
  const auto summary = nlohmann::json::parse(std::ifstream(dir + "/run/summary.json"));
  // eval of the final checkpoint on the same batches gives the run's final val loss.
  auto e = test::run_headwise("eval --checkpoint " + dir + "/run/checkpoints/step_4 --data '" + dir +
                              "/val_*.bin' --batches 4 --micro-batch 2 --seq-len 16");
  INFO(e.out);
  REQUIRE(e.code == 0);
  const auto ej = test::last_json_line(e.out);
  CHECK(ej["loss"].get<double>() == Approx(summary["val_loss"].get<double>()).epsilon(1e-6));
  CHECK(ej["ppl"].get<double>() == Approx(std::exp(ej["loss"].get<double>())));
  CHECK(ej["tokens"].get<int64_t>() == 4 * 2 * 16);
  // inspect reads the same checkpoint.
  auto in = test::run_headwise("inspect --checkpoint " + dir + "/run/checkpoints/step_4");
  CHECK(in.code == 0);
  CHECK(test::last_json_line(in.out)["acr"].get<double>() == Approx(1.0));
}

TEST_CASE("init-from loads a transformers checkpoint", "[cli][hf]") {
  const std::string dir = test::cli_temp_dir("initfrom");
  std::vector<uint16_t> toks(600);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 3) % 64);
  data::write_shard(dir + "/d.bin", toks);
  const std::string fixture = std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/hf_tiny_gpt2";
  test::write_text(dir + "/c.json", R"({
    "model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 32, "vocab_size": 64},
    "train": {"micro_batch": 2, "seq_len": 16, "steps": 1, "lr": 1e-9, "min_lr": 0, "warmup_steps": 0},
    "data": {"train": ")" + dir + R"(/d.bin", "val": ")" + dir + R"(/d.bin", "shuffle": false}
  })");
  auto r = test::run_headwise("train --config " + dir + "/c.json --out " + dir + "/run --init-from " + fixture);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto lines = test::read_jsonl(dir + "/run/metrics.jsonl");
  // The first training loss is the fixture model's loss on the first batch.
  auto e = test::run_headwise("eval --checkpoint " + fixture + " --data " + dir +
                              "/d.bin --batches 1 --micro-batch 2 --seq-len 16");
  REQUIRE(e.code == 0);
  CHECK(lines.front()["loss"].get<double>() == Approx(test::last_json_line(e.out)["loss"].get<double>()).epsilon(1e-6));
  // A shape mismatch is one clear error.
  test::write_text(dir + "/wrong.json", R"({"model": {"n_layer": 3, "n_head": 4, "n_embd": 32, "block_size": 32,
    "vocab_size": 64}, "train": {"micro_batch": 2, "seq_len": 16, "steps": 1}, "data": {"train": ")" + dir +
                                          R"(/d.bin"}})");
  expect_one_error(test::run_headwise("train --config " + dir + "/wrong.json --out " + dir + "/r2 --init-from " +
                                      fixture),
                   "does not match");
}

TEST_CASE("bad configs and data give one error line and a non-zero exit", "[cli][errors]") {
  const std::string dir = test::cli_temp_dir("badinput");
  const std::string cfg = make_tiny_run(dir);
  test::write_text(dir + "/broken.json", "{\"model\": {\"n_layer\": 2,");
  expect_one_error(test::run_headwise("train --config " + dir + "/broken.json --out " + dir + "/o"), "not valid JSON");
  expect_one_error(test::run_headwise("train --config " + dir + "/missing.json --out " + dir + "/o"), "missing.json");
  expect_one_error(test::run_headwise("train --config " + cfg + " --out " + dir + "/o --set train.stepz=3"),
                   "train.stepz");
  expect_one_error(test::run_headwise("train --config " + cfg + " --out " + dir + "/o --set model.n_head=3"),
                   "n_head");
  expect_one_error(test::run_headwise("train --config " + cfg + " --out " + dir + "/o --set data.train=/nope/*.bin"),
                   "/nope/*.bin");
  // A corrupt shard names the file.
  std::ofstream(dir + "/bad_0.bin", std::ios::binary) << "not a shard";
  expect_one_error(test::run_headwise("train --config " + cfg + " --out " + dir + "/o --set data.train=" + dir +
                                      "/bad_0.bin"),
                   "bad_0.bin");
  // NaN loss: a learning rate that explodes the weights.
  auto nan = test::run_headwise("train --config " + cfg + " --out " + dir + "/nan --set train.lr=1e30 "
                                "--set train.grad_clip=0 --set train.steps=3 --set train.warmup_steps=0");
  INFO(nan.out);
  CHECK(nan.code != 0);
  CHECK(test::error_lines(nan.out) == 1);
}

TEST_CASE("corrupt or incomplete checkpoints give a clear error", "[cli][errors]") {
  const std::string dir = test::cli_temp_dir("badckpt");
  const std::string cfg = make_tiny_run(dir);
  REQUIRE(test::run_headwise("train --config " + cfg + " --out " + dir + "/run --set train.steps=2").code == 0);
  const std::string ck = dir + "/run/checkpoints/step_2";
  const std::string eval_args = " --data '" + dir + "/val_*.bin' --batches 1 --micro-batch 2 --seq-len 16";
  // Truncated weights.
  fs::copy(ck, dir + "/trunc", fs::copy_options::recursive);
  fs::resize_file(dir + "/trunc/model.safetensors", fs::file_size(dir + "/trunc/model.safetensors") / 2);
  expect_one_error(test::run_headwise("eval --checkpoint " + dir + "/trunc" + eval_args), "model.safetensors");
  // Missing config.json.
  fs::copy(ck, dir + "/noconf", fs::copy_options::recursive);
  fs::remove(dir + "/noconf/config.json");
  expect_one_error(test::run_headwise("eval --checkpoint " + dir + "/noconf" + eval_args), "config.json");
  // Resume without optimizer state.
  fs::copy(ck, dir + "/noopt", fs::copy_options::recursive);
  fs::remove(dir + "/noopt/optimizer.safetensors");
  expect_one_error(test::run_headwise("train --config " + cfg + " --out " + dir + "/r --resume " + dir + "/noopt"),
                   "optimizer.safetensors");
  expect_one_error(test::run_headwise("eval --checkpoint " + dir + "/nothing" + eval_args), "nothing");
}

TEST_CASE("a mistyped subcommand or option is one error line naming it", "[cli]") {
  // CLI11 alone answers `headwise eval-task` with "A subcommand is required" and exit 106.
  auto r = test::run_headwise("eval-task --checkpoint x");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(r.out == "error: unknown subcommand 'eval-task'; the closest is 'eval-tasks' (run 'headwise --help' for the list)\n");
  r = test::run_headwise("genrate");
  CHECK(r.code == 1);
  CHECK(r.out.find("the closest is 'generate'") != std::string::npos);
  r = test::run_headwise("");
  CHECK(r.code == 1);
  CHECK(r.out.rfind("error: no subcommand given", 0) == 0);
  r = test::run_headwise("inspect --checkpoint a --bogus 1");
  CHECK(r.code == 1);
  CHECK(r.out.rfind("error: headwise inspect: ", 0) == 0);
  CHECK(r.out.find("--bogus") != std::string::npos);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  r = test::run_headwise("inspect --help");  // help is not an error
  CHECK(r.code == 0);
  CHECK(r.out.find("--checkpoint") != std::string::npos);
}

TEST_CASE("headwise config prints every default, and a method's keys", "[cli]") {
  auto r = test::run_headwise("config --set train.steps=7 --method saf");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["train"]["steps"] == 7);
  CHECK(j["train"]["lr"].get<double>() == 6e-4);  // the documented default (docs/configuration.md)
  CHECK(j["model"]["n_layer"] == 4);
  CHECK(j["method"]["name"] == "saf");
  CHECK(j["method"]["ratio"].get<double>() == 0.25);
  expect_one_error(test::run_headwise("config --method nosuch"), "nosuch");
}
