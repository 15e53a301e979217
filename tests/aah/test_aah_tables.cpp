// The Table 4 layout from an experiment directory written here by hand.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "headwise/methods/aah/tables.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/model.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {
void write(const std::string& path, const nlohmann::json& j) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << j.dump(2);
}
}  // namespace

TEST_CASE("aah: Table 4 rows average val loss, ACR, tok/s and memory as worked by hand", "[aah][tables]") {
  const std::string dir = test::temp_dir("aah_table4");
  write(dir + "/results.json", nlohmann::json::parse(R"({"seeds": [{"seed": 1}, {"seed": 2}],
    "summary": [{"branch": "full"}, {"branch": "shallow_freeze"}]})"));
  // full: no AAH reports (ACR 1 by definition); 1000 tokens over 10 updates at 50 ms -> 2000 tok/s.
  for (int s : {1, 2})
    write(dir + "/seed_" + std::to_string(s) + "/full/result.json",
          {{"val_loss", s == 1 ? 2.0 : 2.2}, {"steps", 10}, {"tokens", 1000}, {"mean_update_ms", 50.0},
           {"memory_bytes", 4e6}, {"peak_rss_bytes", 1e8}, {"interventions", nlohmann::json::array()}});
  // shallow_freeze, seed 1: control reports 0.5 and 0.3 (mean 0.4), a non-control report ignored;
  // seed 2: one report 0.2. Mean ACR (0.4 + 0.2) / 2 = 0.3. 1000 tokens / 10 updates at 40 and
  // 25 ms -> 2500 and 4000 tok/s, mean 3250.
  write(dir + "/seed_1/shallow_freeze/result.json",
        {{"val_loss", 1.9}, {"steps", 10}, {"tokens", 1000}, {"mean_update_ms", 40.0}, {"memory_bytes", 4e6},
         {"peak_rss_bytes", 1.2e8}});
  const std::string iv1 = dir + "/seed_1/shallow_freeze/interventions/";
  write(iv1 + "step_2.0.aah.json", {{"planner", "aah"}, {"control_update", true}, {"acr", 0.5}});
  write(iv1 + "step_3.0.aah.json", {{"planner", "aah"}, {"control_update", false}, {"acr", 0.9}});
  write(iv1 + "step_7.0.aah.json", {{"planner", "aah"}, {"control_update", true}, {"acr", 0.3}});
  write(iv1 + "step_7.1.saf.json", {{"planner", "saf"}, {"acr", 0.0}});  // another planner's report
  write(dir + "/seed_2/shallow_freeze/result.json",
        {{"val_loss", 2.1}, {"steps", 10}, {"tokens", 1000}, {"mean_update_ms", 25.0}, {"memory_bytes", 4e6},
         {"peak_rss_bytes", 1.0e8}});
  write(dir + "/seed_2/shallow_freeze/interventions/step_2.0.aah.json",
        {{"planner", "aah"}, {"control_update", true}, {"acr", 0.2}});
  const nlohmann::json rows = aah::table4_rows(dir);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["branch"] == "full");
  CHECK(rows[0]["val_loss"].get<double>() == Approx(2.1));
  CHECK(rows[0]["acr"].get<double>() == 1.0);
  CHECK(rows[0]["tok_per_s"].get<double>() == Approx(2000));
  CHECK(rows[0]["memory_mb"].get<double>() == Approx(4));
  CHECK(rows[1]["val_loss"].get<double>() == Approx(2.0));
  CHECK(rows[1]["acr"].get<double>() == Approx(0.3));
  CHECK(rows[1]["tok_per_s"].get<double>() == Approx(3250));
  CHECK(rows[1]["peak_rss_mb"].get<double>() == Approx(110));
  const std::string md = aah::table4_markdown(rows);
  CHECK(md.find("| shallow_freeze | 2.0000 | 0.3000 | 3250 | 4.0 | 110.0 |") != std::string::npos);
  CHECK_THROWS_WITH(aah::table4_rows(dir + "/nowhere"), Catch::Contains("results.json: not found"));
}

