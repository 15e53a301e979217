// The device option end to end: train, bench and eval ask for a GPU the same way, and without
// one (a CPU-only build, or no GPU visible) each stops with one error line and exit code 1.
#include <catch2/catch.hpp>

#include "cli/cli_util.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/data/shards.hpp"

using namespace hw;

namespace {

std::string make_device_run(const std::string& dir) {
  std::vector<uint16_t> toks(2000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 3 + i / 5) % 40);
  data::write_shard(dir + "/train_0.bin", toks);
  const std::string cfg = dir + "/tiny.json";
  test::write_text(cfg, R"({
    "model": {"n_layer": 1, "n_head": 2, "n_embd": 128, "block_size": 16, "vocab_size": 64},
    "train": {"micro_batch": 2, "seq_len": 16, "steps": 2, "eval_every": 0},
    "data": {"train": ")" + dir + R"(/train_*.bin"}
  })");
  return cfg;
}

constexpr auto& expect_one_error_exit_1 = test::expect_one_error;

}  // namespace

TEST_CASE("device = cuda without a usable GPU: one error line and exit 1", "[cli][errors][device]") {
  const std::string dir = test::cli_temp_dir("nocuda");
  const std::string cfg = make_device_run(dir);
  const std::string train = "train --config " + cfg + " --out " + dir + "/run";
  if (device::available()) {
    // A GPU is visible: nothing to refuse. train and bench run on it (bench says so), eval's
    // only complaint is the missing checkpoint, and an unknown device is still one error.
    const auto t = test::run_headwise(train + " --set train.device=cuda");
    INFO(t.out);
    CHECK(t.code == 0);
    const auto b = test::run_headwise("bench --config " + cfg + " --steps 1 --warmup 0 --set train.device=cuda");
    INFO(b.out);
    REQUIRE(b.code == 0);
    CHECK(test::last_json_line(b.out).value("device", "") == "cuda");
    const auto e = test::run_headwise("eval --checkpoint " + dir + "/none --data '" + dir +
                                      "/train_*.bin' --device cuda");
    INFO(e.out);
    CHECK(e.code == 1);
    CHECK(test::error_lines(e.out) == 1);
    CHECK(e.out.find("--device") == std::string::npos);
    expect_one_error_exit_1(test::run_headwise(train + " --set train.device=gpu"), "train.device");
    return;
  }
  expect_one_error_exit_1(test::run_headwise(train + " --set train.device=cuda"), "train.device = \"cuda\"");
  expect_one_error_exit_1(test::run_headwise("bench --config " + cfg + " --steps 1 --warmup 0 --set train.device=cuda"),
                          "train.device = \"cuda\"");
  expect_one_error_exit_1(test::run_headwise("eval --checkpoint " + dir + "/none --data '" + dir +
                                             "/train_*.bin' --device cuda"),
                          "--device = \"cuda\"");
  expect_one_error_exit_1(test::run_headwise(train + " --set train.device=gpu"), "train.device");
  // The CPU device still trains, and bench says which device it ran on.
  const auto ok = test::run_headwise("bench --config " + cfg + " --steps 1 --warmup 0 --set train.device=cpu");
  INFO(ok.out);
  REQUIRE(ok.code == 0);
  CHECK(test::last_json_line(ok.out).value("device", "") == "cpu");
}
