// The experiment protocol on a tiny config: every branch continues exactly where an
// uninterrupted run would be, and the table's ratios come out of those runs.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "headwise/dist/local_comm.hpp"
#include "headwise/methods/experiment.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/train/trainer.hpp"
#include "methods/methods_test_util.hpp"

using namespace hw;

namespace {

// Final val PPL of a plain Trainer::run of the config (the trainer's own planner hook).
double uninterrupted_ppl(const RunConfig& cfg, const std::string& dir) {
  dist::LocalComm comm;
  Trainer tr(cfg, dir, comm, make_planners(cfg));
  return tr.run()["val_ppl"].get<double>();
}

const nlohmann::json* row(const nlohmann::json& results, const std::string& name) {
  for (const auto& r : results["summary"])
    if (r["branch"] == name) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("experiment spec: generated branches, explicit branches and bad input", "[experiment]") {
  const auto s = ExperimentSpec::from_json(nlohmann::json::object());
  std::vector<std::string> names;
  for (const auto& b : s.branches) names.push_back(b.name);
  CHECK(names == std::vector<std::string>{"ordinary", "saf_25", "saf_50", "prune_25", "random_25", "gate_taylor_25"});
  CHECK(s.branches[3].method["mode"] == "prune");
  CHECK(s.branches[5].method["selector"] == "gate_taylor");
  const auto e = ExperimentSpec::from_json(nlohmann::json::parse(
      R"({"branches": [{"name": "ord", "method": {"name": "none"}}, {"name": "kl", "method": {"selector": "kl"}}]})"));
  CHECK(e.branches[1].method["name"] == "saf");
  CHECK_THROWS_WITH(ExperimentSpec::from_json({{"budget", "flops"}}), Catch::Contains("experiment.budget"));
  CHECK_THROWS_WITH(ExperimentSpec::from_json({{"controls", {"dropout"}}}), Catch::Contains("dropout"));
  CHECK_THROWS_WITH(ExperimentSpec::from_json({{"seed", 3}}), Catch::Contains("experiment.seed"));
  const std::string dir = test::methods_dir("spec");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = {{"branches", {{{"name", "a"}, {"method", {{"ratio", 0.25}}}}}}};
  CHECK_THROWS_WITH(experiment_from_json(doc), Catch::Contains("reference"));
  doc["experiment"] = {{"ratios", {2.0}}};
  CHECK_THROWS_WITH(experiment_from_json(doc), Catch::Contains("ratios"));
  doc["experiment"] = {{"branches", {{{"name", "o"}, {"method", {{"name", "none"}}}},
                                     {{"name", "s"}, {"method", {{"mode", "zap"}}}}}}};
  CHECK_THROWS_WITH(experiment_from_json(doc), Catch::Contains("branch 's'"));
}

TEST_CASE("experiment branches continue the trunk exactly and the table follows from them", "[experiment]") {
  const std::string dir = test::methods_dir("experiment");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = {{"ratios", {0.25, 0.5}}, {"controls", {"prune", "random", "gate_taylor"}}};
  const ExperimentSetup setup = experiment_from_json(doc);
  dist::LocalComm comm;
  const nlohmann::json res = run_experiment(setup, dir + "/out", comm);
  REQUIRE(res["summary"].size() == 6);
  CHECK(res["fire_step"] == 4);
  // Independent paths: uninterrupted runs (SAF through the trainer's hook).
  doc.erase("experiment");
  auto method = [&](const nlohmann::json& m) {
    nlohmann::json d = doc;
    if (m.value("name", "") == "none") d["method"] = nlohmann::json::object();
    for (auto it = m.begin(); it != m.end(); ++it) d["method"][it.key()] = it.value();
    return RunConfig::from_json(d);
  };
  const double p_ord = uninterrupted_ppl(method({{"name", "none"}}), dir + "/ref_ord");
  const double p_saf = uninterrupted_ppl(method({{"ratio", 0.25}}), dir + "/ref_saf");
  const double p_prune = uninterrupted_ppl(method({{"ratio", 0.25}, {"mode", "prune"}}), dir + "/ref_prune");
  CHECK((*row(res, "ordinary"))["val_ppl"]["mean"].get<double>() == p_ord);
  CHECK((*row(res, "saf_25"))["val_ppl"]["mean"].get<double>() == p_saf);
  CHECK((*row(res, "prune_25"))["val_ppl"]["mean"].get<double>() == p_prune);
  CHECK((*row(res, "saf_25"))["ppl_change_pct"]["mean"].get<double>() == Approx(100.0 * (p_saf / p_ord - 1)));
  CHECK((*row(res, "ordinary"))["ppl_change_pct"]["mean"].get<double>() == 0.0);
  CHECK((*row(res, "ordinary"))["update_speedup"]["mean"].get<double>() == 1.0);
  // Same-head pruning took SAF's heads; the branches saved what they replaced.
  const auto saf_j = test::read_json(intervention_file(dir + "/out/seed_5/saf_25", 4, 0, "saf"));
  const auto prune_j = test::read_json(intervention_file(dir + "/out/seed_5/prune_25", 4, 0, "saf"));
  CHECK(saf_j["selected"] == prune_j["selected"]);
  const auto prune_r = test::read_json(dir + "/out/seed_5/prune_25/result.json");
  CHECK(prune_r["pruned_heads"] == 2);
  // Memory: pruning drops parameters, moments, gradients and activations; SAF drops Q/K.
  CHECK((*row(res, "prune_25"))["memory_change_pct"]["mean"].get<double>() < 0);
  CHECK((*row(res, "saf_25"))["memory_change_pct"]["mean"].get<double>() < 0);
  CHECK((*row(res, "saf_50"))["memory_change_pct"]["mean"].get<double>() <
        (*row(res, "saf_25"))["memory_change_pct"]["mean"].get<double>());
  CHECK((*row(res, "saf_25"))["capture_seconds"]["mean"].get<double>() >= 0);
  CHECK((*row(res, "ordinary"))["capture_seconds"].is_null());
  // Files: the table names every branch; a resumable final checkpoint per branch.
  std::ifstream md(dir + "/out/table.md");
  std::stringstream ss;
  ss << md.rdbuf();
  for (const char* b : {"ordinary", "saf_25", "saf_50", "prune_25", "random_25", "gate_taylor_25"})
    CHECK(ss.str().find(std::string("| ") + b + " |") != std::string::npos);
  CHECK(std::filesystem::exists(dir + "/out/results.json"));
  CHECK(std::filesystem::exists(dir + "/out/seed_5/gate_taylor_25/final/trainer.json"));
}

TEST_CASE("experiment over seeds reports mean and standard deviation, and time budgets run", "[experiment]") {
  const std::string dir = test::methods_dir("seeds");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = {{"seeds", {5, 6}},
                       {"save_final", false},
                       {"branches", {{{"name", "ordinary"}, {"method", {{"name", "none"}}}},
                                     {{"name", "saf"}, {"method", {{"ratio", 0.5}}}}}}};
  dist::LocalComm comm;
  const nlohmann::json res = run_experiment(experiment_from_json(doc), dir + "/out", comm);
  const auto& ppl = (*row(res, "saf"))["val_ppl"];
  const auto& v = ppl["values"];
  REQUIRE(v.size() == 2);
  CHECK(v[0].get<double>() != v[1].get<double>());  // the seeds differ
  const double mean = (v[0].get<double>() + v[1].get<double>()) / 2;
  CHECK(ppl["mean"].get<double>() == Approx(mean));
  CHECK(ppl["std"].get<double>() == Approx(std::abs(v[0].get<double>() - v[1].get<double>()) / std::sqrt(2.0)));
  CHECK(res["seeds"][1]["branches"][1]["val_ppl"].get<double>() == v[1].get<double>());
  // Time-matched: the reference runs to train.steps; the other branch gets its wall time.
  doc["experiment"]["budget"] = "time";
  doc["experiment"]["seeds"] = {5};
  const nlohmann::json t = run_experiment(experiment_from_json(doc), dir + "/time", comm);
  CHECK(t["seeds"][0]["branches"][0]["steps"] == 8);
  CHECK(t["seeds"][0]["branches"][1]["steps"].get<int64_t>() >= 4);
  CHECK(t["budget"] == "time");
}