TEST_CASE("aah: Table 5 rows average val loss over seeds and compare with the first row, as worked by hand",
          "[aah][tables]") {
  const std::string dir = test::temp_dir("aah_table5");
  write(dir + "/results.json", nlohmann::json::parse(R"({"seeds": [{"seed": 1}, {"seed": 2}],
    "summary": [{"branch": "pure"}, {"branch": "fixed_window:128"}]})"));
  // pure: (3.0 + 3.2) / 2 = 3.1; fixed: (2.9 + 3.0) / 2 = 2.95, 0.15 below the first row.
  const double losses[2][2] = {{3.0, 3.2}, {2.9, 3.0}};
  const char* names[2] = {"pure", "fixed_window:128"};
  for (int b = 0; b < 2; ++b)
    for (int s : {1, 2})
      write(dir + "/seed_" + std::to_string(s) + "/" + names[b] + "/result.json", {{"val_loss", losses[b][s - 1]}});
  const nlohmann::json rows = aah::table5_rows(dir);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["val_loss"].get<double>() == Approx(3.1));
  CHECK(rows[0]["delta_vs_first"].get<double>() == 0.0);
  CHECK(rows[1]["val_loss"].get<double>() == Approx(2.95));
  CHECK(rows[1]["delta_vs_first"].get<double>() == Approx(-0.15));
  const std::string md = aah::table5_markdown(rows);
  CHECK(md.find("| Row | Val. loss | vs pure |") != std::string::npos);
  CHECK(md.find("| fixed_window:128 | 2.9500 | -0.1500 |") != std::string::npos);
  std::filesystem::remove(dir + "/seed_2/pure/result.json");
  CHECK_THROWS_WITH(aah::table5_rows(dir), Catch::Contains("seed_2/pure/result.json: not found"));
}

TEST_CASE("aah: Table 6 evaluates each branch's final checkpoint: an all-zero model scores log V, ACR by hand",
          "[aah][tables]") {
  // Every weight zero: every LayerNorm outputs 0, so the (tied) logits are 0 and every
  // prediction is uniform: val loss = log V and PPL = V exactly, whatever the plan. The final
  // plan's ACR at T = 128: window:32 clamps to 64 -> (128 + 64) / (2 x 128) = 0.75 per layer.
  const std::string dir = test::temp_dir("aah_table6");
  const int V = 32;
  test::write_text_like_shard(dir, "val_000.bin", 2000, 3, V);
  write(dir + "/results.json", nlohmann::json::parse(R"({"seeds": [{"seed": 7}], "summary": [{"branch": "shallow"}]})"));
  const std::string branch = dir + "/seed_7/shallow";
  ModelConfig cfg = ModelConfig::from_json(nlohmann::json::parse(
      R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "block_size": 128, "vocab_size": 32,
          "head_plan": [["softmax", "window:32"], ["window:32", "softmax"]]})"));
  Model<float> model(cfg, cpu_backend<float>(), {});
  for (const auto& t : model.params().tensors()) std::fill(t->f32(), t->f32() + t->numel(), 0.f);
  save_model_files(model, branch + "/checkpoints/step_9");
  save_model_files(model, branch + "/checkpoints/step_10");  // the final one (10 > 9)
  write(branch + "/config.json", {{"data", {{"val", dir + "/val_*.bin"}}}, {"train", {{"seq_len", 128}}}});
  const nlohmann::json rows = aah::table6_rows(dir, 2, 3);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["val_loss"].get<double>() == Approx(std::log(double(V))).epsilon(1e-6));
  CHECK(rows[0]["val_ppl"].get<double>() == Approx(double(V)).epsilon(1e-5));
  CHECK(rows[0]["acr"].get<double>() == Approx(0.75));
  CHECK(rows[0]["tok_per_s"].get<double>() > 0);
  CHECK(aah::table6_markdown(rows).find("| shallow | 3.4657 | 32.00 | 0.7500 |") != std::string::npos);
  CHECK_THROWS_WITH(aah::table6_rows(dir, 100, 3), Catch::Contains("exceeds the"));
  std::filesystem::remove_all(branch + "/checkpoints");
  CHECK_THROWS_WITH(aah::table6_rows(dir, 2, 3), Catch::Contains("checkpoints: not found"));

  // `headwise experiment`'s own layout: no config.json in the branch (the run config is
  // results.json's "config"), the final checkpoint in final/. Same all-zero model: log V again.
  std::filesystem::remove(branch + "/config.json");
  CHECK_THROWS_WITH(aah::table6_rows(dir, 2, 3), Catch::Contains("results.json has no 'config'"));
  write(dir + "/results.json", {{"seeds", {{{"seed", 7}}}}, {"summary", {{{"branch", "shallow"}}}},
                                {"config", {{"data", {{"val", dir + "/val_*.bin"}}}, {"train", {{"seq_len", 128}}}}}});
  save_model_files(model, branch + "/final");
  const nlohmann::json own = aah::table6_rows(dir, 2, 3);
  REQUIRE(own.size() == 1);
  CHECK(own[0]["val_loss"].get<double>() == Approx(std::log(double(V))).epsilon(1e-6));
  CHECK(own[0]["acr"].get<double>() == Approx(0.75));
}
