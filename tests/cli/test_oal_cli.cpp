// End-to-end: `headwise convert --method oal --calib GLOB` on a finished checkpoint, `oal-stats`
// and `oal-tables`; bad input is one error line naming the key.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>

#include "cli/cli_util.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/model.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {

// An all-softmax GQA checkpoint (2 layers, 4 query heads in 2 KV groups, head_dim 8) and shards.
std::string make_checkpoint(const std::string& dir) {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_kv_head = 2;
  mc.n_embd = 32;
  mc.block_size = 24;
  mc.vocab_size = 32;
  mc.pos = "rope";
  mc.validate();
  Model<float> m(mc, cpu_backend<float>());
  m.init_weights(5);
  save_model_files(m, dir + "/ckpt");
  Rng r(3);
  std::vector<uint16_t> toks(4000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 7 + r.below(3)) % 32);
  data::write_shard(dir + "/val_000.bin", toks);
  return dir + "/ckpt";
}

using test::expect_one_error;

const std::string kSmall =
    " --set method.stats_prompts=6 --set method.fit_seqs=2 --set method.val_seqs=1 --set method.bootstrap=50"
    " --set method.max_updates=40 --set method.val_every=20";

}  // namespace

TEST_CASE("convert --method oal calibrates on --calib and writes linear heads with adapters", "[cli][oal]") {
  const std::string dir = test::cli_temp_dir("oal_convert");
  const std::string ckpt = make_checkpoint(dir), out = dir + "/converted";
  auto r = test::run_headwise("convert --checkpoint " + ckpt + " --out " + out + " --method oal --calib '" + dir +
                              "/val_*.bin' --set method.layers=1" + kSmall);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(test::last_json_line(r.out)["changed_heads"] == 4);
  auto model = load_model(out, cpu_backend<float>());
  const ModelConfig& mc = model->config();
  for (int h = 0; h < 4; ++h) {
    CHECK(mc.head_plan.layers[0][size_t(h)].kind == attn::HeadKind::Softmax);
    CHECK(mc.head_plan.layers[1][size_t(h)].kind == attn::HeadKind::Linear);
  }
  CHECK(mc.lora.rank == 8);
  CHECK(mc.lora.freeze_base);
  // The stored L and groups are the ones the report says were fitted.
  std::ifstream in(out + "/convert.json");
  const auto rec = nlohmann::json::parse(in);
  CHECK(rec["calib"] == dir + "/val_*.bin");
  const HeadExtras ex = model->head_extras();
  for (const auto& hj : rec["report"]["heads"]) {
    const LinearHeadValues& v = ex.linears.at({hj["layer"].get<int>(), hj["head"].get<int>()});
    const auto L = hj["calibration"]["kernel"]["L"].get<std::vector<double>>();
    REQUIRE(L.size() == v.L.size());
    const int G1 = v.n_groups + 1;
    for (int a = 0; a < G1; ++a)
      for (int b = 0; b <= a; ++b) CHECK(v.L[size_t(a * G1 + b)] == float(L[size_t(a * G1 + b)]));
    CHECK(hj["grouping"]["groups"] == nlohmann::json(v.groups));
  }
}

