// End-to-end: `headwise experiment` and `headwise mqar` with SAF on tiny configs, their files
// checked against independent paths (`headwise eval` of the branch checkpoints, an argmax count
// of this test's own), and their bad input as one error line.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "cli/cli_util.hpp"
#include "headwise/data/mqar/mqar_adapt.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"
#include "support/mqar_count.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {

// Shards of a learnable stream and a tiny SAF config (2 layers x 4 heads, T 16, 6 updates,
// SAF 25% at update 3), with an "experiment" of ordinary vs SAF 25%.
std::string make_saf_run(const std::string& dir, const std::string& experiment) {
  std::vector<uint16_t> toks(4000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 5 + i / 7) % 40);
  data::write_shard(dir + "/train_0.bin", toks);
  data::write_shard(dir + "/val_0.bin", std::vector<uint16_t>(toks.begin() + 100, toks.begin() + 1100));
  const std::string cfg = dir + "/saf_tiny.json";
  test::write_text(cfg, R"({
    "model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 32, "vocab_size": 64, "bias": false},
    "train": {"micro_batch": 2, "seq_len": 16, "steps": 6, "lr": 1e-2, "warmup_steps": 1, "eval_every": 0,
              "eval_batches": 4, "checkpoint_every": 0, "seed": 3, "threads": 1},
    "data": {"train": ")" + dir + R"(/train_*.bin", "val": ")" + dir + R"(/val_*.bin", "calib": ")" + dir +
                             R"(/train_*.bin", "shuffle": false},
    "method": {"name": "saf", "ratio": 0.25, "at_step": 3, "calib_seqs": 4, "fit_steps": 40, "max_kl": 5.0},
    "experiment": )" + experiment + R"(
  })");
  return cfg;
}

const char* kTwoBranches =
    R"({"seeds": [3], "speed_rounds": 1, "branches": [{"name": "ordinary", "method": {"name": "none"}}, {"name": "saf_25", "method": {}}]})";

using test::expect_one_error;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// The A-B-B-A processes of one round in DIR (process_<k>_<A|B>.json), checked one by one: a
// fresh process each (distinct pids), the requested warm-up and timed updates, the mean of its
// timed updates; returns the median of the two per-pair ratios computed here.
double check_abba_round(const std::string& dir) {
  const char* names[4] = {"process_0_A", "process_1_B", "process_2_B", "process_3_A"};
  std::vector<double> ms;
  std::set<int64_t> pids;
  for (const char* n : names) {
    INFO(n);
    const auto p = read_json(dir + "/" + n + ".json");
    CHECK(fs::exists(dir + "/" + n + ".log"));
    REQUIRE(p["update_ms"].size() == 4);  // 4 timed updates ...
    CHECK(p["warmup"] == 1);              // ... after 1 warm-up
    double sum = 0.0;
    for (const auto& x : p["update_ms"]) {
      CHECK(x.get<double>() > 0);
      sum += x.get<double>();
    }
    CHECK(p["mean_ms"].get<double>() == Approx(sum / 4).epsilon(1e-12));
    ms.push_back(p["mean_ms"].get<double>());
    pids.insert(p["pid"].get<int64_t>());
  }
  CHECK(pids.size() == 4);
  // Pairs (A0, B1) and (A3, B2); the median of two ratios is their mean.
  return 0.5 * (ms[0] / ms[1] + ms[3] / ms[2]);
}

}  // namespace

