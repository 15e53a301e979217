// AAH in training runs: bad input names the key; control_off is ordinary training bit for bit;
// each regime rebuilds, freezes or reuses its topology as specified (counted); the logged
// executed windows follow the resolution EMA recomputed here from the logged selections; the
// parent constraint holds in every report; a run is deterministic and resumes bit for bit.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>

#include "aah/aah_test_util.hpp"
#include "data/seed_mix.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/methods/aah/planner.hpp"
#include "headwise/methods/method_registry.hpp"

using namespace hw;

namespace {

RunConfig aah_cfg(const std::string& dir, const nlohmann::json& extra = nlohmann::json::object()) {
  return RunConfig::from_json(test::tiny_aah_doc(dir, extra));
}

struct AahRun {
  int64_t level0_builds = 0, upper_builds = 0, control_updates = 0;
  std::vector<double> losses;
};

AahRun run_aah(const RunConfig& cfg, const std::string& out) {
  dist::LocalComm comm;
  auto planners = make_planners(cfg);
  REQUIRE(planners.size() == 1);
  auto* p = dynamic_cast<AahPlanner*>(planners[0].get());
  REQUIRE(p != nullptr);
  Trainer t(cfg, out, comm, std::move(planners));
  t.run();
  return {p->level0_builds(), p->upper_builds(), p->control_updates(), test::losses_of(out + "/metrics.jsonl")};
}

nlohmann::json report(const std::string& run, int64_t step) {
  std::ifstream in(intervention_file(run, step, 0, "aah"));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::string error_of(const nlohmann::json& extra) {
  try {
    const RunConfig cfg = aah_cfg(test::temp_dir("aah_bad"), extra);
    make_planners(cfg);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("aah: bad input is one error naming the key", "[aah][config]") {
  using Catch::Contains;
  CHECK_THAT(error_of({{"windows", {0, 4, 8, 16}}}), Contains("method.windows") && Contains("1..T"));
  CHECK_THAT(error_of({{"windows", {2, 4, 8, 32}}}), Contains("method.windows") && Contains("32") && Contains("1..T"));
  CHECK_THAT(error_of({{"windows", {2, 8, 4, 16}}}), Contains("method.windows") && Contains("ascending"));
  CHECK_THAT(error_of({{"windows", {2, 2, 16}}}), Contains("method.windows") && Contains("ascending"));
  CHECK_THAT(error_of({{"regime", "fast"}}), Contains("method.regime") && Contains("'fast'") && Contains("deep_reuse"));
  CHECK_THAT(error_of({{"ablation", "no_ema"}}), Contains("method.ablation") && Contains("'no_ema'"));
  CHECK_THAT(error_of({{"ablation", "fixed_window"}}), Contains("method.ablation") && Contains("fixed_window:N"));
  CHECK_THAT(error_of({{"ablation", "fixed_window:64"}}), Contains("method.ablation") && Contains("1..T"));
  CHECK_THAT(error_of({{"ablation", "control_interval:0"}}), Contains("method.ablation"));
  CHECK_THAT(error_of({{"control_every", 0}}), Contains("method.control_every must be >= 1"));
  CHECK_THAT(error_of({{"feature_ema", 1.0}}), Contains("method.feature_ema"));
  CHECK_THAT(error_of({{"max_depth", 0}}), Contains("method.max_depth"));
  CHECK_THAT(error_of({{"window", 4}}), Contains("method.window") && Contains("not a key of method \"aah\""));
  CHECK(error_of({}).empty());
}

TEST_CASE("aah: defaults follow the paper and the config writes back whole", "[aah][config]") {
  auto doc = test::tiny_aah_doc(test::temp_dir("aah_defaults"));
  doc["model"]["block_size"] = 4096;
  doc["method"] = {{"name", "aah"}};
  const auto planners = make_planners(RunConfig::from_json(doc));
  const nlohmann::json c = planners.at(0)->config();
  CHECK(c["windows"] == nlohmann::json::parse("[512, 1024, 2048, 4096]"));
  CHECK(c["regime"] == "full_adaptive");
  CHECK(c["warmup_steps"] == 100);
  CHECK(c["control_every"] == 5);
  CHECK(c["feature_ema"] == 0.9);
  CHECK(c["resolution_ema"] == 0.15);
  CHECK(c["max_depth"] == 4);
  CHECK(c["similarity"] == 0.72);
  CHECK(c["upper_similarity"] == 0.76);
  CHECK(c["ablation"] == "none");
  CHECK(aah::AahConfig::from_json(c).to_json() == c);
  doc["method"] = {{"name", "aah"}, {"regime", "shallow_freeze"}};
  CHECK(make_planners(RunConfig::from_json(doc)).at(0)->config()["max_depth"] == 1);
}

TEST_CASE("aah: ablation control_off and regime full are ordinary training bit for bit", "[aah][train]") {
  const std::string dir = test::temp_dir("aah_control_off");
  const RunConfig plain = aah_cfg(dir);
  dist::LocalComm comm;
  {
    Trainer t(plain, dir + "/plain", comm);  // no planner at all
    t.run();
  }
  for (const nlohmann::json& extra : {nlohmann::json{{"ablation", "control_off"}}, nlohmann::json{{"regime", "full"}}}) {
    INFO(extra.dump());
    const AahRun r = run_aah(aah_cfg(dir, extra), dir + "/aah");
    CHECK(r.control_updates == 0);
    CHECK(r.losses == test::losses_of(dir + "/plain/metrics.jsonl"));
    CHECK(io::read_file(dir + "/aah/checkpoints/step_12/model.safetensors") ==
          io::read_file(dir + "/plain/checkpoints/step_12/model.safetensors"));
  }
}

TEST_CASE("aah: each regime rebuilds, freezes or reuses its hierarchy as specified", "[aah][train]") {
  const std::string dir = test::temp_dir("aah_regimes");
  struct Case {
    const char* regime;
    const char* ablation;
    int64_t level0, upper;
  };
  // 4 control updates (steps 2, 5, 8, 11). deep_reuse builds level 0 once at the top of update 1
  // (from update 0's features) and rebuilds the upper levels at every control update.
  const Case cases[] = {{"full_adaptive", "none", 4, 4},   {"shallow_freeze", "none", 1, 1},
                        {"deep_reuse", "none", 1, 4},      {"grouping_off", "none", 0, 0},
                        {"full_adaptive", "freeze_after_warmup", 1, 1},
                        {"full_adaptive", "fixed_random_grouping", 1, 4},
                        {"deep_reuse", "fixed_random_grouping", 1, 4}};
  for (const Case& c : cases) {
    INFO(c.regime << " / " << c.ablation);
    const std::string out = dir + "/" + c.regime + "_" + c.ablation;
    const AahRun r = run_aah(aah_cfg(dir, {{"regime", c.regime}, {"ablation", c.ablation}}), out);
    CHECK(r.control_updates == 4);
    CHECK(r.level0_builds == c.level0);
    CHECK(r.upper_builds == c.upper);
    const nlohmann::json first = report(out, 2), last = report(out, 11);
    CHECK(last["control_updates"] == 4);
    const bool frozen0 = std::string(c.regime) != "full_adaptive" || std::string(c.ablation) != "none";
    for (int l = 0; l < 2; ++l) {
      if (frozen0) CHECK(first["hierarchy"][l][0] == last["hierarchy"][l][0]);  // level 0 kept
      if (std::string(c.regime) == "grouping_off")
        CHECK(last["hierarchy"][l] == nlohmann::json::parse("[[[0], [1], [2], [3]]]"));
      if (std::string(c.regime) == "shallow_freeze") CHECK(last["hierarchy"][l].size() == 1);  // depth 1
      if (std::string(c.ablation) == "fixed_random_grouping")  // the seeded split of layer l, not features
        CHECK(last["hierarchy"][l][0] ==
              nlohmann::json(aah::balanced_random_groups(4, data::derive_seed(3, data::Stream::AahGrouping, uint64_t(l)))));
    }
  }
}

TEST_CASE("aah: executed windows follow the resolution EMA of the selections, parents bound children",
          "[aah][train]") {
  const std::string dir = test::temp_dir("aah_resolution");
  const std::string out = dir + "/run";
  run_aah(aah_cfg(dir), out);
  // Recompute r = .15 r + .85 index from the logged selections (r starts at index 3, the full
  // window); the selection changes only at control updates 2, 5, 8, 11.
  std::vector<double> r(8, 3.0);
  std::vector<int> sel(8, 3);
  const int windows[4] = {2, 4, 8, 16};
  int reports = 0;
  for (int64_t step = 2; step < 12; ++step) {
    const bool control = (step - 2) % 3 == 0;
    const std::string path = intervention_file(out, step, 0, "aah");
    const bool have = std::ifstream(path).good();
    CHECK(have >= control);  // every control update reports
    if (control) {
      const auto j = report(out, step);
      for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 4; ++h) sel[size_t(l * 4 + h)] = j["selected_index"][l][h].get<int>();
    }
    for (int i = 0; i < 8; ++i) r[size_t(i)] = 0.15 * r[size_t(i)] + 0.85 * sel[size_t(i)];
    if (!have) continue;
    ++reports;
    const auto j = report(out, step);
    CHECK(j["control_update"] == control);
    // Causal band at T = 16 (136 pairs): a window W sees W(W+1)/2 + (16-W) W; ACR is 1 because
    // clamp(W, 64, T) = T when T < 64.
    double pairs = 0;
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 4; ++h) {
        const int e = int(std::floor(r[size_t(l * 4 + h)] + 0.5));
        CHECK(j["executed_index"][l][h] == e);
        const std::string spec = j["head_plan"][l][h];
        CHECK(spec == (e == 3 ? std::string("softmax") : "window:" + std::to_string(windows[e])));
        const double w = windows[e];
        pairs += w * (w + 1) / 2 + (16 - w) * w;
      }
    CHECK(j["causal_band_coverage"].get<double>() == Approx(pairs / (8 * 136.0)).epsilon(1e-14));
    CHECK(j["acr"].get<double>() == 1.0);
    // Parent constraint in every level of every layer.
    if (control)
      for (int l = 0; l < 2; ++l) {
        const auto& hier = j["hierarchy"][l];
        const auto& idx = j["node_index"][l];
        for (size_t lev = 0; lev + 1 < hier.size(); ++lev)
          for (size_t p = 0; p < hier[lev + 1].size(); ++p)
            for (const auto& c : hier[lev + 1][p]) CHECK(idx[lev][c.get<size_t>()] <= idx[lev + 1][p]);
      }
  }
  CHECK(reports >= 4);
  // The policy moved some heads off full attention (this seed; a dead controller would show).
  const auto last = report(out, 11);
  int windowed = 0;
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 4; ++h) windowed += last["head_plan"][l][h] != "softmax";
  CHECK(windowed > 0);
}

TEST_CASE("aah: a run is deterministic and resumes bit for bit in the middle", "[aah][train]") {
  // GPT-2, and a Llama-style model (RMSNorm, SwiGLU, RoPE, 2 KV groups of 2 query heads).
  const std::string family = GENERATE(std::string("gpt2"), std::string("llama"));
  INFO("family " << family);
  const std::string dir = test::temp_dir("aah_resume_" + family);
  auto doc = test::tiny_aah_doc(dir, {{"regime", "deep_reuse"}});
  if (family == "llama") {
    doc["model"]["family"] = "llama";
    doc["model"]["n_kv_head"] = 2;
    doc["model"]["intermediate_size"] = 64;
  }
  doc["train"]["checkpoint_every"] = 1;
  const RunConfig cfg = RunConfig::from_json(doc);
  const AahRun a = run_aah(cfg, dir + "/a");
  const AahRun b = run_aah(cfg, dir + "/b");
  CHECK(a.losses == b.losses);
  CHECK(report(dir + "/a", 11)["head_plan"] == report(dir + "/b", 11)["head_plan"]);
  dist::LocalComm comm;
  // 1: level 0 not built yet; 2: warm-up over, before the first control; 5: update 4 observed,
  // its sums pending; 7: between control updates, resolution EMA moving.
  for (int from : {1, 2, 5, 7}) {
    INFO("resumed at step " << from);
    const std::string rd = dir + "/r" + std::to_string(from);
    auto planners = make_planners(cfg);
    Trainer r(cfg, rd, comm, std::move(planners));
    r.resume(dir + "/a/checkpoints/step_" + std::to_string(from));
    r.run();
    const auto lr = test::losses_of(rd + "/metrics.jsonl");
    REQUIRE(lr.size() == size_t(12 - from));
    for (size_t i = 0; i < lr.size(); ++i) CHECK(lr[i] == a.losses[size_t(from) + i]);
    CHECK(io::read_file(rd + "/checkpoints/step_12/model.safetensors") ==
          io::read_file(dir + "/a/checkpoints/step_12/model.safetensors"));
    CHECK(report(rd, 11)["head_plan"] == report(dir + "/a", 11)["head_plan"]);
  }
}