TEST_CASE("oal-stats and oal-tables write their JSON and tables", "[cli][oal]") {
  const std::string dir = test::cli_temp_dir("oal_tables");
  const std::string ckpt = make_checkpoint(dir);
  auto r = test::run_headwise("oal-stats --checkpoint " + ckpt + " --data " + dir + "/val_*.bin --prompts 5 --head 1:2 --json " +
                              dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("dim,mean_abs_q,mean_abs_k,chi,group") != std::string::npos);
  std::ifstream in(dir + "/stats.json");
  const auto st = nlohmann::json::parse(in);
  REQUIRE(st["heads"].size() == 8);
  for (const auto& h : st["heads"]) {
    CHECK(h["chi"].size() == 8);
    int total = 0;
    for (const auto& s : h["grouping"]["sizes"]) total += s.get<int>();
    CHECK(total == 8);
  }

  r = test::run_headwise("oal-tables --checkpoint " + ckpt + " --data " + dir + "/val_*.bin --out " + dir +
                         "/tables --eval-seqs 2 --random-draws 5 --performer-features 16 --performer-seeds 2 --max-groups 3"
                         " --fixed-groups 2" + kSmall);
  INFO(r.out);
  REQUIRE(r.code == 0);
  for (const char* f : {"table1.csv", "table2.csv", "fig2.csv", "tables.md", "tables.json"})
    CHECK(fs::exists(dir + "/tables/" + f));
  std::ifstream tin(dir + "/tables/tables.json");
  const auto t = nlohmann::json::parse(tin);
  REQUIRE(t["table1"]["rows"].size() == 4);  // performer, taylor2, dijiang, taylorshift
  CHECK(t["table1"]["rows"][3]["method"] == "taylorshift");
  REQUIRE(t["table2"].size() == 10);  // 5 OAL rows, then the baselines
  CHECK(t["table2"][5]["method"] == "performer");
  CHECK(t["table2"][6]["method"] == "dijiang");
  CHECK(t["table2"][7]["method"] == "taylorshift");
  CHECK(t["table2"][8]["method"] == "dijiang_fitted");
  CHECK(t["table2"][9]["method"] == "taylorshift_fitted");
  // A fit keeps its start when nothing beats it: never worse on the validation windows.
  CHECK(t["table2"][8]["val_mse"].get<double>() <= t["table2"][6]["val_mse"].get<double>());
  CHECK(t["table2"][9]["val_mse"].get<double>() <= t["table2"][7]["val_mse"].get<double>());
  CHECK(t["fig2"].size() == 3);
  for (const auto& row : t["table2"]) {
    CHECK(row["relmse_pre"].get<double>() > 0);
    CHECK(std::isfinite(row["relmse_post"].get<double>()));
  }
}

TEST_CASE("convert --method oal --set method.kernel=performer writes performer heads with adapters, no data needed",
          "[cli][oal]") {
  const std::string dir = test::cli_temp_dir("oal_convert_performer");
  const std::string ckpt = make_checkpoint(dir), out = dir + "/converted";
  auto r = test::run_headwise("convert --checkpoint " + ckpt + " --out " + out +
                              " --method oal --set method.kernel=performer --set method.layers=1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(test::last_json_line(r.out)["changed_heads"] == 4);
  auto model = load_model(out, cpu_backend<float>());
  const ModelConfig& mc = model->config();
  for (int h = 0; h < 4; ++h) {
    CHECK(mc.head_plan.layers[0][size_t(h)].kind == attn::HeadKind::Softmax);
    CHECK(mc.head_plan.layers[1][size_t(h)].str() == "performer");  // 250 features
  }
  CHECK(mc.lora.rank == 8);
  CHECK(model->head_extras().performers.at({1, 0}).W.size() == 250 * 8);
}

TEST_CASE("convert --method oal: bad input is one error line naming the key", "[cli][oal]") {
  const std::string dir = test::cli_temp_dir("oal_bad");
  const std::string ckpt = make_checkpoint(dir), out = dir + "/never";
  const std::string convert = "convert --checkpoint " + ckpt + " --out " + out + " --method oal ";
  const std::string calib = " --calib " + dir + "/val_*.bin";
  expect_one_error(test::run_headwise(convert + "--set method.layers=0-2" + calib), "method.layers: layer 2 is outside");
  expect_one_error(test::run_headwise(convert + "--set method.grouping=fixed:9" + calib), "1..head_dim (8)");
  expect_one_error(test::run_headwise(convert + "--set method.grouping=fixed:0" + calib), "method.grouping");
  expect_one_error(test::run_headwise(convert + "--set method.layers=1" + kSmall), "needs calibration data");
  expect_one_error(test::run_headwise(convert + "--set method.kernel=cosformer" + calib), "method.kernel is \"cosformer\"");
  expect_one_error(test::run_headwise(convert + "--set method.layers=1 --calib " + dir + "/nothing_*.bin" + kSmall),
                   "nothing_");
  CHECK(!fs::exists(out));
  CHECK(!fs::exists(out + ".tmp"));
}