TEST_CASE("experiment runs a tiny SAF comparison end to end", "[cli][saf]") {
  const std::string dir = test::cli_temp_dir("saf_experiment");
  const std::string cfg = make_saf_run(dir, kTwoBranches);
  const auto r = test::run_headwise("experiment --config " + cfg + " --out " + dir + "/out");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto res = read_json(dir + "/out/results.json");
  CHECK(res["fire_step"] == 3);
  REQUIRE(res["summary"].size() == 2);
  const auto ord = read_json(dir + "/out/seed_3/ordinary/result.json");
  const auto saf = read_json(dir + "/out/seed_3/saf_25/result.json");
  CHECK(ord["steps"] == 6);
  CHECK(saf["steps"] == 6);
  CHECK(saf["static_heads"] == 2);  // round(0.25 x 8)
  CHECK(ord["static_heads"] == 0);
  // Each branch's final PPL, recomputed by `headwise eval` from its final checkpoint on disk.
  for (const auto* b : {"ordinary", "saf_25"}) {
    INFO(b);
    const auto e = test::run_headwise("eval --checkpoint " + dir + "/out/seed_3/" + b + "/final --data '" + dir +
                                      "/val_*.bin' --batches 4 --micro-batch 2 --seq-len 16");
    INFO(e.out);
    REQUIRE(e.code == 0);
    const auto& row = std::string(b) == "ordinary" ? ord : saf;
    CHECK(test::last_json_line(e.out)["ppl"].get<double>() == Approx(row["val_ppl"].get<double>()).epsilon(1e-6));
  }
  // The saved SAF checkpoint holds the two static heads the intervention log selected.
  const auto log = read_json(dir + "/out/seed_3/saf_25/interventions/step_3.0.saf.json");
  REQUIRE(log["selected"].size() == 2);
  auto m = load_model(dir + "/out/seed_3/saf_25/final", cpu_backend<float>());
  for (const auto& s : log["selected"])
    CHECK(m->config().head_plan.layers[s[0].get<size_t>()][s[1].get<size_t>()].kind == attn::HeadKind::Static);
  // The table: PPL change from the two PPLs by hand, both rows named.
  const double change = 100.0 * (saf["val_ppl"].get<double>() / ord["val_ppl"].get<double>() - 1.0);
  CHECK(res["summary"][1]["ppl_change_pct"]["mean"].get<double>() == Approx(change).epsilon(1e-12));
  std::ifstream md(dir + "/out/table.md");
  std::stringstream ss;
  ss << md.rdbuf();
  CHECK(ss.str().find("| ordinary |") != std::string::npos);
  CHECK(ss.str().find("| saf_25 |") != std::string::npos);
  CHECK(r.out.find("written: " + dir + "/out/table.md") != std::string::npos);
  // The A-B-B-A speed phase: the ordinary plan against SAF's, in fresh processes.
  CHECK(ss.str().find("| Update speedup (A-B-B-A) | In-run speedup | (median) |") != std::string::npos);
  const double median = check_abba_round(dir + "/out/speed/saf_25");
  CHECK(res["summary"][1]["abba_update_speedup"]["mean"].get<double>() == Approx(median).epsilon(1e-12));
  CHECK(res["summary"][0]["abba_update_speedup"].is_null());
  CHECK(res["speed"]["saf_25"]["processes"].size() == 4);
  // The B processes timed SAF's plan: two static heads.
  const auto plan = read_json(dir + "/out/seed_3/saf_25/head_plan.json");
  int statics = 0;
  for (const auto& layer : plan)
    for (const auto& h : layer) statics += h == "static";
  CHECK(statics == 2);
  CHECK(res["speed"]["saf_25"]["plan_b"] == dir + "/out/seed_3/saf_25/head_plan.json");
  // A checkpoint directory is a plan too: its config.json's head plan (SAF's two static heads).
  const auto b = test::run_headwise("bench --config " + cfg + " --abba softmax --abba " + dir +
                                    "/out/seed_3/saf_25/final --rounds 1 --steps 1 --warmup 0");
  INFO(b.out);
  REQUIRE(b.code == 0);
  const auto bj = test::last_json_line(b.out);
  REQUIRE(bj["processes"].size() == 4);
  CHECK(bj["processes"][1]["static_heads"] == 2);
  CHECK(bj["processes"][0]["static_heads"] == 0);
  CHECK(bj["processes"][2]["update_ms"].size() == 1);
}

TEST_CASE("bench --abba times two plans in alternating fresh processes", "[cli][saf][bench]") {
  const std::string dir = test::cli_temp_dir("saf_abba");
  const std::string cfg = make_saf_run(dir, kTwoBranches);
  test::write_text(dir + "/half.json", R"([["pruned", "pruned", "softmax", "softmax"],
                                           ["static", "static", "softmax", "softmax"]])");
  const auto r = test::run_headwise("bench --config " + cfg + " --abba softmax --abba " + dir +
                                    "/half.json --rounds 1 --abba-dir " + dir + "/abba");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = test::last_json_line(r.out);
  REQUIRE(j["processes"].size() == 4);
  std::vector<std::string> sides, plans;
  for (const auto& p : j["processes"]) {
    sides.push_back(p["side"].get<std::string>());
    plans.push_back(p["plan"].get<std::string>());
  }
  CHECK(sides == std::vector<std::string>{"A", "B", "B", "A"});
  CHECK(plans == std::vector<std::string>{"softmax", dir + "/half.json", dir + "/half.json", "softmax"});
  CHECK(j["speedup"].get<double>() == Approx(check_abba_round(dir + "/abba")).epsilon(1e-12));
  // The B processes ran plan B: a pruned head loses its Q/K/V rows and output columns
  // (3 x 32 x 8 + 8 x 32 = 1024, no biases), a static head its Q/K rows (2 x 32 x 8 = 512):
  // 2 x 1024 + 2 x 512 = 3072 parameters fewer.
  const auto a0 = read_json(dir + "/abba/process_0_A.json"), b1 = read_json(dir + "/abba/process_1_B.json");
  CHECK(a0["parameters"].get<int64_t>() - b1["parameters"].get<int64_t>() == 3072);
  CHECK(b1["static_heads"] == 2);
  CHECK(b1["pruned_heads"] == 2);
  CHECK(a0["static_heads"] == 0);
  // Bad input: one error line before any process starts.
  expect_one_error(test::run_headwise("bench --config " + cfg + " --abba softmax"), "exactly two plans");
  expect_one_error(test::run_headwise("bench --config " + cfg + " --abba softmax --abba " + dir + "/missing.json"),
                   "missing.json");
  expect_one_error(test::run_headwise("bench --config " + cfg + " --abba softmax --abba softmax --plan softmax"),
                   "do not combine");
}

TEST_CASE("experiment: bad SAF settings are one error line naming the key", "[cli][saf][errors]") {
  const std::string dir = test::cli_temp_dir("saf_experiment_errors");
  const std::string cfg = make_saf_run(dir, kTwoBranches);
  expect_one_error(test::run_headwise("experiment --config " + cfg + " --out " + dir + "/o1 --set method.at_step=7"),
                   "method.at_step");
  const auto short_calib =
      test::run_headwise("experiment --config " + cfg + " --out " + dir + "/o2 --set method.calib_seq_len=8");
  expect_one_error(short_calib, "method.calib_seq_len (8)");
  CHECK(short_calib.out.find("train.seq_len (16)") != std::string::npos);
  expect_one_error(test::run_headwise("experiment --config " + cfg + " --out " + dir + "/o3 --set data.val_split=thirds"),
                   "data.val_split");
  CHECK(!fs::exists(dir + "/o1/results.json"));
}

TEST_CASE("mqar adapts a fresh model after SAF end to end, and its accuracy is an argmax count", "[cli][saf][mqar]") {
  const std::string dir = test::cli_temp_dir("saf_mqar");
  const std::string cfg = make_saf_run(dir, kTwoBranches);
  const std::string opts =
      " --seq-len 16 --train-pairs 2 --eval-pairs 2,4 --eval-examples 16 --eval-batch 8 --steps 30 "
      "--batch 8 --lr 3e-3 --log-every 10 --seed 9";
  const auto r = test::run_headwise("mqar --config " + cfg + " --out " + dir + "/mq --method saf --method-set "
                                    "ratio=0.25 --method-set calib_seqs=4 --method-set fit_steps=40 --method-set "
                                    "max_kl=5 --save-checkpoint --label saf25 --vocab 32" + opts);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = read_json(dir + "/mq/mqar.json");
  CHECK(j["label"] == "saf25");
  CHECK(j["static_heads"] == 2);
  REQUIRE(j["accuracy"].size() == 2);
  const auto metrics = test::read_jsonl(dir + "/mq/metrics.jsonl");
  int updates = 0;
  for (const auto& m : metrics) updates += m.contains("loss");
  CHECK(updates == 30);
  // The adapted model holds SAF's static heads; its accuracy counted here, with this test's own
  // argmax over the whole vocabulary at the query positions of the same evaluation examples.
  auto m = load_model(dir + "/mq/adapted", cpu_backend<float>());
  CHECK(m->config().head_plan.count(attn::HeadKind::Static) == 2);
  MqarOptions o;
  o.seq_len = 16;
  o.vocab = 32;
  o.train_pairs = 2;
  o.eval_pairs = {2, 4};
  o.eval_examples = 16;
  o.seed = 9;
  for (size_t k = 0; k < 2; ++k) {
    const int pairs = j["accuracy"][k]["pairs"].get<int>();
    INFO("pairs " << pairs);
    const auto [hits, total] = test::count_mqar_hits(*m, o, pairs);
    CHECK(total == 16 * pairs);
    CHECK(j["accuracy"][k]["total"].get<int64_t>() == total);
    CHECK(j["accuracy"][k]["correct"].get<int64_t>() == hits);
  }
  CHECK(j["accuracy"][0]["pairs"] == 2);
  CHECK(j["accuracy"][1]["pairs"] == 4);
  // Bad input: one error line naming the option.
  expect_one_error(test::run_headwise("mqar --config " + cfg + " --out " + dir + "/bad --method saf --method-set "
                                      "ratio=2 --vocab 32" + opts),
                   "ratio");
  expect_one_error(test::run_headwise("mqar --config " + cfg + " --out " + dir + "/bad2 --vocab 100" + opts), "vocab");  // over the model's 64
}
